//! The IPMI commands this crate speaks, as typed requests and responses.
//!
//! [`Request::decode`] turns (network function, command, data) into a [`Request`]; its error
//! maps to the completion code a BMC answers with. Each response type encodes to and decodes
//! from the data bytes after the completion code.

use super::message::netfn;
use super::{CodecError, Reader};

/// Command numbers.
pub mod cmd {
    // Network function App.
    pub const GET_DEVICE_ID: u8 = 0x01;
    pub const GET_CHANNEL_AUTH_CAPABILITIES: u8 = 0x38;
    pub const SET_SESSION_PRIVILEGE_LEVEL: u8 = 0x3b;
    pub const CLOSE_SESSION: u8 = 0x3c;
    pub const GET_CHANNEL_CIPHER_SUITES: u8 = 0x54;
    // Network function Chassis.
    pub const GET_CHASSIS_STATUS: u8 = 0x01;
    pub const CHASSIS_CONTROL: u8 = 0x02;
    pub const SET_SYSTEM_BOOT_OPTIONS: u8 = 0x08;
    pub const GET_SYSTEM_BOOT_OPTIONS: u8 = 0x09;
}

/// The channel number meaning "the channel this request arrived on".
pub const CURRENT_CHANNEL: u8 = 0x0e;
/// The LAN channel this crate's BMC answers as.
pub const LAN_CHANNEL: u8 = 0x01;

/// An IPMI completion code (IPMI v2.0 table 5-2, plus command-specific codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CompletionCode(pub u8);

impl CompletionCode {
    pub const OK: Self = Self(0x00);
    /// Get/Set System Boot Options: parameter not supported.
    pub const PARAMETER_NOT_SUPPORTED: Self = Self(0x80);
    /// Set Session Privilege Level: requested level exceeds the session's limit.
    pub const PRIVILEGE_EXCEEDS_LIMIT: Self = Self(0x81);
    /// Close Session: invalid session ID.
    pub const INVALID_SESSION_ID: Self = Self(0x87);
    pub const NODE_BUSY: Self = Self(0xc0);
    pub const INVALID_COMMAND: Self = Self(0xc1);
    pub const TIMEOUT: Self = Self(0xc3);
    pub const REQUEST_LENGTH_INVALID: Self = Self(0xc7);
    pub const PARAMETER_OUT_OF_RANGE: Self = Self(0xc9);
    pub const INVALID_DATA_FIELD: Self = Self(0xcc);
    pub const INSUFFICIENT_PRIVILEGE: Self = Self(0xd4);
    pub const NOT_SUPPORTED_IN_PRESENT_STATE: Self = Self(0xd5);
    pub const UNSPECIFIED: Self = Self(0xff);

    /// What the code means (generic codes; command-specific ones as this crate uses them).
    pub fn describe(self) -> &'static str {
        match self.0 {
            0x00 => "command completed normally",
            0x80 => "parameter not supported",
            0x81 => "requested privilege level exceeds the session limit",
            0x87 => "invalid session ID",
            0xc0 => "node busy",
            0xc1 => "invalid command",
            0xc3 => "timeout while processing command",
            0xc7 => "request data length invalid",
            0xc9 => "parameter out of range",
            0xcc => "invalid data field in request",
            0xd4 => "insufficient privilege level",
            0xd5 => "command not supported in present state",
            0xff => "unspecified error",
            _ => "unrecognized completion code",
        }
    }
}

/// Privilege levels (IPMI v2.0 table 6-1 numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Privilege {
    Callback = 1,
    User = 2,
    Operator = 3,
    Administrator = 4,
    Oem = 5,
}

impl Privilege {
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Self::Callback,
            2 => Self::User,
            3 => Self::Operator,
            4 => Self::Administrator,
            5 => Self::Oem,
            _ => return None,
        })
    }
}

/// Why a request does not decode; each maps to the completion code a BMC answers with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("unknown command {cmd:#04x} in network function {netfn:#04x}")]
    UnknownCommand { netfn: u8, cmd: u8 },
    #[error("request data of command {cmd:#04x} has invalid length {len}")]
    Length { cmd: u8, len: usize },
    #[error("{what} has invalid value {value:#04x}")]
    InvalidField { what: &'static str, value: u8 },
    #[error("boot option parameter {0} is not supported")]
    ParameterNotSupported(u8),
}

