//! The Redfish client against the emulator over real TCP on 127.0.0.1: every reset type, boot
//! override, sessions (with expiry and re-login), retries, TLS policies, each fault rule and
//! vendor profile, and credential hygiene.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{PASSWORD, TestMachine, USER};
use rackproof_clock::Clock;
use rackproof_driver::{
    BootControl, BootOverride, BootOverrideMode, BootTarget, DriverError, Power, PowerState,
    ResetAction,
};
use rackproof_redfish::emulator::RequestRecord;
use rackproof_redfish::{
    AuthMode, ClientOptions, Credentials, Emulator, EmulatorConfig, Endpoint, FaultRule, Quirks,
    RedfishClient, RedfishError, RetryPolicy, RunningEmulator, TlsPolicy, VendorProfile,
};

const SYSTEM: &str = "/redfish/v1/Systems/1";
const RESET: &str = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset";
const SESSIONS: &str = "/redfish/v1/SessionService/Sessions";

fn options() -> ClientOptions {
    ClientOptions {
        retry: RetryPolicy {
            attempts: 4,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(40),
        },
        poll_interval: Duration::from_millis(10),
        power_on_grace: Duration::from_millis(300),
        request_timeout: Duration::from_secs(10),
        task_timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    }
}

async fn serve(machine: Arc<TestMachine>) -> (Emulator, RunningEmulator) {
    let emulator = common::emulator(machine, Clock::wall());
    let running = emulator
        .serve_https("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (emulator, running)
}

fn endpoint(running: &RunningEmulator) -> Endpoint {
    Endpoint::new(&running.url()).with_tls(TlsPolicy::CustomCa {
        pem: running.ca_pem().unwrap().to_owned(),
    })
}

async fn connect_with(running: &RunningEmulator, options: ClientOptions) -> RedfishClient {
    RedfishClient::connect(
        &endpoint(running),
        Credentials::new(USER, PASSWORD),
        options,
        Clock::wall(),
    )
    .await
    .unwrap()
}

async fn connect(running: &RunningEmulator) -> RedfishClient {
    connect_with(running, options()).await
}

fn count(journal: &[RequestRecord], method: &str, path: &str) -> usize {
    journal
        .iter()
        .filter(|r| r.method == method && r.path == path)
        .count()
}

fn resets(journal: &[RequestRecord]) -> Vec<(ResetAction, u16)> {
    journal
        .iter()
        .filter(|r| r.path == RESET)
        .map(|r| (r.reset_type.unwrap(), r.status))
        .collect()
}

#[tokio::test]
async fn every_reset_type_works_over_https_with_one_session() {
    let machine = TestMachine::new(PowerState::Off);
    let (emulator, running) = serve(machine.clone()).await;
    let client = connect(&running).await;
    assert_eq!(client.allowed_resets(), ResetAction::ALL.to_vec());
    let steps = [
        (ResetAction::On, PowerState::On),
        (ResetAction::GracefulRestart, PowerState::On),
        (ResetAction::ForceRestart, PowerState::On),
        (ResetAction::PowerCycle, PowerState::On),
        (ResetAction::Nmi, PowerState::On),
        (ResetAction::GracefulShutdown, PowerState::Off),
        (ResetAction::On, PowerState::On),
        (ResetAction::ForceOff, PowerState::Off),
    ];
    for (action, expected) in steps {
        client
            .reset(action)
            .await
            .unwrap_or_else(|e| panic!("{action}: {e}"));
        assert_eq!(
            client.power_state().await.unwrap(),
            expected,
            "after {action}"
        );
    }
    let state = machine.snapshot();
    assert_eq!(state.boots, 5);
    assert_eq!(state.nmis, 1);
    for action in ResetAction::ALL {
        assert!(
            state.resets.contains(&action),
            "{action} never reached the machine"
        );
    }
    let journal = emulator.journal();
    assert_eq!(
        count(&journal, "POST", SESSIONS),
        1,
        "one login serves every request"
    );
    assert_eq!(emulator.session_count(), 1);
    client.logout().await.unwrap();
    assert_eq!(emulator.session_count(), 0);
}

#[tokio::test]
async fn resets_that_change_nothing_are_not_sent() {
    let machine = TestMachine::new(PowerState::On);
    let (emulator, running) = serve(machine.clone()).await;
    let client = connect(&running).await;
    client.reset(ResetAction::On).await.unwrap();
    client.reset(ResetAction::ForceOff).await.unwrap();
    client.reset(ResetAction::GracefulShutdown).await.unwrap();
    assert_eq!(
        resets(&emulator.journal()),
        vec![(ResetAction::ForceOff, 204)]
    );
}

#[tokio::test]
async fn resets_outside_the_advertised_values_are_refused_with_the_list() {
    let machine =
        TestMachine::with_allowed(PowerState::On, vec![ResetAction::On, ResetAction::ForceOff]);
    let (emulator, running) = serve(machine.clone()).await;
    let client = connect(&running).await;
    assert_eq!(
        client.allowed_resets(),
        vec![ResetAction::On, ResetAction::ForceOff]
    );
    let err = client.reset(ResetAction::Nmi).await.unwrap_err();
    assert!(matches!(err, DriverError::Unsupported { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("Nmi") && text.contains("allowable values: On, ForceOff"),
        "{text}"
    );
    let err = client
        .reset_system(ResetAction::PowerCycle)
        .await
        .unwrap_err();
    assert!(matches!(err, RedfishError::NotAllowed { .. }), "{err:?}");
    assert!(resets(&emulator.journal()).is_empty(), "nothing was sent");
}

#[tokio::test]
async fn boot_overrides_once_and_continuous_for_every_target() {
    let machine = TestMachine::new(PowerState::On);
    let (_emulator, running) = serve(machine.clone()).await;
    let client = connect(&running).await;
    for mode in [BootOverrideMode::Once, BootOverrideMode::Continuous] {
        for target in [
            BootTarget::Pxe,
            BootTarget::Hdd,
            BootTarget::Cd,
            BootTarget::UefiHttp,
        ] {
            let setting = BootOverride { mode, target };
            client.set_boot_override(setting).await.unwrap();
            assert_eq!(machine.snapshot().boot, setting);
            assert_eq!(client.boot_override().await.unwrap(), setting);
        }
    }
    client
        .set_boot_override(BootOverride {
            mode: BootOverrideMode::Once,
            target: BootTarget::Pxe,
        })
        .await
        .unwrap();
    client.reset(ResetAction::PowerCycle).await.unwrap();
    let state = machine.snapshot();
    assert_eq!(state.booted_from.last(), Some(&BootTarget::Pxe));
    assert_eq!(
        client.boot_override().await.unwrap(),
        BootOverride::default(),
        "a Once override is used up by the boot"
    );
}

#[tokio::test]
async fn an_ignored_boot_override_is_sent_again_then_reported() {
    let machine = TestMachine::new(PowerState::On);
    let (emulator, running) = serve(machine.clone()).await;
    let client = connect(&running).await;
    let setting = BootOverride {
        mode: BootOverrideMode::Continuous,
        target: BootTarget::Hdd,
    };
    emulator
        .add_fault(FaultRule::ignore_action("PATCH", SYSTEM).times(1))
        .unwrap();
    client.set_boot_override(setting).await.unwrap();
    assert_eq!(machine.snapshot().boot, setting);
    assert_eq!(count(&emulator.journal(), "PATCH", SYSTEM), 2);
    emulator
        .add_fault(FaultRule::ignore_action("PATCH", SYSTEM))
        .unwrap();
    let err = client
        .set_boot(BootOverride {
            mode: BootOverrideMode::Once,
            target: BootTarget::Cd,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, RedfishError::NotApplied { .. }), "{err:?}");
}

#[tokio::test]
async fn tls_is_verified_unless_a_ca_is_given_or_the_endpoint_opts_out() {
    let machine = TestMachine::new(PowerState::On);
    let (_emulator, running) = serve(machine).await;
    let verify = Endpoint::new(&running.url());
    let err = RedfishClient::connect(
        &verify,
        Credentials::new(USER, PASSWORD),
        options(),
        Clock::wall(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, RedfishError::Transport { .. }),
        "an unknown CA must fail: {err:?}"
    );
    let insecure = Endpoint::new(&running.url()).with_tls(TlsPolicy::InsecureSkipVerify);
    let client = RedfishClient::connect(
        &insecure,
        Credentials::new(USER, PASSWORD),
        options(),
        Clock::wall(),
    )
    .await
    .unwrap();
    assert_eq!(client.power_state().await.unwrap(), PowerState::On);
    let garbage = Endpoint::new(&running.url()).with_tls(TlsPolicy::CustomCa {
        pem: "not a pem".into(),
    });
    let err = RedfishClient::connect(
        &garbage,
        Credentials::new(USER, PASSWORD),
        options(),
        Clock::wall(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("cannot set up TLS"), "{err}");
    let other_ca = emulator_ca().await;
    let wrong = Endpoint::new(&running.url()).with_tls(TlsPolicy::CustomCa { pem: other_ca });
    assert!(
        RedfishClient::connect(
            &wrong,
            Credentials::new(USER, PASSWORD),
            options(),
            Clock::wall()
        )
        .await
        .is_err()
    );
}

/// The CA of another emulator: valid PEM, wrong issuer.
async fn emulator_ca() -> String {
    let (_e, other) = serve(TestMachine::new(PowerState::On)).await;
    other.ca_pem().unwrap().to_owned()
}

#[tokio::test]
async fn plain_http_and_basic_auth_work_without_sessions() {
    let machine = TestMachine::new(PowerState::Off);
    let emulator = common::emulator(machine.clone(), Clock::wall());
    let running = emulator
        .serve_http("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    assert!(running.url().starts_with("http://127.0.0.1:"));
    let basic = ClientOptions {
        auth: AuthMode::Basic,
        ..options()
    };
    let client = RedfishClient::connect(
        &Endpoint::new(&running.url()),
        Credentials::new(USER, PASSWORD),
        basic.clone(),
        Clock::wall(),
    )
    .await
    .unwrap();
    client.reset(ResetAction::On).await.unwrap();
    assert_eq!(machine.snapshot().power, PowerState::On);
    assert_eq!(count(&emulator.journal(), "POST", SESSIONS), 0);
    let err = RedfishClient::connect(
        &Endpoint::new(&running.url()),
        Credentials::new(USER, "wrong"),
        basic,
        Clock::wall(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, RedfishError::Unauthorized { .. }), "{err:?}");
}

#[tokio::test]
async fn expired_sessions_are_replaced_by_logging_in_again() {
    let machine = TestMachine::new(PowerState::On);
    let (emulator, running) = serve(machine).await;
    let client = connect(&running).await;
    emulator.expire_sessions();
    assert_eq!(client.power_state().await.unwrap(), PowerState::On);
    emulator
        .add_fault(FaultRule::expire_session(SYSTEM).times(1))
        .unwrap();
    assert_eq!(client.power_state().await.unwrap(), PowerState::On);
    let journal = emulator.journal();
    assert_eq!(
        count(&journal, "POST", SESSIONS),
        3,
        "the first login and two re-logins"
    );
    assert_eq!(
        journal
            .iter()
            .filter(|r| r.path == SYSTEM && r.status == 401)
            .count(),
        2
    );
    assert_eq!(emulator.session_count(), 1);
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff_and_bounded() {
    let machine = TestMachine::new(PowerState::Off);
    let (emulator, running) = serve(machine.clone()).await;
    let client = connect(&running).await;
    emulator
        .add_fault(FaultRule::status("GET", SYSTEM, 503).times(2))
        .unwrap();
    emulator
        .add_fault(FaultRule::status("POST", RESET, 502).times(1))
        .unwrap();
    client.reset(ResetAction::On).await.unwrap();
    assert_eq!(machine.snapshot().power, PowerState::On);
    assert_eq!(
        resets(&emulator.journal()),
        vec![(ResetAction::On, 502), (ResetAction::On, 204)]
    );

    let before = count(&emulator.journal(), "GET", SYSTEM);
    emulator
        .add_fault(FaultRule::status("GET", SYSTEM, 500))
        .unwrap();
    let err = client.read_power_state().await.unwrap_err();
    assert_eq!(err.status(), Some(500), "{err}");
    assert_eq!(
        count(&emulator.journal(), "GET", SYSTEM) - before,
        4,
        "exactly `attempts` tries"
    );
    assert!(err.to_string().contains("InternalError"), "{err}");
}

#[tokio::test]
async fn a_slow_reset_is_followed_through_its_task_monitor() {
    let machine = TestMachine::new(PowerState::On);
    let (emulator, running) = serve(machine.clone()).await;
    let client = connect(&running).await;
    emulator
        .add_fault(FaultRule::latency(
            Some("POST"),
            RESET,
            Duration::from_millis(150),
        ))
        .unwrap();
    client.reset(ResetAction::PowerCycle).await.unwrap();
    assert_eq!(
        machine.snapshot().boots,
        1,
        "the task completed before reset returned"
    );
    let journal = emulator.journal();
    let monitor = "/redfish/v1/TaskService/TaskMonitors/1";
    assert!(
        journal.iter().any(|r| r.path == monitor && r.status == 202),
        "{journal:?}"
    );
    assert_eq!(
        journal.iter().rfind(|r| r.path == monitor).unwrap().status,
        204
    );
}

#[tokio::test]
async fn a_failed_task_is_reported() {
    let machine = TestMachine::new(PowerState::Off);
    let (emulator, running) = serve(machine).await;
    let client = connect(&running).await;
    emulator
        .add_fault(FaultRule::latency(
            Some("POST"),
            RESET,
            Duration::from_millis(20),
        ))
        .unwrap();
    let err = client.reset_system(ResetAction::Nmi).await.unwrap_err();
    assert!(matches!(err, RedfishError::TaskFailed { .. }), "{err:?}");
    assert!(err.to_string().contains("powered off"), "{err}");
}

#[tokio::test]
async fn a_power_on_accepted_but_ignored_is_detected_and_sent_again() {
    let machine = TestMachine::new(PowerState::Off);
    let (emulator, running) = serve(machine.clone()).await;
    let client = connect(&running).await;
    emulator.apply_profile(VendorProfile::IgnoresFirstPowerOn);
    client.reset(ResetAction::On).await.unwrap();
    assert_eq!(machine.snapshot().power, PowerState::On);
    assert_eq!(
        resets(&emulator.journal()),
        vec![(ResetAction::On, 204), (ResetAction::On, 204)]
    );
}

#[tokio::test]
async fn without_the_quirk_tolerance_an_ignored_power_on_goes_unnoticed() {
    let machine = TestMachine::new(PowerState::Off);
    let (emulator, running) = serve(machine.clone()).await;
    let quirks = Quirks {
        retry_ignored_power_on: false,
        ..Quirks::default()
    };
    let client = connect_with(
        &running,
        ClientOptions {
            quirks,
            ..options()
        },
    )
    .await;
    emulator.apply_profile(VendorProfile::IgnoresFirstPowerOn);
    client.reset(ResetAction::On).await.unwrap();
    assert_eq!(machine.snapshot().power, PowerState::Off);
}

#[tokio::test]
async fn a_power_on_ignored_every_time_ends_in_a_timeout() {
    let machine = TestMachine::new(PowerState::Off);
    let (emulator, running) = serve(machine).await;
    let client = connect(&running).await;
    emulator
        .add_fault(FaultRule::ignore_action("POST", RESET).for_reset_type(ResetAction::On))
        .unwrap();
    let err = client.reset(ResetAction::On).await.unwrap_err();
    assert!(matches!(err, DriverError::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("On sent 3 times"), "{err}");
    assert_eq!(resets(&emulator.journal()).len(), 3);
}

#[tokio::test]
async fn a_reset_refused_until_off_becomes_off_then_on() {
    let machine = TestMachine::new(PowerState::On);
    let (emulator, running) = serve(machine.clone()).await;
    let client = connect(&running).await;
    emulator.apply_profile(VendorProfile::ResetRefusedUntilOff);
    client.reset(ResetAction::ForceRestart).await.unwrap();
    assert_eq!(
        resets(&emulator.journal()),
        vec![
            (ResetAction::ForceRestart, 409),
            (ResetAction::ForceOff, 204),
            (ResetAction::On, 204)
        ]
    );
    assert_eq!(machine.snapshot().power, PowerState::On);
    assert_eq!(machine.snapshot().boots, 1);
    client.reset(ResetAction::GracefulRestart).await.unwrap();
    let tail: Vec<_> = resets(&emulator.journal()).into_iter().skip(3).collect();
    assert_eq!(
        tail,
        vec![
            (ResetAction::GracefulRestart, 409),
            (ResetAction::GracefulShutdown, 204),
            (ResetAction::On, 204)
        ]
    );

    let strict = connect_with(
        &running,
        ClientOptions {
            quirks: Quirks {
                power_off_when_reset_refused: false,
                ..Quirks::default()
            },
            ..options()
        },
    )
    .await;
    let err = strict.reset(ResetAction::PowerCycle).await.unwrap_err();
    assert!(matches!(err, DriverError::Refused { .. }), "{err:?}");
    assert!(
        err.to_string().contains("ChassisPowerStateOffRequired"),
        "{err}"
    );
}

#[tokio::test]
async fn waiting_for_a_power_state_has_a_deadline() {
    let machine = TestMachine::new(PowerState::Off);
    let (_emulator, running) = serve(machine).await;
    let client = connect(&running).await;
    let err = client
        .wait_for_power_state(&[PowerState::On], Duration::from_millis(60))
        .await
        .unwrap_err();
    assert!(matches!(err, RedfishError::Timeout { .. }), "{err:?}");
    assert!(
        err.to_string().contains("power state On (still Off)"),
        "{err}"
    );
    assert_eq!(
        client
            .wait_for_power_state(&[PowerState::Off], Duration::ZERO)
            .await
            .unwrap(),
        PowerState::Off
    );
}

#[tokio::test]
async fn the_endpoint_picks_a_system_by_id() {
    let a = TestMachine::new(PowerState::Off);
    let b = TestMachine::new(PowerState::On);
    let config = EmulatorConfig {
        systems: vec![("node-a".into(), a.clone()), ("node-b".into(), b.clone())],
        ..EmulatorConfig::single(a.clone(), USER, PASSWORD, Clock::wall())
    };
    let emulator = Emulator::new(config).unwrap();
    let running = emulator
        .serve_https("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let creds = Credentials::new(USER, PASSWORD);
    let client = RedfishClient::connect(
        &endpoint(&running).with_system("node-b"),
        creds.clone(),
        options(),
        Clock::wall(),
    )
    .await
    .unwrap();
    assert_eq!(client.system_path(), "/redfish/v1/Systems/node-b");
    client.reset(ResetAction::ForceOff).await.unwrap();
    assert_eq!(
        (a.snapshot().power, b.snapshot().power),
        (PowerState::Off, PowerState::Off)
    );
    assert!(a.snapshot().resets.is_empty());
    let err = RedfishClient::connect(
        &endpoint(&running).with_system("node-z"),
        creds,
        options(),
        Clock::wall(),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("has no system \"node-z\""),
        "{err}"
    );
    assert!(
        err.to_string().contains("/redfish/v1/Systems/node-a"),
        "{err}"
    );
}

/// Everything an error shows: Display of each error in the chain, and Debug.
fn everything(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = format!("{err:?}\n");
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        text.push_str(&format!("{e}\n"));
        current = e.source();
    }
    text
}

#[tokio::test]
async fn credentials_never_appear_in_errors_or_debug_output() {
    let machine = TestMachine::new(PowerState::On);
    let (emulator, running) = serve(machine).await;
    let mut shown = Vec::new();
    // Wrong password, in both auth modes.
    for auth in [AuthMode::Session, AuthMode::Basic] {
        let err = RedfishClient::connect(
            &endpoint(&running),
            Credentials::new(USER, &format!("{PASSWORD}-typo")),
            ClientOptions { auth, ..options() },
            Clock::wall(),
        )
        .await
        .unwrap_err();
        shown.push(everything(&err));
    }
    // Login failing with a server error, after retries.
    emulator
        .add_fault(FaultRule::status("POST", SESSIONS, 500).times(4))
        .unwrap();
    let err = RedfishClient::connect(
        &endpoint(&running),
        Credentials::new(USER, PASSWORD),
        options(),
        Clock::wall(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.status(), Some(500));
    shown.push(everything(&err));
    // Requests rejected later, through the driver traits.
    let client = connect(&running).await;
    shown.push(format!("{client:?}"));
    shown.push(format!("{:?}", Credentials::new(USER, PASSWORD)));
    emulator
        .add_fault(FaultRule::status("GET", SYSTEM, 401))
        .unwrap();
    emulator
        .add_fault(FaultRule::status("POST", SESSIONS, 401))
        .unwrap();
    let err = client.power_state().await.unwrap_err();
    shown.push(everything(&err));
    emulator.clear_faults();
    emulator
        .add_fault(FaultRule::status("POST", RESET, 503))
        .unwrap();
    let err = client.reset(ResetAction::ForceOff).await.unwrap_err();
    shown.push(everything(&err));
    // An unreachable BMC.
    let url = running.url();
    running.shutdown();
    let err = RedfishClient::connect(
        &Endpoint::new(&url).with_tls(TlsPolicy::InsecureSkipVerify),
        Credentials::new(USER, PASSWORD),
        options(),
        Clock::wall(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, RedfishError::Transport { .. }), "{err:?}");
    shown.push(everything(&err));
    // Credentials in the URL are refused without echoing them.
    let err = RedfishClient::connect(
        &Endpoint::new(&format!("https://{USER}:{PASSWORD}@127.0.0.1:1")),
        Credentials::new(USER, PASSWORD),
        options(),
        Clock::wall(),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("credentials belong in Credentials"),
        "{err}"
    );
    shown.push(everything(&err));
    for text in &shown {
        assert!(
            !text.contains(PASSWORD),
            "the password leaked into:\n{text}"
        );
        assert!(
            !text.contains("aHVudGVy"),
            "base64 of the password leaked into:\n{text}"
        );
    }
    assert!(
        shown.iter().any(|t| t.contains("rejected the credentials")),
        "{shown:#?}"
    );
}
