//! Creating or updating a pool's MachineDeployment and OSC Secret: read, compare, create or
//! replace with the resourceVersion read, and read again on a 409 conflict.

use std::collections::BTreeMap;

use inplace_api::crd::{MachineDeployment, MachineDeploymentSpec, WorkerPool, WorkerPoolSpec};
use inplace_api::keys::LABEL_WORKER_POOL;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::PostParams;
use kube::{Api, Resource, ResourceExt};

use crate::error::{Error, is_conflict, kube};
use crate::nodeops::ATTEMPTS;

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    Created,
    Updated,
    Unchanged,
}

/// Writes the pool's MachineDeployment (same name and namespace as the pool, controlled by it).
/// A replica count within `minimum..=maximum` (set by an autoscaler) is kept; otherwise the
/// count is clamped into that range.
pub(crate) async fn deployment(
    api: &Api<MachineDeployment>,
    pool: &WorkerPool,
    accepted: &WorkerPoolSpec,
    want: &MachineDeploymentSpec,
) -> Result<Written, Error> {
    let name = pool.name_any();
    let namespace = pool.namespace().unwrap_or_default();
    let owner = owner(pool);
    for _ in 0..ATTEMPTS {
        let Some(current) = api
            .get_opt(&name)
            .await
            .map_err(kube(format!("read machinedeployment {namespace}/{name}")))?
        else {
            let mut md = MachineDeployment::new(&name, want.clone());
            md.metadata = ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                labels: Some(BTreeMap::from([(
                    LABEL_WORKER_POOL.to_owned(),
                    name.clone(),
                )])),
                owner_references: Some(vec![owner.clone()]),
                ..ObjectMeta::default()
            };
            match api.create(&PostParams::default(), &md).await {
                Ok(_) => return Ok(Written::Created),
                Err(e) if is_conflict(&e) => continue,
                Err(e) => {
                    return Err(kube(format!("create machinedeployment {namespace}/{name}"))(e));
                }
            }
        };
        let mut next = current.clone();
        let replicas = clamp_replicas(current.spec.replicas, accepted);
        next.spec = MachineDeploymentSpec {
            replicas,
            ..want.clone()
        };
        // Keep what others own in the spec.
        next.spec.paused = current.spec.paused;
        next.spec.revision_history_limit = current.spec.revision_history_limit;
        next.spec.progress_deadline_seconds = current.spec.progress_deadline_seconds;
        next.labels_mut()
            .insert(LABEL_WORKER_POOL.to_owned(), name.clone());
        let owners = next.metadata.owner_references.get_or_insert_with(Vec::new);
        if !owners.iter().any(|o| o.uid == owner.uid) {
            owners.retain(|o| o.controller != Some(true));
            owners.push(owner.clone());
        }
        if next == current {
            return Ok(Written::Unchanged);
        }
        match api.replace(&name, &PostParams::default(), &next).await {
            Ok(_) => return Ok(Written::Updated),
            Err(e) if is_conflict(&e) => continue,
            Err(e) => return Err(kube(format!("update machinedeployment {namespace}/{name}"))(e)),
        }
    }
    Err(Error::Contended {
        action: format!("write machinedeployment {namespace}/{name}"),
    })
}

/// Writes the OSC Secret: data, type, and our labels and annotations (others' are kept).
pub(crate) async fn secret(api: &Api<Secret>, want: &Secret) -> Result<Written, Error> {
    let name = want.name_any();
    let namespace = want.namespace().unwrap_or_default();
    for _ in 0..ATTEMPTS {
        let Some(current) = api
            .get_opt(&name)
            .await
            .map_err(kube(format!("read secret {namespace}/{name}")))?
        else {
            match api.create(&PostParams::default(), want).await {
                Ok(_) => return Ok(Written::Created),
                Err(e) if is_conflict(&e) => continue,
                Err(e) => return Err(kube(format!("create secret {namespace}/{name}"))(e)),
            }
        };
        let mut next = current.clone();
        next.data = want.data.clone();
        next.type_ = want.type_.clone();
        for (key, value) in want.labels() {
            next.labels_mut().insert(key.clone(), value.clone());
        }
        for (key, value) in want.annotations() {
            next.annotations_mut().insert(key.clone(), value.clone());
        }
        if next == current {
            return Ok(Written::Unchanged);
        }
        match api.replace(&name, &PostParams::default(), &next).await {
            Ok(_) => return Ok(Written::Updated),
            Err(e) if is_conflict(&e) => continue,
            Err(e) => return Err(kube(format!("update secret {namespace}/{name}"))(e)),
        }
    }
    Err(Error::Contended {
        action: format!("write secret {namespace}/{name}"),
    })
}

fn clamp_replicas(current: i32, spec: &WorkerPoolSpec) -> i32 {
    let (min, max) = (spec.minimum.max(0), spec.maximum.max(spec.minimum).max(0));
    current.clamp(min, max)
}

fn owner(pool: &WorkerPool) -> OwnerReference {
    OwnerReference {
        api_version: WorkerPool::api_version(&()).into_owned(),
        kind: WorkerPool::kind(&()).into_owned(),
        name: pool.name_any(),
        uid: pool.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}
