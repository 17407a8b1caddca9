//! MachineDeployment controller: the in-place rollout (MCM's `rolloutInPlace`).
//!
//! One pass over a MachineDeployment with `strategy.type: InPlaceUpdate`:
//!
//! 1. **New MachineSet.** The template's hash (SHA-256 of its JSON, 10 hex digits, label
//!    `machine-template-hash`) names the new set `<deployment>-<hash>`. It is created with all
//!    replicas when no old set exists, else with `maxSurge` replicas (Auto) or none (Manual).
//! 2. **Protection.** While old sets have machines: old sets get `scale-up-disabled`; every node of
//!    the deployment gets the cluster-autoscaler scale-down-disabled annotations (with MCM's
//!    `-by-mcm` marker, so only ours are removed later); old nodes get `candidate-for-update`.
//! 3. **Counts** (MCM's `syncMachineSets`): a new set with more machines than replicas grows by the
//!    machines that arrived with the Machine label `update-result=successful`, which is then removed;
//!    old sets shrink to the machines they still own. New-set nodes whose update succeeded are
//!    cleared: labels and reason annotation removed, uncordoned (the Machine controller then drops
//!    the condition and sets the Machine `Running`).
//! 4. **New-set size**: capped at `replicas`; raised to fill `replicas − old machines`.
//! 5. **Transfer**: an old Machine whose node says `update-result=successful` and whose phase is
//!    `InPlaceUpdateSuccessful` gets the new set as controller owner and the new template-hash
//!    label (the GEP's "owner reference update" option, which MCM implements), then old −1, new +1.
//!    First the configuration the agent applied (node annotation `checksum/cloud-config-data`)
//!    is compared with the current OSC (the `checksum/data-script` of the Secret the template
//!    names): a success for an earlier configuration — a forced update replaced it while the
//!    node was updating — moves nothing; the result label is removed (conditional on the Node
//!    as read, so a newer result is never lost), and the node, still selected, is walked through
//!    drain and `ReadyForUpdate` again to take the current configuration.
//! 6. **Surplus**: once the new set holds `replicas` (surge machines plus transferred ones) and no
//!    old node is in progress, old sets go to zero: the `maxSurge` machines the surge replaced are
//!    terminated.
//! 7. **Selection** (`plan`): Auto labels `selected-for-update` within `maxUnavailable`;
//!    Manual waits for a person. The halt is reported in status condition
//!    [`CONDITION_HALTED`] and with Events when it starts and ends.
//! 8. **Completion**: old sets without machines are deleted, our autoscaler annotations removed.
//!
//! Every write is idempotent and every decision is re-derived from what the API says (MachineSets,
//! Machines and Nodes through the watch caches, never older than this orchestrator's own last
//! write, see `cache`), so a crash between any two writes is repaired by the next pass.

use std::collections::BTreeMap;
use std::sync::Arc;

use inplace_api::crd::MachineDeploymentStrategyType;
use inplace_api::crd::{
    Machine, MachineDeployment, MachineDeploymentCondition, MachineDeploymentStatus, MachineSet,
    MachineSetSpec, MachineSummary, MachineTemplateSpec,
};
use inplace_api::keys::{
    ANNOTATION_CHECKSUM_APPLIED_OSC, ANNOTATION_CHECKSUM_DOWNLOADED_OSC,
    ANNOTATION_SCALE_DOWN_DISABLED, ANNOTATION_SCALE_DOWN_DISABLED_BY_MCM,
    ANNOTATION_UPDATE_FAILED_REASON, LABEL_CANDIDATE_FOR_UPDATE, LABEL_SELECTED_FOR_UPDATE,
    LABEL_UPDATE_RESULT, MACHINE_TEMPLATE_HASH_LABEL, MachinePhase, SCALE_DOWN_DISABLED_VALUE,
    SELECTED_FOR_UPDATE_VALUE, UPDATE_RESULT_FAILED, UPDATE_RESULT_SUCCESSFUL,
};
use inplace_api::strategy::{OrchestrationType, scaled_int_or_percent};
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::error::{Error, is_conflict, is_not_found, kube};
use crate::events::Kind;
use crate::leases::LeaseView;
use crate::machineset::{LABEL_SCALE_UP_DISABLED, owned};
use crate::nodeops::{self, ATTEMPTS, NodePatch, is_ready, label};
use crate::plan::{self, Limits, Member, Orchestration, UpdateResult};
use crate::workerpool::ANNOTATION_OSC_SECRET;
use crate::write::Write;
use crate::{Action, Context, settings};

