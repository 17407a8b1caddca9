//! TLS policies, plain HTTP with basic auth, sessions that expire, and retries of server errors.

use crate::support::*;

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
