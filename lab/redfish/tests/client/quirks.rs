//! Task monitors, BMCs that ignore or refuse actions, waiting deadlines, picking a system by id,
//! and credential hygiene.

use crate::support::*;

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
