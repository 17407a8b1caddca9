//! The RMCP header every IPMI-over-LAN datagram starts with, and the ASF presence ping/pong.

use super::{CodecError, Reader};

/// RMCP version 1.0, the only version IPMI uses.
pub const RMCP_VERSION: u8 = 0x06;
/// The sequence number meaning "no RMCP ACK wanted", which IPMI always uses.
pub const RMCP_NO_ACK: u8 = 0xff;
/// The IANA enterprise number of the ASF (Alert Standard Format) messages.
pub const ASF_IANA: u32 = 4542;

const CLASS_ASF: u8 = 0x06;
const CLASS_IPMI: u8 = 0x07;
const ASF_PING: u8 = 0x80;
const ASF_PONG: u8 = 0x40;

/// What the datagram carries, from the RMCP class byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmcpClass {
    /// ASF messages (presence ping/pong).
    Asf,
    /// An IPMI session (v1.5 or v2.0).
    Ipmi,
}

/// Splits a datagram into its RMCP class and the bytes after the 4-byte header.
///
/// RMCP ACK datagrams (class bit 7 set) are refused: IPMI never asks for them.
pub fn split(datagram: &[u8]) -> Result<(RmcpClass, &[u8]), CodecError> {
    let mut reader = Reader::new(datagram, "RMCP header");
    let version = reader.u8()?;
    if version != RMCP_VERSION {
        return Err(CodecError::InvalidValue {
            what: "RMCP version",
            value: version.into(),
        });
    }
    let _reserved = reader.u8()?;
    let _sequence = reader.u8()?;
    let class = match reader.u8()? {
        CLASS_ASF => RmcpClass::Asf,
        CLASS_IPMI => RmcpClass::Ipmi,
        other => {
            return Err(CodecError::Unsupported {
                what: "RMCP class",
                value: other.into(),
            });
        }
    };
    Ok((class, reader.rest()))
}

/// The 4-byte RMCP header for `class`, without ACK.
pub fn header(class: RmcpClass) -> [u8; 4] {
    let class = match class {
        RmcpClass::Asf => CLASS_ASF,
        RmcpClass::Ipmi => CLASS_IPMI,
    };
    [RMCP_VERSION, 0x00, RMCP_NO_ACK, class]
}

/// An ASF message this crate understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsfMessage {
    /// Presence ping: "are you there, and do you speak IPMI?".
    Ping { tag: u8 },
    /// Presence pong.
    Pong { tag: u8, ipmi_supported: bool },
}

impl AsfMessage {
    /// Decodes the ASF body (the bytes after the RMCP header).
    pub fn decode(body: &[u8]) -> Result<Self, CodecError> {
        let mut reader = Reader::new(body, "ASF message");
        let iana = u32::from_be_bytes(reader.array()?);
        if iana != ASF_IANA {
            return Err(CodecError::InvalidValue {
                what: "ASF IANA number",
                value: iana,
            });
        }
        let kind = reader.u8()?;
        let tag = reader.u8()?;
        let _reserved = reader.u8()?;
        let length = usize::from(reader.u8()?);
        let data = reader.take(length)?;
        match kind {
            ASF_PING => Ok(Self::Ping { tag }),
            ASF_PONG => {
                let mut data = Reader::new(data, "ASF pong data");
                let _iana = data.take(4)?;
                let _oem = data.take(4)?;
                let entities = data.u8()?;
                Ok(Self::Pong {
                    tag,
                    ipmi_supported: entities & 0x80 != 0,
                })
            }
            other => Err(CodecError::Unsupported {
                what: "ASF message type",
                value: other.into(),
            }),
        }
    }

    /// Encodes the whole datagram, RMCP header included.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = header(RmcpClass::Asf).to_vec();
        out.extend_from_slice(&ASF_IANA.to_be_bytes());
        match *self {
            Self::Ping { tag } => out.extend_from_slice(&[ASF_PING, tag, 0x00, 0x00]),
            Self::Pong {
                tag,
                ipmi_supported,
            } => {
                out.extend_from_slice(&[ASF_PONG, tag, 0x00, 0x10]);
                out.extend_from_slice(&ASF_IANA.to_be_bytes());
                out.extend_from_slice(&[0, 0, 0, 0]);
                // Supported entities: bit 7 IPMI, bits 3:0 ASF version 1.0.
                out.push(if ipmi_supported { 0x81 } else { 0x01 });
                out.push(0x00);
                out.extend_from_slice(&[0; 6]);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_and_pong_round_trip() {
        for message in [
            AsfMessage::Ping { tag: 7 },
            AsfMessage::Pong {
                tag: 9,
                ipmi_supported: true,
            },
        ] {
            let bytes = message.encode();
            let (class, body) = split(&bytes).unwrap();
            assert_eq!(class, RmcpClass::Asf);
            assert_eq!(AsfMessage::decode(body).unwrap(), message);
        }
    }

    #[test]
    fn wrong_version_and_class_are_refused() {
        assert!(matches!(
            split(&[0x05, 0, 0xff, 0x07]),
            Err(CodecError::InvalidValue { .. })
        ));
        assert!(matches!(
            split(&[0x06, 0, 0xff, 0x87]),
            Err(CodecError::Unsupported { .. })
        ));
        assert!(matches!(
            split(&[0x06, 0]),
            Err(CodecError::Truncated { .. })
        ));
    }

    #[test]
    fn ping_with_a_short_body_is_truncated() {
        let mut bytes = AsfMessage::Ping { tag: 1 }.encode();
        bytes[11] = 4; // claims 4 data bytes that are not there
        let (_, body) = split(&bytes).unwrap();
        assert!(matches!(
            AsfMessage::decode(body),
            Err(CodecError::Truncated { .. })
        ));
    }
}
