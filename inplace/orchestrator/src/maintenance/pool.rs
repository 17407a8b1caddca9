//! One pool's maintenance: decide whether this is its window, plan the version changes and
//! operations, check each as the WorkerPool controller will, write, and record.

use inplace_api::crd::{ImageCatalogSpec, WorkerPool, WorkerPoolSpec};
use inplace_api::keys::{ANNOTATION_MAINTENANCE_OPERATION, ANNOTATION_OPERATION};
use inplace_api::validate::{ValidationContext, validate_pool_update};
use inplace_api::version::{ImageVersion, KubeVersion};
use jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::operation::{self, Effect};
use super::record::{self, Operation};
use super::target::{self, Decision, Why};
use super::{Pass, REASON_KUBERNETES, REASON_MACHINE_IMAGE, REASON_OPERATION};
use crate::error::{Error, kube};

/// Maintains `pool` if this is its window and it has not been maintained in it; returns the
/// next window's begin (`None` for a pool without a usable window).
pub(super) async fn reconcile(
    pool: &WorkerPool,
    catalog: &ImageCatalogSpec,
    pass: &Pass<'_>,
) -> Result<Option<Timestamp>, Error> {
    let Some(maintenance) = &pool.spec.maintenance else {
        return Ok(None);
    };
    // An unusable window is the WorkerPool controller's to report (rule 15).
    let Some(Ok(window)) = maintenance.window() else {
        return Ok(None);
    };
    let now = pass.now;
    let next = window.next_begin(now);
    let Some(begin) = window.current_begin(now) else {
        return Ok(Some(next));
    };
    let done = pool
        .status
        .as_ref()
        .and_then(|s| s.last_maintenance.as_ref())
        .is_some_and(|last| last.triggered_time.0 >= begin);
    if done || !window.in_effective(now) {
        return Ok(Some(next));
    }

    let requested = operation::requested(pool.annotations());
    let annotations = operation::annotations_after(pool.annotations(), &requested);
    let ctx = ValidationContext {
        control_plane_version: pass.config.control_plane_version,
        previous_control_plane_version: None,
        catalog,
        annotations: &annotations,
        update_in_progress: pool.status.as_ref().is_some_and(|s| s.update_in_progress()),
        now,
    };
    let mut plan = Plan {
        pool: pool.name_any(),
        old: &pool.spec,
        spec: pool.spec.clone(),
        ctx,
        operations: Vec::new(),
    };
    plan.machine_image(maintenance.auto_update_machine_image());
    plan.kubernetes(maintenance.auto_update_kubernetes());
    for op in &requested {
        plan.operation(op, now);
    }
    let Plan {
        spec, operations, ..
    } = plan;

    if spec != pool.spec || !requested.is_empty() {
        write_pool(pool, &spec, &annotations, pass).await?;
    }
    record::write(pool, &operations, pass).await?;
    Ok(Some(next))
}

/// The changes of one window, checked one by one on top of each other.
struct Plan<'a> {
    pool: String,
    old: &'a WorkerPoolSpec,
    spec: WorkerPoolSpec,
    ctx: ValidationContext<'a>,
    operations: Vec<Operation>,
}

