//! MachineSet controller: creates and deletes Machine objects to match `spec.replicas`, and keeps
//! the set's status counts.
//!
//! 1. The set's Machines are those whose controller ownerReference is the set (the in-place
//!    transfer rewrites it).
//! 2. Fewer non-terminating Machines than replicas → create Machines named `<set>-<n>` (lowest free
//!    `n`, so names are reproducible), unless the set carries the MCM label
//!    `node.machine.sapcloud.io/scale-up-disabled` (old sets during an in-place rollout).
//! 3. More Machines *without* the Machine label `update-result=successful` than replicas → delete
//!    the surplus, least useful first: unbound, then Failed/Unknown, then Running, then those in
//!    an in-place update. Machines carrying `update-result=successful` were just moved here and
//!    are not yet counted in the replicas (MCM's rule).
//! 4. Machines whose MCM settings (timeouts, `maxEvictRetries`) differ from the set's template
//!    get the template's (`settings`).
//! 5. A Machine in phase `Failed` (a creation or health timeout, `health`) is deleted, and
//!    step 2 creates its replacement.
//! 6. Deleting a Machine also deletes its Node object; the machine provider powers the machine off
//!    when its Machine disappears.

use std::collections::BTreeSet;

use inplace_api::crd::{Machine, MachineSet, MachineSetStatus};
use inplace_api::keys::{LABEL_UPDATE_RESULT, MachinePhase, UPDATE_RESULT_SUCCESSFUL};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::DeleteParams;
use kube::{Api, Resource, ResourceExt};

use crate::error::{Error, is_conflict, is_not_found, kube};
use crate::events::Kind;
use crate::write::Write;
use crate::{Action, Context, settings};

/// MCM's label that stops a MachineSet from creating machines.
pub const LABEL_SCALE_UP_DISABLED: &str = "node.machine.sapcloud.io/scale-up-disabled";

/// Machines whose controller is `owner_uid`.
pub(crate) fn owned<'a>(machines: &[&'a Machine], owner_uid: &str) -> Vec<&'a Machine> {
    machines
        .iter()
        .copied()
        .filter(|m| {
            m.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == owner_uid)
        })
        .collect()
}

pub(crate) async fn reconcile(set: &MachineSet, ctx: &Context) -> Result<Action, Error> {
    if set.metadata.deletion_timestamp.is_some() {
        return Ok(Action::idle(ctx));
    }
    let namespace = set.namespace().unwrap_or_default();
    let name = set.name_any();
    let uid = set.uid().unwrap_or_default();
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &namespace);
    let all = ctx.read(&api).await.map_err(kube(format!(
        "list machines of machineset {namespace}/{name}"
    )))?;
    let all: Vec<&Machine> = all.iter().map(|m| &**m).collect();
    let machines = owned(&all, &uid);
    let mut active: Vec<&Machine> = machines
        .iter()
        .copied()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .collect();
    let mut changed = false;
    // A Machine a health timeout failed is replaced (MCM's MachineSet does the same; `health`).
    let (failed, healthy): (Vec<&Machine>, Vec<&Machine>) = active
        .into_iter()
        .partition(|m| m.phase() == Some(&MachinePhase::Failed));
    active = healthy;
    for machine in failed {
        delete_machine(machine, ctx).await?;
        let why = machine
            .status
            .as_ref()
            .map(|s| s.last_operation.description.as_str())
            .unwrap_or_default();
        ctx.event_set(
            set,
            Kind::Warning,
            "MachineDeleted",
            &format!("deleted failed machine {}: {why}", machine.name_any()),
        )
        .await;
        changed = true;
    }
    let replicas = set.spec.replicas.max(0) as usize;
    let scale_up_disabled = set
        .labels()
        .get(LABEL_SCALE_UP_DISABLED)
        .is_some_and(|v| v == "true");
    if active.len() < replicas && !scale_up_disabled {
        let mut taken: BTreeSet<String> = all.iter().map(|m| m.name_any()).collect();
        for _ in active.len()..replicas {
            let machine_name = (0..)
                .map(|i| format!("{name}-{i}"))
                .find(|n| !taken.contains(n))
                .unwrap_or_default();
            taken.insert(machine_name.clone());
            let machine = new_machine(set, &machine_name);
            match ctx.write(&api, Write::Create(&machine)).await {
                Ok(_) => {
                    ctx.event_set(
                        set,
                        Kind::Normal,
                        "MachineCreated",
                        &format!("created machine {machine_name}"),
                    )
                    .await;
                    changed = true;
                }
                Err(e) if is_conflict(&e) => changed = true,
                Err(e) => {
                    return Err(kube(format!(
                        "create machine {namespace}/{machine_name} for machineset {name}"
                    ))(e));
                }
            }
        }
    } else {
        let mut deletable: Vec<&Machine> = active
            .iter()
            .copied()
            .filter(|m| {
                m.labels().get(LABEL_UPDATE_RESULT).map(String::as_str)
                    != Some(UPDATE_RESULT_SUCCESSFUL)
            })
            .collect();
        if deletable.len() > replicas {
            deletable.sort_by_key(|m| (deletion_rank(m), m.name_any()));
            let surplus = deletable.len() - replicas;
            for machine in deletable.into_iter().take(surplus) {
                delete_machine(machine, ctx).await?;
                ctx.event_set(
                    set,
                    Kind::Normal,
                    "MachineDeleted",
                    &format!(
                        "deleted machine {} (scale down to {replicas})",
                        machine.name_any()
                    ),
                )
                .await;
                changed = true;
            }
        }
    }
    for machine in &active {
        if !settings::same(&machine.spec, &set.spec.template.spec) {
            let patch = settings::merge_patch(&set.spec.template.spec);
            ctx.write(&api, Write::MergePatch(&machine.name_any(), patch))
                .await
                .map_err(kube(format!(
                    "copy the machine settings of machineset {name} into machine {namespace}/{}",
                    machine.name_any()
                )))?;
            changed = true;
        }
    }
    update_status(set, &active, ctx).await?;
    Ok(if changed {
        Action::soon()
    } else {
        Action::idle(ctx)
    })
}

