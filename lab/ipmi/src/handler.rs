//! The transport-free command handler: typed machine requests in, typed responses (or a
//! completion code) out, executed against any [`SharedMachine`].
//!
//! Mappings:
//!
//! | IPMI | machine |
//! |---|---|
//! | Chassis Control power down / up / cycle / hard reset / diagnostic interrupt / soft shutdown | `ForceOff` / `On` / `PowerCycle` / `ForceRestart` / `Nmi` / `GracefulShutdown` |
//! | chassis power on (Get Chassis Status) | `On`, `PoweringOn`, `PoweringOff` (power is applied) |
//! | boot flags valid + next boot only / persistent | `BootOverrideMode::Once` / `Continuous` |
//! | boot device PXE / disk / CD-ROM / no override | `Pxe` / `Hdd` / `Cd` / `Disabled` |
//!
//! A machine's `UefiHttp` override reads back as PXE with the EFI bit (IPMI has no HTTP boot).
//! Driver errors become completion codes: unsupported → 0xCC, refused → 0xD5, timeout → 0xC3,
//! anything else → 0xFF.

use std::sync::Mutex;

use rackproof_driver::{
    BootOverride, BootOverrideMode, BootTarget, DriverError, PowerState, ResetAction, SharedMachine,
};
use rackproof_std::LockExt;

use crate::codec::command::{
    BootDevice, BootFlags, BootOptionResponse, BootParameter, ChassisControl, ChassisStatus,
    CompletionCode, DeviceId, MachineRequest, MachineResponse,
};

/// The Device ID this crate's BMC reports unless told otherwise.
pub const DEFAULT_DEVICE_ID: DeviceId = DeviceId {
    device_id: 0x20,
    device_revision: 1,
    provides_sdrs: false,
    firmware_major: 1,
    firmware_minor_bcd: 0x00,
    ipmi_version: 0x02,
    // Chassis device.
    additional_support: 0x80,
    manufacturer_id: 0,
    product_id: 0x5250,
    aux_firmware: [0; 4],
};

/// Last power event bit: the last power-on came from an IPMI command.
const POWER_EVENT_COMMAND: u8 = 0x10;

#[derive(Debug, Default)]
struct BmcState {
    set_in_progress: u8,
    boot_info_ack: u8,
    last_power_event: u8,
}

/// Executes machine requests.
#[derive(Debug)]
pub struct CommandHandler {
    machine: SharedMachine,
    device_id: DeviceId,
    state: Mutex<BmcState>,
}

