//! The IPMI session wrappers: v1.5 (unauthenticated pre-session use only) and v2.0 / RMCP+.
//!
//! An RMCP+ packet (IPMI v2.0 section 13.6), after the RMCP header:
//!
//! ```text
//! auth type 0x06 | payload type (bit 7 encrypted, bit 6 authenticated) | session ID (4, LE)
//! | sequence number (4, LE) | payload length (2, LE) | payload
//! | [integrity pad 0xff.. | pad length | next header 0x07 | auth code]   (authenticated only)
//! ```
//!
//! The integrity pad makes everything from the auth type through the next-header byte a
//! multiple of 4 bytes. The auth code's length depends on the negotiated integrity algorithm,
//! so [`V20Packet::integrity`] takes it as an argument.

use super::rmcp::{self, RmcpClass};
use super::{CodecError, Reader};

const AUTH_TYPE_NONE: u8 = 0x00;
const AUTH_TYPE_RMCP_PLUS: u8 = 0x06;
const NEXT_HEADER: u8 = 0x07;

/// The RMCP+ payload types this crate handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadType {
    Ipmi,
    OpenSessionRequest,
    OpenSessionResponse,
    Rakp1,
    Rakp2,
    Rakp3,
    Rakp4,
}

impl PayloadType {
    /// The 6-bit payload type number.
    pub fn code(self) -> u8 {
        match self {
            Self::Ipmi => 0x00,
            Self::OpenSessionRequest => 0x10,
            Self::OpenSessionResponse => 0x11,
            Self::Rakp1 => 0x12,
            Self::Rakp2 => 0x13,
            Self::Rakp3 => 0x14,
            Self::Rakp4 => 0x15,
        }
    }

    /// The payload type for a 6-bit number.
    pub fn from_code(code: u8) -> Result<Self, CodecError> {
        Ok(match code {
            0x00 => Self::Ipmi,
            0x10 => Self::OpenSessionRequest,
            0x11 => Self::OpenSessionResponse,
            0x12 => Self::Rakp1,
            0x13 => Self::Rakp2,
            0x14 => Self::Rakp3,
            0x15 => Self::Rakp4,
            other => {
                return Err(CodecError::Unsupported {
                    what: "RMCP+ payload type",
                    value: other.into(),
                });
            }
        })
    }
}

/// The session part of an IPMI datagram (everything after the RMCP header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionPacket<'a> {
    /// IPMI v1.5 with auth type none (the pre-session Get Channel Authentication Capabilities).
    V15(V15Packet<'a>),
    /// IPMI v2.0 / RMCP+.
    V20(V20Packet<'a>),
}

/// An IPMI v1.5 packet without authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V15Packet<'a> {
    pub sequence: u32,
    pub session_id: u32,
    /// The IPMI LAN message.
    pub message: &'a [u8],
}

/// The header fields of an RMCP+ packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V20Header {
    pub payload_type: PayloadType,
    pub encrypted: bool,
    pub authenticated: bool,
    pub session_id: u32,
    pub sequence: u32,
}

/// A decoded RMCP+ packet; the payload may still be encrypted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V20Packet<'a> {
    pub header: V20Header,
    /// The payload as sent (ciphertext when `header.encrypted`).
    pub payload: &'a [u8],
    /// The session part from the auth type byte to the end of the datagram.
    session_bytes: &'a [u8],
    /// Offset in `session_bytes` of the first byte after the payload.
    payload_end: usize,
}

impl<'a> V20Packet<'a> {
    /// Splits the session trailer of an authenticated packet whose auth code is `auth_code_len`
    /// bytes: returns the bytes the auth code covers and the auth code itself.
    pub fn integrity(&self, auth_code_len: usize) -> Result<(&'a [u8], &'a [u8]), CodecError> {
        let trailer = &self.session_bytes[self.payload_end..];
        let needed = auth_code_len + 2;
        if trailer.len() < needed {
            return Err(CodecError::Truncated {
                what: "RMCP+ session trailer",
                needed,
                got: trailer.len(),
            });
        }
        let signed_len = self.session_bytes.len() - auth_code_len;
        let next_header = self.session_bytes[signed_len - 1];
        if next_header != NEXT_HEADER {
            return Err(CodecError::InvalidValue {
                what: "RMCP+ next header",
                value: next_header.into(),
            });
        }
        let pad_length = usize::from(self.session_bytes[signed_len - 2]);
        let pad = &trailer[..trailer.len() - needed];
        if pad.len() != pad_length || pad.iter().any(|b| *b != 0xff) {
            return Err(CodecError::InvalidValue {
                what: "RMCP+ integrity pad length",
                value: pad_length as u32,
            });
        }
        if !signed_len.is_multiple_of(4) {
            return Err(CodecError::InvalidValue {
                what: "RMCP+ integrity pad alignment",
                value: signed_len as u32,
            });
        }
        Ok((
            &self.session_bytes[..signed_len],
            &self.session_bytes[signed_len..],
        ))
    }

