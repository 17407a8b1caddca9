//! `WorkerPool` (`rackproof.dev/v1alpha1`): one worker pool with the settings a Shoot's
//! `spec.provider.workers[]` entry and its `machineControllerManager` block carry, plus the
//! credentials-rotation times Gardener keeps in the Shoot status.
//!
//! Field paths used in validation messages are the JSON paths of this type, e.g.
//! `spec.machine.image.name`, `spec.kubernetes.version`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::kubelet::KubeletConfig;
use crate::strategy::UpdateStrategy;

/// Desired state of a worker pool.
#[expect(
    clippy::duplicated_attributes,
    reason = "one printcolumn per column repeats `type_`"
)]
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "rackproof.dev",
    version = "v1alpha1",
    kind = "WorkerPool",
    namespaced,
    status = "WorkerPoolStatus",
    shortname = "wp",
    derive = "PartialEq",
    printcolumn(
        name = "Strategy",
        type_ = "string",
        json_path = ".spec.updateStrategy"
    )
)]
#[kube(printcolumn(
    name = "Image",
    type_ = "string",
    json_path = ".spec.machine.image.version"
))]
#[kube(printcolumn(
    name = "Kubernetes",
    type_ = "string",
    json_path = ".spec.kubernetes.version"
))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerPoolSpec {
    /// Minimum number of nodes.
    pub minimum: i32,
    /// Maximum number of nodes.
    pub maximum: i32,
    /// How many nodes may exist above the desired number during an update (`0`, `1`, `10%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// How many nodes may be unavailable during an update (`1`, `25%`); in-place updates count
    /// updating and failed nodes as unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// How updates reach the nodes; `AutoRollingUpdate` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// Machine type and image.
    pub machine: PoolMachine,
    /// Root volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<Volume>,
    /// Container runtime; `containerd` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cri: Option<Cri>,
    /// Kubernetes version override and kubelet configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<PoolKubernetes>,
    /// System components on the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_components: Option<SystemComponents>,
    /// Settings handed to the orchestrator (MCM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_controller_manager: Option<MachineControllerManagerSettings>,
    /// When the last credentials rotations were initiated (Gardener keeps these in the Shoot status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_rotation: Option<CredentialsRotation>,
    /// The daily maintenance window and what may happen in it (the Shoot's `spec.maintenance`);
    /// without it the pool gets no maintenance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<Maintenance>,
}

impl WorkerPoolSpec {
    /// The configured strategy, `AutoRollingUpdate` when absent.
    pub fn strategy(&self) -> UpdateStrategy {
        self.update_strategy.unwrap_or_default()
    }

    /// The pool's own Kubernetes version, if it overrides the control plane's.
    pub fn kubernetes_version(&self) -> Option<&str> {
        self.kubernetes.as_ref().and_then(|k| k.version.as_deref())
    }

    /// The kubelet configuration, if any.
    pub fn kubelet(&self) -> Option<&KubeletConfig> {
        self.kubernetes.as_ref().and_then(|k| k.kubelet.as_ref())
    }

    /// Whether node-local DNS is enabled.
    pub fn node_local_dns_enabled(&self) -> bool {
        self.system_components
            .as_ref()
            .and_then(|s| s.node_local_dns.as_ref())
            .is_some_and(|d| d.enabled)
    }
}

/// The pool's maintenance settings (the Shoot's `spec.maintenance`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Maintenance {
    /// When maintenance may happen, daily; without it, never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_window: Option<MaintenanceTimeWindow>,
    /// Which versions move automatically to higher ones (expired versions move regardless).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_update: Option<MaintenanceAutoUpdate>,
    /// Whether a person's spec change waits for the window before it is rolled out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confine_spec_update_rollout: Option<bool>,
}

/// A daily window, `begin` and `end` written `HHMMSS+ZZZZ` (e.g. `220000+0100`), 30 minutes to
/// 6 hours long; `end` before `begin` crosses midnight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MaintenanceTimeWindow {
    /// Start of the window.
    pub begin: String,
    /// End of the window.
    pub end: String,
}

/// Opt-ins to automatic version updates; each is `true` when absent, as in Gardener.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MaintenanceAutoUpdate {
    /// Move the pool's Kubernetes version to the newest patch of its minor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<bool>,
    /// Move the machine image to the newest version its `updateStrategy` allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_image_version: Option<bool>,
}

impl Maintenance {
    /// The parsed window, `None` without one.
    pub fn window(
        &self,
    ) -> Option<Result<crate::maintenance::TimeWindow, crate::maintenance::TimeWindowError>> {
        self.time_window
            .as_ref()
            .map(|w| crate::maintenance::TimeWindow::parse(&w.begin, &w.end))
    }

    /// Whether the pool opted in to automatic Kubernetes patch updates.
    pub fn auto_update_kubernetes(&self) -> bool {
        self.auto_update
            .as_ref()
            .and_then(|a| a.kubernetes_version)
            .unwrap_or(true)
    }

    /// Whether the pool opted in to automatic machine image updates.
    pub fn auto_update_machine_image(&self) -> bool {
        self.auto_update
            .as_ref()
            .and_then(|a| a.machine_image_version)
            .unwrap_or(true)
    }

    /// Whether spec changes wait for the window.
    pub fn confine_spec_update_rollout(&self) -> bool {
        self.confine_spec_update_rollout.unwrap_or(false)
    }
}

