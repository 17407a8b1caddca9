//! The simulated machine in virtual time: boots, boot counting with fallback, hangs, power cuts
//! during a slot install, every reset action, faults, and the guest started and stopped with power.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_boot::{
    EntryName, Esp, LoaderVars, bless, boot, install_entry, make_room, update::install_size,
};
use jiff::Timestamp;
use rackproof_clock::Clock;
use rackproof_driver::{
    BootControl, BootOverride, BootOverrideMode, BootTarget, Power, PowerState, ResetAction,
};
use rackproof_lab::console::ConsoleSource;
use rackproof_lab::sim::{Behaviour, Catalog, GuestContext, GuestOs, GuestTask, Phase, SimMachine};
use rackproof_lab::strategy::{BootStage, NodeControl, StrategyError, WaitOptions};

fn clock() -> Clock {
    Clock::simulated(Timestamp::from_second(1_700_000_000).unwrap())
}

fn catalog() -> Catalog {
    Catalog::new()
        .with("1.0.0", Behaviour::Boots)
        .with("2.0.0", Behaviour::Boots)
        .with("2.1.0", Behaviour::PanicsAtBoot)
        .with("3.0.0", Behaviour::HangsAtBoot)
        .with("4.0.0", Behaviour::AgentNeverReports)
        .with("5.0.0", Behaviour::ReportsVersion("1.0.0".into()))
}

/// Counts running guests (a guard decrements on drop, i.e. when the machine aborts the task).
#[derive(Debug, Default)]
struct Recorder {
    running: AtomicUsize,
    starts: Mutex<Vec<(String, String)>>,
}

struct Running(Arc<Recorder>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Debug)]
struct RecGuest(Arc<Recorder>);

impl GuestOs for RecGuest {
    fn start(&self, ctx: GuestContext) -> GuestTask {
        self.0.starts.lock().unwrap().push((
            ctx.booted_entry.file_name().to_owned(),
            ctx.os_version.clone(),
        ));
        self.0.running.fetch_add(1, Ordering::SeqCst);
        let guard = Running(self.0.clone());
        Box::pin(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        })
    }
}

fn machine(guest: Option<Arc<Recorder>>) -> SimMachine {
    let mut b = SimMachine::builder("node-1", clock())
        .catalog(catalog())
        .installed("1.0.0");
    if let Some(g) = guest {
        b = b.guest(Arc::new(RecGuest(g)));
    }
    b.build().unwrap()
}

fn control(m: &SimMachine) -> NodeControl {
    NodeControl::new("node-1", Arc::new(m.clone()), Arc::new(m.clone()), clock())
}

/// Entry files on the machine's ESP (read from outside: works while the machine is off).
fn entries(m: &SimMachine) -> Vec<String> {
    m.esp()
        .paths()
        .into_iter()
        .filter_map(|p| p.strip_prefix("loader/entries/").map(str::to_owned))
        .collect()
}

/// What the agent's OS-update command does: make room, install with +3.
fn install_version(m: &SimMachine, version: &str) -> EntryName {
    let artifact = m.catalog().artifact(version).unwrap();
    let stem = artifact.stem();
    let new = artifact.new_entry(&stem);
    let booted = m.last_boot().map(|r| r.current_name().clone());
    make_room(m.esp(), install_size(&new), booted.as_ref()).unwrap();
    install_entry(m.esp(), &new, booted.as_ref()).unwrap()
}

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

/// An agent that installs 2.0.0 once on its first start and reboots.
#[derive(Debug, Default)]
struct Updater {
    attempted: AtomicBool,
}

