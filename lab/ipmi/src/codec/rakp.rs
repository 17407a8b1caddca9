//! RMCP+ session establishment payloads (IPMI v2.0 sections 13.17–13.23): Open Session
//! Request/Response and the four RAKP messages.
//!
//! All multi-byte integers are little-endian; random numbers and the GUID travel as 16 raw bytes.

use super::{CodecError, Reader};

/// The maximum user name length.
pub const MAX_USERNAME_LEN: usize = 16;

/// An RMCP+ / RAKP status code (IPMI v2.0 table 13-15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RakpStatus(pub u8);

impl RakpStatus {
    pub const NO_ERRORS: Self = Self(0x00);
    pub const INSUFFICIENT_RESOURCES: Self = Self(0x01);
    pub const INVALID_SESSION_ID: Self = Self(0x02);
    pub const INVALID_PAYLOAD_TYPE: Self = Self(0x03);
    pub const INVALID_AUTHENTICATION_ALGORITHM: Self = Self(0x04);
    pub const INVALID_INTEGRITY_ALGORITHM: Self = Self(0x05);
    pub const INVALID_ROLE: Self = Self(0x09);
    pub const UNAUTHORIZED_ROLE: Self = Self(0x0a);
    pub const INVALID_NAME_LENGTH: Self = Self(0x0c);
    pub const UNAUTHORIZED_NAME: Self = Self(0x0d);
    pub const INVALID_INTEGRITY_CHECK_VALUE: Self = Self(0x0f);
    pub const INVALID_CONFIDENTIALITY_ALGORITHM: Self = Self(0x10);
    pub const NO_CIPHER_SUITE_MATCH: Self = Self(0x11);
    pub const ILLEGAL_PARAMETER: Self = Self(0x12);

    /// What the status means, as the specification words it.
    pub fn describe(self) -> &'static str {
        match self.0 {
            0x00 => "no errors",
            0x01 => "insufficient resources to create a session",
            0x02 => "invalid session ID",
            0x03 => "invalid payload type",
            0x04 => "invalid authentication algorithm",
            0x05 => "invalid integrity algorithm",
            0x06 => "no matching authentication payload",
            0x07 => "no matching integrity payload",
            0x08 => "inactive session ID",
            0x09 => "invalid role",
            0x0a => "unauthorized role or privilege level requested",
            0x0b => "insufficient resources to create a session at the requested role",
            0x0c => "invalid name length",
            0x0d => "unauthorized name",
            0x0e => "unauthorized GUID",
            0x0f => "invalid integrity check value",
            0x10 => "invalid confidentiality algorithm",
            0x11 => "no cipher suite match with proposed security algorithms",
            0x12 => "illegal or unrecognized parameter",
            _ => "unknown status",
        }
    }
}

/// The algorithms a console proposes or a BMC accepts (raw algorithm numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Algorithms {
    pub authentication: u8,
    pub integrity: u8,
    pub confidentiality: u8,
}

impl Algorithms {
    fn encode(&self, out: &mut Vec<u8>) {
        for (kind, algorithm) in [
            (0u8, self.authentication),
            (1, self.integrity),
            (2, self.confidentiality),
        ] {
            out.extend_from_slice(&[kind, 0, 0, 8, algorithm, 0, 0, 0]);
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, CodecError> {
        let mut algorithms = [0u8; 3];
        for (kind, slot) in algorithms.iter_mut().enumerate() {
            let record = reader.array::<8>()?;
            if usize::from(record[0]) != kind {
                return Err(CodecError::InvalidValue {
                    what: "RMCP+ algorithm payload type",
                    value: record[0].into(),
                });
            }
            if record[3] != 8 {
                return Err(CodecError::Unsupported {
                    what: "RMCP+ algorithm payload length",
                    value: record[3].into(),
                });
            }
            *slot = record[4] & 0x3f;
        }
        Ok(Self {
            authentication: algorithms[0],
            integrity: algorithms[1],
            confidentiality: algorithms[2],
        })
    }
}

/// RMCP+ Open Session Request (console → BMC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenSessionRequest {
    pub tag: u8,
    /// Requested maximum privilege level; 0 asks for the highest the algorithms allow.
    pub max_privilege: u8,
    pub console_session_id: u32,
    pub algorithms: Algorithms,
}

impl OpenSessionRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.tag, self.max_privilege, 0, 0];
        out.extend_from_slice(&self.console_session_id.to_le_bytes());
        self.algorithms.encode(&mut out);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let mut reader = Reader::new(bytes, "RMCP+ Open Session Request");
        let tag = reader.u8()?;
        let max_privilege = reader.u8()? & 0x0f;
        let _reserved = reader.take(2)?;
        let console_session_id = reader.u32_le()?;
        let algorithms = Algorithms::decode(&mut reader)?;
        reader.finish()?;
        Ok(Self {
            tag,
            max_privilege,
            console_session_id,
            algorithms,
        })
    }
}