impl RequestError {
    pub fn completion_code(&self) -> CompletionCode {
        match self {
            Self::UnknownCommand { .. } => CompletionCode::INVALID_COMMAND,
            Self::Length { .. } => CompletionCode::REQUEST_LENGTH_INVALID,
            Self::InvalidField { .. } => CompletionCode::INVALID_DATA_FIELD,
            Self::ParameterNotSupported(_) => CompletionCode::PARAMETER_NOT_SUPPORTED,
        }
    }
}

/// A request, split into what the session layer answers and what the machine handler answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Session(SessionRequest),
    Machine(MachineRequest),
}

/// Requests about the channel and session, answered by the BMC's session layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionRequest {
    GetChannelAuthCapabilities {
        channel: u8,
        v20_extended: bool,
        privilege: Privilege,
    },
    GetChannelCipherSuites {
        channel: u8,
        payload_type: u8,
        by_cipher_suite: bool,
        list_index: u8,
    },
    /// `None` asks for the current level without changing it.
    SetSessionPrivilegeLevel {
        requested: Option<Privilege>,
    },
    CloseSession {
        session_id: u32,
    },
}

/// Requests about the machine behind the BMC, answered by [`crate::handler::CommandHandler`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineRequest {
    GetDeviceId,
    GetChassisStatus,
    ChassisControl(ChassisControl),
    SetSystemBootOptions(BootParameter),
    GetSystemBootOptions {
        parameter: u8,
        set_selector: u8,
        block_selector: u8,
    },
}

impl MachineRequest {
    /// The session privilege a command needs (IPMI v2.0 appendix G).
    pub fn required_privilege(&self) -> Privilege {
        match self {
            Self::GetDeviceId | Self::GetChassisStatus => Privilege::User,
            Self::ChassisControl(_) | Self::SetSystemBootOptions(_) => Privilege::Operator,
            Self::GetSystemBootOptions { .. } => Privilege::Operator,
        }
    }
}

/// Chassis Control actions (IPMI v2.0 section 28.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChassisControl {
    PowerDown = 0,
    PowerUp = 1,
    PowerCycle = 2,
    HardReset = 3,
    /// Pulse a diagnostic interrupt (NMI).
    DiagnosticInterrupt = 4,
    /// Initiate a soft shutdown through ACPI.
    SoftShutdown = 5,
}

impl ChassisControl {
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => Self::PowerDown,
            1 => Self::PowerUp,
            2 => Self::PowerCycle,
            3 => Self::HardReset,
            4 => Self::DiagnosticInterrupt,
            5 => Self::SoftShutdown,
            _ => return None,
        })
    }
}

/// The boot device selector of boot flags (parameter 5, data byte 2 bits 5:2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BootDevice {
    NoOverride,
    Pxe,
    Disk,
    DiskSafeMode,
    DiagnosticPartition,
    Cdrom,
    BiosSetup,
    /// Any other selector value (remote media, floppy).
    Other(u8),
}

impl BootDevice {
    pub fn code(self) -> u8 {
        match self {
            Self::NoOverride => 0x0,
            Self::Pxe => 0x1,
            Self::Disk => 0x2,
            Self::DiskSafeMode => 0x3,
            Self::DiagnosticPartition => 0x4,
            Self::Cdrom => 0x5,
            Self::BiosSetup => 0x6,
            Self::Other(code) => code & 0x0f,
        }
    }

    pub fn from_code(code: u8) -> Self {
        match code & 0x0f {
            0x0 => Self::NoOverride,
            0x1 => Self::Pxe,
            0x2 => Self::Disk,
            0x3 => Self::DiskSafeMode,
            0x4 => Self::DiagnosticPartition,
            0x5 => Self::Cdrom,
            0x6 => Self::BiosSetup,
            other => Self::Other(other),
        }
    }
}

