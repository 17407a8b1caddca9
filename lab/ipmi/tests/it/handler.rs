//! The transport-free command handler against a test machine: typed requests in, typed
//! responses or completion codes out.

use rackproof_driver::{BootOverride, BootOverrideMode, BootTarget, PowerState, ResetAction};
use rackproof_ipmi::codec::command::{
    BootDevice, BootFlags, BootParameter, ChassisControl, CompletionCode, MachineRequest,
    MachineResponse,
};
use rackproof_ipmi::handler::{CommandHandler, DEFAULT_DEVICE_ID};

use crate::common::TestMachine;

fn control(c: ChassisControl) -> MachineRequest {
    MachineRequest::ChassisControl(c)
}

#[tokio::test]
async fn chassis_controls_drive_the_machine() {
    let machine = TestMachine::new(PowerState::Off);
    let handler = CommandHandler::new(machine.shared(), DEFAULT_DEVICE_ID);
    for (c, power) in [
        (ChassisControl::PowerUp, PowerState::On),
        (ChassisControl::HardReset, PowerState::On),
        (ChassisControl::DiagnosticInterrupt, PowerState::On),
        (ChassisControl::PowerCycle, PowerState::On),
        (ChassisControl::SoftShutdown, PowerState::Off),
        (ChassisControl::PowerUp, PowerState::On),
        (ChassisControl::PowerDown, PowerState::Off),
    ] {
        assert_eq!(
            handler.handle(&control(c)).await,
            Ok(MachineResponse::Done),
            "{c:?}"
        );
        assert_eq!(machine.state().power, power, "after {c:?}");
    }
    assert_eq!(
        machine.state().actions,
        [
            ResetAction::On,
            ResetAction::ForceRestart,
            ResetAction::Nmi,
            ResetAction::PowerCycle,
            ResetAction::GracefulShutdown,
            ResetAction::On,
            ResetAction::ForceOff,
        ]
    );
}

#[tokio::test]
async fn chassis_status_follows_the_machine() {
    let machine = TestMachine::new(PowerState::Off);
    let handler = CommandHandler::new(machine.shared(), DEFAULT_DEVICE_ID);
    let Ok(MachineResponse::ChassisStatus(off)) =
        handler.handle(&MachineRequest::GetChassisStatus).await
    else {
        panic!("chassis status expected");
    };
    assert!(!off.power_on);
    assert_eq!(off.last_power_event, 0);
    handler
        .handle(&control(ChassisControl::PowerUp))
        .await
        .unwrap();
    let Ok(MachineResponse::ChassisStatus(on)) =
        handler.handle(&MachineRequest::GetChassisStatus).await
    else {
        panic!("chassis status expected");
    };
    assert!(on.power_on);
    assert_eq!(on.last_power_event, 0x10, "last power on by command");
}

#[tokio::test]
async fn driver_refusals_and_unsupported_actions_become_completion_codes() {
    let machine = TestMachine::with_resets(
        PowerState::Off,
        vec![ResetAction::On, ResetAction::ForceRestart],
    );
    let handler = CommandHandler::new(machine.shared(), DEFAULT_DEVICE_ID);
    assert_eq!(
        handler.handle(&control(ChassisControl::HardReset)).await,
        Err(CompletionCode::NOT_SUPPORTED_IN_PRESENT_STATE),
        "reset while off is refused by the machine"
    );
    assert_eq!(
        handler
            .handle(&control(ChassisControl::DiagnosticInterrupt))
            .await,
        Err(CompletionCode::INVALID_DATA_FIELD),
        "the machine offers no NMI"
    );
    assert!(machine.state().actions.is_empty());
}

#[tokio::test]
async fn boot_flags_set_and_read_the_machine_override() {
    let machine = TestMachine::new(PowerState::On);
    let handler = CommandHandler::new(machine.shared(), DEFAULT_DEVICE_ID);
    let flags = BootFlags {
        valid: true,
        persistent: true,
        efi: false,
        device: BootDevice::Cdrom,
    };
    let set = MachineRequest::SetSystemBootOptions(BootParameter::BootFlags(flags));
    assert_eq!(handler.handle(&set).await, Ok(MachineResponse::Done));
    assert_eq!(
        machine.state().boot,
        BootOverride {
            mode: BootOverrideMode::Continuous,
            target: BootTarget::Cd
        }
    );
    let get = MachineRequest::GetSystemBootOptions {
        parameter: 5,
        set_selector: 0,
        block_selector: 0,
    };
    let Ok(MachineResponse::BootOption(option)) = handler.handle(&get).await else {
        panic!("boot option expected")
    };
    assert_eq!(option.parameter, 5);
    assert_eq!(BootFlags::decode(&option.data).unwrap(), flags);

    let bios = BootFlags {
        valid: true,
        persistent: false,
        efi: false,
        device: BootDevice::BiosSetup,
    };
    let set = MachineRequest::SetSystemBootOptions(BootParameter::BootFlags(bios));
    assert_eq!(
        handler.handle(&set).await,
        Err(CompletionCode::INVALID_DATA_FIELD)
    );
    assert_eq!(
        machine.state().boot.target,
        BootTarget::Cd,
        "a refused setting changes nothing"
    );
}

#[tokio::test]
async fn set_in_progress_is_a_lock_and_unknown_parameters_are_refused() {
    let machine = TestMachine::new(PowerState::On);
    let handler = CommandHandler::new(machine.shared(), DEFAULT_DEVICE_ID);
    let set = |state| MachineRequest::SetSystemBootOptions(BootParameter::SetInProgress(state));
    assert_eq!(handler.handle(&set(1)).await, Ok(MachineResponse::Done));
    assert_eq!(
        handler.handle(&set(1)).await,
        Err(CompletionCode(0x81)),
        "already in progress"
    );
    let get = MachineRequest::GetSystemBootOptions {
        parameter: 0,
        set_selector: 0,
        block_selector: 0,
    };
    let Ok(MachineResponse::BootOption(option)) = handler.handle(&get).await else {
        panic!("boot option expected")
    };
    assert_eq!(option.data, [1]);
    assert_eq!(handler.handle(&set(0)).await, Ok(MachineResponse::Done));
    assert_eq!(handler.handle(&set(1)).await, Ok(MachineResponse::Done));
    let unknown = MachineRequest::GetSystemBootOptions {
        parameter: 7,
        set_selector: 0,
        block_selector: 0,
    };
    assert_eq!(
        handler.handle(&unknown).await,
        Err(CompletionCode::PARAMETER_NOT_SUPPORTED)
    );
}
