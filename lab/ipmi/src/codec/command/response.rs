//! The responses: each encodes to and decodes from the data bytes after the completion code.

use super::super::{CodecError, Reader};
/// Get Device ID response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceId {
    pub device_id: u8,
    pub device_revision: u8,
    pub provides_sdrs: bool,
    /// Major firmware revision (7 bits).
    pub firmware_major: u8,
    /// Minor firmware revision, BCD-encoded.
    pub firmware_minor_bcd: u8,
    /// IPMI version: major in bits 3:0, minor in bits 7:4 (0x02 is 2.0, 0x51 is 1.5).
    pub ipmi_version: u8,
    pub additional_support: u8,
    /// IANA enterprise number (20 bits).
    pub manufacturer_id: u32,
    pub product_id: u16,
    pub aux_firmware: [u8; 4],
}

impl DeviceId {
    pub fn encode(&self) -> Vec<u8> {
        let m = self.manufacturer_id.to_le_bytes();
        let p = self.product_id.to_le_bytes();
        let mut out = vec![
            self.device_id,
            (self.device_revision & 0x0f) | if self.provides_sdrs { 0x80 } else { 0 },
            self.firmware_major & 0x7f,
            self.firmware_minor_bcd,
            self.ipmi_version,
            self.additional_support,
            m[0],
            m[1],
            m[2] & 0x0f,
            p[0],
            p[1],
        ];
        out.extend_from_slice(&self.aux_firmware);
        out
    }

    pub fn decode(data: &[u8]) -> Result<Self, CodecError> {
        let mut reader = Reader::new(data, "Get Device ID response");
        let b = reader.array::<11>()?;
        let aux_firmware = if reader.remaining() >= 4 {
            reader.array()?
        } else {
            [0; 4]
        };
        Ok(Self {
            device_id: b[0],
            device_revision: b[1] & 0x0f,
            provides_sdrs: b[1] & 0x80 != 0,
            firmware_major: b[2] & 0x7f,
            firmware_minor_bcd: b[3],
            ipmi_version: b[4],
            additional_support: b[5],
            manufacturer_id: u32::from_le_bytes([b[6], b[7], b[8] & 0x0f, 0]),
            product_id: u16::from_le_bytes([b[9], b[10]]),
            aux_firmware,
        })
    }
}

/// Get Chassis Status response (the three mandatory bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChassisStatus {
    pub power_on: bool,
    /// Power restore policy: 0 always off, 1 previous, 2 always on.
    pub power_restore_policy: u8,
    /// Last power event bits (bit 4: last power on was by IPMI command).
    pub last_power_event: u8,
    /// Miscellaneous chassis state bits.
    pub misc: u8,
}

impl ChassisStatus {
    pub fn encode(&self) -> Vec<u8> {
        vec![
            u8::from(self.power_on) | ((self.power_restore_policy & 3) << 5),
            self.last_power_event,
            self.misc,
        ]
    }

    pub fn decode(data: &[u8]) -> Result<Self, CodecError> {
        let mut reader = Reader::new(data, "Get Chassis Status response");
        let b = reader.array::<3>()?;
        Ok(Self {
            power_on: b[0] & 1 != 0,
            power_restore_policy: (b[0] >> 5) & 3,
            last_power_event: b[1],
            misc: b[2],
        })
    }
}

/// Get Channel Authentication Capabilities response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AuthCapabilities {
    pub channel: u8,
    /// The response carries IPMI v2.0 extended data.
    pub v20_extended: bool,
    /// IPMI v1.5 authentication types enabled (bitmask).
    pub v15_auth_types: u8,
    /// Bits of byte 3: 0x20 Kg set, 0x10 per-message auth off, 0x08 user-level auth off,
    /// 0x04 non-null user names exist, 0x02 null user names exist, 0x01 anonymous login.
    pub login_flags: u8,
    pub supports_v15: bool,
    pub supports_v20: bool,
}

