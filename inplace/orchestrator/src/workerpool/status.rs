//! The pool status: conditions (with transition times kept while the status stays), pending
//! in-place updates, and the MachineDeployment facts they are derived from.

use inplace_api::crd::{
    InPlaceUpdatesStatus, MachineDeployment, PendingWorkerUpdates, WorkerPoolStatus,
};
use inplace_api::strategy::UpdateStrategy;
use inplace_api::validate::Violations;
use inplace_api::version::KubeVersion;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::render::ANNOTATION_MACHINE_CLASS_HASH;
use crate::deployment::CONDITION_HALTED;

/// Sets condition `type_`; the transition time moves only when the status changes.
pub(crate) fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    let transition = match conditions.iter().find(|c| c.type_ == type_) {
        Some(old) if old.status == status => old.last_transition_time.clone(),
        _ => Time(now),
    };
    conditions.retain(|c| c.type_ != type_);
    conditions.push(Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: generation,
        last_transition_time: transition,
    });
}

pub(crate) fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) {
    conditions.retain(|c| c.type_ != type_);
}

pub(crate) fn condition<'a>(status: &'a WorkerPoolStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// The machine class hash the MachineDeployment's template was rendered from.
pub(crate) fn rendered_hash(md: &MachineDeployment) -> Option<&str> {
    md.spec
        .template
        .metadata
        .annotations
        .get(ANNOTATION_MACHINE_CLASS_HASH)
        .map(String::as_str)
}

/// Whether the MachineDeployment has brought every machine to its current template: its status
/// is for the current generation and every machine is in the new MachineSet.
pub(crate) fn rolled_out(md: &MachineDeployment) -> bool {
    let Some(status) = md.status.as_ref() else {
        return false;
    };
    let current = status
        .observed_generation
        .is_some_and(|g| Some(g) >= md.metadata.generation);
    current
        && status.updated_replicas >= md.spec.replicas
        && status.replicas == status.updated_replicas
}

/// `status.inPlaceUpdates` for a pool that is (or is not) pending under `strategy`.
pub(crate) fn pending_updates(
    pool: &str,
    strategy: UpdateStrategy,
    pending: bool,
) -> Option<InPlaceUpdatesStatus> {
    if !pending {
        return None;
    }
    let mut lists = PendingWorkerUpdates::default();
    match strategy {
        UpdateStrategy::ManualInPlaceUpdate => lists.manual_in_place_update.push(pool.to_owned()),
        UpdateStrategy::AutoInPlaceUpdate => lists.auto_in_place_update.push(pool.to_owned()),
        UpdateStrategy::AutoRollingUpdate => return None,
    }
    Some(InPlaceUpdatesStatus {
        pending_worker_updates: Some(lists),
    })
}

/// The refusal message: the generation, the control-plane move (`from`, `to`) if there was one,
/// what stays in force, and every violation.
pub(crate) fn refusal_message(
    generation: Option<i64>,
    violations: &Violations,
    have_accepted: bool,
    control_plane_moved: Option<(KubeVersion, KubeVersion)>,
) -> String {
    let in_force = match (have_accepted, control_plane_moved) {
        (true, Some((from, _))) => {
            format!("the spec accepted under control plane {from} stays in force")
        }
        (true, None) => "the previously accepted spec stays in force".to_owned(),
        (false, _) => "nothing is rendered until the pool is valid".to_owned(),
    };
    let refused = match control_plane_moved {
        Some((from, to)) => format!(
            "the spec of generation {} under the control plane's move from {from} to {to} was refused",
            generation.unwrap_or(0)
        ),
        None => format!(
            "the spec of generation {} was refused",
            generation.unwrap_or(0)
        ),
    };
    let mut message = format!("{refused}; {in_force}:");
    for violation in &violations.0 {
        message.push_str(&format!("\n- {violation}"));
    }
    message
}

/// Condition reason for a refusal: the first violated rule's name, e.g. `ImmutableForInPlace`.
pub(crate) fn refusal_reason(violations: &Violations) -> String {
    violations
        .0
        .first()
        .map_or_else(|| "Invalid".to_owned(), |v| format!("{:?}", v.rule))
}

/// Mirrors the MachineDeployment's halt condition into the pool conditions.
pub(crate) fn mirror_halt(
    conditions: &mut Vec<Condition>,
    md: Option<&MachineDeployment>,
    generation: Option<i64>,
    now: Timestamp,
) {
    let halt = md
        .and_then(|md| md.status.as_ref())
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == CONDITION_HALTED));
    match halt {
        Some(c) => set_condition(
            conditions,
            CONDITION_HALTED,
            &c.status,
            &c.reason,
            &c.message,
            generation,
            now,
        ),
        None => remove_condition(conditions, CONDITION_HALTED),
    }
}