    /// Fails when an unauthenticated packet carries bytes after its payload.
    pub fn expect_no_trailer(&self) -> Result<(), CodecError> {
        match self.session_bytes.len() - self.payload_end {
            0 => Ok(()),
            extra => Err(CodecError::TrailingBytes {
                what: "unauthenticated RMCP+ packet",
                extra,
            }),
        }
    }
}

/// Decodes the session part of an IPMI-class datagram.
pub fn decode(session_bytes: &[u8]) -> Result<SessionPacket<'_>, CodecError> {
    let mut reader = Reader::new(session_bytes, "IPMI session header");
    match reader.u8()? {
        AUTH_TYPE_NONE => {
            let sequence = reader.u32_le()?;
            let session_id = reader.u32_le()?;
            let length = usize::from(reader.u8()?);
            let message = reader.take(length)?;
            // A v1.5 packet may end with one legacy pad byte.
            if reader.remaining() > 1 {
                return Err(CodecError::TrailingBytes {
                    what: "IPMI v1.5 packet",
                    extra: reader.remaining(),
                });
            }
            Ok(SessionPacket::V15(V15Packet {
                sequence,
                session_id,
                message,
            }))
        }
        AUTH_TYPE_RMCP_PLUS => {
            let type_byte = reader.u8()?;
            let payload_type = PayloadType::from_code(type_byte & 0x3f)?;
            let session_id = reader.u32_le()?;
            let sequence = reader.u32_le()?;
            let length = usize::from(reader.u16_le()?);
            let payload = reader.take(length)?;
            let header = V20Header {
                payload_type,
                encrypted: type_byte & 0x80 != 0,
                authenticated: type_byte & 0x40 != 0,
                session_id,
                sequence,
            };
            Ok(SessionPacket::V20(V20Packet {
                header,
                payload,
                session_bytes,
                payload_end: 12 + length,
            }))
        }
        other => Err(CodecError::Unsupported {
            what: "IPMI session auth type",
            value: other.into(),
        }),
    }
}

/// Encodes a whole v1.5 datagram (auth type none) around an IPMI LAN message.
pub fn encode_v15(session_id: u32, sequence: u32, message: &[u8]) -> Result<Vec<u8>, CodecError> {
    let length = u8::try_from(message.len()).map_err(|_| CodecError::InvalidValue {
        what: "IPMI v1.5 message length",
        value: message.len() as u32,
    })?;
    let mut out = rmcp::header(RmcpClass::Ipmi).to_vec();
    out.push(AUTH_TYPE_NONE);
    out.extend_from_slice(&sequence.to_le_bytes());
    out.extend_from_slice(&session_id.to_le_bytes());
    out.push(length);
    out.extend_from_slice(message);
    Ok(out)
}

/// Encodes a whole RMCP+ datagram up to (not including) the auth code.
///
/// For an authenticated header the integrity pad, pad length and next header are appended; the
/// caller computes the auth code over `out[4..]` (see [`SIGNED_FROM`]) and appends it.
pub fn encode_v20(header: &V20Header, payload: &[u8]) -> Result<Vec<u8>, CodecError> {
    let length = u16::try_from(payload.len()).map_err(|_| CodecError::InvalidValue {
        what: "RMCP+ payload length",
        value: payload.len() as u32,
    })?;
    let mut out = rmcp::header(RmcpClass::Ipmi).to_vec();
    out.push(AUTH_TYPE_RMCP_PLUS);
    let mut type_byte = header.payload_type.code();
    if header.encrypted {
        type_byte |= 0x80;
    }
    if header.authenticated {
        type_byte |= 0x40;
    }
    out.push(type_byte);
    out.extend_from_slice(&header.session_id.to_le_bytes());
    out.extend_from_slice(&header.sequence.to_le_bytes());
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(payload);
    if header.authenticated {
        let unpadded = out.len() - SIGNED_FROM + 2;
        let pad = (4 - unpadded % 4) % 4;
        out.extend(std::iter::repeat_n(0xff, pad));
        out.push(pad as u8);
        out.push(NEXT_HEADER);
    }
    Ok(out)
}

