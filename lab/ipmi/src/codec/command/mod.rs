//! The IPMI commands this crate speaks, as typed requests and responses.
//!
//! [`Request::decode`] turns (network function, command, data) into a [`Request`]; its error
//! maps to the completion code a BMC answers with. Each response type encodes to and decodes
//! from the data bytes after the completion code.

use super::message::netfn;
use super::{CodecError, Reader};

mod response;
#[cfg(test)]
mod tests;

pub use response::*;

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