/// RMCP+ Open Session Response (BMC → console).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenSessionResponse {
    pub tag: u8,
    pub status: RakpStatus,
    pub max_privilege: u8,
    pub console_session_id: u32,
    /// Present when `status` is no errors.
    pub accepted: Option<AcceptedSession>,
}

/// What a BMC grants in a successful Open Session Response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptedSession {
    pub bmc_session_id: u32,
    pub algorithms: Algorithms,
}

impl OpenSessionResponse {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.tag, self.status.0, self.max_privilege, 0];
        out.extend_from_slice(&self.console_session_id.to_le_bytes());
        if let Some(accepted) = &self.accepted {
            out.extend_from_slice(&accepted.bmc_session_id.to_le_bytes());
            accepted.algorithms.encode(&mut out);
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let mut reader = Reader::new(bytes, "RMCP+ Open Session Response");
        let tag = reader.u8()?;
        let status = RakpStatus(reader.u8()?);
        let max_privilege = reader.u8()? & 0x0f;
        let _reserved = reader.u8()?;
        let console_session_id = reader.u32_le()?;
        let accepted = if status == RakpStatus::NO_ERRORS {
            let bmc_session_id = reader.u32_le()?;
            let algorithms = Algorithms::decode(&mut reader)?;
            Some(AcceptedSession {
                bmc_session_id,
                algorithms,
            })
        } else {
            None
        };
        reader.finish()?;
        Ok(Self {
            tag,
            status,
            max_privilege,
            console_session_id,
            accepted,
        })
    }
}

/// RAKP Message 1 (console → BMC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rakp1 {
    pub tag: u8,
    pub bmc_session_id: u32,
    pub console_random: [u8; 16],
    /// Requested role: privilege level in bits 3:0, name-only lookup in bit 4.
    pub role: u8,
    pub username: Vec<u8>,
}

impl Rakp1 {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.tag, 0, 0, 0];
        out.extend_from_slice(&self.bmc_session_id.to_le_bytes());
        out.extend_from_slice(&self.console_random);
        out.extend_from_slice(&[self.role, 0, 0, self.username.len() as u8]);
        out.extend_from_slice(&self.username);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let mut reader = Reader::new(bytes, "RAKP Message 1");
        let tag = reader.u8()?;
        let _reserved = reader.take(3)?;
        let bmc_session_id = reader.u32_le()?;
        let console_random = reader.array()?;
        let role = reader.u8()?;
        let _reserved = reader.take(2)?;
        let length = reader.u8()?;
        if usize::from(length) > MAX_USERNAME_LEN {
            return Err(CodecError::InvalidValue {
                what: "RAKP 1 user name length",
                value: length.into(),
            });
        }
        let username = reader.take(length.into())?.to_vec();
        // Some consoles send the whole 16-byte name field; the rest must be padding.
        if reader.rest().iter().any(|b| *b != 0) {
            return Err(CodecError::InvalidValue {
                what: "RAKP 1 user name padding",
                value: 0,
            });
        }
        Ok(Self {
            tag,
            bmc_session_id,
            console_random,
            role,
            username,
        })
    }
}

