//! Writes to the deployment's MachineSets and Machines: creating the new set, copying the MCM
//! settings, scaling, and moving an updated Machine to the new set; each re-reads on conflicts.

use inplace_api::crd::{Machine, MachineDeployment, MachineSet, MachineSetSpec};
use inplace_api::keys::{
    ANNOTATION_CHECKSUM_DOWNLOADED_OSC, LABEL_UPDATE_RESULT, MACHINE_TEMPLATE_HASH_LABEL,
    UPDATE_RESULT_SUCCESSFUL,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::Resolved;
use crate::Context;
use crate::error::{Error, is_conflict, is_not_found, kube};
use crate::events::Kind;
use crate::nodeops::ATTEMPTS;
use crate::plan::Orchestration;
use crate::settings;
use crate::workerpool::ANNOTATION_OSC_SECRET;
use crate::write::Write;

/// Step 1: creates the set for the current template: with all replicas when the old sets have
/// none, else with `maxSurge` replicas (Auto) or none (Manual).
pub(super) async fn create_new(
    md: &MachineDeployment,
    resolved: &Resolved,
    hash: &str,
    old: &[MachineSet],
    ctx: &Context,
) -> Result<(), Error> {
    let old_total: i32 = old.iter().map(|s| s.spec.replicas).sum();
    let replicas = if old_total == 0 {
        resolved.replicas
    } else if resolved.orchestration == Orchestration::Manual {
        0
    } else {
        resolved.max_surge.min(resolved.replicas)
    };
    create_set(md, hash, replicas as i32, ctx).await
}

/// MCM settings follow the deployment into every set's template. Returns whether any set was
/// written.
pub(super) async fn copy_settings_into_all(
    md: &MachineDeployment,
    new: &MachineSet,
    old: &[MachineSet],
    ctx: &Context,
) -> Result<bool, Error> {
    let namespace = md.namespace().unwrap_or_default();
    let sets_api: Api<MachineSet> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut copied = false;
    for set in std::iter::once(new).chain(old.iter()) {
        if !settings::same(&set.spec.template.spec, &md.spec.template.spec) {
            copy_settings(&sets_api, &set.name_any(), md, ctx).await?;
            copied = true;
        }
    }
    Ok(copied)
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
pub(super) async fn scale_set(
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
pub(super) async fn transfer(
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

/// The checksum of the OSC the deployment's nodes should run: the annotation
/// `checksum/data-script` of the Secret its template names in [`ANNOTATION_OSC_SECRET`]
/// (`<namespace>/<name>`, set by the WorkerPool controller). `None` when the template names no
/// Secret (a MachineDeployment not rendered from a pool) or the Secret has no checksum.
pub(super) async fn current_osc_checksum(
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

/// The old sets' replicas as the API has them now (a deleted set counts zero).
pub(super) async fn fresh_total(api: &Api<MachineSet>, old: &[MachineSet]) -> Result<i32, Error> {
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
