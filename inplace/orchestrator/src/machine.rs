//! Machine controller: health phases, the node side of the in-place flow ([`crate::step`]), and
//! the drain ([`crate::drain`]).
//!
//! Phases: `Pending` until a machine provider binds the Machine to a node (label `node`),
//! `Running` while the node is Ready, `Unknown` while it is not; `InPlaceUpdating`,
//! `InPlaceUpdateSuccessful`, `InPlaceUpdateFailed` during an update. The node's conditions are
//! copied onto the Machine (as MCM does), without heartbeat times.

use std::time::Duration;

use inplace_api::crd::Machine;
use inplace_api::keys::{
    ANNOTATION_UPDATE_FAILED_REASON, LABEL_CANDIDATE_FOR_UPDATE, LABEL_SELECTED_FOR_UPDATE,
    LABEL_UPDATE_RESULT, MachineOperationType, MachinePhase, MachineState, UPDATE_RESULT_FAILED,
    UPDATE_RESULT_SUCCESSFUL,
};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use rackproof_clock::format_duration;

use crate::cache::NodesByName;
use crate::drain::{Forced, Retries, drain_round};
use crate::error::Error;
use crate::events::Kind;
use crate::nodeops::{self, NodePatch, PhaseChange, in_place_condition, is_ready, label};
use crate::plan::UpdateResult;
use crate::step::{InPlacePhase, NodeFacts, Reason, Step, next_step};
use crate::{Action, Context, health};

/// Reconciles `machine` against its Node as read at the start of this pass (`nodes`, by name).
pub(crate) async fn reconcile(
    machine: &Machine,
    nodes: &NodesByName,
    ctx: &Context,
) -> Result<Action, Error> {
    let now = ctx.clock.now();
    if machine.metadata.deletion_timestamp.is_some() {
        return Ok(Action::idle(ctx));
    }
    let Some(node_name) = machine
        .node_name()
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
    else {
        if machine.phase().is_none() {
            let change = phase(
                MachinePhase::Pending,
                "waiting for a machine provider to bind a node",
                MachineState::Processing,
                MachineOperationType::Create,
            );
            nodeops::update_machine_status(ctx, machine, Some(&change), None, now).await?;
            ctx.event_machine(
                machine,
                Kind::Normal,
                "Pending",
                "machine waits for a machine provider to bind a node",
            )
            .await;
            return Ok(Action::idle(ctx));
        }
        return unhealthy(machine, None, ctx).await;
    };
    tracing::Span::current().record("node", tracing::field::display(&node_name));
    let Some(node) = nodes.get(&node_name).map(|n| &**n) else {
        return unhealthy(machine, Some(&node_name), ctx).await;
    };
    let ready = is_ready(node);
    let current = machine.phase().cloned();
    // Health phases outside an update.
    let in_place = current.as_ref().is_some_and(MachinePhase::is_in_place);
    let mut change = None;
    // `Failed` (a health timeout) is final: the MachineSet replaces the Machine.
    if !in_place && current != Some(MachinePhase::Failed) {
        let want = if ready {
            MachinePhase::Running
        } else if matches!(current, None | Some(MachinePhase::Pending)) {
            MachinePhase::Pending
        } else {
            MachinePhase::Unknown
        };
        if current.as_ref() != Some(&want) {
            let description = if ready {
                format!("node {node_name} is Ready")
            } else {
                format!("node {node_name} is not Ready")
            };
            change = Some(phase(
                want,
                &description,
                MachineState::Successful,
                MachineOperationType::HealthCheck,
            ));
        }
    }
    let under_update = label(node, LABEL_SELECTED_FOR_UPDATE).is_some();
    let mut failure = None;
    let mut health_due = None;
    if change.is_none() && !in_place {
        match health::judge(
            machine,
            Some(&node_name),
            under_update,
            timeouts(machine, ctx)?,
            now,
        ) {
            health::Verdict::Fine => {}
            health::Verdict::Due(at) => health_due = Some(Action::at(ctx, at)),
            health::Verdict::Failed(failed, reason) => {
                failure = Some(reason);
                change = Some(failed);
            }
        }
    }
    let mirrored = nodeops::mirrored_conditions(node);
    let conditions_differ = machine.status.as_ref().map(|s| &s.conditions) != Some(&mirrored);
    if change.is_some() || conditions_differ {
        nodeops::update_machine_status(ctx, machine, change.as_ref(), Some(&mirrored), now).await?;
        if let Some(change) = &change {
            let (kind, reason) = match failure {
                Some(reason) => (Kind::Warning, reason),
                None => (Kind::Normal, change.phase.as_str()),
            };
            ctx.event_machine(machine, kind, reason, &change.description)
                .await;
        }
    }

    let mut facts = facts(machine, node);
    facts.halt = machine
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .and_then(|o| ctx.halt(&o.uid));
    let drain_timeout = ctx.duration(
        machine.spec.drain_timeout.as_deref(),
        ctx.config.default_drain_timeout,
        machine,
    )?;
    let update_timeout = ctx.duration(
        machine.spec.in_place_update_timeout.as_deref(),
        ctx.config.default_in_place_update_timeout,
        machine,
    )?;
    let step = next_step(&facts, now, drain_timeout, update_timeout);
    let action = run_step(step, machine, node, ctx).await?;
    Ok(health_due.map_or(action, |due| action.min(due)))
}

