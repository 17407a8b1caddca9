//! The supervisor of the control-plane components in a simulated run: the orchestrator (as
//! `machine-controller-manager`), the node lifecycle controller (as `kube-controller-manager`) and
//! the dependency watchdog, each an in-process task. A component runs while its Deployment has
//! replicas (so when the watchdog scales machine-controller-manager to zero, the orchestrator
//! really stops) and it is not killed by a fault; a kill with `restartAfter` starts it again then.

use std::collections::BTreeMap;
use std::time::Duration;

use inplace_api::version::KubeVersion;
use kube::Client;
use rackproof_clock::Clock;
use tokio::task::JoinHandle;

use super::lifecycle;
use super::shared::Shared;
use super::timeline::EntryKind;
use crate::scenario::{Component, Implementation, Scenario};

/// A component the supervisor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Managed {
    Orchestrator,
    NodeLifecycle,
    Watchdog,
}

impl Managed {
    fn name(self) -> &'static str {
        match self {
            Self::Orchestrator => "orchestrator",
            Self::NodeLifecycle => "node lifecycle controller",
            Self::Watchdog => "watchdog",
        }
    }

    /// The Deployment whose replicas decide whether it runs.
    fn deployment(self) -> Option<&'static str> {
        match self {
            Self::Orchestrator => Some("machine-controller-manager"),
            Self::NodeLifecycle => Some("kube-controller-manager"),
            Self::Watchdog => None,
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    task: Option<JoinHandle<()>>,
    /// Killed by a fault; `Some(None)`: never restarted, `Some(Some(at))`: restarted after `at`.
    killed: Option<Option<Duration>>,
    /// It ran at some point.
    started: bool,
}

/// Starts and stops the components.
pub struct Supervisor {
    client: Client,
    clock: Clock,
    orchestrator: inplace_orchestrator::Config,
    watchdog: inplace_watchdog::Config,
    kcm_grace: Duration,
    slots: BTreeMap<Managed, Slot>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor").field("slots", &self.slots).finish_non_exhaustive()
    }
}

impl Supervisor {
    /// The components the scenario runs (those set to `off` never start).
    pub fn new(client: Client, clock: Clock, scenario: &Scenario, orchestrator: inplace_orchestrator::Config, watchdog: inplace_watchdog::Config) -> Self {
        let mut slots = BTreeMap::new();
        if scenario.components.orchestrator == Implementation::Builtin {
            slots.insert(Managed::Orchestrator, Slot::default());
        }
        if scenario.components.watchdog == Implementation::Builtin {
            slots.insert(Managed::Watchdog, Slot::default());
        }
        slots.insert(Managed::NodeLifecycle, Slot::default());
        let kcm_grace = scenario.watchdog.kcm_node_monitor_grace_duration.get();
        Self { client, clock, orchestrator, watchdog, kcm_grace, slots }
    }

    /// Starts or stops each component to match the dependents' replicas and the kills, at
    /// `elapsed`.
    pub fn reconcile(&mut self, shared: &Shared, elapsed: Duration) {
        let replicas: BTreeMap<String, i32> = shared.judge().world.dependents.iter().map(|(n, d)| (n.clone(), d.replicas)).collect();
        let managed: Vec<Managed> = self.slots.keys().copied().collect();
        for component in managed {
            let scaled_up = component.deployment().is_none_or(|d| replicas.get(d).is_none_or(|r| *r > 0));
            let slot = self.slots.get_mut(&component).expect("slot exists");
            if let Some(Some(at)) = slot.killed
                && elapsed >= at
            {
                slot.killed = None;
            }
            let want = scaled_up && slot.killed.is_none();
            let running = slot.task.as_ref().is_some_and(|t| !t.is_finished());
            let ran_before = slot.task.is_some() || slot.started;
            if want && !running {
                let why = if ran_before { "restarted" } else { "started" };
                let task = self.spawn(component);
                let slot = self.slots.get_mut(&component).expect("slot exists");
                slot.task = Some(task);
                slot.started = true;
                shared.record(None, EntryKind::Component, format!("{} {why}", component.name()));
            } else if !want && running {
                if let Some(task) = self.slots.get_mut(&component).and_then(|s| s.task.take()) {
                    task.abort();
                }
                let why = if scaled_up {
                    "killed".to_owned()
                } else {
                    format!("stopped: {} scaled to 0", component.deployment().unwrap_or_default())
                };
                shared.record(None, EntryKind::Component, format!("{} {why}", component.name()));
            }
        }
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
        }
    }

    /// Fault: kills `component` now; it starts again `restart_after` later (never, if absent).
    pub fn kill(&mut self, component: Component, restart_after: Option<Duration>, elapsed: Duration) -> bool {
        let managed = match component {
            Component::Orchestrator => Managed::Orchestrator,
            Component::Watchdog => Managed::Watchdog,
            Component::Agent => return false,
        };
        let Some(slot) = self.slots.get_mut(&managed) else { return false };
        slot.killed = Some(restart_after.map(|d| elapsed + d));
        true
    }

    /// The control plane was upgraded: the orchestrator restarts with the new version (it is a
    /// fixed setting of the orchestrator).
    pub fn set_control_plane_version(&mut self, version: KubeVersion, shared: &Shared) {
        self.orchestrator.control_plane_version = version;
        if let Some(task) = self.slots.get_mut(&Managed::Orchestrator).and_then(|s| s.task.take()) {
            task.abort();
            shared.record(None, EntryKind::Component, format!("orchestrator stopped for the control-plane upgrade to {version}"));
        }
    }

    /// Stops everything.
    pub fn stop_all(&mut self) {
        for slot in self.slots.values_mut() {
            if let Some(task) = slot.task.take() {
                task.abort();
            }
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop_all();
    }
}