/// RAKP Message 2 (BMC → console).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rakp2 {
    pub tag: u8,
    pub status: RakpStatus,
    pub console_session_id: u32,
    /// Present when `status` is no errors.
    pub challenge: Option<Rakp2Challenge>,
}

/// The BMC's half of the key exchange in RAKP Message 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rakp2Challenge {
    pub bmc_random: [u8; 16],
    pub bmc_guid: [u8; 16],
    /// HMAC over both session IDs, both random numbers, the GUID, role and user name, keyed
    /// with the user's password.
    pub auth_code: Vec<u8>,
}

impl Rakp2 {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.tag, self.status.0, 0, 0];
        out.extend_from_slice(&self.console_session_id.to_le_bytes());
        if let Some(challenge) = &self.challenge {
            out.extend_from_slice(&challenge.bmc_random);
            out.extend_from_slice(&challenge.bmc_guid);
            out.extend_from_slice(&challenge.auth_code);
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let mut reader = Reader::new(bytes, "RAKP Message 2");
        let tag = reader.u8()?;
        let status = RakpStatus(reader.u8()?);
        let _reserved = reader.take(2)?;
        let console_session_id = reader.u32_le()?;
        let challenge = if status == RakpStatus::NO_ERRORS {
            let bmc_random = reader.array()?;
            let bmc_guid = reader.array()?;
            Some(Rakp2Challenge {
                bmc_random,
                bmc_guid,
                auth_code: reader.rest().to_vec(),
            })
        } else {
            None
        };
        Ok(Self {
            tag,
            status,
            console_session_id,
            challenge,
        })
    }
}

/// RAKP Message 3 (console → BMC): the console's proof, or the error it found in RAKP 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rakp3 {
    pub tag: u8,
    pub status: RakpStatus,
    pub bmc_session_id: u32,
    pub auth_code: Vec<u8>,
}

impl Rakp3 {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.tag, self.status.0, 0, 0];
        out.extend_from_slice(&self.bmc_session_id.to_le_bytes());
        out.extend_from_slice(&self.auth_code);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let mut reader = Reader::new(bytes, "RAKP Message 3");
        let tag = reader.u8()?;
        let status = RakpStatus(reader.u8()?);
        let _reserved = reader.take(2)?;
        let bmc_session_id = reader.u32_le()?;
        Ok(Self {
            tag,
            status,
            bmc_session_id,
            auth_code: reader.rest().to_vec(),
        })
    }
}

/// RAKP Message 4 (BMC → console): the BMC's integrity check value over the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rakp4 {
    pub tag: u8,
    pub status: RakpStatus,
    pub console_session_id: u32,
    pub integrity_check_value: Vec<u8>,
}

