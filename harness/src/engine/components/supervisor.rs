//! The supervisor of the control-plane components of a run: the orchestrator (as
//! `machine-controller-manager`), the node lifecycle controller (as `kube-controller-manager`),
//! the dependency watchdog, and, for a pool with maintenance settings, the maintenance controller
//! (as gardener-controller-manager). Each is Rackproof's own as an in-process task, or an external program
//! the scenario names (`command: [...]`), run as a process; on a `local` cluster the node
//! lifecycle controller is the real kube-controller-manager, switched off and on. A component runs while its Deployment
//! has replicas (so when the watchdog scales machine-controller-manager to zero, the orchestrator
//! really stops) and it is not killed by a fault; a kill with `restartAfter` starts it again then.
//! A component that ends by itself is restarted after a back-off that doubles from 10 s to 5 min,
//! like a crash-looping pod, and starts from 10 s again once it ran 10 min before ending.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use inplace_api::version::KubeVersion;
use kube::Client;
use rackproof_clock::Clock;
use tokio::task::JoinHandle;

use crate::engine::cluster::api::ControllerManagerSwitch;
use crate::engine::components::external::ExternalProcess;
use crate::engine::components::lifecycle;
use crate::engine::components::outside::Outside;
use crate::engine::judge::timeline::EntryKind;
use crate::engine::logs::LineLogs;
use crate::engine::shared::Shared;
use crate::scenario::{Component, Implementation, Scenario};

/// The first restart back-off of a component that ended by itself.
const FIRST_BACKOFF: Duration = Duration::from_secs(10);
/// The longest restart back-off.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// A component that ran this long before it ended starts its back-off again from
/// [`FIRST_BACKOFF`], as the kubelet does for a container that ran 10 minutes.
const BACKOFF_RESET: Duration = Duration::from_secs(600);

/// The wait before restarting a component that ended by itself after running for `ran`, having
/// ended `crashes` times before; and the count of crashes from then on.
fn backoff(crashes: u32, ran: Duration) -> (Duration, u32) {
    let crashes = if ran >= BACKOFF_RESET { 0 } else { crashes };
    (
        FIRST_BACKOFF
            .saturating_mul(1 << crashes.min(5))
            .min(MAX_BACKOFF),
        crashes + 1,
    )
}

/// A component the supervisor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Managed {
    Orchestrator,
    NodeLifecycle,
    Watchdog,
    /// The maintenance controller (gardener-controller-manager's role), for a pool with
    /// maintenance settings.
    Maintenance,
}

impl Managed {
    fn name(self) -> &'static str {
        match self {
            Self::Orchestrator => "orchestrator",
            Self::NodeLifecycle => "node lifecycle controller",
            Self::Watchdog => "watchdog",
            Self::Maintenance => "maintenance controller",
        }
    }

    /// The name of its log in the artifacts (`components/<name>.log`).
    fn log_name(self) -> &'static str {
        match self {
            Self::Orchestrator => "orchestrator",
            Self::NodeLifecycle => "node-lifecycle",
            Self::Watchdog => "watchdog",
            Self::Maintenance => "maintenance",
        }
    }

    /// The Deployment whose replicas decide whether it runs.
    fn deployment(self) -> Option<&'static str> {
        match self {
            Self::Orchestrator => Some("machine-controller-manager"),
            Self::NodeLifecycle => Some("kube-controller-manager"),
            Self::Watchdog | Self::Maintenance => None,
        }
    }
}

/// A running component.
#[derive(Debug)]
enum Running {
    Task(JoinHandle<()>),
    Process(ExternalProcess),
    /// The local control plane's kube-controller-manager, switched on.
    ControllerManager(ControllerManagerSwitch),
}

impl Running {
    /// How it ended by itself, if it has.
    fn ended(&mut self) -> Option<String> {
        match self {
            Self::Task(task) => task.is_finished().then(|| "stopped".to_owned()),
            Self::Process(process) => process.exited(),
            // Its own process supervision is the control plane's; it is only switched here.
            Self::ControllerManager(_) => None,
        }
    }

