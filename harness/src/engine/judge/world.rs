//! The observed world: what the harness knows about the cluster at one instant, built from the
//! objects it watches. Conditions, expectations and invariants are pure functions of it.

use std::collections::{BTreeMap, BTreeSet};

use inplace_api::crd::WorkerPool;
use inplace_api::keys;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};

use crate::scenario::NodeState;

/// Node annotation in which the node agent reports the OS version it runs.
pub(crate) const ANNOTATION_OS_VERSION: &str = inplace_agent::heartbeat::ANNOTATION_OS_VERSION;

/// What the harness knows about one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeView {
    /// The Node object exists.
    pub registered: bool,
    pub ready: bool,
    pub unschedulable: bool,
    pub candidate: bool,
    pub selected: bool,
    pub result: Option<String>,
    pub failed_reason: Option<String>,
    /// The reason of the `InPlaceUpdate` condition, if the node has one.
    pub in_place_reason: Option<String>,
    /// The OS version the node reports running.
    pub os_version: Option<String>,
    /// The kubelet version the node reports.
    pub kubelet_version: Option<String>,
    /// Pods bound to the node that a drain must evict (not DaemonSet or mirror pods).
    pub evictable_pods: u32,
    /// The pool the node says it belongs to (its `worker.gardener.cloud/pool` label).
    pub pool: Option<String>,
}

impl NodeView {
    /// Builds the view from a Node object (pods are counted separately).
    pub fn from_node(node: &Node) -> Self {
        let label = |key: &str| node.metadata.labels.as_ref().and_then(|l| l.get(key));
        let annotation = |key: &str| node.metadata.annotations.as_ref().and_then(|a| a.get(key));
        let status = node.status.as_ref();
        let conditions = status
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        let ready = conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let in_place_reason = conditions
            .iter()
            .find(|c| c.type_ == keys::CONDITION_IN_PLACE_UPDATE)
            .and_then(|c| c.reason.clone());
        let node_info = status.and_then(|s| s.node_info.as_ref());
        let os_version = annotation(ANNOTATION_OS_VERSION).cloned().or_else(|| {
            node_info.map(|i| {
                i.os_image
                    .strip_prefix("Rackproof ")
                    .unwrap_or(&i.os_image)
                    .to_owned()
            })
        });
        Self {
            registered: true,
            ready,
            unschedulable: node
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false),
            candidate: label(keys::LABEL_CANDIDATE_FOR_UPDATE).is_some(),
            selected: label(keys::LABEL_SELECTED_FOR_UPDATE).is_some(),
            result: label(keys::LABEL_UPDATE_RESULT).cloned(),
            failed_reason: annotation(keys::ANNOTATION_UPDATE_FAILED_REASON).cloned(),
            in_place_reason,
            os_version,
            kubelet_version: node_info.map(|i| i.kubelet_version.clone()),
            evictable_pods: 0,
            pool: label(keys::LABEL_WORKER_POOL).cloned(),
        }
    }

    /// Whether the node carries the failed mark.
    pub fn failed(&self) -> bool {
        self.result.as_deref() == Some(keys::UPDATE_RESULT_FAILED)
    }

    /// Whether the orchestrator has taken the node out for an update that has not finished.
    pub fn in_progress(&self) -> bool {
        !self.failed()
            && (self.selected
                || matches!(
                    self.in_place_reason.as_deref(),
                    Some(
                        keys::REASON_SELECTED_FOR_UPDATE
                            | keys::REASON_DRAIN_SUCCESSFUL
                            | keys::REASON_READY_FOR_UPDATE
                    )
                ))
    }

    /// Whether the node is registered and counts against `maxUnavailable`: in progress, failed,
    /// or not Ready.
    pub fn unavailable(&self) -> bool {
        self.registered && (self.in_progress() || self.failed() || !self.ready)
    }

    /// Whether the node is registered, Ready, and neither in update nor failed.
    pub fn available(&self) -> bool {
        self.registered && self.ready && !self.in_progress() && !self.failed()
    }
}

/// A Deployment the watchdog scales (machine-controller-manager, kube-controller-manager,
/// cluster-autoscaler).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DependentView {
    pub replicas: i32,
}

/// What the harness knows about the WorkerPool: the versions its spec names and its last
/// maintenance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolView {
    /// `spec.machine.image.version`.
    pub os: Option<String>,
    /// `spec.kubernetes.version`.
    pub kubernetes: Option<String>,
    /// `status.lastMaintenance`.
    pub last_maintenance: Option<MaintenanceView>,
}

