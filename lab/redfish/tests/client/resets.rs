//! Every reset type and boot override, and what the client refuses or does not send.

use crate::support::*;

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