impl GuestOs for Updater {
    fn start(&self, ctx: GuestContext) -> GuestTask {
        let first = !self.attempted.swap(true, Ordering::SeqCst);
        Box::pin(async move {
            if !first {
                return;
            }
            let artifact = Catalog::new()
                .with("2.0.0", Behaviour::Boots)
                .artifact("2.0.0")
                .unwrap();
            let stem = artifact.stem();
            let new = artifact.new_entry(&stem);
            let esp: &dyn Esp = ctx.esp.as_ref();
            let result = make_room(esp, install_size(&new), Some(&ctx.booted_entry))
                .and_then(|_| install_entry(esp, &new, Some(&ctx.booted_entry)));
            if result.is_ok() {
                ctx.machine.reboot();
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_power_cut_at_any_write_of_a_slot_install_leaves_a_bootable_esp() {
    for cut in 0..6u64 {
        let updater = Arc::new(Updater::default());
        let m = SimMachine::builder("node-1", clock())
            .catalog(catalog())
            .installed("1.0.0")
            .guest(updater.clone())
            .build()
            .unwrap();
        let ctl = control(&m);
        m.cut_power_after_esp_writes(cut);
        assert_eq!(
            ctl.power_on_and_wait_until_up(WaitOptions::default())
                .await
                .unwrap(),
            "1.0.0"
        );
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(
            m.power_state().await.unwrap(),
            PowerState::Off,
            "cut at write {cut}"
        );
        assert!(
            m.console_history()
                .contains(&"firmware: power lost".to_owned())
        );

        let version = ctl
            .power_on_and_wait_until_up(WaitOptions::default())
            .await
            .unwrap();
        assert!(
            version == "1.0.0" || version == "2.0.0",
            "cut at write {cut}: {version}"
        );
        // Whatever the loader picks next has an intact kernel.
        let record = boot(m.esp(), &mut LoaderVars::default()).unwrap().unwrap();
        let kernel = m
            .esp()
            .read(&record.entry.conf.loader_path().unwrap())
            .unwrap();
        assert!(
            kernel.starts_with(b"rackproof-sim-kernel "),
            "cut at write {cut}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_loader_counter_rename_can_be_cut_too() {
    let m = machine(None);
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    install_version(&m, "2.0.0");
    m.reset(ResetAction::ForceOff).await.unwrap();
    m.cut_power_at_next_esp_write();
    m.reset(ResetAction::On).await.unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(m.power_state().await.unwrap(), PowerState::Off);
    assert_eq!(
        entries(&m),
        ["rackproof-1.0.0.conf", "rackproof-2.0.0+3.conf"],
        "the rename did not happen"
    );
    assert_eq!(
        ctl.power_on_and_wait_until_up(WaitOptions::default())
            .await
            .unwrap(),
        "2.0.0"
    );
}

#[tokio::test(start_paused = true)]
async fn power_off_and_reset_stop_the_guest() {
    let rec = Arc::new(Recorder::default());
    let m = machine(Some(rec.clone()));
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    m.reset(ResetAction::ForceRestart).await.unwrap();
    tokio::task::yield_now().await;
    assert_eq!(
        rec.running.load(Ordering::SeqCst),
        0,
        "reset kills the agent"
    );
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    assert_eq!(rec.running.load(Ordering::SeqCst), 1);
    m.reset(ResetAction::ForceOff).await.unwrap();
    tokio::task::yield_now().await;
    assert_eq!(
        rec.running.load(Ordering::SeqCst),
        0,
        "power-off kills the agent"
    );
    assert_eq!(rec.starts.lock().unwrap().len(), 2);
}

async fn settle() {
    tokio::time::sleep(Duration::from_secs(60)).await;
}

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

#[tokio::test(start_paused = true)]
async fn a_once_boot_override_applies_to_one_boot() {
    let m = machine(None);
    m.set_boot_override(BootOverride {
        mode: BootOverrideMode::Once,
        target: BootTarget::Pxe,
    })
    .await
    .unwrap();
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    assert!(
        m.console_history()
            .contains(&"firmware: boot from Pxe: nothing to boot, trying the disk".to_owned())
    );
    assert_eq!(m.boot_override().await.unwrap(), BootOverride::default());
}

#[tokio::test(start_paused = true)]
async fn an_empty_esp_halts_in_the_loader() {
    let m = SimMachine::builder("node-1", clock())
        .catalog(catalog())
        .build()
        .unwrap();
    let ctl = control(&m);
    let options = WaitOptions {
        deadline: Duration::from_secs(120),
        ..WaitOptions::default()
    };
    assert!(ctl.power_on_and_wait_until_up(options).await.is_err());
    assert_eq!(m.phase(), Phase::Halted);
    let (backlog, _rx) = m.subscribe();
    assert!(
        backlog
            .iter()
            .any(|l| l.text == "systemd-boot: no boot entries found")
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_versions_are_refused_at_build() {
    let err = SimMachine::builder("node-1", clock())
        .catalog(catalog())
        .installed("9.9.9")
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "node node-1: version 9.9.9 is not in the image catalog"
    );
}

#[tokio::test(start_paused = true)]
async fn a_killed_guest_stays_dead_until_restarted_while_the_os_stays_up() {
    let rec = Arc::new(Recorder::default());
    let m = machine(Some(rec.clone()));
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    assert!(
        !m.restart_guest(),
        "nothing to restart while the guest runs"
    );
    assert!(m.kill_guest());
    tokio::task::yield_now().await;
    assert_eq!(rec.running.load(Ordering::SeqCst), 0, "the agent is gone");
    assert!(!m.kill_guest(), "a dead guest cannot be killed twice");
    assert!(matches!(m.phase(), Phase::Up { .. }), "the OS stays up");
    assert!(m.restart_guest());
    tokio::task::yield_now().await;
    assert_eq!(rec.running.load(Ordering::SeqCst), 1);
    assert_eq!(
        rec.starts.lock().unwrap().len(),
        2,
        "the same boot's context started again"
    );
    assert_eq!(m.boots(), 1, "no reboot");
    // A kill followed by a power-off: the next boot starts the guest normally.
    assert!(m.kill_guest());
    m.reset(ResetAction::ForceOff).await.unwrap();
    assert!(!m.restart_guest(), "a powered-off machine runs no guest");
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    tokio::task::yield_now().await;
    assert_eq!(rec.running.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_behaviour_override_applies_to_this_machine_only() {
    let m = machine(None);
    let other = machine(None);
    m.override_behaviour("2.0.0", Behaviour::PanicsAtBoot);
    for machine in [&m, &other] {
        let ctl = NodeControl::new(
            "node-1",
            Arc::new(machine.clone()),
            Arc::new(machine.clone()),
            clock(),
        );
        ctl.power_on_and_wait_until_up(WaitOptions::default())
            .await
            .unwrap();
        install_version(machine, "2.0.0");
        machine.reset(ResetAction::ForceRestart).await.unwrap();
    }
    settle().await;
    settle().await;
    assert!(
        matches!(m.phase(), Phase::Up { ref version, .. } if version == "1.0.0"),
        "the overridden machine panicked and fell back: {:?}",
        m.phase()
    );
    assert!(
        matches!(other.phase(), Phase::Up { ref version, .. } if version == "2.0.0"),
        "the other machine boots the catalog's behaviour: {:?}",
        other.phase()
    );
}

#[tokio::test(start_paused = true)]
async fn reimaging_leaves_one_good_entry_of_the_new_version() {
    let m = machine(None);
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    assert!(m.reimage("2.0.0").is_err(), "refused while on");
    install_version(&m, "2.1.0");
    m.reset(ResetAction::ForceOff).await.unwrap();
    m.reimage("2.0.0").unwrap();
    assert_eq!(entries(&m), ["rackproof-2.0.0.conf"]);
    assert_eq!(
        ctl.power_on_and_wait_until_up(WaitOptions::default())
            .await
            .unwrap(),
        "2.0.0"
    );
    assert!(m.reimage("9.9.9").is_err(), "unknown versions are refused");
}
