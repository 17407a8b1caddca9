//! Types shared by `Machine`, `MachineSet` and `MachineDeployment` (`machine.sapcloud.io/v1alpha1`),
//! with MCM's JSON field names.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::machine::MachineSpec;
use crate::keys::{MachineOperationType, MachineState};

/// Reference to a MachineClass.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassSpec {
    /// API group of the class.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// Kind of the class, usually `MachineClass`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Name of the class.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// Labels and annotations of a template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// What a Machine created from a template looks like.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineTemplateSpec {
    /// Labels and annotations of the Machine.
    #[serde(default)]
    pub metadata: TemplateMetadata,
    /// The Machine's spec.
    #[serde(default)]
    pub spec: MachineSpec,
}

/// What the Node of a Machine should carry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeTemplateSpec {
    /// Labels and annotations of the Node.
    #[serde(default)]
    pub metadata: TemplateMetadata,
    /// Node spec fields (taints, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<NodeSpec>,
}

/// The last operation MCM performed on a machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastOperation {
    /// What happened.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Error code, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error_code: String,
    /// When the operation was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// State of the operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<MachineState>,
    /// Type of the operation.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<MachineOperationType>,
}

/// Summary of a failed machine, in MachineSet and MachineDeployment status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSummary {
    /// Machine name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Provider ID.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "String::is_empty"
    )]
    pub provider_id: String,
    /// Its last operation.
    #[serde(default)]
    pub last_operation: LastOperation,
    /// Owner reference name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner_ref: String,
}

/// MCM's condition status strings.
pub const CONDITION_TRUE: &str = "True";
/// MCM's condition status strings.
pub const CONDITION_FALSE: &str = "False";
/// MCM's condition status strings.
pub const CONDITION_UNKNOWN: &str = "Unknown";

pub(crate) fn is_zero(value: &i32) -> bool {
    *value == 0
}