/// The creation and health timeouts of `machine` (its own, else the configured defaults).
fn timeouts(machine: &Machine, ctx: &Context) -> Result<health::Timeouts, Error> {
    Ok(health::Timeouts {
        creation: ctx.duration(
            machine.spec.creation_timeout.as_deref(),
            ctx.config.default_machine_creation_timeout,
            machine,
        )?,
        health: ctx.duration(
            machine.spec.health_timeout.as_deref(),
            ctx.config.default_machine_health_timeout,
            machine,
        )?,
    })
}

/// A Machine without a Node (none bound, or its Node not registered): `Failed` once its creation
/// timeout ran out (`health`), else looked at again then.
async fn unhealthy(machine: &Machine, node: Option<&str>, ctx: &Context) -> Result<Action, Error> {
    let now = ctx.clock.now();
    match health::judge(machine, node, false, timeouts(machine, ctx)?, now) {
        health::Verdict::Fine => Ok(Action::idle(ctx)),
        health::Verdict::Due(at) => Ok(Action::at(ctx, at).min(Action::idle(ctx))),
        health::Verdict::Failed(change, reason) => {
            nodeops::update_machine_status(ctx, machine, Some(&change), None, now).await?;
            ctx.event_machine(machine, Kind::Warning, reason, &change.description)
                .await;
            Ok(Action::soon())
        }
    }
}

fn phase(
    phase: MachinePhase,
    description: &str,
    state: MachineState,
    operation: MachineOperationType,
) -> PhaseChange {
    PhaseChange {
        phase,
        description: description.to_owned(),
        state,
        operation,
    }
}

fn facts(machine: &Machine, node: &Node) -> NodeFacts {
    let result = match label(node, LABEL_UPDATE_RESULT) {
        Some(UPDATE_RESULT_SUCCESSFUL) => Some(UpdateResult::Successful),
        Some(UPDATE_RESULT_FAILED) => Some(UpdateResult::Failed),
        _ => None,
    };
    let condition = in_place_condition(node).and_then(|c| {
        let reason = Reason::parse(c.reason.as_deref()?)?;
        let since = c
            .last_transition_time
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        Some((reason, since))
    });
    let phase = match machine.phase() {
        Some(MachinePhase::InPlaceUpdating) => InPlacePhase::Updating,
        Some(MachinePhase::InPlaceUpdateSuccessful) => InPlacePhase::Successful,
        Some(MachinePhase::InPlaceUpdateFailed) => InPlacePhase::Failed,
        _ => InPlacePhase::Other,
    };
    NodeFacts {
        candidate: label(node, LABEL_CANDIDATE_FOR_UPDATE).is_some(),
        selected: label(node, LABEL_SELECTED_FOR_UPDATE).is_some(),
        result,
        condition,
        phase,
        phase_since: machine
            .status
            .as_ref()
            .and_then(|s| s.current_status.last_update_time.as_ref())
            .map(|t| t.0),
        halt: None,
    }
}

