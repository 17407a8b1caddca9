//! The kubelet settings of a worker pool that GEP-31 cares about: the reservations, hard eviction
//! thresholds and CPU manager policy (the kubelet inputs of the worker pool hash), as Gardener's
//! `KubeletConfig` spells them.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Kubelet configuration of a pool (`spec.kubernetes.kubelet`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeletConfig {
    /// Resources reserved for Kubernetes node components (kubelet, container runtime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_reserved: Option<Reserved>,
    /// Resources reserved for system processes not managed by Kubernetes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_reserved: Option<Reserved>,
    /// Hard eviction thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_hard: Option<EvictionHard>,
    /// CPU manager policy (`none` or `static`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_manager_policy: Option<String>,
}

/// Reserved resources (`kubeReserved` / `systemReserved`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Reserved {
    /// CPU, e.g. `80m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,
    /// Memory, e.g. `1Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
    /// Ephemeral storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<Quantity>,
    /// Process IDs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<Quantity>,
}

/// Hard eviction thresholds, e.g. `memoryAvailable: 100Mi`, `imageFSAvailable: 5%`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvictionHard {
    /// `memory.available`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_available: Option<String>,
    /// `imagefs.available`.
    #[serde(
        default,
        rename = "imageFSAvailable",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_fs_available: Option<String>,
    /// `imagefs.inodesFree`.
    #[serde(
        default,
        rename = "imageFSInodesFree",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_fs_inodes_free: Option<String>,
    /// `nodefs.available`.
    #[serde(
        default,
        rename = "nodeFSAvailable",
        skip_serializing_if = "Option::is_none"
    )]
    pub node_fs_available: Option<String>,
    /// `nodefs.inodesFree`.
    #[serde(
        default,
        rename = "nodeFSInodesFree",
        skip_serializing_if = "Option::is_none"
    )]
    pub node_fs_inodes_free: Option<String>,
}