impl CommandHandler {
    pub fn new(machine: SharedMachine, device_id: DeviceId) -> Self {
        Self {
            machine,
            device_id,
            state: Mutex::new(BmcState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, BmcState> {
        self.state.locked()
    }

    /// Executes `request` against the machine.
    pub async fn handle(
        &self,
        request: &MachineRequest,
    ) -> Result<MachineResponse, CompletionCode> {
        match request {
            MachineRequest::GetDeviceId => Ok(MachineResponse::DeviceId(self.device_id)),
            MachineRequest::GetChassisStatus => {
                let state = self
                    .machine
                    .power_state()
                    .await
                    .map_err(|e| completion_code(&e))?;
                Ok(MachineResponse::ChassisStatus(ChassisStatus {
                    power_on: state != PowerState::Off,
                    // "previous": the emulated machine keeps its state across BMC restarts.
                    power_restore_policy: 1,
                    last_power_event: self.state().last_power_event,
                    misc: 0,
                }))
            }
            MachineRequest::ChassisControl(control) => self.chassis_control(*control).await,
            MachineRequest::SetSystemBootOptions(parameter) => {
                self.set_boot_option(parameter).await
            }
            MachineRequest::GetSystemBootOptions { parameter, .. } => {
                self.get_boot_option(*parameter).await
            }
        }
    }

    async fn chassis_control(
        &self,
        control: ChassisControl,
    ) -> Result<MachineResponse, CompletionCode> {
        let action = reset_action(control);
        if !self.machine.allowed_resets().contains(&action) {
            return Err(CompletionCode::INVALID_DATA_FIELD);
        }
        tracing::info!(%action, "chassis control");
        self.machine
            .reset(action)
            .await
            .map_err(|e| completion_code(&e))?;
        if matches!(
            control,
            ChassisControl::PowerUp | ChassisControl::PowerCycle
        ) {
            self.state().last_power_event = POWER_EVENT_COMMAND;
        }
        Ok(MachineResponse::Done)
    }

    async fn set_boot_option(
        &self,
        parameter: &BootParameter,
    ) -> Result<MachineResponse, CompletionCode> {
        match *parameter {
            BootParameter::SetInProgress(requested) => {
                let mut state = self.state();
                // Taking the lock twice is refused (IPMI v2.0 table 28-14, completion code 81h).
                if requested == 1 && state.set_in_progress == 1 {
                    return Err(CompletionCode(0x81));
                }
                state.set_in_progress = requested;
            }
            BootParameter::BootInfoAcknowledge { mask, flags } => {
                let mut state = self.state();
                state.boot_info_ack = (state.boot_info_ack & !mask) | (flags & mask);
            }
            BootParameter::BootFlags(flags) => {
                let setting = boot_override(&flags)?;
                self.machine
                    .set_boot_override(setting)
                    .await
                    .map_err(|e| completion_code(&e))?;
            }
        }
        Ok(MachineResponse::Done)
    }

    async fn get_boot_option(&self, parameter: u8) -> Result<MachineResponse, CompletionCode> {
        let data = match parameter {
            BootParameter::SET_IN_PROGRESS => vec![self.state().set_in_progress],
            BootParameter::BOOT_INFO_ACKNOWLEDGE => vec![0x00, self.state().boot_info_ack],
            BootParameter::BOOT_FLAGS => {
                let setting = self
                    .machine
                    .boot_override()
                    .await
                    .map_err(|e| completion_code(&e))?;
                boot_flags(setting).encode().to_vec()
            }
            _ => return Err(CompletionCode::PARAMETER_NOT_SUPPORTED),
        };
        Ok(MachineResponse::BootOption(BootOptionResponse {
            parameter,
            invalid: false,
            data,
        }))
    }
}

/// The machine action a Chassis Control asks for.
pub fn reset_action(control: ChassisControl) -> ResetAction {
    match control {
        ChassisControl::PowerDown => ResetAction::ForceOff,
        ChassisControl::PowerUp => ResetAction::On,
        ChassisControl::PowerCycle => ResetAction::PowerCycle,
        ChassisControl::HardReset => ResetAction::ForceRestart,
        ChassisControl::DiagnosticInterrupt => ResetAction::Nmi,
        ChassisControl::SoftShutdown => ResetAction::GracefulShutdown,
    }
}

/// The Chassis Control for a machine action; `None` for actions IPMI cannot express
/// (`GracefulRestart`).
pub fn chassis_control(action: ResetAction) -> Option<ChassisControl> {
    Some(match action {
        ResetAction::ForceOff => ChassisControl::PowerDown,
        ResetAction::On => ChassisControl::PowerUp,
        ResetAction::PowerCycle => ChassisControl::PowerCycle,
        ResetAction::ForceRestart => ChassisControl::HardReset,
        ResetAction::Nmi => ChassisControl::DiagnosticInterrupt,
        ResetAction::GracefulShutdown => ChassisControl::SoftShutdown,
        ResetAction::GracefulRestart => return None,
    })
}

/// The boot override that boot flags set.
pub fn boot_override(flags: &BootFlags) -> Result<BootOverride, CompletionCode> {
    let target = match flags.device {
        _ if !flags.valid => return Ok(BootOverride::default()),
        BootDevice::NoOverride => return Ok(BootOverride::default()),
        BootDevice::Pxe => BootTarget::Pxe,
        BootDevice::Disk => BootTarget::Hdd,
        BootDevice::Cdrom => BootTarget::Cd,
        _ => return Err(CompletionCode::INVALID_DATA_FIELD),
    };
    let mode = if flags.persistent {
        BootOverrideMode::Continuous
    } else {
        BootOverrideMode::Once
    };
    Ok(BootOverride { mode, target })
}

/// The boot flags that report a boot override.
pub fn boot_flags(setting: BootOverride) -> BootFlags {
    let (device, efi) = match setting.target {
        BootTarget::None => (BootDevice::NoOverride, false),
        BootTarget::Pxe => (BootDevice::Pxe, false),
        BootTarget::Hdd => (BootDevice::Disk, false),
        BootTarget::Cd => (BootDevice::Cdrom, false),
        BootTarget::UefiHttp => (BootDevice::Pxe, true),
    };
    match setting.mode {
        BootOverrideMode::Disabled => BootFlags {
            valid: false,
            persistent: false,
            efi: false,
            device: BootDevice::NoOverride,
        },
        BootOverrideMode::Once => BootFlags {
            valid: true,
            persistent: false,
            efi,
            device,
        },
        BootOverrideMode::Continuous => BootFlags {
            valid: true,
            persistent: true,
            efi,
            device,
        },
    }
}

fn completion_code(error: &DriverError) -> CompletionCode {
    tracing::debug!(%error, "machine refused an IPMI command");
    match error {
        DriverError::Unsupported { .. } => CompletionCode::INVALID_DATA_FIELD,
        DriverError::Refused { .. } => CompletionCode::NOT_SUPPORTED_IN_PRESENT_STATE,
        DriverError::Timeout { .. } => CompletionCode::TIMEOUT,
        DriverError::Failed { .. } => CompletionCode::UNSPECIFIED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chassis_control_maps_to_an_action_and_back() {
        for code in 0..=5 {
            let control = ChassisControl::from_code(code).unwrap();
            assert_eq!(chassis_control(reset_action(control)), Some(control));
        }
        assert_eq!(chassis_control(ResetAction::GracefulRestart), None);
    }

    #[test]
    fn boot_overrides_survive_the_boot_flags() {
        for mode in [BootOverrideMode::Once, BootOverrideMode::Continuous] {
            for target in [BootTarget::Pxe, BootTarget::Hdd, BootTarget::Cd] {
                let setting = BootOverride { mode, target };
                assert_eq!(boot_override(&boot_flags(setting)).unwrap(), setting);
            }
        }
        assert_eq!(
            boot_override(&boot_flags(BootOverride::default())).unwrap(),
            BootOverride::default()
        );
        let bios = BootFlags {
            valid: true,
            persistent: false,
            efi: false,
            device: BootDevice::BiosSetup,
        };
        assert_eq!(
            boot_override(&bios),
            Err(CompletionCode::INVALID_DATA_FIELD)
        );
    }
}