async fn run_step(
    step: Step,
    machine: &Machine,
    node: &Node,
    ctx: &Context,
) -> Result<Action, Error> {
    let name = machine.name_any();
    let node_name = node.name_any();
    let now = ctx.clock.now();
    let client = &ctx.client;
    match step {
        Step::Nothing => Ok(Action::idle(ctx)),
        Step::SetCondition(reason) => {
            let message = match reason {
                Reason::CandidateForUpdate => "node is a candidate for in-place update".to_owned(),
                Reason::SelectedForUpdate => "node is selected for in-place update".to_owned(),
                other => other.as_str().to_owned(),
            };
            nodeops::set_condition(ctx, node, Some((reason.as_str(), &message)), now).await?;
            ctx.event_machine(
                machine,
                Kind::Normal,
                reason.as_str(),
                &format!("node {node_name}: {message}"),
            )
            .await;
            Ok(Action::soon())
        }
        Step::Drain { force, deadline } => {
            let cordon = NodePatch::default().unschedulable(true);
            if nodeops::patch_node(ctx, node, cordon).await? {
                ctx.event_machine(
                    machine,
                    Kind::Normal,
                    "Cordoned",
                    &format!("node {node_name} cordoned for its in-place update"),
                )
                .await;
            }
            let retries = machine
                .spec
                .max_evict_retries
                .map(|r| r.max(1) as u32)
                .unwrap_or(ctx.config.default_max_evict_retries);
            let round = {
                let mut refusals = ctx.refusals.lock().await;
                let retries = Retries {
                    max: retries,
                    interval: ctx.config.eviction_retry_interval,
                    now,
                };
                let eviction = ctx
                    .eviction
                    .get_or_try_init(|| crate::drain::eviction_version(client))
                    .await?;
                drain_round(client, &node_name, force, retries, &mut refusals, eviction).await?
            };
            for pod in &round.evicted {
                ctx.event_machine(
                    machine,
                    Kind::Normal,
                    "Evicted",
                    &format!("evicted pod {pod} from node {node_name}"),
                )
                .await;
            }
            if !round.deleted.is_empty() {
                let why = match &round.forced {
                    Some(Forced::Failed(error)) => format!("failed ({error})"),
                    _ => format!("timed out after {}", deadline_text(machine, ctx)),
                };
                let message = format!(
                    "drain of node {node_name} {why}: force-deleted pods {}",
                    round.deleted.join(", ")
                );
                ctx.event_machine(machine, Kind::Warning, "ForcedDrain", &message)
                    .await;
            }
            for pod in &round.exhausted {
                let message = format!(
                    "eviction of pod {pod} from node {node_name} refused {retries} times (maxEvictRetries; a disruption budget blocks it): pod deleted"
                );
                ctx.event_machine(machine, Kind::Warning, "EvictionRetriesExhausted", &message)
                    .await;
            }
            if round.drained() {
                return ready_for_update(machine, node, ctx).await;
            }
            if force {
                return Ok(Action::soon());
            }
            let until_deadline = ctx.clock.until(deadline);
            Ok(Action::after(
                round
                    .look_again
                    .unwrap_or(ctx.config.eviction_retry_interval)
                    .min(until_deadline.max(Duration::from_millis(1))),
            ))
        }
        Step::ReadyForUpdate => ready_for_update(machine, node, ctx).await,
        Step::SetUpdating => {
            let change = phase(
                MachinePhase::InPlaceUpdating,
                &format!("machine {name} is undergoing an in-place update"),
                MachineState::Processing,
                MachineOperationType::InPlaceUpdate,
            );
            nodeops::update_machine_status(ctx, machine, Some(&change), None, now).await?;
            ctx.event_machine(
                machine,
                Kind::Normal,
                "InPlaceUpdating",
                &change.description,
            )
            .await;
            Ok(Action::soon())
        }
        Step::WaitForResult { deadline } => Ok(Action::at(ctx, deadline)),
        Step::RecordSuccess => {
            let change = phase(
                MachinePhase::InPlaceUpdateSuccessful,
                &format!("machine {name} updated in place"),
                MachineState::Successful,
                MachineOperationType::InPlaceUpdate,
            );
            nodeops::update_machine_status(ctx, machine, Some(&change), None, now).await?;
            nodeops::set_condition(
                ctx,
                node,
                Some((
                    Reason::UpdateSuccessful.as_str(),
                    "node in-place update successful",
                )),
                now,
            )
            .await?;
            ctx.event_machine(
                machine,
                Kind::Normal,
                "UpdateSuccessful",
                &format!("node {node_name} reported a successful in-place update"),
            )
            .await;
            Ok(Action::soon())
        }
        Step::RecordFailure => record_failure(machine, node, ctx).await,
        Step::TimedOut { after } => {
            let reason = format!(
                "in-place update timed out after {}: the node agent reported no result (machineInPlaceUpdateTimeout)",
                format_duration(after)
            );
            // Conditional on the Node as read: a result the agent wrote since is never
            // overwritten; the next pass records it.
            let Some(marked) = nodeops::mark_timed_out(ctx, node, &reason).await? else {
                return Ok(Action::soon());
            };
            ctx.event_machine(
                machine,
                Kind::Warning,
                "InPlaceUpdateTimedOut",
                &format!("node {node_name}: {reason}"),
            )
            .await;
            record_failure(machine, &marked, ctx).await
        }
        Step::ResetToCandidate => {
            let reset = NodePatch::default()
                .label(LABEL_SELECTED_FOR_UPDATE, None)
                .annotation(ANNOTATION_UPDATE_FAILED_REASON, None)
                .unschedulable(false);
            nodeops::patch_node(ctx, node, reset).await?;
            nodeops::set_condition(
                ctx,
                node,
                Some((
                    Reason::CandidateForUpdate.as_str(),
                    "node is a candidate for in-place update",
                )),
                now,
            )
            .await?;
            let change = phase(
                MachinePhase::Running,
                &format!("machine {name} is a candidate again"),
                MachineState::Successful,
                MachineOperationType::InPlaceUpdate,
            );
            nodeops::update_machine_status(ctx, machine, Some(&change), None, now).await?;
            ctx.event_machine(machine, Kind::Normal, "CandidateAgain", &format!("node {node_name}: failed mark or selection removed, node uncordoned and a candidate again")).await;
            Ok(Action::soon())
        }
        Step::Recover => {
            // Uncordon first, the condition last: a pass cut short in between finds the
            // condition (or the Machine's failed phase) and recovers again.
            let recover = NodePatch::default()
                .annotation(ANNOTATION_UPDATE_FAILED_REASON, None)
                .unschedulable(false);
            nodeops::patch_node(ctx, node, recover).await?;
            if machine.phase().is_some_and(MachinePhase::is_in_place) {
                let change = phase(
                    MachinePhase::Running,
                    &format!("machine {name}: failed mark removed"),
                    MachineState::Successful,
                    MachineOperationType::InPlaceUpdate,
                );
                nodeops::update_machine_status(ctx, machine, Some(&change), None, now).await?;
            }
            nodeops::set_condition(ctx, node, None, now).await?;
            ctx.event_machine(
                machine,
                Kind::Normal,
                "UpdateRecovered",
                &format!(
                    "node {node_name}: failed mark removed: reason and condition cleared, node uncordoned"
                ),
            )
            .await;
            Ok(Action::soon())
        }
        // Known as soon as the MachineDeployment pass gets as far as its selection.
        Step::Hold(None) => Ok(Action::after(Duration::from_secs(1))),
        Step::Hold(Some(why)) => {
            let message = format!(
                "node is selected for in-place update but not drained: {why}; it goes on once a person removes a failed mark"
            );
            let held = in_place_condition(node).and_then(|c| c.message.as_deref())
                == Some(message.as_str());
            if !held {
                nodeops::set_condition(
                    ctx,
                    node,
                    Some((Reason::CandidateForUpdate.as_str(), &message)),
                    now,
                )
                .await?;
                ctx.event_machine(
                    machine,
                    Kind::Warning,
                    "SelectionHeld",
                    &format!("node {node_name}: {message}"),
                )
                .await;
            }
            Ok(Action::idle(ctx))
        }
        Step::ClearCondition => {
            nodeops::set_condition(ctx, node, None, now).await?;
            if machine.phase().is_some_and(MachinePhase::is_in_place) {
                let change = phase(
                    MachinePhase::Running,
                    &format!("machine {name} is up to date"),
                    MachineState::Successful,
                    MachineOperationType::InPlaceUpdate,
                );
                nodeops::update_machine_status(ctx, machine, Some(&change), None, now).await?;
            }
            ctx.event_machine(
                machine,
                Kind::Normal,
                "InPlaceUpdateCleared",
                &format!("node {node_name}: in-place update condition cleared"),
            )
            .await;
            Ok(Action::soon())
        }
    }
}

