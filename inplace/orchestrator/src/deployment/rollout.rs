//! Steps 2 to 6 of a pass: protection, counts, the new set's size, the transfer of updated
//! machines, and the termination of surplus old machines.

use std::collections::BTreeMap;

use inplace_api::crd::Machine;
use inplace_api::keys::{
    ANNOTATION_CHECKSUM_APPLIED_OSC, ANNOTATION_SCALE_DOWN_DISABLED,
    ANNOTATION_SCALE_DOWN_DISABLED_BY_MCM, ANNOTATION_UPDATE_FAILED_REASON,
    LABEL_CANDIDATE_FOR_UPDATE, LABEL_SELECTED_FOR_UPDATE, LABEL_UPDATE_RESULT, MachinePhase,
    SCALE_DOWN_DISABLED_VALUE, UPDATE_RESULT_FAILED, UPDATE_RESULT_SUCCESSFUL,
};
use kube::ResourceExt;
use serde_json::json;

use super::machinesets::{current_osc_checksum, fresh_total, scale_set, transfer};
use super::pass::{Pass, Progress};
use crate::error::{Error, kube};
use crate::events::Kind;
use crate::machineset::{LABEL_SCALE_UP_DISABLED, owned};
use crate::nodeops::{self, NodePatch, label};
use crate::write::Write;

/// Step 2: old sets get `scale-up-disabled`; every node of the deployment the autoscaler's
/// scale-down-disabled annotations, old nodes `candidate-for-update`.
pub(super) async fn protect(pass: &Pass<'_>, progress: &mut Progress) -> Result<(), Error> {
    let (md, ctx) = (pass.md, pass.ctx);
    for set in pass.old {
        if set
            .labels()
            .get(LABEL_SCALE_UP_DISABLED)
            .map(String::as_str)
            != Some("true")
        {
            let patch = json!({ "metadata": { "labels": { LABEL_SCALE_UP_DISABLED: "true" } } });
            ctx.write(&pass.sets_api, Write::MergePatch(&set.name_any(), patch))
                .await
                .map_err(kube(format!(
                    "label machineset {}/{} scale-up-disabled",
                    pass.namespace,
                    set.name_any()
                )))?;
        }
    }
    // One patch per node: the protection, and on old nodes the candidate label.
    let all = pass
        .new_machines
        .iter()
        .map(|m| (false, *m))
        .chain(pass.old_machines.iter().map(|(_, m)| (true, *m)));
    for (is_old, machine) in all {
        let Some(node) = pass.node_of(machine) else {
            continue;
        };
        let mut patch = NodePatch::default()
            .annotation(
                ANNOTATION_SCALE_DOWN_DISABLED,
                Some(SCALE_DOWN_DISABLED_VALUE),
            )
            .annotation(
                ANNOTATION_SCALE_DOWN_DISABLED_BY_MCM,
                Some(SCALE_DOWN_DISABLED_VALUE),
            );
        let candidate = is_old && label(node, LABEL_CANDIDATE_FOR_UPDATE).is_none();
        if candidate {
            patch = patch.label(LABEL_CANDIDATE_FOR_UPDATE, Some("true"));
        }
        progress.changed |= nodeops::patch_node(ctx, node, patch).await?;
        if candidate {
            ctx.event_deployment(
                md,
                Kind::Normal,
                "CandidateForUpdate",
                &format!("node {} labelled candidate for update", node.name_any()),
            )
            .await;
        }
    }
    Ok(())
}

/// Step 3: the new set grows by the machines that arrived with `update-result=successful`
/// (the label is then removed), new-set nodes whose update succeeded are cleared and
/// uncordoned, old sets shrink to the machines they still own. The old sets' replicas are
/// re-read when anything changed so far.
pub(super) async fn count(pass: &Pass<'_>, progress: &mut Progress) -> Result<(), Error> {
    let (md, ctx) = (pass.md, pass.ctx);
    let arrived: Vec<&Machine> = pass
        .new_machines
        .iter()
        .copied()
        .filter(|m| {
            m.labels().get(LABEL_UPDATE_RESULT).map(String::as_str)
                == Some(UPDATE_RESULT_SUCCESSFUL)
        })
        .collect();
    let new_machines = pass.new_machines.len() as i32;
    if new_machines > progress.new_replicas && !arrived.is_empty() {
        let grow = (arrived.len() as i32).min(new_machines - progress.new_replicas);
        progress.new_replicas =
            scale_set(&pass.sets_api, &pass.new.name_any(), |r| r + grow, md, ctx).await?;
        progress.changed = true;
    }
    for machine in &arrived {
        let patch = json!({ "metadata": { "labels": { LABEL_UPDATE_RESULT: null } } });
        ctx.write(
            &pass.machines_api,
            Write::MergePatch(&machine.name_any(), patch),
        )
        .await
        .map_err(kube(format!(
            "remove the update-result label of machine {}/{}",
            pass.namespace,
            machine.name_any()
        )))?;
    }
    for machine in &pass.new_machines {
        if let Some(node) = pass.node_of(machine)
            && label(node, LABEL_UPDATE_RESULT) == Some(UPDATE_RESULT_SUCCESSFUL)
        {
            let clear = NodePatch::default()
                .label(LABEL_CANDIDATE_FOR_UPDATE, None)
                .label(LABEL_SELECTED_FOR_UPDATE, None)
                .label(LABEL_UPDATE_RESULT, None)
                .annotation(ANNOTATION_UPDATE_FAILED_REASON, None)
                .unschedulable(false);
            nodeops::patch_node(ctx, node, clear).await?;
            ctx.event_deployment(
                md,
                Kind::Normal,
                "Uncordoned",
                &format!(
                    "node {} updated: labels cleared and uncordoned",
                    node.name_any()
                ),
            )
            .await;
            progress.changed = true;
        }
    }
    for set in pass.old {
        let count = owned(&pass.machines, &set.uid().unwrap_or_default()).len() as i32;
        if count < set.spec.replicas {
            scale_set(&pass.sets_api, &set.name_any(), |r| r.min(count), md, ctx).await?;
            progress.changed = true;
        }
    }
    if progress.changed {
        progress.old_total = fresh_total(&pass.sets_api, pass.old).await?;
    }
    Ok(())
}

