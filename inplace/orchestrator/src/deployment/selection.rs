//! Step 7 of a pass: which nodes to select for update now (`plan`), the halt it reports, and
//! the `selected-for-update` labels.

use inplace_api::keys::{
    LABEL_CANDIDATE_FOR_UPDATE, LABEL_SELECTED_FOR_UPDATE, LABEL_UPDATE_RESULT,
    SELECTED_FOR_UPDATE_VALUE, UPDATE_RESULT_FAILED, UPDATE_RESULT_SUCCESSFUL,
};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::pass::{Pass, Progress};
use crate::error::Error;
use crate::events::Kind;
use crate::leases::LeaseView;
use crate::nodeops::{self, NodePatch, is_ready, label};
use crate::plan::{self, Limits, Member, UpdateResult};

/// The deployment's members as step 7 saw them, and what it decided.
#[derive(Debug)]
pub(super) struct Selection {
    pub(super) members: Vec<Member>,
    pub(super) plan: plan::Plan,
}

/// Step 7: Auto labels `selected-for-update` within `maxUnavailable`; Manual waits for a person.
/// The halt is recorded for the MachineSet controller (`Context::set_halt`).
pub(super) async fn select(pass: &Pass<'_>, progress: &Progress) -> Result<Selection, Error> {
    let (md, ctx, resolved) = (pass.md, pass.ctx, &pass.resolved);
    let members: Vec<Member> = pass
        .new_machines
        .iter()
        .map(|m| (false, *m))
        .chain(pass.old_machines.iter().map(|(_, m)| (true, *m)))
        .filter(|(_, m)| m.metadata.deletion_timestamp.is_none())
        .map(|(is_old, m)| member(is_old, pass.node_of(m), pass.leases))
        .collect();
    let limits = Limits {
        replicas: resolved.replicas,
        max_unavailable: resolved.max_unavailable,
        new_set_replicas: progress.new_replicas.max(0) as u32,
        orchestration: resolved.orchestration,
    };
    let plan = plan::plan(&members, limits);
    let halt = plan.halted.then(|| {
        format!(
            "the rollout is halted: {} failed node(s) reached maxUnavailable {}",
            plan.failed, resolved.max_unavailable
        )
    });
    ctx.set_halt(
        std::iter::once(pass.new)
            .chain(pass.old.iter())
            .map(|s| s.uid().unwrap_or_default()),
        halt.as_deref(),
    );
    for node_name in &plan.select {
        if let Some(node) = pass.nodes.get(node_name) {
            nodeops::patch_node(
                ctx,
                node,
                NodePatch::default()
                    .label(LABEL_SELECTED_FOR_UPDATE, Some(SELECTED_FOR_UPDATE_VALUE)),
            )
            .await?;
            let message = format!(
                "node {node_name} selected for update ({} in progress, {} failed, {} available of {} replicas, maxUnavailable {})",
                plan.in_progress,
                plan.failed,
                plan.available,
                resolved.replicas,
                resolved.max_unavailable
            );
            ctx.event_deployment(md, Kind::Normal, "SelectedForUpdate", &message)
                .await;
        }
    }
    Ok(Selection { members, plan })
}

/// What the plan needs to know of one machine and its node.
fn member(old: bool, node: Option<&Node>, leases: &LeaseView) -> Member {
    let result = node.and_then(|n| match label(n, LABEL_UPDATE_RESULT) {
        Some(UPDATE_RESULT_SUCCESSFUL) => Some(UpdateResult::Successful),
        Some(UPDATE_RESULT_FAILED) => Some(UpdateResult::Failed),
        _ => None,
    });
    Member {
        node: node.map(ResourceExt::name_any),
        old,
        // Ready, and not contradicted by its Lease: a condition written before the kubelet
        // died stays True while nobody marks it (see `leases`).
        ready: node.is_some_and(|n| is_ready(n) && !leases.expired(&n.name_any())),
        candidate: node.is_some_and(|n| label(n, LABEL_CANDIDATE_FOR_UPDATE).is_some()),
        // A person's selected-for-update label on a node that is no candidate is ignored: it
        // neither starts an update nor counts the node unavailable.
        selected: node.is_some_and(|n| {
            label(n, LABEL_SELECTED_FOR_UPDATE).is_some()
                && label(n, LABEL_CANDIDATE_FOR_UPDATE).is_some()
        }),
        result,
    }
}
