//! `Machine` (`machine.sapcloud.io/v1alpha1`): one physical or virtual machine, the subset of
//! MCM's type Rackproof reads and writes. The backing Node's name is the Machine label
//! [`crate::keys::MACHINE_LABEL_NODE`].

use k8s_openapi::api::core::v1::{NodeAddress, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::machine_shared::{ClassSpec, LastOperation, NodeTemplateSpec};
use crate::keys::MachinePhase;

/// Specification of a Machine. MCM inlines its `MachineConfiguration` here, so the timeouts are
/// top-level fields; durations use Go's format (`2h0m0s`, also readable as `2h`).
#[expect(
    clippy::duplicated_attributes,
    reason = "one printcolumn per column repeats `type_`"
)]
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machine.sapcloud.io",
    version = "v1alpha1",
    kind = "Machine",
    namespaced,
    status = "MachineStatus",
    shortname = "mc",
    derive = "PartialEq",
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.currentStatus.phase"
    )
)]
#[kube(printcolumn(name = "Node", type_ = "string", json_path = ".metadata.labels.node"))]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The MachineClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<ClassSpec>,
    /// The provider's ID of the machine.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// What the Node should carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_template: Option<NodeTemplateSpec>,
    /// Drain timeout (MCM `drainTimeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_timeout: Option<String>,
    /// Health timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_timeout: Option<String>,
    /// Creation timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timeout: Option<String>,
    /// In-place update timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_timeout: Option<String>,
    /// Never declare the machine failed for health reasons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_health_timeout: Option<bool>,
    /// Eviction attempts per pod before it is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_evict_retries: Option<i32>,
    /// Node conditions that make a machine failed after the health timeout (comma-separated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_conditions: Option<String>,
}

/// Observed state of a Machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Addresses (only when MCM runs without a target cluster).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<NodeAddress>,
    /// Conditions, copied from the Node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<NodeCondition>,
    /// The last operation.
    #[serde(default)]
    pub last_operation: LastOperation,
    /// The current phase.
    #[serde(default)]
    pub current_status: CurrentStatus,
    /// Provider state for later calls.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_known_state: String,
}

/// `Machine.status.currentStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CurrentStatus {
    /// The phase, e.g. `Running`, `InPlaceUpdating`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<MachinePhase>,
    /// Whether a timeout is running for the phase.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timeout_active: bool,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
}

impl Machine {
    /// The name of the backing Node (the `node` label).
    pub fn node_name(&self) -> Option<&str> {
        self.metadata
            .labels
            .as_ref()?
            .get(crate::keys::MACHINE_LABEL_NODE)
            .map(String::as_str)
    }

    /// The current phase, if reported.
    pub fn phase(&self) -> Option<&MachinePhase> {
        self.status.as_ref()?.current_status.phase.as_ref()
    }
}