/// Boot flags (boot option parameter 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BootFlags {
    /// The flags apply at all (bit 7 of byte 1).
    pub valid: bool,
    /// For all future boots rather than the next one only.
    pub persistent: bool,
    /// EFI boot rather than legacy PC-compatible boot.
    pub efi: bool,
    pub device: BootDevice,
}

impl BootFlags {
    pub fn encode(&self) -> [u8; 5] {
        let mut first = 0u8;
        if self.valid {
            first |= 0x80;
        }
        if self.persistent {
            first |= 0x40;
        }
        if self.efi {
            first |= 0x20;
        }
        [first, self.device.code() << 2, 0, 0, 0]
    }

    pub fn decode(data: &[u8]) -> Result<Self, CodecError> {
        let mut reader = Reader::new(data, "boot flags");
        let first = reader.u8()?;
        let second = reader.u8()?;
        let _rest = reader.take(3)?;
        reader.finish()?;
        Ok(Self {
            valid: first & 0x80 != 0,
            persistent: first & 0x40 != 0,
            efi: first & 0x20 != 0,
            device: BootDevice::from_code(second >> 2),
        })
    }
}

/// A boot option parameter value this crate reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BootParameter {
    /// Parameter 0, set-in-progress: 0 set complete, 1 set in progress, 2 commit write.
    SetInProgress(u8),
    /// Parameter 4, boot info acknowledge: which bits to write, and their values.
    BootInfoAcknowledge { mask: u8, flags: u8 },
    /// Parameter 5.
    BootFlags(BootFlags),
}

impl BootParameter {
    pub const SET_IN_PROGRESS: u8 = 0;
    pub const BOOT_INFO_ACKNOWLEDGE: u8 = 4;
    pub const BOOT_FLAGS: u8 = 5;

    pub fn number(&self) -> u8 {
        match self {
            Self::SetInProgress(_) => Self::SET_IN_PROGRESS,
            Self::BootInfoAcknowledge { .. } => Self::BOOT_INFO_ACKNOWLEDGE,
            Self::BootFlags(_) => Self::BOOT_FLAGS,
        }
    }

    pub fn encode_data(&self) -> Vec<u8> {
        match self {
            Self::SetInProgress(state) => vec![*state & 3],
            Self::BootInfoAcknowledge { mask, flags } => vec![*mask, *flags],
            Self::BootFlags(flags) => flags.encode().to_vec(),
        }
    }

    pub fn decode(parameter: u8, data: &[u8]) -> Result<Self, RequestError> {
        let length = |expected: usize| {
            if data.len() == expected {
                Ok(())
            } else {
                Err(RequestError::Length {
                    cmd: cmd::SET_SYSTEM_BOOT_OPTIONS,
                    len: data.len() + 1,
                })
            }
        };
        match parameter & 0x7f {
            Self::SET_IN_PROGRESS => {
                length(1)?;
                match data[0] & 3 {
                    3 => Err(RequestError::InvalidField {
                        what: "set-in-progress state",
                        value: 3,
                    }),
                    state => Ok(Self::SetInProgress(state)),
                }
            }
            Self::BOOT_INFO_ACKNOWLEDGE => {
                length(2)?;
                Ok(Self::BootInfoAcknowledge {
                    mask: data[0],
                    flags: data[1],
                })
            }
            Self::BOOT_FLAGS => {
                length(5)?;
                BootFlags::decode(data)
                    .map(Self::BootFlags)
                    .map_err(|_| RequestError::Length {
                        cmd: cmd::SET_SYSTEM_BOOT_OPTIONS,
                        len: data.len() + 1,
                    })
            }
            other => Err(RequestError::ParameterNotSupported(other)),
        }
    }
}

fn expect_len(
    cmd: u8,
    data: &[u8],
    allowed: std::ops::RangeInclusive<usize>,
) -> Result<(), RequestError> {
    if allowed.contains(&data.len()) {
        Ok(())
    } else {
        Err(RequestError::Length {
            cmd,
            len: data.len(),
        })
    }
}

