//! `MachineSet` (`machine.sapcloud.io/v1alpha1`): a set of Machines from one template revision.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::machine_shared::{
    ClassSpec, LastOperation, MachineSummary, MachineTemplateSpec, is_zero,
};

/// Specification of a MachineSet.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machine.sapcloud.io",
    version = "v1alpha1",
    kind = "MachineSet",
    namespaced,
    status = "MachineSetStatus",
    shortname = "mcs",
    derive = "PartialEq",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetSpec {
    /// Desired number of machines.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,
    /// Which machines belong to the set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The MachineClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_class: Option<ClassSpec>,
    /// Template of the machines.
    #[serde(default)]
    pub template: MachineTemplateSpec,
    /// Seconds a new machine must be ready to count as available.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_ready_seconds: i32,
}

/// Observed state of a MachineSet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetStatus {
    /// Actual number of machines.
    #[serde(default)]
    pub replicas: i32,
    /// Machines whose labels match the template.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fully_labeled_replicas: i32,
    /// Ready machines.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ready_replicas: i32,
    /// Available machines.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub available_replicas: i32,
    /// Generation last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions (MCM's JSON name is `machineSetCondition`).
    #[serde(
        default,
        rename = "machineSetCondition",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<MachineSetCondition>,
    /// The last operation.
    #[serde(default)]
    pub last_operation: LastOperation,
    /// Machines whose last operation failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_machines: Option<Vec<MachineSummary>>,
}

/// A MachineSet condition (`ReplicaFailure`, `Frozen`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetCondition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}