fn deadline_text(machine: &Machine, ctx: &Context) -> String {
    let timeout = ctx
        .duration(
            machine.spec.drain_timeout.as_deref(),
            ctx.config.default_drain_timeout,
            machine,
        )
        .unwrap_or(ctx.config.default_drain_timeout);
    format_duration(timeout)
}

async fn ready_for_update(machine: &Machine, node: &Node, ctx: &Context) -> Result<Action, Error> {
    let name = machine.name_any();
    let node_name = node.name_any();
    let now = ctx.clock.now();
    let change = phase(
        MachinePhase::InPlaceUpdating,
        &format!("machine {name} is undergoing an in-place update"),
        MachineState::Processing,
        MachineOperationType::InPlaceUpdate,
    );
    nodeops::update_machine_status(ctx, machine, Some(&change), None, now).await?;
    let drained = nodeops::set_condition(
        ctx,
        node,
        Some((Reason::DrainSuccessful.as_str(), "node drained")),
        now,
    )
    .await?;
    ctx.event_machine(
        machine,
        Kind::Normal,
        "DrainSuccessful",
        &format!("node {node_name} drained"),
    )
    .await;
    nodeops::set_condition(
        ctx,
        &drained,
        Some((
            Reason::ReadyForUpdate.as_str(),
            "node is ready for in-place update",
        )),
        now,
    )
    .await?;
    ctx.event_machine(
        machine,
        Kind::Normal,
        "ReadyForUpdate",
        &format!("node {node_name} is ready for its in-place update"),
    )
    .await;
    Ok(Action::soon())
}