/// A pool's `status.lastMaintenance`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaintenanceView {
    pub state: String,
    pub description: String,
    pub failure_reason: Option<String>,
    pub triggered: Timestamp,
}

impl PoolView {
    /// Builds the view from a WorkerPool.
    pub fn from_pool(pool: &WorkerPool) -> Self {
        Self {
            os: Some(pool.spec.machine.image.version.clone()),
            kubernetes: pool.spec.kubernetes_version().map(str::to_owned),
            last_maintenance: pool
                .status
                .as_ref()
                .and_then(|s| s.last_maintenance.as_ref())
                .map(|m| MaintenanceView {
                    state: m.state.clone(),
                    description: m.description.clone(),
                    failure_reason: m.failure_reason.clone(),
                    triggered: m.triggered_time.0,
                }),
        }
    }
}

/// What the harness knows about one pool: the versions its rollout goes to, its limits, and
/// the WorkerPool as last observed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolState {
    /// The pool's target OS version and Kubernetes version.
    pub target_os: String,
    pub target_kubernetes: String,
    /// A step (or a maintenance) asked for an update (before that, no node is `updated`).
    pub update_requested: bool,
    /// How many pool specs the pool's controller accepted: each starts a round in which a node
    /// is updated at most once (invariant `selectedOnce`).
    pub spec_round: u32,
    /// The spec its controller accepted last, as written in its annotation.
    pub accepted: Option<String>,
    /// `maxUnavailable`, resolved to a count.
    pub max_unavailable: u32,
    /// The pool's node count (the MachineDeployment's replicas).
    pub size: u32,
    /// The pool is updated by a person (`ManualInPlaceUpdate`): they decide how many nodes go
    /// at once, so `maxUnavailable` is not the orchestrator's to keep.
    pub manual: bool,
    /// The WorkerPool as last observed.
    pub view: PoolView,
}

/// The whole observed state.
#[derive(Debug, Clone, Default)]
pub struct World {
    /// Nodes by name, for every lab node (registered or not).
    pub nodes: BTreeMap<String, NodeView>,
    /// The pools by name.
    pub pools: BTreeMap<String, PoolState>,
    /// The watchdog's dependents by name, and the replicas they had at the start.
    pub dependents: BTreeMap<String, DependentView>,
    pub dependents_at_start: BTreeMap<String, i32>,
    /// Nodes the harness made unhealthy while they were not being updated (a real outage).
    pub outage: BTreeSet<String>,
    /// Nodes the harness powered off (a fault) and has not powered on since: down, whatever
    /// their `Ready` condition still says.
    pub powered_off: BTreeSet<String>,
    /// Nodes whose kubelet the harness killed (a fault) and has not started since: NotReady
    /// because of that, not because they reboot.
    pub kubelet_stopped: BTreeSet<String>,
    /// When each node's Lease expires (its renew time plus its duration), as last observed.
    pub lease_expiry: BTreeMap<String, Timestamp>,
    /// Who holds each component's leader Lease, by Lease name (absent: nobody).
    pub leaders: BTreeMap<String, String>,
    /// The time of the last observation (the judge's "now").
    pub now: Option<Timestamp>,
}

impl World {
    /// A copy with only the named nodes (for comparing one change without copying the whole pool).
    pub fn with_only(&self, names: &[String]) -> Self {
        Self {
            nodes: names
                .iter()
                .filter_map(|n| self.nodes.get(n).map(|v| (n.clone(), v.clone())))
                .collect(),
            pools: self.pools.clone(),
            dependents: self.dependents.clone(),
            dependents_at_start: self.dependents_at_start.clone(),
            outage: self.outage.clone(),
            powered_off: self.powered_off.clone(),
            kubelet_stopped: self.kubelet_stopped.clone(),
            lease_expiry: BTreeMap::new(),
            leaders: self.leaders.clone(),
            now: self.now,
        }
    }

    /// The name of the pool the node seen as `view` belongs to: the pool its label names, or
    /// the only pool of a run with one (a node not yet labelled).
    pub fn pool_name_of<'a>(&'a self, view: &'a NodeView) -> Option<&'a str> {
        match &view.pool {
            Some(pool) => self
                .pools
                .get_key_value(pool)
                .map(|(name, _)| name.as_str()),
            None if self.pools.len() == 1 => self.pools.keys().next().map(String::as_str),
            None => None,
        }
    }

    /// The pool the node seen as `view` belongs to.
    pub fn pool_of(&self, view: &NodeView) -> Option<&PoolState> {
        self.pool_name_of(view).and_then(|p| self.pools.get(p))
    }