impl Plan<'_> {
    fn machine_image(&mut self, opted_in: bool) {
        let image = self.spec.machine.image.clone();
        let Ok(current) = ImageVersion::parse(&image.version) else {
            return;
        };
        let in_place = self.spec.strategy().is_in_place();
        let (decision, strategy) = target::machine_image(
            self.ctx.catalog,
            &image.name,
            &current,
            opted_in,
            in_place,
            self.ctx.now,
        );
        let pool = &self.pool;
        let failed = |why: &str| {
            format!(
                "Worker pool {pool}: '{}' machine image version maintenance failed. Reason for update: {why}",
                image.name
            )
        };
        match decision {
            Decision::Stay => {}
            Decision::Unreachable { failure } => self.operations.push(Operation::failed(
                REASON_MACHINE_IMAGE,
                failed("machine image version expired"),
                format!("Worker pool {pool}: {failure}"),
            )),
            Decision::Move { to, why } => {
                let reason = match why {
                    Why::AutoUpdate => format!(
                        "Automatic update of the machine image version is configured (image update strategy: {})",
                        strategy.as_str()
                    ),
                    Why::Expired => format!(
                        "Machine image version expired - force update required (image update strategy: {})",
                        strategy.as_str()
                    ),
                };
                let mut candidate = self.spec.clone();
                candidate.machine.image.version = to.clone();
                let done = format!(
                    "Worker pool {pool:?}: Updated image from '{}' version '{}' to version '{to}'. Reason: {reason}",
                    image.name, image.version
                );
                let failed = failed(&reason);
                self.check(REASON_MACHINE_IMAGE, candidate, done, failed);
            }
        }
    }

    fn kubernetes(&mut self, opted_in: bool) {
        // A pool without its own version follows the control plane, which is not ours to move.
        let Some(current) = self
            .spec
            .kubernetes_version()
            .and_then(|v| KubeVersion::parse(v).ok())
        else {
            return;
        };
        let decision = target::kubernetes(
            self.ctx.catalog,
            current,
            self.ctx.control_plane_version,
            opted_in,
            self.ctx.now,
        );
        let pool = &self.pool;
        let failed = |why: &str| {
            format!(
                "Worker pool {pool}: Kubernetes version maintenance failed. Reason for update: {why}"
            )
        };
        match decision {
            Decision::Stay => {}
            Decision::Unreachable { failure } => self.operations.push(Operation::failed(
                REASON_KUBERNETES,
                failed("Kubernetes version expired"),
                format!("Worker pool {pool}: {failure}"),
            )),
            Decision::Move { to, why } => {
                let reason = match why {
                    Why::AutoUpdate => "Automatic update of Kubernetes version configured",
                    Why::Expired => "Kubernetes version expired - force update required",
                };
                let mut candidate = self.spec.clone();
                if let Some(k) = candidate.kubernetes.as_mut() {
                    k.version = Some(to.clone());
                }
                let done = format!(
                    "Worker pool {pool:?}: Updated Kubernetes version '{current}' to version '{to}'. Reason: {reason}"
                );
                let failed = failed(reason);
                self.check(REASON_KUBERNETES, candidate, done, failed);
            }
        }
    }

    fn operation(&mut self, op: &str, now: Timestamp) {
        let pool = &self.pool;
        match operation::apply(op, &self.spec, now) {
            Effect::Annotation => self.operations.push(Operation::succeeded(
                REASON_OPERATION,
                format!("Worker pool {pool:?}: operation {op:?} handed on to {ANNOTATION_OPERATION}"),
            )),
            Effect::Spec(candidate) => {
                let done = format!("Worker pool {pool:?}: operation {op:?} carried out");
                let failed = format!("Worker pool {pool}: operation {op:?} failed");
                self.check(REASON_OPERATION, *candidate, done, failed);
            }
            Effect::Unknown => self.operations.push(Operation::failed(
                REASON_OPERATION,
                format!("Worker pool {pool}: operation {op:?} failed"),
                format!(
                    "Worker pool {pool}: {ANNOTATION_MAINTENANCE_OPERATION} {op:?} is not an operation; use one of {}",
                    operation::KNOWN.join(", ")
                ),
            )),
        }
    }

    /// Takes `candidate` when the WorkerPool controller would accept it; records either way.
    fn check(
        &mut self,
        reason: &'static str,
        candidate: WorkerPoolSpec,
        done: String,
        failed: String,
    ) {
        match validate_pool_update(self.old, &candidate, &self.ctx) {
            Ok(()) => {
                self.spec = candidate;
                self.operations.push(Operation::succeeded(reason, done));
            }
            Err(violations) => {
                let why: Vec<String> = violations.0.iter().map(ToString::to_string).collect();
                let failure = format!("Worker pool {}: {}", self.pool, why.join("; "));
                self.operations
                    .push(Operation::failed(reason, failed, failure));
            }
        }
    }
}

/// Writes the planned spec and the annotations after the window, if the pool did not change since
/// it was read (a conflict leaves the window to the next pass).
async fn write_pool(
    pool: &WorkerPool,
    spec: &WorkerPoolSpec,
    annotations: &inplace_api::crd::Annotations,
    pass: &Pass<'_>,
) -> Result<(), Error> {
    let namespace = pool.namespace().unwrap_or_default();
    let name = pool.name_any();
    let mut changed = serde_json::Map::new();
    changed.insert(ANNOTATION_MAINTENANCE_OPERATION.to_owned(), json!(null));
    if let Some(value) = annotations.get(ANNOTATION_OPERATION) {
        changed.insert(ANNOTATION_OPERATION.to_owned(), json!(value));
    }
    let patch = json!({
        "metadata": {
            "resourceVersion": pool.resource_version(),
            "annotations": changed,
        },
        "spec": spec,
    });
    Api::<WorkerPool>::namespaced(pass.client.clone(), &namespace)
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(kube(format!(
            "write the maintenance of workerpool {namespace}/{name}"
        )))?;
    Ok(())
}
