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

use inplace_api::leader::LeaderElection;
use inplace_api::version::KubeVersion;
use kube::Client;
use rackproof_clock::Clock;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::engine::cluster::api::ControllerManagerSwitch;
use crate::engine::cluster::objects::NAMESPACE;
use crate::engine::components::external::{ExternalError, ExternalProcess};
use crate::engine::components::lifecycle;
use crate::engine::components::outside::Outside;
use crate::engine::judge::timeline::EntryKind;
use crate::engine::logs::LineLogs;
use crate::engine::shared::Shared;
use crate::scenario::{Component, Implementation, Scenario, Workload};

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
    /// The ReplicaSet controller and scheduler stand-in, for scenarios with `pods` workloads on
    /// a cluster Rackproof runs.
    Workloads,
}

impl Managed {
    fn name(self) -> &'static str {
        match self {
            Self::Orchestrator => "orchestrator",
            Self::NodeLifecycle => "node lifecycle controller",
            Self::Watchdog => "watchdog",
            Self::Maintenance => "maintenance controller",
            Self::Workloads => "ReplicaSet controller",
        }
    }

    /// The Lease its instances hold while they lead, when several run.
    fn lease(self) -> Option<&'static str> {
        match self {
            Self::Orchestrator => Some(inplace_orchestrator::LEADER_LEASE_NAME),
            Self::Watchdog => Some(inplace_watchdog::LEADER_LEASE_NAME),
            Self::NodeLifecycle | Self::Maintenance | Self::Workloads => None,
        }
    }

    /// The Deployment whose replicas decide whether it runs.
    fn deployment(self) -> Option<&'static str> {
        match self {
            Self::Orchestrator => Some("machine-controller-manager"),
            Self::NodeLifecycle | Self::Workloads => Some("kube-controller-manager"),
            Self::Watchdog | Self::Maintenance => None,
        }
    }
}

/// Why a component instance could not be started.
#[derive(Debug, thiserror::Error)]
enum StartError {
    /// The scenario gives the component as a command, but the run opened no outside door.
    #[error("no outside access was opened for external programs")]
    NoOutside,
    /// The external program could not be started.
    #[error(transparent)]
    External(#[from] ExternalError),
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

/// One running copy of a component: `index` counts from 1; with one instance it is 1 and the
/// instance goes by the component's name, with several by `<name>-<index>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Instance {
    pub(crate) component: Managed,
    pub(crate) index: u32,
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
    /// How many instances of the orchestrator and of the watchdog run.
    replicas: u32,
    slots: BTreeMap<Instance, Slot>,
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
        workload_stand_in: bool,
    ) -> Self {
        let replicas = scenario.components.replicas.value.max(1);
        let mut slots = BTreeMap::new();
        for (component, implementation) in [
            (Managed::Orchestrator, &scenario.components.orchestrator),
            (Managed::Watchdog, &scenario.components.watchdog),
        ] {
            let command = match implementation {
                Implementation::Builtin => None,
                Implementation::Command(argv) => Some(argv.clone()),
                Implementation::Off => continue,
            };
            for index in 1..=replicas {
                let slot = Slot {
                    command: command.clone(),
                    ..Slot::default()
                };
                slots.insert(Instance { component, index }, slot);
            }
        }
        let has_pods = std::iter::once(&scenario.workloads)
            .chain(scenario.pools().iter().map(|p| &p.workloads))
            .flatten()
            .any(|w| matches!(w, Workload::Pods(_)));
        for component in [
            Managed::NodeLifecycle,
            Managed::Maintenance,
            Managed::Workloads,
        ] {
            let wanted = match component {
                Managed::Maintenance => scenario.pools().iter().any(|p| p.maintenance.is_some()),
                Managed::Workloads => workload_stand_in && has_pods,
                _ => true,
            };
            if !wanted {
                continue;
            }
            slots.insert(
                Instance {
                    component,
                    index: 1,
                },
                Slot::default(),
            );
        }
        let kcm_grace = scenario.watchdog.kcm_node_monitor_grace_duration.get();
        Self {
            client,
            clock,
            orchestrator,
            watchdog,
            kcm_grace,
            replicas,
            slots,
            outside,
            logs,
            controller_manager,
        }
    }

