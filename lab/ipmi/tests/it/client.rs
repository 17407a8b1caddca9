//! The native client against the emulator: the same operations ipmitool performs, through the
//! `Power` and `BootControl` traits.

use std::sync::Arc;
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_driver::{
    BootControl, BootOverride, BootOverrideMode, BootTarget, DriverError, Power, PowerState,
    ResetAction,
};
use rackproof_ipmi::codec::command::Privilege;
use rackproof_ipmi::{
    BmcConfig, ClientError, ClientOptions, Credentials, IpmiClient, IpmiEmulator,
};
use rackproof_std::error_chain;

use crate::common::TestMachine;

const USER: &str = "ops-user";
const PASSWORD: &str = "pa55-word-xyz";

async fn setup(
    power: PowerState,
    options: ClientOptions,
) -> (Arc<TestMachine>, IpmiEmulator, IpmiClient) {
    let machine = TestMachine::new(power);
    let emulator = IpmiEmulator::start(
        machine.shared(),
        Credentials::new(USER, PASSWORD).unwrap(),
        Clock::wall(),
    )
    .await
    .unwrap();
    let client = IpmiClient::with_options(
        emulator.local_addr(),
        Credentials::new(USER, PASSWORD).unwrap(),
        options,
        Clock::wall(),
    );
    (machine, emulator, client)
}

#[tokio::test]
async fn every_power_action_reaches_the_machine() {
    for suite in [None, Some(3), Some(17)] {
        let options = ClientOptions {
            cipher_suite: suite,
            ..ClientOptions::default()
        };
        let (machine, emulator, client) = setup(PowerState::Off, options).await;
        assert_eq!(client.power_state().await.unwrap(), PowerState::Off);
        for (action, power) in [
            (ResetAction::On, PowerState::On),
            (ResetAction::ForceRestart, PowerState::On),
            (ResetAction::Nmi, PowerState::On),
            (ResetAction::PowerCycle, PowerState::On),
            (ResetAction::GracefulShutdown, PowerState::Off),
            (ResetAction::On, PowerState::On),
            (ResetAction::ForceOff, PowerState::Off),
        ] {
            client.reset(action).await.unwrap();
            assert_eq!(
                machine.state().power,
                power,
                "suite {suite:?} after {action}"
            );
            assert_eq!(client.power_state().await.unwrap(), power);
        }
        assert_eq!(machine.state().actions.len(), 7, "suite {suite:?}");
        assert_eq!(
            emulator.active_sessions(),
            1,
            "one session serves every call"
        );
        client.close().await;
        assert_eq!(emulator.active_sessions(), 0);
    }
}

#[tokio::test]
async fn power_on_when_on_does_nothing_and_graceful_restart_is_unsupported() {
    let (machine, _emulator, client) = setup(PowerState::On, ClientOptions::default()).await;
    client.reset(ResetAction::On).await.unwrap();
    assert!(machine.state().actions.is_empty());
    let error = client
        .reset(ResetAction::GracefulRestart)
        .await
        .unwrap_err();
    assert!(matches!(error, DriverError::Unsupported { .. }), "{error}");
    assert!(
        !client
            .allowed_resets()
            .contains(&ResetAction::GracefulRestart)
    );
}

#[tokio::test]
async fn a_refused_action_is_a_refusal() {
    let (_machine, _emulator, client) = setup(PowerState::Off, ClientOptions::default()).await;
    let error = client.reset(ResetAction::ForceRestart).await.unwrap_err();
    assert!(matches!(error, DriverError::Refused { .. }), "{error}");
}

#[tokio::test]
async fn boot_overrides_round_trip_through_the_bmc() {
    let (machine, _emulator, client) = setup(PowerState::On, ClientOptions::default()).await;
    for setting in [
        BootOverride {
            mode: BootOverrideMode::Once,
            target: BootTarget::Pxe,
        },
        BootOverride {
            mode: BootOverrideMode::Continuous,
            target: BootTarget::Hdd,
        },
        BootOverride {
            mode: BootOverrideMode::Once,
            target: BootTarget::Cd,
        },
        BootOverride::default(),
    ] {
        client.set_boot_override(setting).await.unwrap();
        assert_eq!(machine.state().boot, setting);
        assert_eq!(client.boot_override().await.unwrap(), setting);
    }
    let http = BootOverride {
        mode: BootOverrideMode::Once,
        target: BootTarget::UefiHttp,
    };
    assert!(matches!(
        client.set_boot_override(http).await,
        Err(DriverError::Unsupported { .. })
    ));
}

