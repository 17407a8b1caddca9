//! Domains that never boot: defining, refusing, tearing down.

use crate::support::*;

#[tokio::test]
async fn define_then_teardown_leaves_no_domain_or_file() {
    let ws = Workspace::new("define");
    let config = ws.node("n1");
    let dir = config.dir.clone();
    let machine = define(config).await;
    assert_eq!(machine.power_state().await.unwrap(), PowerState::Off);
    let xml = machine.defined_xml().await.unwrap();
    assert!(
        xml.contains(&format!("<name>{}</name>", machine.name())),
        "{xml}"
    );
    assert!(
        xml.contains("<tb-cache unit='KiB'>65536</tb-cache>"),
        "{xml}"
    );
    assert!(dir.join("OVMF_VARS_4M.fd").is_file());
    let name = machine.name().to_owned();
    machine.teardown().await.unwrap();
    assert_gone(&ws.prefix, &name, &dir).await;
}

#[tokio::test]
async fn actions_that_need_power_are_refused_while_off_and_off_actions_are_idempotent() {
    let ws = Workspace::new("refuse");
    let machine = define(ws.node("n1")).await;
    for action in [
        ResetAction::ForceRestart,
        ResetAction::GracefulRestart,
        ResetAction::Nmi,
    ] {
        let err = machine.reset(action).await.unwrap_err();
        assert!(
            matches!(err, DriverError::Refused { .. }),
            "{action}: {err}"
        );
        assert!(err.to_string().contains("the domain is off"), "{err}");
    }
    machine.reset(ResetAction::ForceOff).await.unwrap();
    machine.reset(ResetAction::GracefulShutdown).await.unwrap();
    assert_eq!(machine.power_state().await.unwrap(), PowerState::Off);
    let err = machine
        .set_boot_override(BootOverride {
            mode: BootOverrideMode::Once,
            target: BootTarget::Cd,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, DriverError::Unsupported { .. }), "{err}");
    machine.teardown().await.unwrap();
}

#[tokio::test]
async fn dropping_a_machine_tears_it_down_and_prefix_teardown_finds_only_its_own() {
    let ws = Workspace::new("drop");
    let config = ws.node("n1");
    let dir = config.dir.clone();
    let other = Workspace::new("other");
    let keep = define(other.node("keep")).await;
    let name = {
        let machine = define(config).await;
        machine.name().to_owned()
    };
    assert_gone(&ws.prefix, &name, &dir).await;
    // The other prefix's domain was not touched by either teardown.
    assert_eq!(keep.power_state().await.unwrap(), PowerState::Off);
    assert_eq!(
        teardown_prefix(URI, &other.prefix).await.unwrap(),
        vec![keep.name().to_owned()]
    );
    assert!(teardown_prefix(URI, "").await.is_err());
}