    /// What the timeline calls `instance`: the component's name, with its index when several run.
    fn name(&self, instance: Instance) -> String {
        let name = match instance.component {
            Managed::NodeLifecycle if self.controller_manager.is_some() => {
                "kube-controller-manager"
            }
            component => component.name(),
        };
        if self.elects(instance.component) {
            format!("{name}-{}", instance.index)
        } else {
            name.to_owned()
        }
    }

    /// Whether `component` runs several instances that elect a leader.
    fn elects(&self, component: Managed) -> bool {
        self.replicas > 1 && component.lease().is_some()
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
        let instances: Vec<Instance> = self.slots.keys().copied().collect();
        for instance in instances {
            let component = instance.component;
            let scaled_up = component
                .deployment()
                .is_none_or(|d| replicas.get(d).is_none_or(|r| *r > 0));
            let name = self.name(instance);
            let slot = self.slots.get_mut(&instance).expect("slot exists");
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
                match self.start(instance, shared) {
                    Ok(started) => {
                        let slot = self.slots.get_mut(&instance).expect("slot exists");
                        slot.running = Some(started);
                        slot.started = true;
                        slot.started_at = elapsed;
                        shared.record(None, EntryKind::Component, format!("{name} {why}"));
                    }
                    Err(e) => {
                        let slot = self.slots.get_mut(&instance).expect("slot exists");
                        slot.not_before = elapsed + MAX_BACKOFF;
                        shared.record(
                            None,
                            EntryKind::Component,
                            format!("{name} could not start: {}", rackproof_std::error_chain(&e)),
                        );
                    }
                }
            } else if !want && running {
                if let Some(running) = self.slots.get_mut(&instance).and_then(|s| s.running.take())
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

    /// Starts `instance`: its external program if the scenario names one, else its task.
    fn start(&self, instance: Instance, shared: &Shared) -> Result<Running, StartError> {
        let component = instance.component;
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
        let Some(argv) = self.slots.get(&instance).and_then(|s| s.command.as_ref()) else {
            return Ok(Running::Task(self.spawn(instance)));
        };
        let outside = self.outside.as_ref().ok_or(StartError::NoOutside)?;
        let mut env = match component {
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
            Managed::NodeLifecycle | Managed::Maintenance | Managed::Workloads => Vec::new(),
        };
        let name = self.name(instance);
        if let Some(election) = self.election(instance) {
            env.push(("RACKPROOF_LEADER_ELECT", "true".to_owned()));
            env.push(("RACKPROOF_LEADER_ELECT_IDENTITY", election.identity));
        }
        Ok(Running::Process(ExternalProcess::start(
            outside, argv, &env, &name, &self.logs, shared,
        )?))
    }

    /// The leader election `instance` takes part in when several instances run: its component's
    /// Lease in the run's namespace, its timeline name as its identity, MCM's durations.
    fn election(&self, instance: Instance) -> Option<LeaderElection> {
        let lease = instance
            .component
            .lease()
            .filter(|_| self.elects(instance.component))?;
        let mut election = LeaderElection::new(lease, NAMESPACE);
        election.identity = self.name(instance);
        Some(election)
    }

    /// Spawns `instance`'s task in a `component{name}` span (a child of the span it is started
    /// in: the run's, or a step's or fault's).
    fn spawn(&self, instance: Instance) -> JoinHandle<()> {
        let span = tracing::info_span!("component", name = %self.name(instance));
        let (client, clock) = (self.client.clone(), self.clock.clone());
        let election = self.election(instance);
        match instance.component {
            Managed::Orchestrator => {
                let config = inplace_orchestrator::Config {
                    leader_election: election,
                    ..self.orchestrator.clone()
                };
                tokio::spawn(
                    async move {
                        if let Err(e) = inplace_orchestrator::run(client, clock, config).await {
                            tracing::error!(error = %e, "the orchestrator stopped");
                        }
                    }
                    .instrument(span),
                )
            }
            Managed::Watchdog => {
                let config = inplace_watchdog::Config {
                    leader_election: election,
                    ..self.watchdog.clone()
                };
                tokio::spawn(
                    async move {
                        if let Err(e) = inplace_watchdog::run(client, clock, config).await {
                            tracing::error!(error = %e, "the watchdog stopped");
                        }
                    }
                    .instrument(span),
                )
            }
            Managed::NodeLifecycle => {
                let grace = self.kcm_grace;
                tokio::spawn(lifecycle::run(client, clock, grace).instrument(span))
            }
            Managed::Workloads => {
                tokio::spawn(super::workloads::run(client, clock).instrument(span))
            }
            Managed::Maintenance => {
                let config = self.orchestrator.clone();
                tokio::spawn(
                    async move {
                        if let Err(e) =
                            inplace_orchestrator::maintenance::run(client, clock, config).await
                        {
                            tracing::error!(error = %e, "the maintenance controller stopped");
                        }
                    }
                    .instrument(span),
                )
            }
        }
    }

    /// The Lease whose holder leads `component`'s instances, when several run (what a `kill`
    /// must read to find the leader).
    pub fn leader_lease(&self, component: Component) -> Option<&'static str> {
        let managed = managed(component)?;
        managed.lease().filter(|_| self.elects(managed))
    }

    /// The instance of `component` whose timeline name (and election identity) is `identity`.
    pub fn instance_named(&self, component: Component, identity: &str) -> Option<u32> {
        let managed = managed(component)?;
        self.slots
            .keys()
            .find(|i| i.component == managed && self.name(**i) == identity)
            .map(|i| i.index)
    }

    /// Fault: kills instance `index` of `component` now (the only one, when one runs); it starts
    /// again `restart_after` later (never, if absent). Returns its timeline name, or `None` when
    /// the scenario runs no such instance.
    pub fn kill(
        &mut self,
        component: Component,
        index: u32,
        restart_after: Option<Duration>,
        elapsed: Duration,
    ) -> Option<String> {
        let instance = Instance {
            component: managed(component)?,
            index,
        };
        let name = self.name(instance);
        let slot = self.slots.get_mut(&instance)?;
        slot.killed = Some(restart_after.map(|d| elapsed + d));
        Some(name)
    }

    /// The control plane was upgraded: the orchestrator and the maintenance controller restart
    /// with the new version (it is a fixed setting of both).
    pub fn set_control_plane_version(&mut self, version: KubeVersion, shared: &Shared) {
        self.orchestrator.control_plane_version = version;
        let restarted: Vec<Instance> = self
            .slots
            .keys()
            .filter(|i| matches!(i.component, Managed::Orchestrator | Managed::Maintenance))
            .copied()
            .collect();
        for instance in restarted {
            let name = self.name(instance);
            if let Some(running) = self.slots.get_mut(&instance).and_then(|s| s.running.take()) {
                running.stop();
                shared.record(
                    None,
                    EntryKind::Component,
                    format!("{name} stopped for the control-plane upgrade to {version}"),
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

/// The leader Lease of the component a scenario names (none for the agent).
pub(crate) fn leader_lease(component: Component) -> Option<&'static str> {
    managed(component).and_then(Managed::lease)
}

/// The supervised component a scenario's `kill` names (the agent is the lab's).
fn managed(component: Component) -> Option<Managed> {
    match component {
        Component::Orchestrator => Some(Managed::Orchestrator),
        Component::Watchdog => Some(Managed::Watchdog),
        Component::Agent | Component::Kubelet => None,
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
