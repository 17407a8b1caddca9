//! Boots: a good one, an update tried and blessed, a panicking one falling back, a hanging one.

use crate::support::*;

#[tokio::test(start_paused = true)]
async fn a_good_boot_comes_up_and_starts_the_guest_once() {
    let rec = Arc::new(Recorder::default());
    let m = machine(Some(rec.clone()));
    let ctl = control(&m);
    assert_eq!(
        ctl.power_on_and_wait_until_up(WaitOptions::default())
            .await
            .unwrap(),
        "1.0.0"
    );
    // Idempotent: already up, nothing happens.
    assert_eq!(
        ctl.power_on_and_wait_until_up(WaitOptions::default())
            .await
            .unwrap(),
        "1.0.0"
    );
    assert_eq!(m.boots(), 1);
    assert_eq!(
        m.phase(),
        Phase::Up {
            entry: "rackproof-1.0.0.conf".into(),
            version: "1.0.0".into()
        }
    );
    let history = m.console_history();
    assert!(
        history.contains(&"systemd-boot: selected entry rackproof-1.0.0.conf".to_owned()),
        "{history:?}"
    );
    assert_eq!(
        *rec.starts.lock().unwrap(),
        [("rackproof-1.0.0.conf".to_owned(), "1.0.0".to_owned())]
    );
    assert_eq!(rec.running.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn an_update_to_a_good_version_is_tried_and_can_be_blessed() {
    let m = machine(None);
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    install_version(&m, "2.0.0");
    let boots = ctl
        .power_cycle_and_wait_for_boot(1, BootStage::Up, WaitOptions::default())
        .await
        .unwrap();
    assert_eq!(boots[0].entry.as_deref(), Some("rackproof-2.0.0+3.conf"));
    assert_eq!(boots[0].up.as_deref(), Some("2.0.0"));
    let record = m.last_boot().unwrap();
    bless(m.esp(), record.current_name()).unwrap();
    assert_eq!(
        entries(&m),
        ["rackproof-1.0.0.conf", "rackproof-2.0.0.conf"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_panicking_update_is_tried_three_times_then_the_old_version_boots() {
    let m = machine(None);
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    install_version(&m, "2.1.0");
    assert_eq!(
        entries(&m),
        ["rackproof-1.0.0.conf", "rackproof-2.1.0+3.conf"]
    );

    let boots = ctl
        .power_cycle_and_wait_for_boot(4, BootStage::Up, WaitOptions::default())
        .await
        .unwrap();
    let seen: Vec<(Option<&str>, bool, Option<&str>)> = boots
        .iter()
        .map(|b| (b.entry.as_deref(), b.panicked, b.up.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            (Some("rackproof-2.1.0+3.conf"), true, None),
            (Some("rackproof-2.1.0+2-1.conf"), true, None),
            (Some("rackproof-2.1.0+1-2.conf"), true, None),
            (Some("rackproof-1.0.0.conf"), false, Some("1.0.0")),
        ]
    );
    assert_eq!(m.boots(), 5);
    // Exactly what the rules predict: the old entry, the new one out of tries, both payloads.
    assert_eq!(
        entries(&m),
        ["rackproof-1.0.0.conf", "rackproof-2.1.0+0-3.conf"]
    );
    let payloads: Vec<String> = m
        .esp()
        .list("rackproof")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(
        payloads,
        [
            "rackproof-1.0.0.initrd",
            "rackproof-1.0.0.linux",
            "rackproof-2.1.0.initrd",
            "rackproof-2.1.0.linux"
        ]
    );
    // And the next boot stays on the old version.
    let boots = ctl
        .power_cycle_and_wait_for_boot(1, BootStage::Up, WaitOptions::default())
        .await
        .unwrap();
    assert_eq!(boots[0].entry.as_deref(), Some("rackproof-1.0.0.conf"));
}

#[tokio::test(start_paused = true)]
async fn a_hanging_update_never_comes_back() {
    let m = machine(None);
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    install_version(&m, "3.0.0");
    let options = WaitOptions {
        deadline: Duration::from_secs(3600),
        ..WaitOptions::default()
    };
    let err = ctl
        .power_cycle_and_wait_for_boot(1, BootStage::Up, options)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StrategyError::Timeout { boots: 1, .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "node node-1: boot 1 reaching Up did not happen within 1h (1 boots seen)"
    );
    assert_eq!(m.boots(), 2);
    assert_eq!(
        m.phase(),
        Phase::Hung {
            entry: "rackproof-3.0.0+2-1.conf".into(),
            version: "3.0.0".into()
        }
    );
    assert_eq!(
        entries(&m),
        ["rackproof-1.0.0.conf", "rackproof-3.0.0+2-1.conf"]
    );
    // An NMI makes the hung kernel panic and reboot: the counter goes on down.
    m.reset(ResetAction::Nmi).await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(m.boots(), 3);
    assert_eq!(
        entries(&m),
        ["rackproof-1.0.0.conf", "rackproof-3.0.0+1-2.conf"]
    );
}

/// What boots is the build on the ESP: a version whose first build panicked boots once a fixed
/// build of it is installed over the failed entry, with the machine's catalog unchanged.
#[tokio::test(start_paused = true)]
async fn a_fixed_build_installed_over_a_failed_version_boots() {
    let m = machine(None);
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    install_version(&m, "2.1.0");
    let boots = ctl
        .power_cycle_and_wait_for_boot(4, BootStage::Up, WaitOptions::default())
        .await
        .unwrap();
    assert_eq!(boots[3].up.as_deref(), Some("1.0.0"), "2.1.0 panicked");

    // A person publishes a fixed 2.1.0; the node installs it again.
    let fixed = Catalog::new()
        .with("2.1.0", Behaviour::Boots)
        .artifact("2.1.0")
        .unwrap();
    let stem = fixed.stem();
    let new = fixed.new_entry(&stem);
    let booted = m.last_boot().map(|r| r.current_name().clone());
    make_room(m.esp(), install_size(&new), booted.as_ref()).unwrap();
    install_entry(m.esp(), &new, booted.as_ref()).unwrap();
    let boots = ctl
        .power_cycle_and_wait_for_boot(1, BootStage::Up, WaitOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (boots[0].entry.as_deref(), boots[0].up.as_deref()),
        (Some("rackproof-2.1.0+3.conf"), Some("2.1.0")),
        "the fixed build boots: {:?}",
        m.console_history()
    );
}