impl Request {
    /// Decodes a request from its network function, command and data bytes.
    pub fn decode(net_fn: u8, command: u8, data: &[u8]) -> Result<Self, RequestError> {
        let unknown = RequestError::UnknownCommand {
            netfn: net_fn,
            cmd: command,
        };
        match (net_fn, command) {
            (netfn::APP, cmd::GET_DEVICE_ID) => {
                expect_len(command, data, 0..=0)?;
                Ok(Self::Machine(MachineRequest::GetDeviceId))
            }
            (netfn::APP, cmd::GET_CHANNEL_AUTH_CAPABILITIES) => {
                expect_len(command, data, 2..=2)?;
                let privilege =
                    Privilege::from_code(data[1] & 0x0f).ok_or(RequestError::InvalidField {
                        what: "requested privilege level",
                        value: data[1],
                    })?;
                Ok(Self::Session(SessionRequest::GetChannelAuthCapabilities {
                    channel: data[0] & 0x0f,
                    v20_extended: data[0] & 0x80 != 0,
                    privilege,
                }))
            }
            (netfn::APP, cmd::GET_CHANNEL_CIPHER_SUITES) => {
                expect_len(command, data, 3..=3)?;
                Ok(Self::Session(SessionRequest::GetChannelCipherSuites {
                    channel: data[0] & 0x0f,
                    payload_type: data[1] & 0x3f,
                    by_cipher_suite: data[2] & 0x80 != 0,
                    list_index: data[2] & 0x3f,
                }))
            }
            (netfn::APP, cmd::SET_SESSION_PRIVILEGE_LEVEL) => {
                expect_len(command, data, 1..=1)?;
                let requested = match data[0] & 0x0f {
                    0 => None,
                    code => Some(
                        Privilege::from_code(code).ok_or(RequestError::InvalidField {
                            what: "requested privilege level",
                            value: data[0],
                        })?,
                    ),
                };
                Ok(Self::Session(SessionRequest::SetSessionPrivilegeLevel {
                    requested,
                }))
            }
            (netfn::APP, cmd::CLOSE_SESSION) => {
                expect_len(command, data, 4..=5)?;
                let session_id = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
                Ok(Self::Session(SessionRequest::CloseSession { session_id }))
            }
            (netfn::CHASSIS, cmd::GET_CHASSIS_STATUS) => {
                expect_len(command, data, 0..=0)?;
                Ok(Self::Machine(MachineRequest::GetChassisStatus))
            }
            (netfn::CHASSIS, cmd::CHASSIS_CONTROL) => {
                expect_len(command, data, 1..=1)?;
                let control = ChassisControl::from_code(data[0] & 0x0f).ok_or(
                    RequestError::InvalidField {
                        what: "chassis control",
                        value: data[0],
                    },
                )?;
                Ok(Self::Machine(MachineRequest::ChassisControl(control)))
            }
            (netfn::CHASSIS, cmd::SET_SYSTEM_BOOT_OPTIONS) => {
                if data.is_empty() {
                    return Err(RequestError::Length {
                        cmd: command,
                        len: 0,
                    });
                }
                let parameter = BootParameter::decode(data[0], &data[1..])?;
                Ok(Self::Machine(MachineRequest::SetSystemBootOptions(
                    parameter,
                )))
            }
            (netfn::CHASSIS, cmd::GET_SYSTEM_BOOT_OPTIONS) => {
                expect_len(command, data, 3..=3)?;
                Ok(Self::Machine(MachineRequest::GetSystemBootOptions {
                    parameter: data[0] & 0x7f,
                    set_selector: data[1],
                    block_selector: data[2],
                }))
            }
            _ => Err(unknown),
        }
    }