/// Where the bytes an RMCP+ auth code covers start in an encoded datagram (after the RMCP header).
pub const SIGNED_FROM: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    fn header(authenticated: bool) -> V20Header {
        V20Header {
            payload_type: PayloadType::Ipmi,
            encrypted: authenticated,
            authenticated,
            session_id: 0x0102_0304,
            sequence: 9,
        }
    }

    #[test]
    fn v15_round_trips() {
        let bytes = encode_v15(0, 0, &[1, 2, 3]).unwrap();
        let (class, session) = rmcp::split(&bytes).unwrap();
        assert_eq!(class, RmcpClass::Ipmi);
        assert_eq!(
            decode(session).unwrap(),
            SessionPacket::V15(V15Packet {
                sequence: 0,
                session_id: 0,
                message: &[1, 2, 3]
            })
        );
    }

    #[test]
    fn v20_round_trips_with_and_without_trailer() {
        for payload_len in 0..9 {
            let payload: Vec<u8> = (0..payload_len as u8).collect();
            let mut bytes = encode_v20(&header(true), &payload).unwrap();
            assert_eq!(
                (bytes.len() - SIGNED_FROM) % 4,
                0,
                "pad aligns the signed bytes"
            );
            let signed_len = bytes.len() - SIGNED_FROM;
            bytes.extend_from_slice(&[0xaa; 12]);
            let (_, session) = rmcp::split(&bytes).unwrap();
            let SessionPacket::V20(packet) = decode(session).unwrap() else {
                panic!("v2.0 expected")
            };
            assert_eq!(packet.header, header(true));
            assert_eq!(packet.payload, &payload[..]);
            let (signed, code) = packet.integrity(12).unwrap();
            assert_eq!(signed.len(), signed_len);
            assert_eq!(code, &[0xaa; 12]);
        }
        let bytes = encode_v20(&header(false), &[5, 6]).unwrap();
        let (_, session) = rmcp::split(&bytes).unwrap();
        let SessionPacket::V20(packet) = decode(session).unwrap() else {
            panic!("v2.0 expected")
        };
        packet.expect_no_trailer().unwrap();
    }

    #[test]
    fn a_wrong_trailer_is_an_error() {
        let mut bytes = encode_v20(&header(true), &[1, 2, 3]).unwrap();
        let next_header_at = bytes.len() - 1;
        bytes[next_header_at] = 0x08;
        bytes.extend_from_slice(&[0; 12]);
        let (_, session) = rmcp::split(&bytes).unwrap();
        let SessionPacket::V20(packet) = decode(session).unwrap() else {
            panic!("v2.0 expected")
        };
        assert!(matches!(
            packet.integrity(12),
            Err(CodecError::InvalidValue { .. })
        ));
        assert!(matches!(
            packet.integrity(200),
            Err(CodecError::Truncated { .. })
        ));
    }

    #[test]
    fn payload_longer_than_the_datagram_is_truncated() {
        let mut bytes = encode_v20(&header(false), &[1, 2, 3]).unwrap();
        bytes.truncate(bytes.len() - 1);
        let (_, session) = rmcp::split(&bytes).unwrap();
        assert!(matches!(decode(session), Err(CodecError::Truncated { .. })));
    }

    #[test]
    fn unknown_auth_types_and_payload_types_are_unsupported() {
        assert!(matches!(
            decode(&[0x02, 0, 0, 0, 0]),
            Err(CodecError::Unsupported { .. })
        ));
        assert!(matches!(
            decode(&[0x06, 0x01, 0, 0, 0, 0]),
            Err(CodecError::Unsupported { .. })
        ));
    }
}
