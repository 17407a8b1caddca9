//! The vocabulary of GEP-31 in-place node updates, as machine-controller-manager (MCM) and
//! gardener-node-agent speak it, for Rackproof's orchestrator, node agent, API server and harness.
//!
//! # The contract in one page
//!
//! A *worker pool* ([`crd::WorkerPool`], our stand-in for a Shoot's `spec.provider.workers[]`)
//! chooses an [`strategy::UpdateStrategy`]: `AutoRollingUpdate` replaces machines on every update
//! trigger; `AutoInPlaceUpdate` and `ManualInPlaceUpdate` keep the machines and update them where
//! they stand. Which changes are update triggers, and how heavy each one is, is decided by
//! [`classify`]; which changes are allowed at all by [`validate`] (against an
//! [`crd::ImageCatalog`], our stand-in for the CloudProfile).
//!
//! For an in-place pool:
//!
//! 1. The pool's desired node configuration is written as an [`osc::OperatingSystemConfig`] into
//!    a Secret whose name stays the same across in-place updates, because the [`hash`] that names
//!    it leaves out everything an in-place update may change (GEP-31 "Worker pool hash
//!    calculations"). The MachineClass hash does include those inputs, so a change creates a new
//!    MachineSet and MCM starts an `InPlaceUpdate` rollout of the
//!    [`crd::MachineDeployment`].
//! 2. The orchestrator labels every node of the pool [`keys::LABEL_CANDIDATE_FOR_UPDATE`], protects
//!    it with [`keys::ANNOTATION_SCALE_DOWN_DISABLED`], selects nodes
//!    ([`keys::LABEL_SELECTED_FOR_UPDATE`]) within `maxUnavailable` (or waits for a person to do it
//!    with `ManualInPlaceUpdate`), drains them, and walks the node condition
//!    [`keys::CONDITION_IN_PLACE_UPDATE`] through `CandidateForUpdate → SelectedForUpdate →
//!    DrainSuccessful → ReadyForUpdate`.
//! 3. The agent, seeing `ReadyForUpdate`, applies the OSC: credentials rotation, kubelet, then the
//!    OS-update command from `status.inPlaceUpdates.osUpdate`, whose exit code
//!    ([`keys::OsUpdateExit`]) says whether to retry. It records the attempted OS version on the Node
//!    ([`keys::ANNOTATION_UPDATING_OS_VERSION`]), reboots, compares, and labels
//!    [`keys::LABEL_UPDATE_RESULT`] `successful` or `failed` (with
//!    [`keys::ANNOTATION_UPDATE_FAILED_REASON`]).
//! 4. The orchestrator moves a successful Machine to the new MachineSet and clears the labels;
//!    failed nodes count as unavailable and halt the rollout at `maxUnavailable`.
//!
//! While an update is in progress, further updates of the pool are refused unless the pool carries
//! the force operation annotation ([`keys::OPERATION_FORCE_IN_PLACE_UPDATE`]).

pub mod api_error;
pub mod classify;
pub mod crd;
pub mod events;
pub mod hash;
pub mod keys;
pub mod leader;
pub mod maintenance;
pub mod node_fingerprint;
pub mod node_lease;
pub mod osc;
pub mod pool;
pub mod quantity;
pub mod resource_version;
pub mod standalone;
pub mod strategy;
pub mod unmanaged;
pub mod validate;
pub mod version;

mod string_enum;

#[cfg(test)]
mod testing;