/// MachineDeployment status condition: `True` while failed nodes halt the rollout.
pub const CONDITION_HALTED: &str = "InPlaceUpdateHalted";
/// Reason of [`CONDITION_HALTED`] while halted.
pub const REASON_HALTED: &str = "FailedNodesReachedMaxUnavailable";

/// The template hash that names the MachineSet for `template`. The MCM settings (timeouts,
/// `maxEvictRetries`) are left out, as MCM does: changing them starts no rollout (`settings`).
pub fn template_hash(template: &MachineTemplateSpec) -> String {
    let mut clean = template.clone();
    clean.metadata.labels.remove(MACHINE_TEMPLATE_HASH_LABEL);
    clean.spec = settings::without(&clean.spec);
    let bytes = serde_json::to_vec(&clean).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    hex::encode(digest)[..10].to_owned()
}

/// What the deployment's strategy says, resolved against its replicas.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resolved {
    pub(crate) replicas: u32,
    pub(crate) max_surge: u32,
    pub(crate) max_unavailable: u32,
    pub(crate) orchestration: Orchestration,
}

pub(crate) fn resolve(md: &MachineDeployment) -> Option<Resolved> {
    let strategy = &md.spec.strategy;
    if strategy.type_.as_ref() != Some(&MachineDeploymentStrategyType::InPlaceUpdate) {
        return None;
    }
    let in_place = strategy.in_place_update.clone().unwrap_or_default();
    let replicas = md.spec.replicas.max(0);
    let orchestration = match in_place.orchestration_type {
        Some(OrchestrationType::Manual) => Orchestration::Manual,
        _ => Orchestration::Auto,
    };
    let value = |v: &Option<IntOrString>, up: bool, default: i32| {
        v.as_ref()
            .and_then(|v| scaled_int_or_percent(v, replicas, up))
            .unwrap_or(default)
            .max(0) as u32
    };
    let max_surge = if orchestration == Orchestration::Manual {
        0
    } else {
        value(&in_place.max_surge, true, 0)
    };
    let mut max_unavailable = value(&in_place.max_unavailable, false, 1).min(replicas as u32);
    if max_unavailable == 0 && max_surge == 0 {
        max_unavailable = 1.min(replicas as u32);
    }
    Some(Resolved {
        replicas: replicas as u32,
        max_surge,
        max_unavailable,
        orchestration,
    })
}

