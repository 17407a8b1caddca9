//! Steps: what happens in a scenario, in order.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::step_forms::{MaintenanceOperation, Scale};
use super::{BootBehaviour, Condition, FaultAction, Located, NodeName, Span};

/// One step. Steps run one after the other; faults (see `fault`) fire alongside them.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Step {
    /// Change the pool: OS version, Kubernetes version, kubelet config, credentials rotation.
    Update(PoolUpdate),
    /// Label these candidates `selected-for-update` (Manual strategy: a person's choice).
    Select(Vec<NodeName>),
    /// Remove the `selected-for-update` label from these nodes.
    Unselect(Vec<NodeName>),
    /// Remove these nodes' failed mark, as a person does after looking at them.
    ClearFailed(Vec<NodeName>),
    /// Set a pool's node count: `scale: 4`, or `scale: { pool: small, nodes: 4 }` naming the
    /// pool (required when the scenario has several).
    Scale(Scale),
    /// Let time pass.
    Sleep(Span),
    /// Wait until a condition holds; the scenario fails if it doesn't within the limit.
    WaitUntil(Wait),
    /// Run a command on the harness host; the scenario fails on an unexpected exit code.
    Run(RunCommand),
    /// Fire a fault now.
    Fault(FaultAction),
    /// Publish a new build of a version on the image server, as a person fixing an image does:
    /// every node that downloads the version from now on gets it (a node's own `bootFailure`
    /// build of the version is replaced too). Copies already on the nodes' ESPs are unchanged.
    Publish(Publish),
    /// Ask for a maintenance operation in a pool's next window: sets the pool's
    /// `maintenance.gardener.cloud/operation` annotation (`rotate-credentials-start`,
    /// `rotate-ca-start`, `rotate-serviceaccount-key-start`, `force-in-place-update`). Written
    /// `maintenanceOperation: rotate-ca-start`, or `maintenanceOperation: { pool: small,
    /// operation: rotate-ca-start }` naming the pool (required when the scenario has several).
    MaintenanceOperation(MaintenanceOperation),
}

impl Step {
    /// Its key in a scenario file (`waitUntil`), or a fault step's fault (`powerCut`), as log
    /// spans name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Update(_) => "update",
            Self::Select(_) => "select",
            Self::Unselect(_) => "unselect",
            Self::ClearFailed(_) => "clearFailed",
            Self::Scale(_) => "scale",
            Self::Sleep(_) => "sleep",
            Self::WaitUntil(_) => "waitUntil",
            Self::Run(_) => "run",
            Self::Fault(fault) => fault.kind(),
            Self::Publish(_) => "publish",
            Self::MaintenanceOperation(_) => "maintenanceOperation",
        }
    }

    /// The one node it acts on, if it names exactly one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Self::Select(nodes) | Self::Unselect(nodes) | Self::ClearFailed(nodes) => {
                match nodes.as_slice() {
                    [node] => Some(node.value.as_str()),
                    _ => None,
                }
            }
            Self::Fault(fault) => fault.node(),
            _ => None,
        }
    }
}

/// A new build of a version on the image server.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Publish {
    /// The version it is a build of (one of `images`).
    pub version: Located<String>,
    /// How the new build boots (default `ok`: a fixed build).
    #[serde(default)]
    pub boot: BootBehaviour,
}

/// A change to the pool.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PoolUpdate {
    /// The pool to change (one of `pools`); required when the scenario has several pools.
    #[serde(default)]
    pub pool: Option<Located<String>>,
    /// New OS image version (must be one of `images`).
    #[serde(default)]
    pub os: Option<Located<String>>,
    /// New Kubernetes (kubelet) version.
    #[serde(default)]
    pub kubernetes: Option<Located<String>>,
    /// New control-plane version (kept in step with `kubernetes` unless given).
    #[serde(default)]
    pub control_plane: Option<Located<String>>,
    /// Kubelet configuration fields to set (`kubeReserved`, `evictionHard`, …).
    #[serde(default)]
    pub kubelet_config: Option<Located<serde_json::Map<String, serde_json::Value>>>,
    /// Rotate the cluster CA.
    #[serde(default)]
    pub rotate_ca: bool,
    /// Rotate the service-account signing key.
    #[serde(default)]
    pub rotate_service_account_key: bool,
    /// Add the force-in-place-update operation annotation (an update while one is in progress).
    #[serde(default)]
    pub force: bool,
    /// The update must be refused by validation with a reason matching this regex.
    #[serde(default)]
    pub expect_refused: Option<String>,
}

/// Wait for a condition.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Wait {
    /// The condition.
    pub until: Located<Condition>,
    /// How long to wait at most.
    pub within: Span,
}

/// A command run on the harness host.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunCommand {
    /// Program and arguments.
    pub command: Vec<String>,
    /// The exit code that counts as success.
    #[serde(default)]
    pub expect_exit: i32,
    /// Kill it after this long.
    #[serde(default = "default_run_timeout")]
    pub timeout: Span,
}

fn default_run_timeout() -> Span {
    Span(std::time::Duration::from_secs(60))
}
