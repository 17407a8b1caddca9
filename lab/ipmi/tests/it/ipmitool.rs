//! Debian's ipmitool (`-I lanplus`) against the emulator, for every command the emulator
//! promises; each test checks the machine behind the BMC, not just ipmitool's output.
//!
//! Needs `apt-get install -y ipmitool`; fails (never skips) with that command when it is missing.

use std::sync::Arc;

use crate::common::TestMachine;
use rackproof_clock::Clock;
use rackproof_driver::{
    BootControl as _, BootOverride, BootOverrideMode, BootTarget, Power as _, PowerState,
    ResetAction,
};
use rackproof_ipmi::{Credentials, IpmiEmulator};
use rackproof_test_support::ipmitool::{Ipmitool, find_program, ipmitool_path};

const USER: &str = "admin";
const PASSWORD: &str = "s3cret-pw";

async fn emulator(power: PowerState) -> (Arc<TestMachine>, IpmiEmulator) {
    let machine = TestMachine::new(power);
    let credentials = Credentials::new(USER, PASSWORD).unwrap();
    let emulator = IpmiEmulator::start(machine.shared(), credentials, Clock::wall())
        .await
        .unwrap();
    (machine, emulator)
}

async fn run_ok(emulator: &IpmiEmulator, args: &[&str]) -> String {
    let run = Ipmitool::lanplus(emulator.local_addr().port(), USER, PASSWORD)
        .run(args)
        .await;
    assert!(
        run.success,
        "ipmitool {args:?} failed\nstdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    run.stdout
}

#[tokio::test]
async fn missing_ipmitool_fails_with_the_install_command() {
    let empty = tempfile::tempdir().unwrap();
    let message = find_program("ipmitool", "ipmitool", Some(empty.path().as_os_str())).unwrap_err();
    assert!(message.contains("apt-get install -y ipmitool"), "{message}");
    // And the real lookup succeeds here (ci/test installs it).
    ipmitool_path();
}

#[tokio::test]
async fn power_status_reports_the_machine_state() {
    let (machine, emulator) = emulator(PowerState::Off).await;
    assert_eq!(
        run_ok(&emulator, &["power", "status"]).await.trim(),
        "Chassis Power is off"
    );
    machine.reset(ResetAction::On).await.unwrap();
    assert_eq!(
        run_ok(&emulator, &["power", "status"]).await.trim(),
        "Chassis Power is on"
    );
}

#[tokio::test]
async fn power_on_turns_the_machine_on() {
    let (machine, emulator) = emulator(PowerState::Off).await;
    let out = run_ok(&emulator, &["power", "on"]).await;
    assert!(out.contains("Chassis Power Control: Up/On"), "{out}");
    let state = machine.state();
    assert_eq!(state.power, PowerState::On);
    assert_eq!(state.actions, [ResetAction::On]);
}

#[tokio::test]
async fn power_off_forces_the_machine_off() {
    let (machine, emulator) = emulator(PowerState::On).await;
    let out = run_ok(&emulator, &["power", "off"]).await;
    assert!(out.contains("Chassis Power Control: Down/Off"), "{out}");
    assert_eq!(machine.state().power, PowerState::Off);
    assert_eq!(machine.state().actions, [ResetAction::ForceOff]);
}

#[tokio::test]
async fn power_cycle_cycles_the_machine() {
    let (machine, emulator) = emulator(PowerState::On).await;
    let out = run_ok(&emulator, &["power", "cycle"]).await;
    assert!(out.contains("Chassis Power Control: Cycle"), "{out}");
    let state = machine.state();
    assert_eq!((state.power, state.boots), (PowerState::On, 1));
    assert_eq!(state.actions, [ResetAction::PowerCycle]);
}

#[tokio::test]
async fn power_reset_restarts_the_machine() {
    let (machine, emulator) = emulator(PowerState::On).await;
    let out = run_ok(&emulator, &["power", "reset"]).await;
    assert!(out.contains("Chassis Power Control: Reset"), "{out}");
    assert_eq!(machine.state().actions, [ResetAction::ForceRestart]);
    assert_eq!(machine.state().boots, 1);
}

#[tokio::test]
async fn power_reset_of_a_machine_that_is_off_is_refused() {
    let (machine, emulator) = emulator(PowerState::Off).await;
    let run = Ipmitool::lanplus(emulator.local_addr().port(), USER, PASSWORD)
        .run(&["power", "reset"])
        .await;
    assert!(!run.success, "{run:?}");
    assert!(
        run.stderr
            .contains("Command not supported in present state"),
        "{}",
        run.stderr
    );
    assert!(machine.state().actions.is_empty());
}

#[tokio::test]
async fn power_soft_shuts_the_machine_down_gracefully() {
    let (machine, emulator) = emulator(PowerState::On).await;
    let out = run_ok(&emulator, &["power", "soft"]).await;
    assert!(out.contains("Chassis Power Control: Soft"), "{out}");
    assert_eq!(machine.state().power, PowerState::Off);
    assert_eq!(machine.state().actions, [ResetAction::GracefulShutdown]);
}

#[tokio::test]
async fn chassis_status_shows_power_and_last_event() {
    let (_machine, emulator) = emulator(PowerState::Off).await;
    let out = run_ok(&emulator, &["chassis", "status"]).await;
    assert!(out.contains("System Power         : off"), "{out}");
    run_ok(&emulator, &["power", "on"]).await;
    let out = run_ok(&emulator, &["chassis", "status"]).await;
    assert!(out.contains("System Power         : on"), "{out}");
    assert!(out.contains("Last Power Event     : command"), "{out}");
}

#[tokio::test]
async fn bootdev_pxe_sets_a_one_time_pxe_override() {
    let (machine, emulator) = emulator(PowerState::On).await;
    let out = run_ok(&emulator, &["chassis", "bootdev", "pxe"]).await;
    assert!(out.contains("Set Boot Device to pxe"), "{out}");
    assert_eq!(
        machine.state().boot,
        BootOverride {
            mode: BootOverrideMode::Once,
            target: BootTarget::Pxe
        }
    );
}

#[tokio::test]
async fn bootdev_disk_persistent_sets_a_continuous_disk_override() {
    let (machine, emulator) = emulator(PowerState::On).await;
    let out = run_ok(
        &emulator,
        &["chassis", "bootdev", "disk", "options=persistent"],
    )
    .await;
    assert!(out.contains("Set Boot Device to disk"), "{out}");
    assert_eq!(
        machine.state().boot,
        BootOverride {
            mode: BootOverrideMode::Continuous,
            target: BootTarget::Hdd
        }
    );
    // A second bootdev in a row works: the set-in-progress lock was released.
    run_ok(&emulator, &["chassis", "bootdev", "pxe"]).await;
    assert_eq!(
        machine.state().boot,
        BootOverride {
            mode: BootOverrideMode::Once,
            target: BootTarget::Pxe
        }
    );
}

#[tokio::test]
async fn bootparam_get_5_shows_the_machine_override() {
    let (machine, emulator) = emulator(PowerState::On).await;
    let out = run_ok(&emulator, &["chassis", "bootparam", "get", "5"]).await;
    assert!(out.contains("Boot Flag Invalid"), "{out}");
    assert!(out.contains("Boot Device Selector : No override"), "{out}");
    machine
        .set_boot_override(BootOverride {
            mode: BootOverrideMode::Continuous,
            target: BootTarget::Pxe,
        })
        .await
        .unwrap();
    let out = run_ok(&emulator, &["chassis", "bootparam", "get", "5"]).await;
    assert!(out.contains("Boot Flag Valid"), "{out}");
    assert!(out.contains("Options apply to all future boots"), "{out}");
    assert!(out.contains("Boot Device Selector : Force PXE"), "{out}");
}

#[tokio::test]
async fn mc_info_shows_the_device_id() {
    let (_machine, emulator) = emulator(PowerState::Off).await;
    let out = run_ok(&emulator, &["mc", "info"]).await;
    assert!(out.contains("Device ID                 : 32"), "{out}");
    assert!(out.contains("IPMI Version              : 2.0"), "{out}");
    assert!(out.contains("Firmware Revision         : 1.00"), "{out}");
    assert!(out.contains("Chassis Device"), "{out}");
}

#[tokio::test]
async fn ipmitool_picks_cipher_suite_17_from_the_offered_list() {
    let (machine, emulator) = emulator(PowerState::Off).await;
    let run = Ipmitool::lanplus(emulator.local_addr().port(), USER, PASSWORD)
        .run(&["-v", "power", "on"])
        .await;
    assert!(run.success, "{run:?}");
    assert!(
        run.stderr.contains("Using best available cipher suite 17"),
        "{}",
        run.stderr
    );
    assert_eq!(machine.state().power, PowerState::On);
}

#[tokio::test]
async fn both_cipher_suites_work_when_named() {
    let (machine, emulator) = emulator(PowerState::Off).await;
    for suite in ["3", "17"] {
        run_ok(&emulator, &["-C", suite, "power", "on"]).await;
        assert_eq!(machine.state().power, PowerState::On, "suite {suite}");
        run_ok(&emulator, &["-C", suite, "power", "off"]).await;
        assert_eq!(machine.state().power, PowerState::Off, "suite {suite}");
    }
}

#[tokio::test]
async fn ipmitool_closes_its_session() {
    let (_machine, emulator) = emulator(PowerState::Off).await;
    run_ok(&emulator, &["power", "status"]).await;
    assert_eq!(emulator.active_sessions(), 0);
}

#[tokio::test]
async fn a_wrong_password_is_refused_and_changes_nothing() {
    let (machine, emulator) = emulator(PowerState::Off).await;
    let run = Ipmitool::lanplus(emulator.local_addr().port(), USER, "wrong-password")
        .run(&["-v", "power", "on"])
        .await;
    assert!(!run.success, "{run:?}");
    assert!(
        run.stderr.contains("RAKP 2 HMAC is invalid"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("Unable to establish IPMI v2 / RMCP+ session"),
        "{}",
        run.stderr
    );
    assert_eq!(machine.state().power, PowerState::Off);
    assert_eq!(emulator.active_sessions(), 0);
}

#[tokio::test]
async fn an_unknown_user_gets_unauthorized_name() {
    let (machine, emulator) = emulator(PowerState::Off).await;
    let run = Ipmitool::lanplus(emulator.local_addr().port(), "mallory", PASSWORD)
        .run(&["-v", "power", "on"])
        .await;
    assert!(!run.success, "{run:?}");
    assert!(run.stderr.contains("unauthorized name"), "{}", run.stderr);
    assert_eq!(machine.state().power, PowerState::Off);
}

#[tokio::test]
async fn a_user_level_session_may_read_but_not_control_power() {
    let (machine, emulator) = emulator(PowerState::Off).await;
    let status = Ipmitool::lanplus(emulator.local_addr().port(), USER, PASSWORD)
        .run(&["-L", "USER", "power", "status"])
        .await;
    assert!(status.success, "{status:?}");
    let on = Ipmitool::lanplus(emulator.local_addr().port(), USER, PASSWORD)
        .run(&["-L", "USER", "power", "on"])
        .await;
    assert!(!on.success, "{on:?}");
    assert!(
        on.stderr.contains("Insufficient privilege level"),
        "{}",
        on.stderr
    );
    assert_eq!(machine.state().power, PowerState::Off);
}