/// Step 4: the new set is capped at `replicas`, and raised to fill `replicas − old machines`
/// (all of `replicas` once the old sets are empty).
pub(super) async fn size_new_set(pass: &Pass<'_>, progress: &mut Progress) -> Result<(), Error> {
    let desired = pass.resolved.replicas as i32;
    let to = if progress.new_replicas > desired
        || (progress.old_total == 0 && progress.new_replicas != desired)
    {
        desired
    } else if progress.old_total + progress.new_replicas < desired {
        desired - progress.old_total
    } else {
        return Ok(());
    };
    progress.new_replicas = scale_set(
        &pass.sets_api,
        &pass.new.name_any(),
        |_| to,
        pass.md,
        pass.ctx,
    )
    .await?;
    progress.changed = true;
    Ok(())
}

/// Step 5: every old Machine whose node reports success for the current configuration moves to
/// the new set, then one scale per set for all the machines it moved (a crash in between is
/// repaired by step 3 of the next pass, as after a single move). A success for an earlier
/// configuration moves nothing: the result label is removed so the node is updated again.
pub(super) async fn transfer_updated(
    pass: &Pass<'_>,
    progress: &mut Progress,
) -> Result<(), Error> {
    let (md, ctx, new) = (pass.md, pass.ctx, pass.new);
    let mut moved: BTreeMap<String, i32> = BTreeMap::new();
    let mut osc: Option<Option<String>> = None;
    for (set, machine) in &pass.old_machines {
        let Some(node) = pass.node_of(machine) else {
            continue;
        };
        if label(node, LABEL_UPDATE_RESULT) != Some(UPDATE_RESULT_SUCCESSFUL)
            || machine.phase() != Some(&MachinePhase::InPlaceUpdateSuccessful)
        {
            continue;
        }
        // The success is for the configuration the agent applied: only one equal to the
        // current OSC belongs to the new template (a forced update may have replaced it while
        // the node was updating).
        if osc.is_none() {
            osc = Some(current_osc_checksum(md, ctx).await?);
        }
        let applied = node.annotations().get(ANNOTATION_CHECKSUM_APPLIED_OSC);
        if let (Some(Some(current)), Some(applied)) = (&osc, applied)
            && applied != current
        {
            let again = NodePatch::default().label(LABEL_UPDATE_RESULT, None);
            if nodeops::patch_node_if_unchanged(ctx, node, &again)
                .await?
                .is_some()
            {
                let message = format!(
                    "node {} reported success for operating system config {} but the current one is {}: it is updated again before machine {} moves to machineset {}",
                    node.name_any(),
                    short(applied),
                    short(current),
                    machine.name_any(),
                    new.name_any()
                );
                ctx.event_deployment(md, Kind::Normal, "OutdatedUpdateResult", &message)
                    .await;
            }
            progress.changed = true;
            continue;
        }
        transfer(machine, new, pass.hash, &pass.machines_api, ctx).await?;
        *moved.entry(set.name_any()).or_default() += 1;
        let message = format!(
            "machine {} (node {}) updated in place and moved to machineset {}",
            machine.name_any(),
            node.name_any(),
            new.name_any()
        );
        ctx.event_deployment(md, Kind::Normal, "MachineMoved", &message)
            .await;
    }
    for (set, count) in &moved {
        scale_set(&pass.sets_api, set, |r| (r - count).max(0), md, ctx).await?;
        progress.new_replicas =
            scale_set(&pass.sets_api, &new.name_any(), |r| r + count, md, ctx).await?;
        progress.changed = true;
    }
    Ok(())
}

/// Step 6: once the new set holds `replicas` and no old node is in progress, the old sets go to
/// zero. Returns whether any set was scaled.
pub(super) async fn terminate_surplus(pass: &Pass<'_>, progress: &Progress) -> Result<bool, Error> {
    let in_progress = pass.old_machines.iter().any(|(_, m)| {
        pass.node_of(m).is_some_and(|n| {
            label(n, LABEL_SELECTED_FOR_UPDATE).is_some()
                && label(n, LABEL_UPDATE_RESULT) != Some(UPDATE_RESULT_FAILED)
        })
    });
    let desired = pass.resolved.replicas as i32;
    if progress.old_total <= 0 || progress.new_replicas < desired || in_progress {
        return Ok(false);
    }
    for set in pass.old.iter().filter(|s| s.spec.replicas > 0) {
        scale_set(&pass.sets_api, &set.name_any(), |_| 0, pass.md, pass.ctx).await?;
        pass.ctx
            .event_deployment(
                pass.md,
                Kind::Normal,
                "SurplusTerminated",
                &format!(
                    "machineset {} scaled to zero: the new machineset holds all replicas",
                    set.name_any()
                ),
            )
            .await;
    }
    Ok(true)
}

/// A checksum's first 12 characters, for messages.
fn short(checksum: &str) -> &str {
    checksum.get(..12).unwrap_or(checksum)
}