impl AuthCapabilities {
    pub fn encode(&self) -> Vec<u8> {
        vec![
            self.channel,
            (self.v15_auth_types & 0x3f) | if self.v20_extended { 0x80 } else { 0 },
            self.login_flags & 0x3f,
            u8::from(self.supports_v15) | (u8::from(self.supports_v20) << 1),
            0,
            0,
            0,
            0,
        ]
    }

    pub fn decode(data: &[u8]) -> Result<Self, CodecError> {
        let mut reader = Reader::new(data, "Get Channel Authentication Capabilities response");
        let b = reader.array::<8>()?;
        Ok(Self {
            channel: b[0] & 0x0f,
            v20_extended: b[1] & 0x80 != 0,
            v15_auth_types: b[1] & 0x3f,
            login_flags: b[2] & 0x3f,
            supports_v15: b[3] & 1 != 0,
            supports_v20: b[3] & 2 != 0,
        })
    }
}

/// One standard cipher suite record as Get Channel Cipher Suites lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CipherSuiteRecord {
    pub id: u8,
    pub authentication: u8,
    pub integrity: u8,
    pub confidentiality: u8,
}

const STANDARD_CIPHER_SUITE: u8 = 0xc0;
const OEM_CIPHER_SUITE: u8 = 0xc1;
/// The most record bytes one Get Channel Cipher Suites response carries.
pub const CIPHER_SUITE_CHUNK: usize = 16;

impl CipherSuiteRecord {
    /// The record bytes of `records`, in "list by cipher suite" form.
    pub fn encode_all(records: &[Self]) -> Vec<u8> {
        records
            .iter()
            .flat_map(|r| {
                [
                    STANDARD_CIPHER_SUITE,
                    r.id,
                    r.authentication,
                    0x40 | r.integrity,
                    0x80 | r.confidentiality,
                ]
            })
            .collect()
    }

    /// Parses the concatenated record bytes of every response chunk; OEM records are skipped.
    pub fn decode_all(bytes: &[u8]) -> Result<Vec<Self>, CodecError> {
        let mut reader = Reader::new(bytes, "cipher suite records");
        let mut records = Vec::new();
        while reader.remaining() > 0 {
            match reader.u8()? {
                STANDARD_CIPHER_SUITE => {
                    let [id, a, i, c] = reader.array()?;
                    records.push(Self {
                        id,
                        authentication: a & 0x3f,
                        integrity: i & 0x3f,
                        confidentiality: c & 0x3f,
                    });
                }
                OEM_CIPHER_SUITE => {
                    let _oem = reader.take(7)?;
                }
                other => {
                    return Err(CodecError::InvalidValue {
                        what: "cipher suite record start",
                        value: other.into(),
                    });
                }
            }
        }
        Ok(records)
    }
}

/// Get System Boot Options response.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BootOptionResponse {
    pub parameter: u8,
    /// The parameter is marked invalid/locked.
    pub invalid: bool,
    pub data: Vec<u8>,
}

impl BootOptionResponse {
    /// Parameter version 1, as IPMI v2.0 defines.
    const VERSION: u8 = 0x01;

    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![
            Self::VERSION,
            (self.parameter & 0x7f) | if self.invalid { 0x80 } else { 0 },
        ];
        out.extend_from_slice(&self.data);
        out
    }

    pub fn decode(data: &[u8]) -> Result<Self, CodecError> {
        let mut reader = Reader::new(data, "Get System Boot Options response");
        let _version = reader.u8()?;
        let parameter = reader.u8()?;
        Ok(Self {
            parameter: parameter & 0x7f,
            invalid: parameter & 0x80 != 0,
            data: reader.rest().to_vec(),
        })
    }
}

/// What the machine handler answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineResponse {
    DeviceId(DeviceId),
    ChassisStatus(ChassisStatus),
    BootOption(BootOptionResponse),
    /// Completed, no response data.
    Done,
}

impl MachineResponse {
    /// The response data bytes (after the completion code).
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Self::DeviceId(id) => id.encode(),
            Self::ChassisStatus(status) => status.encode(),
            Self::BootOption(option) => option.encode(),
            Self::Done => Vec::new(),
        }
    }
}
