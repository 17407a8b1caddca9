//! Every reset action as a BMC would do it, hung OSes, ignored power-ons, broken image variants.

use crate::support::*;

#[tokio::test(start_paused = true)]
async fn every_reset_action_does_what_a_bmc_would() {
    let m = machine(None);
    let ctl = control(&m);
    assert_eq!(m.allowed_resets(), ResetAction::ALL);

    // Refused while off; harmless ones are no-ops.
    for action in [
        ResetAction::ForceRestart,
        ResetAction::GracefulRestart,
        ResetAction::Nmi,
    ] {
        let err = m.reset(action).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("node-1 refused {action}: the machine is off")
        );
    }
    for action in [ResetAction::ForceOff, ResetAction::GracefulShutdown] {
        m.reset(action).await.unwrap();
        assert_eq!(m.power_state().await.unwrap(), PowerState::Off);
    }
    assert_eq!(m.boots(), 0);

    // On, and On again (idempotent).
    m.reset(ResetAction::On).await.unwrap();
    m.reset(ResetAction::On).await.unwrap();
    settle().await;
    assert_eq!(
        (m.boots(), m.power_state().await.unwrap()),
        (1, PowerState::On)
    );

    // Graceful restart: the OS reboots.
    m.reset(ResetAction::GracefulRestart).await.unwrap();
    settle().await;
    assert_eq!(m.boots(), 2);
    assert!(matches!(m.phase(), Phase::Up { .. }));

    // Forced restart.
    m.reset(ResetAction::ForceRestart).await.unwrap();
    settle().await;
    assert_eq!(m.boots(), 3);

    // Power cycle: off, then on again.
    m.reset(ResetAction::PowerCycle).await.unwrap();
    assert_eq!(m.power_state().await.unwrap(), PowerState::Off);
    settle().await;
    assert_eq!(
        (m.boots(), m.power_state().await.unwrap()),
        (4, PowerState::On)
    );

    // NMI: the kernel panics and the machine reboots.
    m.reset(ResetAction::Nmi).await.unwrap();
    settle().await;
    assert_eq!(m.boots(), 5);
    assert!(
        m.console_history()
            .iter()
            .any(|l| l == "Kernel panic - not syncing: NMI: Not continuing")
    );

    // Graceful shutdown: the OS powers off.
    m.reset(ResetAction::GracefulShutdown).await.unwrap();
    assert_eq!(
        m.power_state().await.unwrap(),
        PowerState::On,
        "shutting down takes a moment"
    );
    settle().await;
    assert_eq!(m.power_state().await.unwrap(), PowerState::Off);

    // Power cycle while off powers on.
    m.reset(ResetAction::PowerCycle).await.unwrap();
    assert_eq!(
        ctl.power_on_and_wait_until_up(WaitOptions::default())
            .await
            .unwrap(),
        "1.0.0"
    );
    assert_eq!(m.boots(), 6);

    // Forced off.
    m.reset(ResetAction::ForceOff).await.unwrap();
    assert_eq!(m.power_state().await.unwrap(), PowerState::Off);
    assert_eq!(m.phase(), Phase::Off);
}

#[tokio::test(start_paused = true)]
async fn graceful_requests_are_ignored_by_a_hung_os() {
    let m = machine(None);
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    install_version(&m, "3.0.0");
    m.reset(ResetAction::ForceRestart).await.unwrap();
    settle().await;
    assert!(matches!(m.phase(), Phase::Hung { .. }));
    m.reset(ResetAction::GracefulShutdown).await.unwrap();
    m.reset(ResetAction::GracefulRestart).await.unwrap();
    settle().await;
    assert!(matches!(m.phase(), Phase::Hung { .. }));
    assert_eq!(m.boots(), 2);
}

#[tokio::test(start_paused = true)]
async fn an_ignored_power_on_is_detected_and_retried() {
    let m = machine(None);
    m.ignore_power_on(1);
    let ctl = control(&m);
    assert_eq!(
        ctl.power_on_and_wait_until_up(WaitOptions::default())
            .await
            .unwrap(),
        "1.0.0"
    );
    assert_eq!(m.boots(), 1);

    let stubborn = machine(None);
    stubborn.ignore_power_on(10);
    let err = control(&stubborn)
        .power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "node node-1: stayed off after 3 power-on requests"
    );
}

#[tokio::test(start_paused = true)]
async fn broken_variants_behave_as_specified() {
    // Boots but the agent never reports: up on the console, no guest.
    let rec = Arc::new(Recorder::default());
    let m = machine(Some(rec.clone()));
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    install_version(&m, "4.0.0");
    let boots = ctl
        .power_cycle_and_wait_for_boot(1, BootStage::Up, WaitOptions::default())
        .await
        .unwrap();
    assert_eq!(boots[0].up.as_deref(), Some("4.0.0"));
    assert_eq!(
        rec.starts.lock().unwrap().len(),
        1,
        "only the first boot's agent started"
    );

    // Boots an older version string: a silent rollback.
    let m = machine(Some(rec.clone()));
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    install_version(&m, "5.0.0");
    let boots = ctl
        .power_cycle_and_wait_for_boot(1, BootStage::Up, WaitOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (boots[0].entry.as_deref(), boots[0].up.as_deref()),
        (Some("rackproof-5.0.0+3.conf"), Some("1.0.0"))
    );
    let last = rec.starts.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        last,
        ("rackproof-5.0.0+2-1.conf".to_owned(), "1.0.0".to_owned())
    );
}