    /// Whether the node seen as `view` is in `pool` (every node is, for `None`).
    pub fn in_pool(&self, view: &NodeView, pool: Option<&str>) -> bool {
        pool.is_none_or(|p| self.pool_name_of(view) == Some(p))
    }

    /// The nodes of `pool` (every node for `None`), by name.
    pub fn pool_nodes<'a>(
        &'a self,
        pool: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a String, &'a NodeView)> {
        self.nodes
            .iter()
            .filter(move |(_, v)| self.in_pool(v, pool))
    }

    /// The pool named `pool`, or the only one for `None` in a run with one pool.
    pub fn pool(&self, pool: Option<&str>) -> Option<&PoolState> {
        match pool {
            Some(name) => self.pools.get(name),
            None if self.pools.len() == 1 => self.pools.values().next(),
            None => None,
        }
    }

    /// The pool named `pool`, to change, or the only one for `None`.
    pub fn pool_mut(&mut self, pool: Option<&str>) -> Option<&mut PoolState> {
        match pool {
            Some(name) => self.pools.get_mut(name),
            None if self.pools.len() == 1 => self.pools.values_mut().next(),
            None => None,
        }
    }

    /// The sum of the pools' sizes: the nodes the run waits for before the steps.
    pub fn pools_size(&self) -> u32 {
        self.pools.values().map(|p| p.size).sum()
    }

    /// Recounts the evictable pods of every node from the pods bound to it.
    pub fn count_pods<'a>(&mut self, pods: impl IntoIterator<Item = &'a Pod>) {
        for view in self.nodes.values_mut() {
            view.evictable_pods = 0;
        }
        for pod in pods {
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()) else {
                continue;
            };
            if is_daemon_or_mirror(pod) {
                continue;
            }
            if let Some(view) = self.nodes.get_mut(node) {
                view.evictable_pods += 1;
            }
        }
    }

    /// Whether `node` is in `state`.
    pub fn node_is(&self, node: &str, state: NodeState) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|view| self.view_is(view, state))
    }

    /// The registered nodes' views (what [`World::registered`] names), for checks over the whole
    /// pool that would otherwise look every node up again by name at every change.
    pub fn registered_views(&self) -> impl Iterator<Item = &NodeView> {
        self.nodes.values().filter(|v| v.registered)
    }

    /// Whether the node seen as `view` is in `state`.
    pub fn view_is(&self, view: &NodeView, state: NodeState) -> bool {
        match state {
            NodeState::Candidate => view.candidate,
            NodeState::Selected => view.selected,
            NodeState::Drained => {
                view.in_place_reason.as_deref() == Some(keys::REASON_DRAIN_SUCCESSFUL)
            }
            NodeState::ReadyForUpdate => {
                view.in_place_reason.as_deref() == Some(keys::REASON_READY_FOR_UPDATE)
            }
            NodeState::Failed => view.failed(),
            NodeState::Ready => view.registered && view.ready,
            NodeState::NotReady => !(view.registered && view.ready),
            NodeState::Updated => {
                let Some(pool) = self.pool_of(view) else {
                    return false;
                };
                pool.update_requested
                    && view.registered
                    && view.ready
                    && !view.candidate
                    && !view.selected
                    && view.result.is_none()
                    && !view.unschedulable
                    && view.os_version.as_deref() == Some(pool.target_os.as_str())
                    && (pool.target_kubernetes.is_empty()
                        || view
                            .kubelet_version
                            .as_deref()
                            .map(|v| v.trim_start_matches('v'))
                            == Some(pool.target_kubernetes.trim_start_matches('v')))
            }
        }
    }

    /// How many nodes count against `maxUnavailable`.
    pub fn unavailable(&self) -> u32 {
        count(self.nodes.values().filter(|v| v.unavailable()))
    }

    /// How many nodes of `pool` count against its `maxUnavailable`.
    pub fn unavailable_in(&self, pool: Option<&str>) -> u32 {
        count(
            self.pool_nodes(pool)
                .map(|(_, v)| v)
                .filter(|v| v.unavailable()),
        )
    }

    /// How many nodes are available (registered, Ready, not in update, not failed).
    pub fn available(&self) -> u32 {
        count(self.nodes.values().filter(|v| v.available()))
    }

    /// Whether node `name` is down in the lab, whatever its `Ready` condition says: powered off
    /// by the harness, or its Lease expired (no kubelet renewed it within its duration). A
    /// condition is only as fresh as whoever last wrote it: with kube-controller-manager scaled
    /// down nobody marks a dead node `NotReady`.
    pub fn down(&self, name: &str) -> bool {
        self.powered_off.contains(name)
            || self
                .now
                .zip(self.lease_expiry.get(name))
                .is_some_and(|(now, expiry)| now > *expiry)
    }

    /// The nodes of `pool` available in truth: [`NodeView::available`] and not [`World::down`].
    pub fn truly_available(&self, pool: Option<&str>) -> u32 {
        count(
            self.pool_nodes(pool)
                .filter(|(name, view)| view.available() && !self.down(name))
                .map(|(_, view)| view),
        )
    }

    /// Nodes whose `Ready` condition says `True` while the lab says they are down.
    pub fn stale_ready(&self) -> Vec<&str> {
        self.nodes
            .iter()
            .filter(|(name, view)| view.registered && view.ready && self.down(name))
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The registered nodes (the pool's members now; spare lab machines are not registered).
    pub fn registered(&self) -> impl Iterator<Item = &str> {
        self.nodes
            .iter()
            .filter(|(_, v)| v.registered)
            .map(|(n, _)| n.as_str())
    }

    /// How many nodes are in progress or failed (the orchestrator's own doing).
    pub fn taken_out(&self) -> u32 {
        count(
            self.nodes
                .values()
                .filter(|v| v.in_progress() || v.failed()),
        )
    }

    /// Whether the watchdog's dependents are scaled to zero.
    pub fn dependents_scaled_down(&self) -> bool {
        !self.dependents.is_empty() && self.dependents.values().all(|d| d.replicas == 0)
    }

    /// Whether every dependent runs with the replicas it had at the start.
    pub fn dependents_running(&self) -> bool {
        self.dependents_at_start.iter().all(|(name, replicas)| {
            self.dependents
                .get(name)
                .is_some_and(|d| d.replicas == *replicas)
        })
    }

    /// Whether `pool`'s rollout is halted: its failed nodes reach its `maxUnavailable`, none
    /// of its nodes is in progress, and candidates still wait. Judged from the nodes alone, so
    /// it holds for any orchestrator; one pool's halt says nothing about another's.
    pub fn rollout_halted(&self, pool: &str) -> bool {
        let Some(state) = self.pools.get(pool) else {
            return false;
        };
        let nodes = || self.pool_nodes(Some(pool)).map(|(_, v)| v);
        let failed = count(nodes().filter(|v| v.failed()));
        failed > 0
            && failed >= state.max_unavailable
            && !nodes().any(NodeView::in_progress)
            && nodes().any(|v| v.candidate && !v.failed())
    }

    /// Whether every node of `pool` runs the pool's versions, none is failed and nothing is in
    /// progress.
    pub fn rollout_complete(&self, pool: &str) -> bool {
        let Some(state) = self.pools.get(pool) else {
            return false;
        };
        let registered = || {
            self.pool_nodes(Some(pool))
                .map(|(_, v)| v)
                .filter(|v| v.registered)
        };
        u32::try_from(registered().count()).is_ok_and(|n| n == state.size && n > 0)
            && registered().all(|v| self.view_is(v, NodeState::Updated))
    }
}

fn count<'a>(views: impl Iterator<Item = &'a NodeView>) -> u32 {
    u32::try_from(views.count()).unwrap_or(u32::MAX)
}