    fn stop(self) {
        match self {
            Self::Task(task) => task.abort(),
            Self::Process(process) => drop(process),
            Self::ControllerManager(switch) => switch.stop(),
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    /// The external program, if the scenario names one.
    command: Option<Vec<String>>,
    running: Option<Running>,
    /// Killed by a fault; `Some(None)`: never restarted, `Some(Some(at))`: restarted after `at`.
    killed: Option<Option<Duration>>,
    /// It ran at some point.
    started: bool,
    /// It ended by itself this many times since it last ran for [`BACKOFF_RESET`] (each doubles
    /// the next back-off).
    crashes: u32,
    /// When it was last started.
    started_at: Duration,
    /// After a crash: not started again before this.
    not_before: Duration,
}

/// Starts and stops the components.
pub struct Supervisor {
    client: Client,
    clock: Clock,
    orchestrator: inplace_orchestrator::Config,
    watchdog: inplace_watchdog::Config,
    kcm_grace: Duration,
    slots: BTreeMap<Managed, Slot>,
    /// Where external programs get their kubeconfig and environment.
    outside: Option<Arc<Outside>>,
    /// The output of the external programs.
    logs: LineLogs,
    /// The real kube-controller-manager, which replaces the node lifecycle controller (a `local`
    /// cluster).
    controller_manager: Option<ControllerManagerSwitch>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("slots", &self.slots)
            .finish_non_exhaustive()
    }
}

impl Supervisor {
    /// The components the scenario runs (those set to `off` never start). External programs start
    /// through `outside` (which the run opens when the scenario names any) and print into `logs`.
    #[expect(
        clippy::too_many_arguments,
        reason = "one call site; the run's parts, named"
    )]
    pub(crate) fn new(
        client: Client,
        clock: Clock,
        scenario: &Scenario,
        orchestrator: inplace_orchestrator::Config,
        watchdog: inplace_watchdog::Config,
        outside: Option<Arc<Outside>>,
        logs: LineLogs,
        controller_manager: Option<ControllerManagerSwitch>,
    ) -> Self {
        let mut slots = BTreeMap::new();
        for (managed, implementation) in [
            (Managed::Orchestrator, &scenario.components.orchestrator),
            (Managed::Watchdog, &scenario.components.watchdog),
        ] {
            match implementation {
                Implementation::Builtin => {
                    slots.insert(managed, Slot::default());
                }
                Implementation::Command(argv) => {
                    slots.insert(
                        managed,
                        Slot {
                            command: Some(argv.clone()),
                            ..Slot::default()
                        },
                    );
                }
                Implementation::Off => {}
            }
        }
        slots.insert(Managed::NodeLifecycle, Slot::default());
        if scenario.pool.maintenance.is_some() {
            slots.insert(Managed::Maintenance, Slot::default());
        }
        let kcm_grace = scenario.watchdog.kcm_node_monitor_grace_duration.get();
        Self {
            client,
            clock,
            orchestrator,
            watchdog,
            kcm_grace,
            slots,
            outside,
            logs,
            controller_manager,
        }
    }

    /// What the timeline calls `component`.
    fn name(&self, component: Managed) -> &'static str {
        match component {
            Managed::NodeLifecycle if self.controller_manager.is_some() => {
                "kube-controller-manager"
            }
            _ => component.name(),
        }
    }

    /// Starts or stops each component to match the dependents' replicas and the kills, at
    /// `elapsed`.
    pub fn reconcile(&mut self, shared: &Shared, elapsed: Duration) {
        let replicas: BTreeMap<String, i32> = shared
            .judge()
            .world
            .dependents
            .iter()
            .map(|(n, d)| (n.clone(), d.replicas))
            .collect();
        let managed: Vec<Managed> = self.slots.keys().copied().collect();
        for component in managed {
            let scaled_up = component
                .deployment()
                .is_none_or(|d| replicas.get(d).is_none_or(|r| *r > 0));
            let name = self.name(component);
            let slot = self.slots.get_mut(&component).expect("slot exists");
            if let Some(Some(at)) = slot.killed
                && elapsed >= at
            {
                slot.killed = None;
            }
            if let Some(how) = slot.running.as_mut().and_then(Running::ended) {
                slot.running = None;
                let backoff;
                (backoff, slot.crashes) =
                    self::backoff(slot.crashes, elapsed.saturating_sub(slot.started_at));
                slot.not_before = elapsed + backoff;
                let text = format!(
                    "{} ended by itself ({how}); restarting in {}",
                    name,
                    rackproof_clock::format_duration(backoff)
                );
                shared.record(None, EntryKind::Component, text);
            }
            let want = scaled_up && slot.killed.is_none();
            let running = slot.running.is_some();
            if want && !running && elapsed >= slot.not_before {
                let why = if slot.started { "restarted" } else { "started" };
                match self.start(component, shared) {
                    Ok(started) => {
                        let slot = self.slots.get_mut(&component).expect("slot exists");
                        slot.running = Some(started);
                        slot.started = true;
                        slot.started_at = elapsed;
                        shared.record(None, EntryKind::Component, format!("{name} {why}"));
                    }
                    Err(e) => {
                        let slot = self.slots.get_mut(&component).expect("slot exists");
                        slot.not_before = elapsed + MAX_BACKOFF;
                        shared.record(
                            None,
                            EntryKind::Component,
                            format!("{name} could not start: {e}"),
                        );
                    }
                }
            } else if !want && running {
                if let Some(running) = self
                    .slots
                    .get_mut(&component)
                    .and_then(|s| s.running.take())
                {
                    running.stop();
                }
                let why = if scaled_up {
                    "killed".to_owned()
                } else {
                    format!(
                        "stopped: {} scaled to 0",
                        component.deployment().unwrap_or_default()
                    )
                };
                shared.record(None, EntryKind::Component, format!("{name} {why}"));
            }
        }
    }

    /// Starts `component`: its external program if the scenario names one, else its task.
    fn start(&self, component: Managed, shared: &Shared) -> Result<Running, String> {
        if let (Managed::NodeLifecycle, Some(switch)) = (component, &self.controller_manager) {
            let shared = shared.clone();
            switch.start(move |e| {
                shared.record(
                    None,
                    EntryKind::Component,
                    format!("kube-controller-manager could not start: {e}"),
                );
            });
            return Ok(Running::ControllerManager(switch.clone()));
        }
        let Some(argv) = self.slots.get(&component).and_then(|s| s.command.as_ref()) else {
            return Ok(Running::Task(self.spawn(component)));
        };
        let outside = self
            .outside
            .as_ref()
            .ok_or("no outside access was opened for external programs")?;
        let env = match component {
            Managed::Orchestrator => vec![(
                "RACKPROOF_CONTROL_PLANE_VERSION",
                self.orchestrator.control_plane_version.to_string(),
            )],
            Managed::Watchdog => vec![
                ("RACKPROOF_DEPENDENTS", self.watchdog.dependents.join(",")),
                (
                    "RACKPROOF_PROBE_INTERVAL",
                    rackproof_clock::format_duration(self.watchdog.probe_interval),
                ),
                (
                    "RACKPROOF_KCM_NODE_MONITOR_GRACE",
                    rackproof_clock::format_duration(self.watchdog.kcm_node_monitor_grace),
                ),
                (
                    "RACKPROOF_NODE_LEASE_FAILURE_FRACTION",
                    self.watchdog.node_lease_failure_fraction.to_string(),
                ),
            ],
            Managed::NodeLifecycle | Managed::Maintenance => Vec::new(),
        };
        ExternalProcess::start(
            outside,
            argv,
            &env,
            component.log_name(),
            &self.logs,
            shared,
        )
        .map(Running::Process)
    }

    fn spawn(&self, component: Managed) -> JoinHandle<()> {
        let (client, clock) = (self.client.clone(), self.clock.clone());
        match component {
            Managed::Orchestrator => {
                let config = self.orchestrator.clone();
                tokio::spawn(async move {
                    if let Err(e) = inplace_orchestrator::run(client, clock, config).await {
                        tracing::error!(error = %e, "the orchestrator stopped");
                    }
                })
            }
            Managed::Watchdog => {
                let config = self.watchdog.clone();
                tokio::spawn(async move {
                    if let Err(e) = inplace_watchdog::run(client, clock, config).await {
                        tracing::error!(error = %e, "the watchdog stopped");
                    }
                })
            }
            Managed::NodeLifecycle => {
                let grace = self.kcm_grace;
                tokio::spawn(lifecycle::run(client, clock, grace))
            }
            Managed::Maintenance => {
                let config = self.orchestrator.clone();
                tokio::spawn(async move {
                    if let Err(e) =
                        inplace_orchestrator::maintenance::run(client, clock, config).await
                    {
                        tracing::error!(error = %e, "the maintenance controller stopped");
                    }
                })
            }
        }
    }

    /// Fault: kills `component` now; it starts again `restart_after` later (never, if absent).
    pub fn kill(
        &mut self,
        component: Component,
        restart_after: Option<Duration>,
        elapsed: Duration,
    ) -> bool {
        let managed = match component {
            Component::Orchestrator => Managed::Orchestrator,
            Component::Watchdog => Managed::Watchdog,
            Component::Agent => return false,
        };
        let Some(slot) = self.slots.get_mut(&managed) else {
            return false;
        };
        slot.killed = Some(restart_after.map(|d| elapsed + d));
        true
    }

    /// The control plane was upgraded: the orchestrator and the maintenance controller restart
    /// with the new version (it is a fixed setting of both).
    pub fn set_control_plane_version(&mut self, version: KubeVersion, shared: &Shared) {
        self.orchestrator.control_plane_version = version;
        for component in [Managed::Orchestrator, Managed::Maintenance] {
            if let Some(running) = self
                .slots
                .get_mut(&component)
                .and_then(|s| s.running.take())
            {
                running.stop();
                shared.record(
                    None,
                    EntryKind::Component,
                    format!(
                        "{} stopped for the control-plane upgrade to {version}",
                        component.name()
                    ),
                );
            }
        }
    }

    /// Stops everything.
    pub fn stop_all(&mut self) {
        for slot in self.slots.values_mut() {
            if let Some(running) = slot.running.take() {
                running.stop();
            }
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_back_off_doubles_to_five_minutes_and_resets_after_ten_minutes_of_running() {
        let quick = Duration::from_secs(30);
        let mut crashes = 0;
        let mut waits = Vec::new();
        for _ in 0..7 {
            let wait;
            (wait, crashes) = backoff(crashes, quick);
            waits.push(wait.as_secs());
        }
        assert_eq!(waits, [10, 20, 40, 80, 160, 300, 300]);
        let (wait, crashes) = backoff(crashes, BACKOFF_RESET);
        assert_eq!(
            (wait, crashes),
            (FIRST_BACKOFF, 1),
            "a component that ran ten minutes starts over"
        );
        assert_eq!(backoff(crashes, quick).0, Duration::from_secs(20));
    }
}
