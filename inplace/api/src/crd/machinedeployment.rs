//! `MachineDeployment` (`machine.sapcloud.io/v1alpha1`) with MCM's `InPlaceUpdate` strategy:
//!
//! ```yaml
//! strategy:
//!   type: InPlaceUpdate          # RollingUpdate | Recreate | InPlaceUpdate
//!   inPlaceUpdate:
//!     maxUnavailable: 1
//!     maxSurge: 0
//!     orchestrationType: Auto    # Auto | Manual
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::machine_shared::{MachineSummary, MachineTemplateSpec, is_zero};
use crate::strategy::{OrchestrationType, UpdateStrategy};
use crate::string_enum::string_enum;

/// Specification of a MachineDeployment.
#[expect(
    clippy::duplicated_attributes,
    reason = "one printcolumn per column repeats `type_`"
)]
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machine.sapcloud.io",
    version = "v1alpha1",
    kind = "MachineDeployment",
    namespaced,
    status = "MachineDeploymentStatus",
    shortname = "mcd",
    derive = "PartialEq",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas"
    ),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas")
)]
#[kube(printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"))]
#[kube(printcolumn(
    name = "Up-to-date",
    type_ = "integer",
    json_path = ".status.updatedReplicas"
))]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentSpec {
    /// Desired number of machines.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,
    /// Which machines belong to the deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Template of the machines.
    #[serde(default)]
    pub template: MachineTemplateSpec,
    /// How machines are updated.
    #[serde(default)]
    pub strategy: MachineDeploymentStrategy,
    /// Seconds a new machine must be ready to count as available.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_ready_seconds: i32,
    /// Old MachineSets kept for rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Whether the controller leaves the deployment alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Seconds without progress before the deployment counts as failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i32>,
}

string_enum! {
    /// `strategy.type`.
    pub enum MachineDeploymentStrategyType {
        /// Delete all machines, then create new ones.
        Recreate = "Recreate",
        /// Replace machines gradually (the default).
        RollingUpdate = "RollingUpdate",
        /// Update machines in place and move them to the new MachineSet.
        InPlaceUpdate = "InPlaceUpdate",
    }
}

/// How machines are updated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentStrategy {
    /// Strategy type; `RollingUpdate` when absent.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<MachineDeploymentStrategyType>,
    /// Rolling update settings (type `RollingUpdate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateMachineDeployment>,
    /// In-place update settings (type `InPlaceUpdate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update: Option<InPlaceUpdateMachineDeployment>,
}

impl MachineDeploymentStrategy {
    /// The strategy the worker pool's `updateStrategy` maps to, with its surge and unavailability.
    pub fn for_pool(
        strategy: UpdateStrategy,
        max_surge: Option<IntOrString>,
        max_unavailable: Option<IntOrString>,
    ) -> Self {
        match strategy.orchestration_type() {
            None => Self {
                type_: Some(MachineDeploymentStrategyType::RollingUpdate),
                rolling_update: Some(RollingUpdateMachineDeployment {
                    max_unavailable,
                    max_surge,
                }),
                in_place_update: None,
            },
            Some(orchestration_type) => Self {
                type_: Some(MachineDeploymentStrategyType::InPlaceUpdate),
                rolling_update: None,
                in_place_update: Some(InPlaceUpdateMachineDeployment {
                    max_unavailable,
                    max_surge,
                    orchestration_type: Some(orchestration_type),
                }),
            },
        }
    }

    /// The pool strategy this deployment strategy corresponds to (`Recreate` has none).
    pub fn update_strategy(&self) -> Option<UpdateStrategy> {
        match self
            .type_
            .as_ref()
            .unwrap_or(&MachineDeploymentStrategyType::RollingUpdate)
        {
            MachineDeploymentStrategyType::RollingUpdate => Some(UpdateStrategy::AutoRollingUpdate),
            MachineDeploymentStrategyType::InPlaceUpdate => Some(
                self.in_place_update
                    .as_ref()
                    .and_then(|u| u.orchestration_type)
                    .unwrap_or(OrchestrationType::Auto)
                    .update_strategy(),
            ),
            MachineDeploymentStrategyType::Recreate | MachineDeploymentStrategyType::Other(_) => {
                None
            }
        }
    }
}

/// Rolling update settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateMachineDeployment {
    /// Maximum unavailable machines (number or percentage, rounded down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Maximum machines above the desired number (number or percentage, rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
}

/// In-place update settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateMachineDeployment {
    /// Maximum unavailable machines; updating and failed machines count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Maximum machines above the desired number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Who selects machines for update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orchestration_type: Option<OrchestrationType>,
}

/// Observed state of a MachineDeployment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentStatus {
    /// Generation last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Non-terminated machines.
    #[serde(default)]
    pub replicas: i32,
    /// Machines with the desired template.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub updated_replicas: i32,
    /// Ready machines.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ready_replicas: i32,
    /// Available machines.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub available_replicas: i32,
    /// Machines still needed for full capacity.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unavailable_replicas: i32,
    /// Conditions (`Available`, `Progressing`, `ReplicaFailure`, `Frozen`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<MachineDeploymentCondition>,
    /// Hash collisions seen when naming MachineSets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// Machines whose last operation failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_machines: Vec<MachineSummary>,
}

/// A MachineDeployment condition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentCondition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When the condition was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
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
