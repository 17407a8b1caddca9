//! The judge: applies each observation to the world, records what changed in the timeline, and
//! checks invariants and expectations at every change.

pub(crate) mod conditions;
pub(crate) mod expectations;
pub(crate) mod invariants;
pub(crate) mod observe;
pub mod timeline;
pub(crate) mod world;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::engine::judge::expectations::Expectations;
use crate::engine::judge::invariants::{InvariantChecker, Violation};
use crate::engine::judge::observe::Observation;
use crate::engine::judge::timeline::{EntryKind, Timeline};
use crate::engine::judge::world::{NodeView, PoolView, World, is_daemon_or_mirror};
use crate::scenario::{InvariantName, NodeState};
use inplace_api::crd::{WorkerPool, WorkerPoolSpec};

/// Everything judged about one run.
#[derive(Debug)]
pub struct Judge {
    pub world: World,
    pub timeline: Timeline,
    pub expectations: Expectations,
    pub violations: Vec<(Duration, Violation)>,
    invariants: InvariantChecker,
    /// Evictable pods by (namespace, name) → node.
    pods: BTreeMap<(String, String), String>,
    /// How many of `pods` each node has (what a recount of `pods` would give).
    pods_per_node: BTreeMap<String, u32>,
    /// Nodes whose view was reset (the Node went) since pods were last counted into the views.
    reset_since_count: BTreeSet<String>,
    last_unavailable: u32,
}

impl Judge {
    /// A judge for a world whose nodes, targets and limits are already filled in.
    pub fn new(world: World, expectations: Expectations, invariants: InvariantChecker) -> Self {
        let mut timeline = Timeline::default();
        for (name, view) in &world.nodes {
            timeline.push(
                Duration::ZERO,
                Some(name),
                EntryKind::NodeState,
                world.lane_phase(name, view),
            );
        }
        Self {
            world,
            timeline,
            expectations,
            violations: Vec::new(),
            invariants,
            pods: BTreeMap::new(),
            pods_per_node: BTreeMap::new(),
            reset_since_count: BTreeSet::new(),
            last_unavailable: 0,
        }
    }

    /// Records when `node`'s Lease expires (`None`: it has none any more): the lab's truth about
    /// availability ([`World::down`]), which changes no node's state.
    pub fn lease(&mut self, node: String, expiry: Option<jiff::Timestamp>) {
        match expiry {
            Some(expiry) => self.world.lease_expiry.insert(node, expiry),
            None => self.world.lease_expiry.remove(&node),
        };
    }

