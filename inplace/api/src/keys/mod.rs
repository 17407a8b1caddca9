//! Label, annotation and condition keys, reasons and values of GEP-31, spelled exactly as
//! machine-controller-manager (`pkg/apis/machine/v1alpha1`) and gardener-node-agent use them.
//!
//! Who writes what:
//!
//! | key | on | written by | meaning |
//! |---|---|---|---|
//! | [`LABEL_CANDIDATE_FOR_UPDATE`] | Node | orchestrator | the node's pool has a pending update |
//! | [`LABEL_SELECTED_FOR_UPDATE`] | Node | orchestrator (Auto) or a person (Manual) | update this node now |
//! | [`LABEL_UPDATE_RESULT`] | Node | agent (or orchestrator on timeout) | [`UPDATE_RESULT_SUCCESSFUL`] / [`UPDATE_RESULT_FAILED`] |
//! | [`ANNOTATION_UPDATE_FAILED_REASON`] | Node | agent / orchestrator | why the update failed |
//! | [`CONDITION_IN_PLACE_UPDATE`] | Node condition | orchestrator | reason walks [`REASON_CANDIDATE_FOR_UPDATE`] → [`REASON_SELECTED_FOR_UPDATE`] → [`REASON_DRAIN_SUCCESSFUL`] → [`REASON_READY_FOR_UPDATE`] |
//! | [`ANNOTATION_SCALE_DOWN_DISABLED`] (+ [`ANNOTATION_SCALE_DOWN_DISABLED_BY_MCM`]) | Node | orchestrator | cluster-autoscaler must not remove the node meanwhile |
//! | [`ANNOTATION_UPDATING_OS_VERSION`] | Node | agent | the OS version it is about to boot into |
//! | [`ANNOTATION_CHECKSUM_APPLIED_OSC`] | Node | agent | checksum of the last OSC applied completely |
//! | [`ANNOTATION_OPERATION`] = [`OPERATION_FORCE_IN_PLACE_UPDATE`] | WorkerPool | a person | allow an update while one is in progress |
//! | [`ANNOTATION_MAINTENANCE_OPERATION`] | WorkerPool | a person | run the operation in the next maintenance window, then remove the annotation |
//!
//! The GEP text still names older forms (`ready-for-update` label, `update-successful` /
//! `update-failed` labels, `update-failure-message` annotation, `shoot.gardener.cloud/force-in-place-update`);
//! MCM replaced them by the condition reason, the one `update-result` label, the
//! `update-failed-reason` annotation, and the `gardener.cloud/operation` annotation used here.

mod exit;
mod phase;

pub use exit::OsUpdateExit;
pub use phase::{MachineOperationType, MachinePhase, MachineState};

/// Node label: the node's pool has an update the node has not received yet.
pub const LABEL_CANDIDATE_FOR_UPDATE: &str = "node.machine.sapcloud.io/candidate-for-update";
/// Node label: the node is about to be, or is being, updated.
pub const LABEL_SELECTED_FOR_UPDATE: &str = "node.machine.sapcloud.io/selected-for-update";
/// Node label: the outcome of the node's update, [`UPDATE_RESULT_SUCCESSFUL`] or [`UPDATE_RESULT_FAILED`].
pub const LABEL_UPDATE_RESULT: &str = "node.machine.sapcloud.io/update-result";
/// Value of [`LABEL_UPDATE_RESULT`]: the update succeeded.
pub const UPDATE_RESULT_SUCCESSFUL: &str = "successful";
/// Value of [`LABEL_UPDATE_RESULT`]: the update failed; the node stays cordoned in the old MachineSet.
pub const UPDATE_RESULT_FAILED: &str = "failed";
/// Value a person sets on [`LABEL_SELECTED_FOR_UPDATE`] (`kubectl label node N ...=true`).
pub const SELECTED_FOR_UPDATE_VALUE: &str = "true";

/// Node annotation: why the update failed.
pub const ANNOTATION_UPDATE_FAILED_REASON: &str = "node.machine.sapcloud.io/update-failed-reason";

/// Node condition type that carries the in-place update progress in its reason.
pub const CONDITION_IN_PLACE_UPDATE: &str = "InPlaceUpdate";
/// [`CONDITION_IN_PLACE_UPDATE`] reason: the node is a candidate.
pub const REASON_CANDIDATE_FOR_UPDATE: &str = "CandidateForUpdate";
/// [`CONDITION_IN_PLACE_UPDATE`] reason: the node was selected.
pub const REASON_SELECTED_FOR_UPDATE: &str = "SelectedForUpdate";
/// [`CONDITION_IN_PLACE_UPDATE`] reason: the node was drained.
pub const REASON_DRAIN_SUCCESSFUL: &str = "DrainSuccessful";
/// [`CONDITION_IN_PLACE_UPDATE`] reason: the agent may update the node now (the GEP's `ready-for-update`).
pub const REASON_READY_FOR_UPDATE: &str = "ReadyForUpdate";
/// [`CONDITION_IN_PLACE_UPDATE`] reason: the update succeeded.
pub const REASON_UPDATE_SUCCESSFUL: &str = "UpdateSuccessful";
/// [`CONDITION_IN_PLACE_UPDATE`] reason: the update failed.
pub const REASON_UPDATE_FAILED: &str = "UpdateFailed";