async fn record_failure(machine: &Machine, node: &Node, ctx: &Context) -> Result<Action, Error> {
    let name = machine.name_any();
    let node_name = node.name_any();
    let now = ctx.clock.now();
    let reason = node
        .annotations()
        .get(ANNOTATION_UPDATE_FAILED_REASON)
        .cloned()
        .unwrap_or_else(|| "no reason given".to_owned());
    // A failed node stays cordoned in the old MachineSet until a person removes the mark.
    nodeops::patch_node(ctx, node, NodePatch::default().unschedulable(true)).await?;
    let description = format!("machine {name} failed its in-place update: {reason}");
    let change = phase(
        MachinePhase::InPlaceUpdateFailed,
        &description,
        MachineState::Failed,
        MachineOperationType::InPlaceUpdate,
    );
    nodeops::update_machine_status(ctx, machine, Some(&change), None, now).await?;
    let message = format!("node in-place update failed: {reason}");
    nodeops::set_condition(
        ctx,
        node,
        Some((Reason::UpdateFailed.as_str(), &message)),
        now,
    )
    .await?;
    ctx.event_machine(
        machine,
        Kind::Warning,
        "UpdateFailed",
        &format!("node {node_name}: {message}"),
    )
    .await;
    Ok(Action::soon())
}