    /// Applies one observation at `elapsed` since the start.
    pub fn observe(&mut self, observation: Observation, elapsed: Duration) {
        // The world before the change, with only the nodes this observation can change (the
        // invariants compare those; everything else is equal by construction).
        let touched: Vec<String> = match &observation {
            Observation::Node(node) => node.metadata.name.iter().cloned().collect(),
            Observation::NodeGone(name) => vec![name.clone()],
            Observation::Pod(pod) => {
                let key = (
                    pod.metadata.namespace.clone().unwrap_or_default(),
                    pod.metadata.name.clone().unwrap_or_default(),
                );
                let now = pod.spec.as_ref().and_then(|s| s.node_name.clone());
                self.pods
                    .get(&key)
                    .cloned()
                    .into_iter()
                    .chain(now)
                    .collect()
            }
            Observation::PodGone { namespace, name } => self
                .pods
                .get(&(namespace.clone(), name.clone()))
                .cloned()
                .into_iter()
                .collect(),
            Observation::Deployment(_) | Observation::Pool(_) => Vec::new(),
            Observation::WatchError(_)
            | Observation::KubeEvent { .. }
            | Observation::Lease { .. }
            | Observation::Leader { .. } => Vec::new(),
        };
        let before = match &observation {
            Observation::Node(_)
            | Observation::NodeGone(_)
            | Observation::Pod(_)
            | Observation::PodGone { .. }
            | Observation::Deployment(_) => self.world.with_only(&touched),
            Observation::Lease { node, expiry } => {
                self.lease(node.clone(), *expiry);
                return;
            }
            // The run's own hold on an existing cluster leads nothing.
            Observation::Leader { lease, .. }
                if lease == crate::engine::cluster::existing::sweep::LEASE =>
            {
                return;
            }
            Observation::Leader { lease, holder } => {
                if self.world.leaders.get(lease) == holder.as_ref() {
                    return;
                }
                let text = match holder {
                    Some(holder) => format!("{holder} leads (holds the Lease {lease})"),
                    None => format!("nobody holds the Lease {lease}"),
                };
                self.timeline
                    .push(elapsed, None, EntryKind::Component, text);
                self.world.with_only(&[])
            }
            Observation::Pool(pool) => {
                self.pool(pool, elapsed);
                return;
            }
            Observation::WatchError(e) => {
                self.timeline.push(
                    elapsed,
                    None,
                    EntryKind::Event,
                    format!("watch error (retrying): {e}"),
                );
                return;
            }
            Observation::KubeEvent {
                object,
                reason,
                message,
                warning,
            } => {
                let node = object.strip_prefix("Node/");
                let node = node.filter(|n| self.world.nodes.contains_key(*n));
                let kind = if *warning { "Warning" } else { "Normal" };
                self.timeline.push(
                    elapsed,
                    node,
                    EntryKind::Event,
                    format!("{kind} {reason} {object}: {message}"),
                );
                return;
            }
        };
        let changed = self.apply(observation);
        if !changed {
            return;
        }
        for (name, was) in &before.nodes {
            let Some(now) = self.world.nodes.get(name) else {
                continue;
            };
            let phase = self.world.lane_phase(name, now);
            if before.lane_phase(name, was) != phase {
                self.timeline
                    .push(elapsed, Some(name), EntryKind::NodeState, phase);
            }
        }
        let unavailable = self.world.unavailable();
        if unavailable != self.last_unavailable {
            self.timeline.push(
                elapsed,
                None,
                EntryKind::Unavailable,
                unavailable.to_string(),
            );
            self.last_unavailable = unavailable;
        }
        if before.dependents_scaled_down() != self.world.dependents_scaled_down() {
            let text = if self.world.dependents_scaled_down() {
                "dependents scaled down"
            } else {
                "dependents scaled up"
            };
            self.timeline.push(elapsed, None, EntryKind::Watchdog, text);
        }
        for violation in self.invariants.check(&before, &self.world) {
            self.timeline.push(
                elapsed,
                violation.node.as_deref(),
                EntryKind::Violation,
                format!(
                    "{}: {}",
                    invariant_name(violation.invariant),
                    violation.message
                ),
            );
            self.violations.push((elapsed, violation));
        }
        self.judge_expectations(elapsed);
    }

