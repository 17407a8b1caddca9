//! Step 8 of a pass, the completion (old sets deleted, our autoscaler annotations removed), and
//! the deployment's status: replica counts, failed machines and the halt condition, with Events
//! when a halt starts and ends.

use inplace_api::crd::{
    MachineDeployment, MachineDeploymentCondition, MachineDeploymentStatus, MachineSet,
    MachineSummary,
};
use inplace_api::keys::{
    ANNOTATION_SCALE_DOWN_DISABLED, ANNOTATION_SCALE_DOWN_DISABLED_BY_MCM, LABEL_UPDATE_RESULT,
    UPDATE_RESULT_FAILED,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};

use super::pass::Pass;
use super::selection::Selection;
use super::{CONDITION_HALTED, REASON_HALTED};
use crate::error::{Error, is_conflict, is_not_found, kube};
use crate::events::Kind;
use crate::nodeops::{self, NodePatch, label};

/// Step 8, once no old set has replicas or machines: old sets are deleted and our
/// scale-down-disabled annotations removed from the new set's nodes.
pub(super) async fn complete(pass: &Pass<'_>) -> Result<(), Error> {
    let (md, ctx, namespace) = (pass.md, pass.ctx, &pass.namespace);
    for set in pass.old {
        match pass
            .sets_api
            .delete(&set.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => {
                ctx.deleting::<MachineSet>(namespace, &set.name_any());
                ctx.event_deployment(
                    md,
                    Kind::Normal,
                    "RolloutComplete",
                    &format!("old machineset {} removed", set.name_any()),
                )
                .await;
            }
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                return Err(kube(format!(
                    "delete old machineset {namespace}/{}",
                    set.name_any()
                ))(e));
            }
        }
    }
    for machine in &pass.new_machines {
        if let Some(node) = pass.node_of(machine)
            && node
                .annotations()
                .contains_key(ANNOTATION_SCALE_DOWN_DISABLED_BY_MCM)
        {
            let release = NodePatch::default()
                .annotation(ANNOTATION_SCALE_DOWN_DISABLED, None)
                .annotation(ANNOTATION_SCALE_DOWN_DISABLED_BY_MCM, None);
            nodeops::patch_node(ctx, node, release).await?;
        }
    }
    Ok(())
}

/// Writes the deployment's status from what the pass found (unless it is unchanged), and the
/// Events `RolloutHalted`/`RolloutResumed` when the halt starts or ends.
pub(super) async fn write_status(pass: &Pass<'_>, selection: &Selection) -> Result<(), Error> {
    let (md, ctx, resolved) = (pass.md, pass.ctx, &pass.resolved);
    let Selection { members, plan } = selection;
    let failed_machines: Vec<MachineSummary> = pass
        .old_machines
        .iter()
        .filter(|(_, m)| {
            pass.node_of(m)
                .is_some_and(|n| label(n, LABEL_UPDATE_RESULT) == Some(UPDATE_RESULT_FAILED))
        })
        .map(|(_, m)| MachineSummary {
            name: m.name_any(),
            last_operation: m.status.clone().unwrap_or_default().last_operation,
            owner_ref: m
                .owner_references()
                .first()
                .map(|o| o.name.clone())
                .unwrap_or_default(),
            ..MachineSummary::default()
        })
        .collect();
    let updated = pass.new_machines.len() as i32;
    let ready = members.iter().filter(|m| m.ready).count() as i32;
    let now = ctx.clock.now();
    let previous = md.status.clone().unwrap_or_default();
    let was_halted = previous
        .conditions
        .iter()
        .any(|c| c.type_ == CONDITION_HALTED && c.status == "True");
    let mut conditions: Vec<MachineDeploymentCondition> = previous
        .conditions
        .iter()
        .filter(|c| c.type_ != CONDITION_HALTED)
        .cloned()
        .collect();
    let old_condition = previous
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_HALTED);
    let (status, reason, message) = if plan.halted {
        (
            "True",
            REASON_HALTED,
            format!(
                "{} failed node(s) reached maxUnavailable {}: no more nodes are selected until a person removes a failed mark (label {LABEL_UPDATE_RESULT})",
                plan.failed, resolved.max_unavailable
            ),
        )
    } else {
        (
            "False",
            "RolloutProceeding",
            format!(
                "{} failed node(s), maxUnavailable {}",
                plan.failed, resolved.max_unavailable
            ),
        )
    };
    let transition = old_condition.is_none_or(|c| c.status != status);
    conditions.push(MachineDeploymentCondition {
        type_: CONDITION_HALTED.to_owned(),
        status: status.to_owned(),
        last_update_time: old_condition
            .filter(|c| c.message == message)
            .and_then(|c| c.last_update_time.clone())
            .or(Some(Time(now))),
        last_transition_time: if transition {
            Some(Time(now))
        } else {
            old_condition.and_then(|c| c.last_transition_time.clone())
        },
        reason: reason.to_owned(),
        message: message.clone(),
    });
    let want = MachineDeploymentStatus {
        observed_generation: md.metadata.generation,
        replicas: members.len() as i32,
        updated_replicas: updated,
        ready_replicas: ready,
        available_replicas: plan.available as i32,
        unavailable_replicas: (resolved.replicas as i32 - plan.available as i32).max(0),
        conditions,
        failed_machines,
        ..previous.clone()
    };
    if want != previous {
        let namespace = md.namespace().unwrap_or_default();
        let api: Api<MachineDeployment> = Api::namespaced(ctx.client.clone(), &namespace);
        let mut updated_md = md.clone();
        updated_md.status = Some(want);
        match api
            .replace_status(&md.name_any(), &PostParams::default(), &updated_md)
            .await
        {
            Ok(_) => {}
            // Someone changed the deployment meanwhile; the next pass writes status (and Events) anew.
            Err(e) if is_conflict(&e) => return Ok(()),
            Err(e) => {
                return Err(kube(format!(
                    "update the status of machinedeployment {namespace}/{}",
                    md.name_any()
                ))(e));
            }
        }
    }
    if plan.halted && !was_halted {
        ctx.event_deployment(md, Kind::Warning, "RolloutHalted", &message)
            .await;
    } else if !plan.halted && was_halted {
        ctx.event_deployment(
            md,
            Kind::Normal,
            "RolloutResumed",
            &format!("rollout resumed: {message}"),
        )
        .await;
    }
    Ok(())
}
