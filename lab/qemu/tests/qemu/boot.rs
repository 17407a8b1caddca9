//! The installed version, power actions, graceful power requests, and updates to a good, a
//! panicking and a hanging version.

use std::time::Duration;

use rackproof_driver::{
    BootControl, BootOverride, BootOverrideMode, BootTarget, DriverError, Power, PowerState,
    ResetAction,
};
use rackproof_qemu::images::{BASE_VERSION, NEW_VERSION};
use rackproof_test_support::node_images;

use super::{Node, agent_started, any_init, base_blessed, entries, marker, model_of, predict, re};

#[tokio::test]
async fn boots_the_installed_version_and_starts_the_agent() {
    let images = node_images();
    let node = Node::new(
        "boots_the_installed_version",
        &images.disk(BASE_VERSION).unwrap(),
    );
    let model = model_of(&node.machine.esp());
    let mark = node.machine.console().mark();
    node.machine.reset(ResetAction::On).await.unwrap();
    node.wait(mark, &marker(BASE_VERSION, "up")).await;
    node.wait(mark, &agent_started()).await;
    assert_eq!(node.machine.power_state().await.unwrap(), PowerState::On);
    let esp = node.machine.esp();
    node.machine.shutdown().await.unwrap();
    let actual = entries(&esp);
    assert_eq!(actual, [base_blessed()]);
    assert_eq!(actual, predict(&model, 1));
    node.finish().await;
}

#[tokio::test]
async fn power_actions_through_the_driver_traits_show_on_the_console() {
    let images = node_images();
    let node = Node::new("power_actions", &images.disk(BASE_VERSION).unwrap());
    let m = &node.machine;
    let booted = marker(BASE_VERSION, "init started");
    let up = marker(BASE_VERSION, "up");
    let start = m.console().mark();
    assert_eq!(m.power_state().await.unwrap(), PowerState::Off);

    m.reset(ResetAction::On).await.unwrap();
    node.wait(start, &up).await;
    m.reset(ResetAction::On).await.unwrap(); // already on: nothing happens
    assert_eq!(m.boots().await, 1);

    let mark = m.console().mark();
    m.reset(ResetAction::ForceRestart).await.unwrap();
    node.wait(mark, &up).await;
    assert_eq!(m.boots().await, 2);

    let mark = m.console().mark();
    m.reset(ResetAction::PowerCycle).await.unwrap();
    node.wait(mark, &up).await;
    assert_eq!(m.boots().await, 3);

    m.reset(ResetAction::Nmi).await.unwrap();
    m.pause().await.unwrap();
    assert_eq!(m.power_state().await.unwrap(), PowerState::Off);
    m.reset(ResetAction::On).await.unwrap();
    assert_eq!(m.power_state().await.unwrap(), PowerState::On);

    m.reset(ResetAction::ForceOff).await.unwrap();
    assert_eq!(m.power_state().await.unwrap(), PowerState::Off);
    m.reset(ResetAction::ForceOff).await.unwrap(); // already off: nothing happens

    let err = m.reset(ResetAction::ForceRestart).await.unwrap_err();
    assert!(matches!(err, DriverError::Refused { .. }), "{err}");
    assert_eq!(m.console().count_since(start, &booted), 3);

    let pxe = BootOverride {
        mode: BootOverrideMode::Once,
        target: BootTarget::Pxe,
    };
    let err = m.set_boot_override(pxe).await.unwrap_err();
    assert!(matches!(err, DriverError::Unsupported { .. }), "{err}");
    let hdd = BootOverride {
        mode: BootOverrideMode::Continuous,
        target: BootTarget::Hdd,
    };
    m.set_boot_override(hdd).await.unwrap();
    assert_eq!(m.boot_override().await.unwrap(), hdd);
    node.finish().await;
}

/// Ctrl-Alt-Del reboots the guest through its init, the ACPI power button powers it off: both
/// stop the services and unmount the ESP first, so it is left clean (FAT dirty bit clear) and
/// exactly as the model predicts for two boots. A power cut (`ForceOff`) leaves it dirty.
#[tokio::test]
async fn graceful_restart_and_shutdown_leave_the_esp_clean() {
    let images = node_images();
    let node = Node::new("graceful", &images.disk(BASE_VERSION).unwrap());
    let m = &node.machine;
    let model = model_of(&m.esp());
    assert!(!m.esp().dirty().unwrap(), "the built disk's ESP is dirty");

    let mark = m.console().mark();
    m.reset(ResetAction::On).await.unwrap();
    node.wait(mark, &agent_started()).await;

    let mark = m.console().mark();
    m.reset(ResetAction::GracefulRestart).await.unwrap();
    node.wait(mark, &marker(BASE_VERSION, "rebooting")).await;
    node.wait(mark, &agent_started()).await;
    assert_eq!(m.boots().await, 2);
    assert_eq!(m.console().count_since(mark, &any_init()), 1);

    node.power_button(BASE_VERSION).await;
    let esp = m.esp();
    assert!(
        !esp.dirty().unwrap(),
        "the ESP was not unmounted before the power-off"
    );
    let actual = entries(&esp);
    assert_eq!(actual, [base_blessed()]);
    assert_eq!(actual, predict(&model, 2));

    // The same node cut off while running: the ESP stays marked dirty.
    let mark = m.console().mark();
    m.reset(ResetAction::On).await.unwrap();
    node.wait(mark, &agent_started()).await;
    m.reset(ResetAction::ForceOff).await.unwrap();
    assert!(esp.dirty().unwrap(), "a power cut left the ESP clean");
    node.finish().await;
}