    /// Applies a WorkerPool change: its versions and last maintenance, in the timeline as they
    /// change, and the rollout's target when the pool's controller accepted new versions.
    fn pool(&mut self, pool: &WorkerPool, elapsed: Duration) {
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        let Some(state) = self.world.pools.get_mut(name) else {
            return;
        };
        // The target first: the controller accepts a spec in a write of its own, which changes
        // nothing the view shows.
        let accepted_text = pool
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(inplace_orchestrator::workerpool::ANNOTATION_ACCEPTED_SPEC));
        if accepted_text.is_some() && accepted_text != state.accepted.as_ref() {
            state.accepted = accepted_text.cloned();
            state.spec_round += 1;
        }
        if let Some(accepted) = accepted_spec(pool) {
            let os = accepted.machine.image.version.clone();
            let kubernetes = accepted.kubernetes_version().map(str::to_owned);
            if os != state.target_os {
                state.target_os = os;
                state.update_requested = true;
            }
            if let Some(kubernetes) = kubernetes
                && kubernetes != state.target_kubernetes
            {
                state.target_kubernetes = kubernetes;
                state.update_requested = true;
            }
        }
        let next = PoolView::from_pool(pool);
        let was = std::mem::replace(&mut state.view, next.clone());
        if was != next {
            self.pool_timeline(pool, &was, &next, elapsed);
        }
        self.judge_expectations(elapsed);
    }

    /// Records what changed in the pool's view: its versions, its last maintenance.
    fn pool_timeline(
        &mut self,
        pool: &WorkerPool,
        was: &PoolView,
        next: &PoolView,
        elapsed: Duration,
    ) {
        let name = pool.metadata.name.as_deref().unwrap_or("?");
        if (was.os.is_some() || was.kubernetes.is_some())
            && (was.os != next.os || was.kubernetes != next.kubernetes)
        {
            let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
            self.timeline.push(
                elapsed,
                None,
                EntryKind::Event,
                format!(
                    "WorkerPool/{name} names os {} (was {}), kubernetes {} (was {})",
                    show(&next.os),
                    show(&was.os),
                    show(&next.kubernetes),
                    show(&was.kubernetes)
                ),
            );
        }
        if let Some(last) = &next.last_maintenance
            && was.last_maintenance.as_ref() != Some(last)
        {
            let mut text = format!(
                "WorkerPool/{name} lastMaintenance {} (triggered {}): {}",
                last.state, last.triggered, last.description
            );
            if let Some(reason) = &last.failure_reason {
                text.push_str(&format!(" — failure: {reason}"));
            }
            self.timeline.push(elapsed, None, EntryKind::Event, text);
        }
    }

    /// Evaluates expectations at `elapsed` (also called when time passes without changes).
    pub fn judge_expectations(&mut self, elapsed: Duration) {
        let before: Vec<_> = self
            .expectations
            .items
            .iter()
            .map(|i| i.verdict.clone())
            .collect();
        for broken in self.expectations.observe(&self.world, elapsed) {
            self.timeline
                .push(elapsed, None, EntryKind::ExpectationBroken, broken);
        }
        for (item, was) in self.expectations.items.iter().zip(before) {
            if was == crate::engine::judge::expectations::Verdict::Pending
                && matches!(
                    item.verdict,
                    crate::engine::judge::expectations::Verdict::Met { .. }
                )
            {
                self.timeline.push(
                    elapsed,
                    None,
                    EntryKind::ExpectationMet,
                    item.description.clone(),
                );
            }
        }
    }

    /// Ends the run at `elapsed`: settles expectations and runs the end-of-run invariants.
    pub fn finish(&mut self, elapsed: Duration) {
        self.expectations.finish(elapsed);
        for item in &self.expectations.items {
            if let crate::engine::judge::expectations::Verdict::Broken { at, why } = &item.verdict
                && *at == elapsed
            {
                self.timeline.push(
                    elapsed,
                    None,
                    EntryKind::ExpectationBroken,
                    format!("{}: {why}", item.description),
                );
            }
        }
        for violation in self.invariants.check_end(&self.world) {
            self.timeline.push(
                elapsed,
                None,
                EntryKind::Violation,
                format!(
                    "{}: {}",
                    invariant_name(violation.invariant),
                    violation.message
                ),
            );
            self.violations.push((elapsed, violation));
        }
    }

    /// Every failure: violations, then broken expectations.
    pub fn failures(&self) -> Vec<String> {
        let mut failures: Vec<String> = self
            .violations
            .iter()
            .map(|(at, v)| {
                format!(
                    "at {}: invariant {} broken: {}",
                    rackproof_clock::format_duration(*at),
                    invariant_name(v.invariant),
                    v.message
                )
            })
            .collect();
        failures.extend(self.expectations.failures());
        failures
    }

    /// Whether `node` is in `state` now.
    pub fn node_is(&self, node: &str, state: NodeState) -> bool {
        self.world.node_is(node, state)
    }

    fn apply(&mut self, observation: Observation) -> bool {
        match observation {
            Observation::Node(node) => {
                let name = node.metadata.name.clone().unwrap_or_default();
                let Some(view) = self.world.nodes.get(&name) else {
                    return false;
                };
                let mut next = NodeView::from_node(&node);
                next.evictable_pods = view.evictable_pods;
                if *view == next {
                    return false;
                }
                self.world.nodes.insert(name, next);
                true
            }
            Observation::NodeGone(name) => match self.world.nodes.get_mut(&name) {
                Some(view) if view.registered => {
                    *view = NodeView::default();
                    self.reset_since_count.insert(name);
                    true
                }
                _ => false,
            },
            Observation::Pod(pod) => {
                let key = (
                    pod.metadata.namespace.clone().unwrap_or_default(),
                    pod.metadata.name.clone().unwrap_or_default(),
                );
                let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
                let counted = match node {
                    Some(node) if !is_daemon_or_mirror(&pod) => Some(node),
                    _ => None,
                };
                let previous = match &counted {
                    Some(node) => self.pods.insert(key, node.clone()),
                    None => self.pods.remove(&key),
                };
                if previous.is_some() && previous == counted {
                    return false;
                }
                self.move_counted_pod(previous, counted);
                true
            }
            Observation::PodGone { namespace, name } => {
                match self.pods.remove(&(namespace, name)) {
                    Some(node) => {
                        self.move_counted_pod(Some(node), None);
                        true
                    }
                    None => false,
                }
            }
            Observation::Deployment(deployment) => {
                let name = deployment.metadata.name.clone().unwrap_or_default();
                let Some(view) = self.world.dependents.get_mut(&name) else {
                    return false;
                };
                let replicas = deployment
                    .spec
                    .as_ref()
                    .and_then(|s| s.replicas)
                    .unwrap_or(1);
                if view.replicas == replicas {
                    return false;
                }
                view.replicas = replicas;
                true
            }
            Observation::Leader { lease, holder } => {
                match holder {
                    Some(holder) => self.world.leaders.insert(lease, holder),
                    None => self.world.leaders.remove(&lease),
                };
                true
            }
            Observation::WatchError(_)
            | Observation::KubeEvent { .. }
            | Observation::Lease { .. }
            | Observation::Pool(_) => false,
        }
    }

    /// Moves one counted pod from node `from` to node `to` (either may be none) and brings the
    /// views up to date: those two nodes' and those reset since the last count. That leaves
    /// every view with the count of the pods bound to it, as recounting every pod would, without
    /// walking every pod and node at each pod change.
    fn move_counted_pod(&mut self, from: Option<String>, to: Option<String>) {
        if let Some(node) = &from
            && let Some(count) = self.pods_per_node.get_mut(node)
        {
            *count = count.saturating_sub(1);
        }
        if let Some(node) = &to {
            *self.pods_per_node.entry(node.clone()).or_default() += 1;
        }
        let touched: BTreeSet<String> = std::mem::take(&mut self.reset_since_count)
            .into_iter()
            .chain(from)
            .chain(to)
            .collect();
        for node in touched {
            if let Some(view) = self.world.nodes.get_mut(&node) {
                view.evictable_pods = self.pods_per_node.get(&node).copied().unwrap_or(0);
            }
        }
    }
}

/// The spec the pool's controller last accepted (the versions a rollout goes to), if it
/// records one.
fn accepted_spec(pool: &WorkerPool) -> Option<WorkerPoolSpec> {
    let text = pool
        .metadata
        .annotations
        .as_ref()?
        .get(inplace_orchestrator::workerpool::ANNOTATION_ACCEPTED_SPEC)?;
    serde_json::from_str(text).ok()
}

/// The scenario-file name of an invariant.
pub(crate) fn invariant_name(name: InvariantName) -> &'static str {
    match name {
        InvariantName::MaxUnavailable => "maxUnavailable",
        InvariantName::DrainedBeforeReady => "drainedBeforeReady",
        InvariantName::FailedStaysCordoned => "failedStaysCordoned",
        InvariantName::CleanAfterSuccess => "cleanAfterSuccess",
        InvariantName::WatchdogIgnoresUpdates => "watchdogIgnoresUpdates",
        InvariantName::DependentsRestored => "dependentsRestored",
        InvariantName::SelectedOnce => "selectedOnce",
    }
}