/// The reasons of [`CONDITION_IN_PLACE_UPDATE`] in the order a successful update walks them.
pub const IN_PLACE_UPDATE_REASONS: [&str; 4] = [
    REASON_CANDIDATE_FOR_UPDATE,
    REASON_SELECTED_FOR_UPDATE,
    REASON_DRAIN_SUCCESSFUL,
    REASON_READY_FOR_UPDATE,
];

/// Node annotation telling cluster-autoscaler not to scale the node down.
pub const ANNOTATION_SCALE_DOWN_DISABLED: &str =
    "cluster-autoscaler.kubernetes.io/scale-down-disabled";
/// Node annotation MCM sets next to [`ANNOTATION_SCALE_DOWN_DISABLED`] so it only removes what it added.
pub const ANNOTATION_SCALE_DOWN_DISABLED_BY_MCM: &str =
    "cluster-autoscaler.kubernetes.io/scale-down-disabled-by-mcm";
/// Value of both scale-down annotations.
pub const SCALE_DOWN_DISABLED_VALUE: &str = "true";

/// Operation annotation on the pool (Gardener puts it on the Shoot).
pub const ANNOTATION_OPERATION: &str = "gardener.cloud/operation";
/// [`ANNOTATION_OPERATION`] value that allows a new update while one is still in progress.
pub const OPERATION_FORCE_IN_PLACE_UPDATE: &str = "force-in-place-update";

/// Operation annotation on the pool carried out in its next maintenance time window and then
/// removed (Gardener: on the Shoot).
pub const ANNOTATION_MAINTENANCE_OPERATION: &str = "maintenance.gardener.cloud/operation";
/// Operation: initiate the rotation of the certificate authorities and the ServiceAccount key.
pub const OPERATION_ROTATE_CREDENTIALS_START: &str = "rotate-credentials-start";
/// Operation: initiate the rotation of the certificate authorities.
pub const OPERATION_ROTATE_CA_START: &str = "rotate-ca-start";
/// Operation: initiate the rotation of the ServiceAccount signing key.
pub const OPERATION_ROTATE_SERVICE_ACCOUNT_KEY_START: &str = "rotate-serviceaccount-key-start";

/// Node annotation: the OS version the agent attempted to boot into (gardener-node-agent's key).
pub const ANNOTATION_UPDATING_OS_VERSION: &str = "node-agent.gardener.cloud/updating-os-version";
/// Node annotation: checksum of the last OperatingSystemConfig the agent applied completely.
pub const ANNOTATION_CHECKSUM_APPLIED_OSC: &str = "checksum/cloud-config-data";
/// Secret annotation: checksum of the OperatingSystemConfig in the Secret's data.
pub const ANNOTATION_CHECKSUM_DOWNLOADED_OSC: &str = "checksum/data-script";
/// Label naming the worker pool, on Nodes and on the pool's OSC Secret.
pub const LABEL_WORKER_POOL: &str = "worker.gardener.cloud/pool";

/// Machine label holding the name of the Node that backs the Machine.
pub const MACHINE_LABEL_NODE: &str = "node";
/// Label MCM adds to MachineSets and Machines to tell template revisions apart.
pub const MACHINE_TEMPLATE_HASH_LABEL: &str = "machine-template-hash";

/// Pool status condition (Gardener: a Shoot constraint): `False` while a `ManualInPlaceUpdate`
/// pool still has nodes waiting for a person to select them.
pub const CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED: &str = "ManualInPlaceWorkersUpdated";

/// Whether an operation annotation value asks for `operation`. Gardener allows several operations
/// separated by `;`.
pub fn has_operation(annotation_value: &str, operation: &str) -> bool {
    annotation_value.split(';').any(|op| op.trim() == operation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcm_label_keys_are_spelled_as_mcm_spells_them() {
        assert_eq!(
            LABEL_CANDIDATE_FOR_UPDATE,
            "node.machine.sapcloud.io/candidate-for-update"
        );
        assert_eq!(
            LABEL_SELECTED_FOR_UPDATE,
            "node.machine.sapcloud.io/selected-for-update"
        );
        assert_eq!(
            LABEL_UPDATE_RESULT,
            "node.machine.sapcloud.io/update-result"
        );
        assert_eq!(
            (UPDATE_RESULT_SUCCESSFUL, UPDATE_RESULT_FAILED),
            ("successful", "failed")
        );
        assert_eq!(
            ANNOTATION_UPDATE_FAILED_REASON,
            "node.machine.sapcloud.io/update-failed-reason"
        );
    }

    #[test]
    fn condition_reasons_walk_in_mcm_order() {
        assert_eq!(CONDITION_IN_PLACE_UPDATE, "InPlaceUpdate");
        assert_eq!(
            IN_PLACE_UPDATE_REASONS,
            [
                "CandidateForUpdate",
                "SelectedForUpdate",
                "DrainSuccessful",
                "ReadyForUpdate"
            ]
        );
    }

    #[test]
    fn force_operation_is_found_among_several_operations() {
        assert!(has_operation(
            "force-in-place-update",
            OPERATION_FORCE_IN_PLACE_UPDATE
        ));
        assert!(has_operation(
            "reconcile;force-in-place-update",
            OPERATION_FORCE_IN_PLACE_UPDATE
        ));
        assert!(!has_operation("reconcile", OPERATION_FORCE_IN_PLACE_UPDATE));
        assert!(!has_operation(
            "force-in-place-update-later",
            OPERATION_FORCE_IN_PLACE_UPDATE
        ));
    }
}