impl Rakp4 {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.tag, self.status.0, 0, 0];
        out.extend_from_slice(&self.console_session_id.to_le_bytes());
        out.extend_from_slice(&self.integrity_check_value);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let mut reader = Reader::new(bytes, "RAKP Message 4");
        let tag = reader.u8()?;
        let status = RakpStatus(reader.u8()?);
        let _reserved = reader.take(2)?;
        let console_session_id = reader.u32_le()?;
        Ok(Self {
            tag,
            status,
            console_session_id,
            integrity_check_value: reader.rest().to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALGORITHMS: Algorithms = Algorithms {
        authentication: 3,
        integrity: 4,
        confidentiality: 1,
    };

    #[test]
    fn open_session_round_trips() {
        let request = OpenSessionRequest {
            tag: 1,
            max_privilege: 0,
            console_session_id: 0xa0a2_a3a4,
            algorithms: ALGORITHMS,
        };
        let bytes = request.encode();
        assert_eq!(bytes.len(), 32);
        assert_eq!(OpenSessionRequest::decode(&bytes).unwrap(), request);

        let accepted = OpenSessionResponse {
            tag: 1,
            status: RakpStatus::NO_ERRORS,
            max_privilege: 4,
            console_session_id: 7,
            accepted: Some(AcceptedSession {
                bmc_session_id: 9,
                algorithms: ALGORITHMS,
            }),
        };
        assert_eq!(
            OpenSessionResponse::decode(&accepted.encode()).unwrap(),
            accepted
        );
        let refused = OpenSessionResponse {
            tag: 1,
            status: RakpStatus::NO_CIPHER_SUITE_MATCH,
            max_privilege: 0,
            console_session_id: 7,
            accepted: None,
        };
        assert_eq!(refused.encode().len(), 8);
        assert_eq!(
            OpenSessionResponse::decode(&refused.encode()).unwrap(),
            refused
        );
    }

    #[test]
    fn rakp_messages_round_trip() {
        let rakp1 = Rakp1 {
            tag: 2,
            bmc_session_id: 5,
            console_random: [7; 16],
            role: 0x14,
            username: b"admin".to_vec(),
        };
        assert_eq!(Rakp1::decode(&rakp1.encode()).unwrap(), rakp1);
        let mut padded = rakp1.encode();
        padded.extend_from_slice(&[0; 11]);
        assert_eq!(Rakp1::decode(&padded).unwrap(), rakp1);

        let rakp2 = Rakp2 {
            tag: 2,
            status: RakpStatus::NO_ERRORS,
            console_session_id: 6,
            challenge: Some(Rakp2Challenge {
                bmc_random: [1; 16],
                bmc_guid: [2; 16],
                auth_code: vec![3; 20],
            }),
        };
        assert_eq!(Rakp2::decode(&rakp2.encode()).unwrap(), rakp2);
        let rakp2_error = Rakp2 {
            tag: 2,
            status: RakpStatus::UNAUTHORIZED_NAME,
            console_session_id: 6,
            challenge: None,
        };
        assert_eq!(Rakp2::decode(&rakp2_error.encode()).unwrap(), rakp2_error);

        let rakp3 = Rakp3 {
            tag: 3,
            status: RakpStatus::NO_ERRORS,
            bmc_session_id: 5,
            auth_code: vec![4; 32],
        };
        assert_eq!(Rakp3::decode(&rakp3.encode()).unwrap(), rakp3);
        let rakp4 = Rakp4 {
            tag: 3,
            status: RakpStatus::NO_ERRORS,
            console_session_id: 6,
            integrity_check_value: vec![5; 12],
        };
        assert_eq!(Rakp4::decode(&rakp4.encode()).unwrap(), rakp4);
    }

    #[test]
    fn malformed_payloads_are_errors() {
        let request = OpenSessionRequest {
            tag: 1,
            max_privilege: 4,
            console_session_id: 1,
            algorithms: ALGORITHMS,
        };
        assert!(matches!(
            OpenSessionRequest::decode(&request.encode()[..20]),
            Err(CodecError::Truncated { .. })
        ));
        let mut bytes = request.encode();
        bytes[8] = 1; // authentication record typed as integrity
        assert!(matches!(
            OpenSessionRequest::decode(&bytes),
            Err(CodecError::InvalidValue { .. })
        ));
        let mut bytes = request.encode();
        bytes.push(0);
        assert!(matches!(
            OpenSessionRequest::decode(&bytes),
            Err(CodecError::TrailingBytes { .. })
        ));

        let mut rakp1 = Rakp1 {
            tag: 0,
            bmc_session_id: 1,
            console_random: [0; 16],
            role: 4,
            username: vec![],
        }
        .encode();
        rakp1[27] = 17;
        assert!(matches!(
            Rakp1::decode(&rakp1),
            Err(CodecError::InvalidValue { .. })
        ));
        assert!(matches!(
            Rakp2::decode(&[0, 0, 0, 0, 1]),
            Err(CodecError::Truncated { .. })
        ));
    }

    #[test]
    fn statuses_describe_themselves() {
        assert_eq!(
            RakpStatus::UNAUTHORIZED_NAME.describe(),
            "unauthorized name"
        );
        assert_eq!(
            RakpStatus::INVALID_INTEGRITY_CHECK_VALUE.describe(),
            "invalid integrity check value"
        );
    }
}
