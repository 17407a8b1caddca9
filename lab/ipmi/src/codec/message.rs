//! The IPMI LAN message inside a session (IPMI v2.0 section 13.8): addresses, network function,
//! sequence, command and data, protected by two checksums.
//!
//! ```text
//! request:  rsAddr | netFn<<2 | rsLUN | checksum1 | rqAddr | rqSeq<<2 | rqLUN | cmd | data.. | checksum2
//! response: rqAddr | netFn<<2 | rqLUN | checksum1 | rsAddr | rqSeq<<2 | rsLUN | cmd | ccode | data.. | checksum2
//! ```

use super::{CodecError, Reader};

/// The BMC's slave address.
pub const BMC_ADDRESS: u8 = 0x20;
/// The software ID a remote console uses as its requester address.
pub const REMOTE_CONSOLE_SWID: u8 = 0x81;

/// Network functions (requests; the response network function is one higher).
pub mod netfn {
    pub const CHASSIS: u8 = 0x00;
    pub const APP: u8 = 0x06;
}

/// A request message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMessage {
    pub rs_addr: u8,
    pub netfn: u8,
    pub rs_lun: u8,
    pub rq_addr: u8,
    /// 6-bit request sequence number, echoed in the response.
    pub rq_seq: u8,
    pub rq_lun: u8,
    pub cmd: u8,
    pub data: Vec<u8>,
}

/// A response message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseMessage {
    pub rq_addr: u8,
    /// The response network function (request netFn + 1).
    pub netfn: u8,
    pub rq_lun: u8,
    pub rs_addr: u8,
    pub rq_seq: u8,
    pub rs_lun: u8,
    pub cmd: u8,
    pub completion_code: u8,
    pub data: Vec<u8>,
}

/// The two's-complement checksum: the sum of the bytes and the checksum is zero modulo 256.
pub fn checksum(bytes: &[u8]) -> u8 {
    bytes
        .iter()
        .fold(0u8, |sum, b| sum.wrapping_add(*b))
        .wrapping_neg()
}

fn check(bytes: &[u8], which: &'static str) -> Result<(), CodecError> {
    match bytes.iter().fold(0u8, |sum, b| sum.wrapping_add(*b)) {
        0 => Ok(()),
        _ => Err(CodecError::Checksum { which }),
    }
}

/// Encodes the 6 header bytes and the body, adding both checksums.
fn encode(first: u8, netfn: u8, lun: u8, second: u8, seq: u8, seq_lun: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![first, (netfn << 2) | (lun & 3)];
    out.push(checksum(&out));
    out.extend_from_slice(&[second, (seq << 2) | (seq_lun & 3)]);
    out.extend_from_slice(body);
    out.push(checksum(&out[3..]));
    out
}

/// Checks both checksums and returns (header bytes, body bytes between header and checksum 2).
fn decode<'a>(
    bytes: &'a [u8],
    min_body: usize,
    what: &'static str,
) -> Result<([u8; 5], &'a [u8]), CodecError> {
    let needed = 6 + min_body;
    if bytes.len() < needed {
        return Err(CodecError::Truncated {
            what,
            needed,
            got: bytes.len(),
        });
    }
    check(&bytes[..3], "header")?;
    check(&bytes[3..], "data")?;
    let mut reader = Reader::new(&bytes[..bytes.len() - 1], what);
    let header = reader.array::<5>()?;
    Ok((header, reader.rest()))
}

impl RequestMessage {
    /// A request from a remote console to the BMC.
    pub fn to_bmc(netfn: u8, cmd: u8, rq_seq: u8, data: Vec<u8>) -> Self {
        Self {
            rs_addr: BMC_ADDRESS,
            netfn,
            rs_lun: 0,
            rq_addr: REMOTE_CONSOLE_SWID,
            rq_seq,
            rq_lun: 0,
            cmd,
            data,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut body = vec![self.cmd];
        body.extend_from_slice(&self.data);
        encode(
            self.rs_addr,
            self.netfn,
            self.rs_lun,
            self.rq_addr,
            self.rq_seq,
            self.rq_lun,
            &body,
        )
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let (h, body) = decode(bytes, 1, "IPMI request message")?;
        Ok(Self {
            rs_addr: h[0],
            netfn: h[1] >> 2,
            rs_lun: h[1] & 3,
            rq_addr: h[3],
            rq_seq: h[4] >> 2,
            rq_lun: h[4] & 3,
            cmd: body[0],
            data: body[1..].to_vec(),
        })
    }

    /// The response to this request with `completion_code` and `data`.
    pub fn respond(&self, completion_code: u8, data: Vec<u8>) -> ResponseMessage {
        ResponseMessage {
            rq_addr: self.rq_addr,
            netfn: (self.netfn + 1) & 0x3f,
            rq_lun: self.rq_lun,
            rs_addr: self.rs_addr,
            rq_seq: self.rq_seq,
            rs_lun: self.rs_lun,
            cmd: self.cmd,
            completion_code,
            data,
        }
    }
}

impl ResponseMessage {
    pub fn encode(&self) -> Vec<u8> {
        let mut body = vec![self.cmd, self.completion_code];
        body.extend_from_slice(&self.data);
        encode(
            self.rq_addr,
            self.netfn,
            self.rq_lun,
            self.rs_addr,
            self.rq_seq,
            self.rs_lun,
            &body,
        )
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let (h, body) = decode(bytes, 2, "IPMI response message")?;
        Ok(Self {
            rq_addr: h[0],
            netfn: h[1] >> 2,
            rq_lun: h[1] & 3,
            rs_addr: h[3],
            rq_seq: h[4] >> 2,
            rs_lun: h[4] & 3,
            cmd: body[0],
            completion_code: body[1],
            data: body[2..].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_response_round_trip() {
        let request = RequestMessage::to_bmc(netfn::CHASSIS, 0x02, 17, vec![0x01]);
        let bytes = request.encode();
        assert_eq!(RequestMessage::decode(&bytes).unwrap(), request);
        let response = request.respond(0x00, vec![1, 2, 3]);
        assert_eq!(response.netfn, netfn::CHASSIS + 1);
        assert_eq!(
            ResponseMessage::decode(&response.encode()).unwrap(),
            response
        );
    }

    #[test]
    fn matches_ipmitool_get_channel_auth_caps_layout() {
        // rsAddr 0x20, netFn App, checksum, rqAddr 0x81, seq 0, cmd 0x38, data 8e 04, checksum.
        let bytes = RequestMessage::to_bmc(netfn::APP, 0x38, 0, vec![0x8e, 0x04]).encode();
        assert_eq!(
            bytes,
            [0x20, 0x18, 0xc8, 0x81, 0x00, 0x38, 0x8e, 0x04, 0xb5]
        );
    }

    #[test]
    fn bad_checksums_are_errors() {
        let mut bytes = RequestMessage::to_bmc(netfn::APP, 0x01, 1, vec![]).encode();
        bytes[2] ^= 1;
        assert_eq!(
            RequestMessage::decode(&bytes),
            Err(CodecError::Checksum { which: "header" })
        );
        let mut bytes = RequestMessage::to_bmc(netfn::APP, 0x01, 1, vec![]).encode();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(
            RequestMessage::decode(&bytes),
            Err(CodecError::Checksum { which: "data" })
        );
        assert!(matches!(
            ResponseMessage::decode(&[0x81, 0x1c]),
            Err(CodecError::Truncated { .. })
        ));
    }
}