/// A power request to a node that is off changes nothing.
#[tokio::test]
async fn a_graceful_shutdown_of_a_node_that_is_off_does_nothing() {
    let images = node_images();
    let node = Node::new("graceful_off", &images.disk(BASE_VERSION).unwrap());
    node.machine
        .reset(ResetAction::GracefulShutdown)
        .await
        .unwrap();
    assert_eq!(node.machine.power_state().await.unwrap(), PowerState::Off);
    assert_eq!(node.machine.boots().await, 0);
    node.finish().await;
}

/// Installs `slot` with a `+3` counter on the stopped node's ESP, boots, waits for `until`
/// (counting boots with the init marker of every version), stops, and checks the ESP against
/// the model and against `expected`.
async fn update(
    test: &str,
    slot: &str,
    until: &regex::Regex,
    boots: u32,
    expected: &[String],
) -> (Node, usize) {
    let images = node_images();
    let node = Node::new(test, &images.disk(BASE_VERSION).unwrap());
    let esp = node.machine.esp();
    images
        .slot(slot)
        .unwrap()
        .install(&esp, Some(3), false)
        .unwrap();
    let model = model_of(&esp);
    let mark = node.machine.console().mark();
    node.machine.reset(ResetAction::On).await.unwrap();
    node.wait_boots(mark, until, boots).await;
    node.machine.shutdown().await.unwrap();
    let boots = node.machine.console().count_since(mark, &any_init());
    let actual = entries(&esp);
    assert_eq!(
        actual,
        predict(&model, boots),
        "ESP differs from the model after {boots} boots"
    );
    assert_eq!(actual, expected);
    (node, boots)
}

#[tokio::test]
async fn an_update_to_a_good_version_boots_it() {
    let (node, boots) = update(
        "update_good",
        NEW_VERSION,
        &agent_started(),
        1,
        &[base_blessed(), format!("rackproof-{NEW_VERSION}+2-1.conf")],
    )
    .await;
    assert_eq!(boots, 1);
    let lines = node.machine.console().lines();
    assert!(lines.iter().any(|l| marker(NEW_VERSION, "up").is_match(l)));
    node.finish().await;
}

#[tokio::test]
async fn a_panicking_version_is_tried_three_times_then_the_old_one_boots() {
    let (node, boots) = update(
        "update_panic",
        &format!("{NEW_VERSION}-panic"),
        &marker(BASE_VERSION, "up"),
        4,
        &[base_blessed(), format!("rackproof-{NEW_VERSION}+0-3.conf")],
    )
    .await;
    assert_eq!(boots, 4);
    let panics = node.machine.console().count_since(
        rackproof_qemu::Mark::default(),
        &marker(NEW_VERSION, "panicking"),
    );
    assert_eq!(panics, 3);
    assert_eq!(node.machine.boots().await, 4);
    node.finish().await;
}

#[tokio::test]
async fn a_hanging_version_never_comes_back() {
    let (node, boots) = update(
        "update_hang",
        &format!("{NEW_VERSION}-hang"),
        &marker(NEW_VERSION, "hanging"),
        1,
        &[base_blessed(), format!("rackproof-{NEW_VERSION}+2-1.conf")],
    )
    .await;
    assert_eq!(boots, 1);
    // Boot it again and give it far longer than a panic-and-fallback takes: still hanging,
    // never rebooted.
    let mark = node.machine.console().mark();
    node.machine.reset(ResetAction::On).await.unwrap();
    node.wait(mark, &marker(NEW_VERSION, "hanging")).await;
    node.clock.sleep(Duration::from_secs(40)).await;
    assert_eq!(
        node.machine
            .console()
            .count_since(mark, &re(r"^rackproof-os \S+: init started")),
        1
    );
    assert_eq!(node.machine.power_state().await.unwrap(), PowerState::On);
    node.machine.shutdown().await.unwrap();
    assert_eq!(
        entries(&node.machine.esp()),
        [base_blessed(), format!("rackproof-{NEW_VERSION}+1-2.conf")]
    );
    node.finish().await;
}