fn deletion_rank(machine: &Machine) -> u8 {
    if machine.node_name().is_none_or(str::is_empty) {
        return 0;
    }
    match machine.phase() {
        None | Some(MachinePhase::Pending) => 0,
        Some(MachinePhase::Failed | MachinePhase::Unknown | MachinePhase::CrashLoopBackOff) => 1,
        Some(MachinePhase::Running | MachinePhase::Available) => 2,
        Some(MachinePhase::InPlaceUpdateFailed) => 3,
        _ => 4,
    }
}

fn new_machine(set: &MachineSet, name: &str) -> Machine {
    let template = &set.spec.template;
    let owner = OwnerReference {
        api_version: MachineSet::api_version(&()).into_owned(),
        kind: MachineSet::kind(&()).into_owned(),
        name: set.name_any(),
        uid: set.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let mut machine = Machine::new(name, template.spec.clone());
    machine.metadata = ObjectMeta {
        name: Some(name.to_owned()),
        namespace: set.namespace(),
        labels: Some(template.metadata.labels.clone()),
        annotations: (!template.metadata.annotations.is_empty())
            .then(|| template.metadata.annotations.clone()),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    };
    machine
}

/// Deletes a Machine and its Node object. Missing objects are fine.
pub(crate) async fn delete_machine(machine: &Machine, ctx: &Context) -> Result<(), Error> {
    let namespace = machine.namespace().unwrap_or_default();
    let name = machine.name_any();
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &namespace);
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => ctx.deleting::<Machine>(&namespace, &name),
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(kube(format!("delete machine {namespace}/{name}"))(e)),
    }
    if let Some(node) = machine.node_name().filter(|n| !n.is_empty()) {
        let nodes: Api<Node> = Api::all(ctx.client.clone());
        match nodes.delete(node, &DeleteParams::default()).await {
            Ok(_) => ctx.deleting::<Node>("", node),
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                return Err(kube(format!(
                    "delete node {node} of machine {namespace}/{name}"
                ))(e));
            }
        }
    }
    Ok(())
}

async fn update_status(set: &MachineSet, active: &[&Machine], ctx: &Context) -> Result<(), Error> {
    let ready = active
        .iter()
        .filter(|m| m.phase() == Some(&MachinePhase::Running))
        .count() as i32;
    let want = MachineSetStatus {
        replicas: active.len() as i32,
        fully_labeled_replicas: active.len() as i32,
        ready_replicas: ready,
        available_replicas: ready,
        observed_generation: set.metadata.generation,
        ..set.status.clone().unwrap_or_default()
    };
    if set.status.as_ref() == Some(&want) {
        return Ok(());
    }
    let namespace = set.namespace().unwrap_or_default();
    let api: Api<MachineSet> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut updated = set.clone();
    updated.status = Some(want);
    match ctx
        .write(&api, Write::ReplaceStatus(&set.name_any(), &updated))
        .await
    {
        Ok(_) => Ok(()),
        // A newer version exists; the next pass writes the status from it.
        Err(e) if is_conflict(&e) || is_not_found(&e) => Ok(()),
        Err(e) => Err(kube(format!(
            "update the status of machineset {namespace}/{}",
            set.name_any()
        ))(e)),
    }
}