pub(crate) async fn reconcile(md: &MachineDeployment, ctx: &Context) -> Result<Action, Error> {
    if md.metadata.deletion_timestamp.is_some() {
        return Ok(Action::idle(ctx));
    }
    let Some(resolved) = resolve(md) else {
        // Rolling updates are out of scope (ARCHITECTURE.md): leave such deployments alone.
        return Ok(Action::idle(ctx));
    };
    let namespace = md.namespace().unwrap_or_default();
    let name = md.name_any();
    let uid = md.uid().unwrap_or_default();
    let client = &ctx.client;
    let sets_api: Api<MachineSet> = Api::namespaced(client.clone(), &namespace);
    let sets = ctx
        .read(&sets_api)
        .await
        .map_err(kube(format!("list machinesets of {namespace}/{name}")))?;
    let sets: Vec<MachineSet> = sets
        .iter()
        .map(|s| MachineSet::clone(s))
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .filter(|s| {
            s.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .collect();
    let hash = template_hash(&md.spec.template);
    let (new, old): (Vec<MachineSet>, Vec<MachineSet>) = sets
        .into_iter()
        .partition(|s| s.labels().get(MACHINE_TEMPLATE_HASH_LABEL) == Some(&hash));
    let Some(new) = new.into_iter().next() else {
        let old_total: i32 = old.iter().map(|s| s.spec.replicas).sum();
        let replicas = if old_total == 0 {
            resolved.replicas
        } else if resolved.orchestration == Orchestration::Manual {
            0
        } else {
            resolved.max_surge.min(resolved.replicas)
        };
        create_set(md, &hash, replicas as i32, ctx).await?;
        return Ok(Action::soon());
    };

    // MCM settings follow the deployment into every set's template.
    let mut copied = false;
    for set in std::iter::once(&new).chain(old.iter()) {
        if !settings::same(&set.spec.template.spec, &md.spec.template.spec) {
            copy_settings(&sets_api, &set.name_any(), md, ctx).await?;
            copied = true;
        }
    }
    if copied {
        return Ok(Action::soon());
    }

    let machines_api: Api<Machine> = Api::namespaced(client.clone(), &namespace);
    let machines = ctx
        .read(&machines_api)
        .await
        .map_err(kube(format!("list machines of {namespace}/{name}")))?;
    let machines: Vec<&Machine> = machines.iter().map(|m| &**m).collect();
    let nodes_api: Api<Node> = Api::all(client.clone());
    let nodes: BTreeMap<String, Arc<Node>> = ctx
        .read(&nodes_api)
        .await
        .map_err(kube("list nodes"))?
        .into_iter()
        .map(|n| (n.name_any(), n))
        .collect();
    let node_of = |m: &Machine| m.node_name().and_then(|n| nodes.get(n)).map(|n| &**n);
    let leases = ctx
        .leases
        .view(
            &ctx.client,
            ctx.clock.now(),
            ctx.config.node_monitor_grace_period,
        )
        .await
        .map_err(kube("list node leases"))?;
    let new_uid = new.uid().unwrap_or_default();
    let new_machines: Vec<&Machine> = owned(&machines, &new_uid);
    let old_machines: Vec<(&MachineSet, &Machine)> = old
        .iter()
        .flat_map(|s| {
            owned(&machines, &s.uid().unwrap_or_default())
                .into_iter()
                .map(move |m| (s, m))
        })
        .collect();
    let old_total: i32 = old.iter().map(|s| s.spec.replicas).sum();
    let rolling = old_total > 0 || !old_machines.is_empty();
    let mut changed = false;

    // 2. Protection.
    if rolling {
        for set in &old {
            if set
                .labels()
                .get(LABEL_SCALE_UP_DISABLED)
                .map(String::as_str)
                != Some("true")
            {
                let patch =
                    json!({ "metadata": { "labels": { LABEL_SCALE_UP_DISABLED: "true" } } });
                ctx.write(&sets_api, Write::MergePatch(&set.name_any(), patch))
                    .await
                    .map_err(kube(format!(
                        "label machineset {namespace}/{} scale-up-disabled",
                        set.name_any()
                    )))?;
            }
        }
        // One patch per node: the protection, and on old nodes the candidate label.
        let all = new_machines
            .iter()
            .map(|m| (false, *m))
            .chain(old_machines.iter().map(|(_, m)| (true, *m)));
        for (is_old, machine) in all {
            let Some(node) = node_of(machine) else {
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
            changed |= nodeops::patch_node(ctx, node, patch).await?;
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
    }

    // 3. Counts and clean-up of moved machines.
    let arrived: Vec<&Machine> = new_machines
        .iter()
        .copied()
        .filter(|m| {
            m.labels().get(LABEL_UPDATE_RESULT).map(String::as_str)
                == Some(UPDATE_RESULT_SUCCESSFUL)
        })
        .collect();
    let mut new_replicas = new.spec.replicas;
    if new_machines.len() as i32 > new_replicas && !arrived.is_empty() {
        let grow = (arrived.len() as i32).min(new_machines.len() as i32 - new_replicas);
        new_replicas = scale_set(&sets_api, &new.name_any(), |r| r + grow, md, ctx).await?;
        changed = true;
    }
    for machine in &arrived {
        let patch = json!({ "metadata": { "labels": { LABEL_UPDATE_RESULT: null } } });
        ctx.write(&machines_api, Write::MergePatch(&machine.name_any(), patch))
            .await
            .map_err(kube(format!(
                "remove the update-result label of machine {namespace}/{}",
                machine.name_any()
            )))?;
    }
    for machine in &new_machines {
        if let Some(node) = node_of(machine)
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
            changed = true;
        }
    }
    for set in &old {
        let count = owned(&machines, &set.uid().unwrap_or_default()).len() as i32;
        if count < set.spec.replicas {
            scale_set(&sets_api, &set.name_any(), |r| r.min(count), md, ctx).await?;
            changed = true;
        }
    }
    let old_total: i32 = if changed {
        fresh_total(&sets_api, &old).await?
    } else {
        old_total
    };

    // 4. New-set size.
    let desired = resolved.replicas as i32;
    if new_replicas > desired {
        new_replicas = scale_set(&sets_api, &new.name_any(), |_| desired, md, ctx).await?;
        changed = true;
    } else if old_total == 0 && new_replicas != desired {
        new_replicas = scale_set(&sets_api, &new.name_any(), |_| desired, md, ctx).await?;
        changed = true;
    } else if old_total + new_replicas < desired {
        new_replicas =
            scale_set(&sets_api, &new.name_any(), |_| desired - old_total, md, ctx).await?;
        changed = true;
    }

    // 5. Transfer, then one scale per set for all the machines it moved (a crash in between is
    //    repaired by step 3 of the next pass, as after a single move).
    let mut moved: BTreeMap<String, i32> = BTreeMap::new();
    let mut osc: Option<Option<String>> = None;
    for (set, machine) in &old_machines {
        let Some(node) = node_of(machine) else {
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
            changed = true;
            continue;
        }
        transfer(machine, &new, &hash, &machines_api, ctx).await?;
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
        scale_set(&sets_api, set, |r| (r - count).max(0), md, ctx).await?;
        new_replicas = scale_set(&sets_api, &new.name_any(), |r| r + count, md, ctx).await?;
        changed = true;
    }
    if changed {
        return Ok(Action::soon());
    }

    // 6. Surplus old machines once the new set is full.
    let in_progress = old_machines.iter().any(|(_, m)| {
        node_of(m).is_some_and(|n| {
            label(n, LABEL_SELECTED_FOR_UPDATE).is_some()
                && label(n, LABEL_UPDATE_RESULT) != Some(UPDATE_RESULT_FAILED)
        })
    });
    if old_total > 0 && new_replicas >= desired && !in_progress {
        for set in old.iter().filter(|s| s.spec.replicas > 0) {
            scale_set(&sets_api, &set.name_any(), |_| 0, md, ctx).await?;
            ctx.event_deployment(
                md,
                Kind::Normal,
                "SurplusTerminated",
                &format!(
                    "machineset {} scaled to zero: the new machineset holds all replicas",
                    set.name_any()
                ),
            )
            .await;
        }
        return Ok(Action::soon());
    }

    // 7. Selection.
    let members: Vec<Member> = new_machines
        .iter()
        .map(|m| (false, *m))
        .chain(old_machines.iter().map(|(_, m)| (true, *m)))
        .filter(|(_, m)| m.metadata.deletion_timestamp.is_none())
        .map(|(is_old, m)| member(is_old, node_of(m), &leases))
        .collect();
    let limits = Limits {
        replicas: resolved.replicas,
        max_unavailable: resolved.max_unavailable,
        new_set_replicas: new_replicas.max(0) as u32,
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
        std::iter::once(&new)
            .chain(old.iter())
            .map(|s| s.uid().unwrap_or_default()),
        halt.as_deref(),
    );
    for node_name in &plan.select {
        if let Some(node) = nodes.get(node_name) {
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

    // 8. Completion.
    if !rolling {
        for set in &old {
            match sets_api
                .delete(&set.name_any(), &DeleteParams::default())
                .await
            {
                Ok(_) => {
                    ctx.deleting::<MachineSet>(&namespace, &set.name_any());
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
        for machine in &new_machines {
            if let Some(node) = node_of(machine)
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
    }

    let failed: Vec<MachineSummary> = old_machines
        .iter()
        .filter(|(_, m)| {
            node_of(m).is_some_and(|n| label(n, LABEL_UPDATE_RESULT) == Some(UPDATE_RESULT_FAILED))
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
    let ready = members.iter().filter(|m| m.ready).count() as i32;
    write_status(
        md,
        &plan,
        &members,
        new_machines.len() as i32,
        ready,
        failed,
        &resolved,
        ctx,
    )
    .await?;
    Ok(if plan.select.is_empty() {
        Action::idle(ctx)
    } else {
        Action::soon()
    })
}

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

/// The checksum of the OSC the deployment's nodes should run: the annotation
/// `checksum/data-script` of the Secret its template names in [`ANNOTATION_OSC_SECRET`]
/// (`<namespace>/<name>`, set by the WorkerPool controller). `None` when the template names no
/// Secret (a MachineDeployment not rendered from a pool) or the Secret has no checksum.
async fn current_osc_checksum(
    md: &MachineDeployment,
    ctx: &Context,
) -> Result<Option<String>, Error> {
    let Some((namespace, name)) = md
        .spec
        .template
        .metadata
        .annotations
        .get(ANNOTATION_OSC_SECRET)
        .and_then(|s| s.split_once('/'))
    else {
        return Ok(None);
    };
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let secret = api
        .get_opt(name)
        .await
        .map_err(kube(format!("read the OSC secret {namespace}/{name}")))?;
    Ok(secret.and_then(|s| {
        s.metadata
            .annotations
            .and_then(|mut a| a.remove(ANNOTATION_CHECKSUM_DOWNLOADED_OSC))
    }))
}

/// A checksum's first 12 characters, for messages.
fn short(checksum: &str) -> &str {
    checksum.get(..12).unwrap_or(checksum)
}

async fn fresh_total(api: &Api<MachineSet>, old: &[MachineSet]) -> Result<i32, Error> {
    let mut total = 0;
    for set in old {
        match api.get(&set.name_any()).await {
            Ok(s) => total += s.spec.replicas,
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(kube(format!("read machineset {}", set.name_any()))(e)),
        }
    }
    Ok(total)
}

async fn create_set(
    md: &MachineDeployment,
    hash: &str,
    replicas: i32,
    ctx: &Context,
) -> Result<(), Error> {
    let namespace = md.namespace().unwrap_or_default();
    let set_name = format!("{}-{hash}", md.name_any());
    let mut template = md.spec.template.clone();
    template
        .metadata
        .labels
        .insert(MACHINE_TEMPLATE_HASH_LABEL.to_owned(), hash.to_owned());
    let mut match_labels = md
        .spec
        .selector
        .as_ref()
        .and_then(|s| s.match_labels.clone())
        .unwrap_or_default();
    match_labels.insert(MACHINE_TEMPLATE_HASH_LABEL.to_owned(), hash.to_owned());
    let owner = OwnerReference {
        api_version: MachineDeployment::api_version(&()).into_owned(),
        kind: MachineDeployment::kind(&()).into_owned(),
        name: md.name_any(),
        uid: md.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let spec = MachineSetSpec {
        replicas,
        selector: Some(LabelSelector {
            match_labels: Some(match_labels),
            ..LabelSelector::default()
        }),
        machine_class: template.spec.class.clone(),
        template: template.clone(),
        min_ready_seconds: md.spec.min_ready_seconds,
    };
    let mut set = MachineSet::new(&set_name, spec);
    set.metadata = ObjectMeta {
        name: Some(set_name.clone()),
        namespace: Some(namespace.clone()),
        labels: Some(template.metadata.labels.clone()),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    };
    let api: Api<MachineSet> = Api::namespaced(ctx.client.clone(), &namespace);
    match ctx.write(&api, Write::Create(&set)).await {
        Ok(_) => {
            ctx.event_deployment(
                md,
                Kind::Normal,
                "MachineSetCreated",
                &format!(
                    "created machineset {set_name} with {replicas} replicas for the new template"
                ),
            )
            .await;
            Ok(())
        }
        Err(e) if is_conflict(&e) => Ok(()),
        Err(e) => Err(kube(format!("create machineset {namespace}/{set_name}"))(e)),
    }
}

/// Copies the deployment's MCM settings into a MachineSet's template, re-reading on conflicts.
async fn copy_settings(
    api: &Api<MachineSet>,
    name: &str,
    md: &MachineDeployment,
    ctx: &Context,
) -> Result<(), Error> {
    for _ in 0..ATTEMPTS {
        let mut set = match api.get(name).await {
            Ok(s) => s,
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(kube(format!("read machineset {name}"))(e)),
        };
        settings::copy(&md.spec.template.spec, &mut set.spec.template.spec);
        match ctx.write(api, Write::Replace(name, &set)).await {
            Ok(_) => return Ok(()),
            Err(e) if is_conflict(&e) => continue,
            Err(e) => {
                return Err(kube(format!(
                    "copy the machine settings into machineset {name}"
                ))(e));
            }
        }
    }
    Err(Error::Contended {
        action: format!("copy the machine settings into machineset {name}"),
    })
}

/// Sets a MachineSet's replicas to `f(current)`, re-reading on conflicts; returns the new value.
async fn scale_set(
    api: &Api<MachineSet>,
    name: &str,
    f: impl Fn(i32) -> i32,
    md: &MachineDeployment,
    ctx: &Context,
) -> Result<i32, Error> {
    for _ in 0..ATTEMPTS {
        let mut set = match api.get(name).await {
            Ok(s) => s,
            Err(e) if is_not_found(&e) => return Ok(0),
            Err(e) => return Err(kube(format!("read machineset {name}"))(e)),
        };
        let from = set.spec.replicas;
        let to = f(from).max(0);
        if to == from {
            return Ok(to);
        }
        set.spec.replicas = to;
        match ctx.write(api, Write::Replace(name, &set)).await {
            Ok(_) => {
                ctx.event_deployment(
                    md,
                    Kind::Normal,
                    "ScalingMachineSet",
                    &format!("scaled machineset {name} from {from} to {to}"),
                )
                .await;
                return Ok(to);
            }
            Err(e) if is_conflict(&e) => continue,
            Err(e) => return Err(kube(format!("scale machineset {name} to {to}"))(e)),
        }
    }
    Err(Error::Contended {
        action: format!("scale machineset {name}"),
    })
}

/// Moves `machine` to the `new` set: controller owner and template-hash label, plus the Machine
/// label `update-result=successful` until the new set's replicas count it.
async fn transfer(
    machine: &Machine,
    new: &MachineSet,
    hash: &str,
    api: &Api<Machine>,
    ctx: &Context,
) -> Result<(), Error> {
    let owner = json!([{
        "apiVersion": MachineSet::api_version(&()),
        "kind": MachineSet::kind(&()),
        "name": new.name_any(),
        "uid": new.uid().unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    let mut labels = serde_json::Map::new();
    for (k, v) in &new.spec.template.metadata.labels {
        labels.insert(k.clone(), json!(v));
    }
    labels.insert(MACHINE_TEMPLATE_HASH_LABEL.to_owned(), json!(hash));
    labels.insert(
        LABEL_UPDATE_RESULT.to_owned(),
        json!(UPDATE_RESULT_SUCCESSFUL),
    );
    let patch = json!({ "metadata": { "ownerReferences": owner, "labels": labels } });
    ctx.write(api, Write::MergePatch(&machine.name_any(), patch))
        .await
        .map_err(kube(format!(
            "move machine {} to machineset {}",
            machine.name_any(),
            new.name_any()
        )))?;
    Ok(())
}

#[expect(
    clippy::too_many_arguments,
    reason = "one status write from one pass's findings"
)]
async fn write_status(
    md: &MachineDeployment,
    plan: &plan::Plan,
    members: &[Member],
    updated: i32,
    ready: i32,
    failed_machines: Vec<MachineSummary>,
    resolved: &Resolved,
    ctx: &Context,
) -> Result<(), Error> {
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