/// Machine type and image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolMachine {
    /// Machine type, e.g. `m5.large` or a rack class.
    #[serde(rename = "type")]
    pub type_: String,
    /// Machine image (the node OS).
    pub image: MachineImage,
}

/// Machine image name and version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineImage {
    /// Image name, e.g. `gardenlinux`.
    pub name: String,
    /// Image version, e.g. `1443.8.0`.
    pub version: String,
}

/// Root volume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Volume {
    /// Volume type.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Volume size, e.g. `50Gi`.
    pub size: String,
}

/// Container runtime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cri {
    /// Runtime name, e.g. `containerd`.
    pub name: String,
}

/// The CRI a pool uses when it names none.
pub const DEFAULT_CRI: &str = "containerd";

/// Kubernetes settings of the pool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolKubernetes {
    /// The pool's Kubernetes (kubelet) version; the control plane's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Kubelet configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfig>,
}

/// System components on the nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SystemComponents {
    /// Node-local DNS cache.
    #[serde(
        default,
        rename = "nodeLocalDNS",
        skip_serializing_if = "Option::is_none"
    )]
    pub node_local_dns: Option<NodeLocalDns>,
}

/// Node-local DNS switch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeLocalDns {
    /// Whether node-local DNS runs on the nodes.
    pub enabled: bool,
}

/// MCM settings of the pool; durations are written like `2h`, `10m`, `90s`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineControllerManagerSettings {
    /// How long a drain may take before it is forced (default 2h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_drain_timeout: Option<String>,
    /// How long an unhealthy machine may take to recover before it is declared failed (default 10m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_health_timeout: Option<String>,
    /// How long a new machine may take to join (default 10m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_creation_timeout: Option<String>,
    /// How long an in-place update may take before it is declared failed (in-place pools only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_in_place_update_timeout: Option<String>,
    /// How often an eviction is attempted before the pod is deleted (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_evict_retries: Option<i32>,
    /// Never declare machines failed for health reasons (in-place pools only; their default is true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_health_timeout: Option<bool>,
}

/// Default `machineDrainTimeout`.
pub const DEFAULT_MACHINE_DRAIN_TIMEOUT: &str = "2h";
/// Default `machineHealthTimeout` and `machineCreationTimeout`.
pub const DEFAULT_MACHINE_HEALTH_TIMEOUT: &str = "10m";
/// Default `maxEvictRetries`.
pub const DEFAULT_MAX_EVICT_RETRIES: i32 = 10;

/// Credentials rotations whose initiation reaches the nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CredentialsRotation {
    /// Certificate authorities rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authorities: Option<RotationTimes>,
    /// ServiceAccount signing key rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_key: Option<RotationTimes>,
}

/// Times of one credentials rotation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RotationTimes {
    /// When the rotation was last initiated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_initiation_time: Option<Time>,
}

impl CredentialsRotation {
    /// When the CA rotation was last initiated.
    pub fn ca_initiated(&self) -> Option<jiff::Timestamp> {
        self.certificate_authorities
            .as_ref()
            .and_then(|r| r.last_initiation_time.as_ref())
            .map(|t| t.0)
    }

    /// When the ServiceAccount key rotation was last initiated.
    pub fn service_account_key_initiated(&self) -> Option<jiff::Timestamp> {
        self.service_account_key
            .as_ref()
            .and_then(|r| r.last_initiation_time.as_ref())
            .map(|t| t.0)
    }
}

/// Observed state of a worker pool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerPoolStatus {
    /// The generation the controller last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions, e.g. [`crate::keys::CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// In-place update bookkeeping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_updates: Option<InPlaceUpdatesStatus>,
    /// The [`crate::hash::machine_class_hash`] of the spec the nodes were last brought to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_hash: Option<String>,
    /// Name of the Secret that carries the pool's OperatingSystemConfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_agent_secret_name: Option<String>,
    /// What the last maintenance did (the Shoot's `status.lastMaintenance`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_maintenance: Option<LastMaintenance>,
}

/// The outcome of the last maintenance of a pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastMaintenance {
    /// What was done, one sentence per operation.
    pub description: String,
    /// `Succeeded` or `Failed`.
    pub state: String,
    /// Why an operation failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// When the maintenance ran.
    pub triggered_time: Time,
}

/// [`LastMaintenance::state`] when every operation succeeded.
pub const MAINTENANCE_SUCCEEDED: &str = "Succeeded";
/// [`LastMaintenance::state`] when one failed.
pub const MAINTENANCE_FAILED: &str = "Failed";

impl WorkerPoolStatus {
    /// Whether an in-place update of the pool is still pending (listed under either strategy).
    pub fn update_in_progress(&self) -> bool {
        self.in_place_updates
            .as_ref()
            .and_then(|u| u.pending_worker_updates.as_ref())
            .is_some_and(|p| {
                !p.auto_in_place_update.is_empty() || !p.manual_in_place_update.is_empty()
            })
    }
}

/// In-place update status (Gardener: `Shoot.status.inPlaceUpdates`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdatesStatus {
    /// Pools whose in-place update has not reached every node yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_worker_updates: Option<PendingWorkerUpdates>,
}

/// Names of pools with a pending in-place update, by strategy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingWorkerUpdates {
    /// Pools pending with `AutoInPlaceUpdate`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auto_in_place_update: Vec<String>,
    /// Pools pending with `ManualInPlaceUpdate`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manual_in_place_update: Vec<String>,
}

/// Annotations of a pool, as validation reads them.
pub type Annotations = BTreeMap<String, String>;