/// DaemonSet pods and mirror (static) pods stay on a node through a drain.
pub(crate) fn is_daemon_or_mirror(pod: &Pod) -> bool {
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let daemon = pod
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|owners| owners.iter().any(|o| o.kind == "DaemonSet"));
    mirror || daemon
}

impl World {
    /// The phase node `name`, seen as `view`, is drawn in on the report's swimlanes: one word
    /// per node at any instant. A node drained for its update that goes NotReady is rebooting,
    /// unless the harness stopped its kubelet.
    pub(crate) fn lane_phase(&self, name: &str, view: &NodeView) -> &'static str {
        let phase = lane_phase(view);
        if phase == "rebooting" && self.kubelet_stopped.contains(name) {
            return "notReady";
        }
        phase
    }
}

/// The phase a node is drawn in from its view alone (see [`World::lane_phase`]).
fn lane_phase(view: &NodeView) -> &'static str {
    if !view.registered {
        return "absent";
    }
    if view.failed() {
        return "failed";
    }
    match view.in_place_reason.as_deref() {
        Some(keys::REASON_READY_FOR_UPDATE) if !view.ready => "rebooting",
        Some(keys::REASON_READY_FOR_UPDATE) => "updating",
        Some(keys::REASON_DRAIN_SUCCESSFUL) => "drained",
        _ if view.selected => "draining",
        _ if !view.ready => "notReady",
        _ if view.candidate => "candidate",
        _ => "ready",
    }
}