    /// The network function, command and data bytes of this request.
    pub fn encode(&self) -> (u8, u8, Vec<u8>) {
        match self {
            Self::Session(SessionRequest::GetChannelAuthCapabilities {
                channel,
                v20_extended,
                privilege,
            }) => (
                netfn::APP,
                cmd::GET_CHANNEL_AUTH_CAPABILITIES,
                vec![
                    (channel & 0x0f) | if *v20_extended { 0x80 } else { 0 },
                    privilege.code(),
                ],
            ),
            Self::Session(SessionRequest::GetChannelCipherSuites {
                channel,
                payload_type,
                by_cipher_suite,
                list_index,
            }) => (
                netfn::APP,
                cmd::GET_CHANNEL_CIPHER_SUITES,
                vec![
                    *channel & 0x0f,
                    *payload_type & 0x3f,
                    (list_index & 0x3f) | if *by_cipher_suite { 0x80 } else { 0 },
                ],
            ),
            Self::Session(SessionRequest::SetSessionPrivilegeLevel { requested }) => (
                netfn::APP,
                cmd::SET_SESSION_PRIVILEGE_LEVEL,
                vec![requested.map_or(0, Privilege::code)],
            ),
            Self::Session(SessionRequest::CloseSession { session_id }) => (
                netfn::APP,
                cmd::CLOSE_SESSION,
                session_id.to_le_bytes().to_vec(),
            ),
            Self::Machine(MachineRequest::GetDeviceId) => (netfn::APP, cmd::GET_DEVICE_ID, vec![]),
            Self::Machine(MachineRequest::GetChassisStatus) => {
                (netfn::CHASSIS, cmd::GET_CHASSIS_STATUS, vec![])
            }
            Self::Machine(MachineRequest::ChassisControl(control)) => {
                (netfn::CHASSIS, cmd::CHASSIS_CONTROL, vec![*control as u8])
            }
            Self::Machine(MachineRequest::SetSystemBootOptions(parameter)) => {
                let mut data = vec![parameter.number()];
                data.extend(parameter.encode_data());
                (netfn::CHASSIS, cmd::SET_SYSTEM_BOOT_OPTIONS, data)
            }
            Self::Machine(MachineRequest::GetSystemBootOptions {
                parameter,
                set_selector,
                block_selector,
            }) => (
                netfn::CHASSIS,
                cmd::GET_SYSTEM_BOOT_OPTIONS,
                vec![*parameter & 0x7f, *set_selector, *block_selector],
            ),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn every_request() -> Vec<Request> {
        let mut requests = vec![
            Request::Session(SessionRequest::GetChannelAuthCapabilities {
                channel: CURRENT_CHANNEL,
                v20_extended: true,
                privilege: Privilege::Administrator,
            }),
            Request::Session(SessionRequest::GetChannelCipherSuites {
                channel: CURRENT_CHANNEL,
                payload_type: 0,
                by_cipher_suite: true,
                list_index: 2,
            }),
            Request::Session(SessionRequest::SetSessionPrivilegeLevel {
                requested: Some(Privilege::Operator),
            }),
            Request::Session(SessionRequest::SetSessionPrivilegeLevel { requested: None }),
            Request::Session(SessionRequest::CloseSession {
                session_id: 0xdead_beef,
            }),
            Request::Machine(MachineRequest::GetDeviceId),
            Request::Machine(MachineRequest::GetChassisStatus),
            Request::Machine(MachineRequest::GetSystemBootOptions {
                parameter: 5,
                set_selector: 0,
                block_selector: 0,
            }),
            Request::Machine(MachineRequest::SetSystemBootOptions(
                BootParameter::SetInProgress(1),
            )),
            Request::Machine(MachineRequest::SetSystemBootOptions(
                BootParameter::BootInfoAcknowledge { mask: 1, flags: 1 },
            )),
            Request::Machine(MachineRequest::SetSystemBootOptions(
                BootParameter::BootFlags(BootFlags {
                    valid: true,
                    persistent: true,
                    efi: true,
                    device: BootDevice::Pxe,
                }),
            )),
        ];
        for code in 0..=5 {
            requests.push(Request::Machine(MachineRequest::ChassisControl(
                ChassisControl::from_code(code).unwrap(),
            )));
        }
        requests
    }

    #[test]
    fn every_request_round_trips() {
        for request in every_request() {
            let (net_fn, command, data) = request.encode();
            assert_eq!(Request::decode(net_fn, command, &data).unwrap(), request);
        }
    }

    #[test]
    fn ipmitool_bootdev_pxe_decodes_as_pxe_for_the_next_boot() {
        // `chassis bootdev pxe` sends parameter 5 with 80 04 00 00 00.
        let request = Request::decode(netfn::CHASSIS, 0x08, &[0x05, 0x80, 0x04, 0, 0, 0]).unwrap();
        let Request::Machine(MachineRequest::SetSystemBootOptions(BootParameter::BootFlags(flags))) =
            request
        else {
            panic!("boot flags expected, got {request:?}");
        };
        assert_eq!(
            flags,
            BootFlags {
                valid: true,
                persistent: false,
                efi: false,
                device: BootDevice::Pxe
            }
        );
    }

    #[test]
    fn bad_requests_map_to_completion_codes() {
        let code = |net_fn, command, data: &[u8]| {
            Request::decode(net_fn, command, data)
                .unwrap_err()
                .completion_code()
        };
        assert_eq!(code(netfn::APP, 0x99, &[]), CompletionCode::INVALID_COMMAND);
        assert_eq!(
            code(netfn::CHASSIS, cmd::CHASSIS_CONTROL, &[]),
            CompletionCode::REQUEST_LENGTH_INVALID
        );
        assert_eq!(
            code(netfn::CHASSIS, cmd::CHASSIS_CONTROL, &[9]),
            CompletionCode::INVALID_DATA_FIELD
        );
        assert_eq!(
            code(netfn::CHASSIS, cmd::SET_SYSTEM_BOOT_OPTIONS, &[0x07, 1]),
            CompletionCode::PARAMETER_NOT_SUPPORTED
        );
        assert_eq!(
            code(netfn::CHASSIS, cmd::SET_SYSTEM_BOOT_OPTIONS, &[0x05, 0x80]),
            CompletionCode::REQUEST_LENGTH_INVALID
        );
        assert_eq!(
            code(
                netfn::APP,
                cmd::GET_CHANNEL_AUTH_CAPABILITIES,
                &[0x8e, 0x09]
            ),
            CompletionCode::INVALID_DATA_FIELD
        );
    }

    #[test]
    fn responses_round_trip() {
        let id = DeviceId {
            device_id: 0x20,
            device_revision: 1,
            provides_sdrs: false,
            firmware_major: 1,
            firmware_minor_bcd: 0x02,
            ipmi_version: 0x02,
            additional_support: 0x01,
            manufacturer_id: 0x0a_bcde,
            product_id: 0x1234,
            aux_firmware: [1, 2, 3, 4],
        };
        assert_eq!(DeviceId::decode(&id.encode()).unwrap(), id);
        let status = ChassisStatus {
            power_on: true,
            power_restore_policy: 1,
            last_power_event: 0x10,
            misc: 0,
        };
        assert_eq!(ChassisStatus::decode(&status.encode()).unwrap(), status);
        let caps = AuthCapabilities {
            channel: 1,
            v20_extended: true,
            v15_auth_types: 0,
            login_flags: 0x04,
            supports_v15: false,
            supports_v20: true,
        };
        assert_eq!(AuthCapabilities::decode(&caps.encode()).unwrap(), caps);
        let records = vec![
            CipherSuiteRecord {
                id: 17,
                authentication: 3,
                integrity: 4,
                confidentiality: 1,
            },
            CipherSuiteRecord {
                id: 3,
                authentication: 1,
                integrity: 1,
                confidentiality: 1,
            },
        ];
        assert_eq!(
            CipherSuiteRecord::decode_all(&CipherSuiteRecord::encode_all(&records)).unwrap(),
            records
        );
        let option = BootOptionResponse {
            parameter: 5,
            invalid: false,
            data: vec![0x80, 0x04, 0, 0, 0],
        };
        assert_eq!(
            BootOptionResponse::decode(&option.encode()).unwrap(),
            option
        );
    }

    #[test]
    fn short_responses_are_errors() {
        assert!(DeviceId::decode(&[0; 10]).is_err());
        assert!(ChassisStatus::decode(&[1, 0]).is_err());
        assert!(AuthCapabilities::decode(&[1]).is_err());
        assert!(CipherSuiteRecord::decode_all(&[0xc0, 17, 3]).is_err());
        assert!(CipherSuiteRecord::decode_all(&[0x42]).is_err());
        assert!(BootOptionResponse::decode(&[1]).is_err());
    }
}
