//! Conditions, expectations and invariants: what must be observed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Component, Located, MaintenanceState, NodeName, Span};

/// Where a node is in its in-place update, as the orchestrator and agent record it on the Node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum NodeState {
    /// Labelled `candidate-for-update`.
    Candidate,
    /// Labelled `selected-for-update`.
    Selected,
    /// Condition `InPlaceUpdate` reason `DrainSuccessful`.
    Drained,
    /// Condition `InPlaceUpdate` reason `ReadyForUpdate`.
    ReadyForUpdate,
    /// Updated: the update succeeded and the labels are cleared (the node runs the new version).
    Updated,
    /// `update-result=failed`.
    Failed,
    /// The node's Ready condition is True.
    Ready,
    /// The node's Ready condition is not True.
    NotReady,
}

/// A condition over the observed cluster.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Condition {
    /// One node is in a state.
    Node(NodeCondition),
    /// Every node of the pool is in a state.
    AllNodes(NodesCondition),
    /// At least one node of the pool is in a state.
    AnyNode(NodesCondition),
    /// Exactly `count` nodes of the pool are in a state.
    Count(CountCondition),
    /// The pool's rollout finished: every node runs the pool's versions and none is failed.
    RolloutComplete,
    /// The rollout halted because failed nodes reached `maxUnavailable`.
    RolloutHalted,
    /// The watchdog scaled the dependents down.
    DependentsScaledDown,
    /// The dependents run with their original replicas.
    DependentsRunning,
    /// An instance leads its component: it holds the component's leader Lease (with
    /// `components.replicas` above 1).
    Leader(LeaderCondition),
    /// The WorkerPool's spec names these versions (whoever wrote them: a step or a maintenance).
    PoolVersion(PoolVersion),
    /// The pool's `status.lastMaintenance` is in this state.
    LastMaintenance(MaintenanceCondition),
    /// A condition about one pool of several: `pool: { name: small, that: rolloutHalted }`.
    /// `that` is one of `rolloutComplete`, `rolloutHalted`, `allNodes`, `anyNode`, `count`,
    /// `poolVersion` and `lastMaintenance`, judged over that pool's nodes and settings alone.
    Pool(Box<PoolCondition>),
}

/// A condition judged within one pool.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PoolCondition {
    /// The pool (one of `pools`).
    pub name: Located<String>,
    /// The condition, over that pool's nodes and settings.
    pub that: Located<Condition>,
}

impl Condition {
    /// Whether the condition means one pool (its rollout, its settings), so that a scenario
    /// with several pools must say which: `pool: { name, that }`. (`allNodes`, `anyNode` and
    /// `count` without a pool range over every pool's nodes.)
    pub fn needs_a_pool(&self) -> bool {
        matches!(
            self,
            Self::RolloutComplete
                | Self::RolloutHalted
                | Self::PoolVersion(_)
                | Self::LastMaintenance(_)
        )
    }

    /// Whether the condition can be judged within one pool (`pool: { name, that }`).
    pub fn about_a_pool(&self) -> bool {
        matches!(
            self,
            Self::RolloutComplete
                | Self::RolloutHalted
                | Self::AllNodes(_)
                | Self::AnyNode(_)
                | Self::Count(_)
                | Self::PoolVersion(_)
                | Self::LastMaintenance(_)
        )
    }
}

/// Which instance leads a component.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeaderCondition {
    /// `orchestrator` or `watchdog`.
    pub of: Component,
    /// The instance, as the timeline names it: `orchestrator-2`.
    pub is: Located<String>,
}

/// The pool's versions as its spec names them; the ones given must all match.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PoolVersion {
    /// The OS image version.
    #[serde(default)]
    pub os: Option<Located<String>>,
    /// The pool's Kubernetes version.
    #[serde(default)]
    pub kubernetes: Option<Located<String>>,
}

/// The outcome of the pool's last maintenance.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MaintenanceCondition {
    pub state: MaintenanceState,
    /// The failure reason matches this regex (a substring is enough).
    #[serde(default)]
    pub reason: Option<String>,
    /// The description matches this regex.
    #[serde(default)]
    pub description: Option<String>,
}

/// One node in a state.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeCondition {
    pub name: NodeName,
    pub is: NodeState,
    /// For `failed`: the failure reason matches this regex.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Every node in a state.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodesCondition {
    pub are: NodeState,
}

/// A count of nodes in a state.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CountCondition {
    pub are: NodeState,
    pub count: u32,
}

/// Something that must be observed.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Expectation {
    /// The condition holds at some point within the limit (from the scenario start).
    Eventually(Eventually),
    /// The condition never holds at any observed change.
    Never(Located<Condition>),
    /// The second condition first holds between `atLeast` and `atMost` after the first one
    /// first held.
    Timed(Timed),
}

/// A condition that must come true in time.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Eventually {
    pub that: Located<Condition>,
    pub within: Span,
    /// The condition must not hold before this long after the start (e.g. a maintenance window's
    /// begin): holding earlier breaks the expectation.
    #[serde(default)]
    pub not_before: Option<Span>,
}

/// The time between two conditions first holding.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Timed {
    pub from: Located<Condition>,
    pub to: Located<Condition>,
    pub at_least: Span,
    pub at_most: Span,
}

/// The safety invariants, checked at every observed change. All are on unless disabled here,
/// each with a reason.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Invariants {
    #[serde(default)]
    pub disable: Vec<DisabledInvariant>,
}

/// An invariant switched off for one scenario.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DisabledInvariant {
    pub name: InvariantName,
    /// Why this scenario may break it.
    pub reason: String,
}

/// The invariants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum InvariantName {
    /// Never more than `maxUnavailable` nodes unavailable (updating, failed, NotReady, or down in
    /// the lab: powered off, or its Lease expired while its condition still says Ready).
    MaxUnavailable,
    /// No node is `ReadyForUpdate` before it is cordoned and drained.
    DrainedBeforeReady,
    /// A failed node is never uncordoned while its failed mark stands.
    FailedStaysCordoned,
    /// After a successful update, the update labels, annotation and condition are gone.
    CleanAfterSuccess,
    /// The watchdog never scales down because of nodes under update.
    WatchdogIgnoresUpdates,
    /// After a real outage ends, the dependents run with their original replicas again.
    DependentsRestored,
    /// No node is selected again for an update it already finished successfully: once a node
    /// is done with the pool's current spec, only a new spec the pool's controller accepts (an
    /// `update` step, a maintenance, any other change) selects it again.
    SelectedOnce,
}