#[tokio::test]
async fn device_id_chassis_status_and_ping() {
    let (_machine, _emulator, client) = setup(PowerState::On, ClientOptions::default()).await;
    assert!(client.ping().await.unwrap(), "pong says IPMI is supported");
    let id = client.device_id().await.unwrap();
    assert_eq!((id.device_id, id.ipmi_version), (0x20, 0x02));
    assert!(client.chassis_status().await.unwrap().power_on);
}

#[tokio::test]
async fn a_wrong_password_fails_without_revealing_credentials() {
    let machine = TestMachine::new(PowerState::Off);
    let emulator = IpmiEmulator::start(
        machine.shared(),
        Credentials::new(USER, PASSWORD).unwrap(),
        Clock::wall(),
    )
    .await
    .unwrap();
    let client = IpmiClient::new(
        emulator.local_addr(),
        Credentials::new(USER, "not-the-password").unwrap(),
        Clock::wall(),
    );
    let error = client.reset(ResetAction::On).await.unwrap_err();
    let text = error_chain(&error);
    assert!(
        text.contains("does not know the configured password"),
        "{text}"
    );
    assert!(
        !text.contains(USER) && !text.contains(PASSWORD) && !text.contains("not-the-password"),
        "{text}"
    );
    assert!(!format!("{client:?}").contains("not-the-password"));
    assert_eq!(machine.state().power, PowerState::Off);
    // The client's RAKP 3 error report (sent without waiting) makes the BMC drop the half-open
    // session.
    let dropped = async {
        while emulator.sessions_including_handshakes() != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), dropped)
        .await
        .expect("the BMC drops the half-open session");
}

#[tokio::test]
async fn an_unknown_user_is_refused_at_rakp_2() {
    let machine = TestMachine::new(PowerState::Off);
    let emulator = IpmiEmulator::start(
        machine.shared(),
        Credentials::new(USER, PASSWORD).unwrap(),
        Clock::wall(),
    )
    .await
    .unwrap();
    let client = IpmiClient::new(
        emulator.local_addr(),
        Credentials::new("intruder", PASSWORD).unwrap(),
        Clock::wall(),
    );
    let error = client.power_state().await.unwrap_err();
    let text = error_chain(&error);
    assert!(
        text.contains("refused the session at RAKP 2: unauthorized name"),
        "{text}"
    );
    assert!(
        !text.contains("intruder") && !text.contains(PASSWORD),
        "{text}"
    );
}

#[tokio::test]
async fn a_user_privilege_session_cannot_control_power() {
    let options = ClientOptions {
        privilege: Privilege::User,
        ..ClientOptions::default()
    };
    let (machine, _emulator, client) = setup(PowerState::Off, options).await;
    assert_eq!(client.power_state().await.unwrap(), PowerState::Off);
    let error = client.reset(ResetAction::ForceOff).await.unwrap_err();
    assert!(
        error_chain(&error).contains("insufficient privilege level"),
        "{}",
        error_chain(&error)
    );
    assert!(machine.state().actions.is_empty());
}

#[tokio::test]
async fn the_client_reopens_a_session_the_bmc_forgot() {
    let options = ClientOptions {
        timeout: Duration::from_millis(200),
        retries: 1,
        ..ClientOptions::default()
    };
    let (machine, emulator, client) = setup(PowerState::Off, options).await;
    assert_eq!(client.power_state().await.unwrap(), PowerState::Off);
    // The BMC restarts on the same address and knows no sessions.
    let addr = emulator.local_addr();
    emulator.stop().await;
    let config = BmcConfig::new(Credentials::new(USER, PASSWORD).unwrap());
    let restarted = IpmiEmulator::start_with(machine.shared(), config, addr, Clock::wall())
        .await
        .unwrap();
    client.reset(ResetAction::On).await.unwrap();
    assert_eq!(machine.state().power, PowerState::On);
    assert_eq!(restarted.active_sessions(), 1);
}

#[tokio::test]
async fn a_silent_bmc_times_out_with_its_address() {
    // A bound socket that never answers.
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let options = ClientOptions {
        timeout: Duration::from_millis(100),
        retries: 1,
        ..ClientOptions::default()
    };
    let client = IpmiClient::with_options(
        silent.local_addr().unwrap(),
        Credentials::new(USER, PASSWORD).unwrap(),
        options,
        Clock::wall(),
    );
    let error = client.power_state().await.unwrap_err();
    let text = error_chain(&error);
    assert!(
        text.contains(&silent.local_addr().unwrap().to_string()),
        "{text}"
    );
    assert!(
        text.contains("did not answer Get Channel Authentication Capabilities"),
        "{text}"
    );
    let DriverError::Failed {
        source: Some(source),
        ..
    } = &error
    else {
        panic!("failure expected: {error:?}")
    };
    assert!(matches!(
        source.downcast_ref::<ClientError>(),
        Some(ClientError::NoResponse { .. })
    ));
}
