//! Boot overrides, an empty ESP, refused versions, a killed guest, per-machine behaviours, reimaging.

use crate::support::*;

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
        !m.restart_guest(AGENT),
        "nothing to restart while the guest runs"
    );
    assert!(m.kill_guest(AGENT));
    tokio::task::yield_now().await;
    assert_eq!(rec.running.load(Ordering::SeqCst), 0, "the agent is gone");
    assert!(!m.kill_guest(AGENT), "a dead guest cannot be killed twice");
    assert!(matches!(m.phase(), Phase::Up { .. }), "the OS stays up");
    assert!(m.restart_guest(AGENT));
    tokio::task::yield_now().await;
    assert_eq!(rec.running.load(Ordering::SeqCst), 1);
    assert_eq!(
        rec.starts.lock().unwrap().len(),
        2,
        "the same boot's context started again"
    );
    assert_eq!(m.boots(), 1, "no reboot");
    // A kill followed by a power-off: the next boot starts the guest normally.
    assert!(m.kill_guest(AGENT));
    m.reset(ResetAction::ForceOff).await.unwrap();
    assert!(
        !m.restart_guest(AGENT),
        "a powered-off machine runs no guest"
    );
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

/// A guest of two services (the agent and the kubelet, each counted while it runs).
#[derive(Debug, Default)]
struct TwoServices {
    running: Mutex<Vec<&'static str>>,
}

struct Runs(Arc<TwoServices>, &'static str);

impl Drop for Runs {
    fn drop(&mut self) {
        let mut running = self.0.running.lock().unwrap();
        if let Some(at) = running.iter().position(|s| *s == self.1) {
            running.remove(at);
        }
    }
}

#[derive(Debug)]
struct TwoServicesGuest(Arc<TwoServices>);

impl GuestOs for TwoServicesGuest {
    fn services(&self) -> &'static [&'static str] {
        &["rackproof-agent", "kubelet"]
    }

    fn start(&self, service: &str, _ctx: GuestContext) -> GuestTask {
        let unit = self
            .services()
            .iter()
            .copied()
            .find(|s| *s == service)
            .unwrap();
        self.0.running.lock().unwrap().push(unit);
        let guard = Runs(self.0.clone(), unit);
        Box::pin(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        })
    }
}

/// Killing one service leaves the other running; each restarts alone; a power-off stops both.
#[tokio::test(start_paused = true)]
async fn a_killed_service_dies_alone_and_restarts_alone() {
    let services = Arc::new(TwoServices::default());
    let m = SimMachine::builder("node-1", clock())
        .catalog(catalog())
        .installed("1.0.0")
        .guest(Arc::new(TwoServicesGuest(services.clone())))
        .build()
        .unwrap();
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    tokio::task::yield_now().await;
    let running = || {
        let mut now = services.running.lock().unwrap().clone();
        now.sort_unstable();
        now
    };
    assert_eq!(running(), ["kubelet", "rackproof-agent"]);
    assert!(m.kill_guest("kubelet"));
    tokio::task::yield_now().await;
    assert_eq!(running(), ["rackproof-agent"], "the agent keeps running");
    assert!(
        !m.restart_guest("rackproof-agent"),
        "the agent was never killed"
    );
    assert!(!m.kill_guest("sshd"), "no such service");
    assert!(m.restart_guest("kubelet"));
    tokio::task::yield_now().await;
    assert_eq!(running(), ["kubelet", "rackproof-agent"]);
    assert!(
        m.console_history()
            .contains(&"rackproof-os: kubelet.service: killed".to_owned())
    );
    assert_eq!(m.boots(), 1, "no reboot");
    m.reset(ResetAction::ForceOff).await.unwrap();
    tokio::task::yield_now().await;
    assert!(running().is_empty(), "a power-off stops every service");
}
