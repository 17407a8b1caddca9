//! WorkerPool controller, in the role of gardenlet plus the worker extension: validates each
//! change of a [`WorkerPool`], renders the accepted spec into a MachineDeployment and an OSC
//! Secret, and reports the pool's in-place update progress.
//!
//! One pass over a pool:
//!
//! 1. **Inputs.** The [`ImageCatalog`] named [`crate::Config::catalog_name`] (cluster-scoped; missing →
//!    condition `Valid=Unknown`, reason `ImageCatalogMissing`, nothing else happens) and the
//!    control-plane version [`crate::Config::control_plane_version`] (a fixed setting: the orchestrator
//!    is restarted with a new value when the control plane is upgraded).
//! 2. **The accepted spec** is stored as JSON in the pool annotation [`ANNOTATION_ACCEPTED_SPEC`],
//!    and the control-plane version it was accepted under in
//!    [`ANNOTATION_ACCEPTED_CONTROL_PLANE`], so a restart keeps both. A spec equal to the accepted
//!    one, under the same control plane, needs no validation. Otherwise the spec is validated:
//!    with `validate_pool` when nothing was accepted yet, else with `validate_pool_update`
//!    against the accepted spec, with `update_in_progress` as in step 4. A control-plane upgrade
//!    is such a change even when the spec is the same: the accepted spec is resolved with the
//!    accepted control-plane version (`previous_control_plane_version`), so a pool that inherits
//!    the version gets the in-progress check and the no-minor-skip rule, and a pool with its own
//!    version a fresh skew check. A pool accepted before the control-plane version was recorded
//!    counts as accepted under the configured one, and gets it recorded.
//!    - Accepted: the annotation is rewritten (and a `force-in-place-update` operation in
//!      `gardener.cloud/operation` is consumed, as Gardener removes operation annotations),
//!      condition [`CONDITION_VALID`]`=True`, Event `SpecAccepted`.
//!    - Refused: condition `Valid=False` with the first violated rule as reason (e.g.
//!      `ImmutableForInPlace`, `MinorVersionSkip`, `UpdateInProgress`) and every violation's field,
//!      problem and fix in the message; a Warning Event `SpecRefused` once per refused generation.
//!      Nothing is rendered from the refused spec: the accepted one stays in force, rendered
//!      with the accepted control-plane version (an inheriting pool keeps its kubelet version).
//! 3. **Rendering** (`render`) of the accepted spec: the MachineDeployment named like the pool,
//!    in the pool's namespace, controlled by the pool, and the OSC Secret
//!    `gardener-node-agent-<pool>-<pool hash>` in [`crate::Config::osc_namespace`] ([`osc_secret_name`]).
//!    Both are created, or replaced when they differ (`write`).
//! 4. **Progress.** `status.currentHash` is the machine class hash the nodes were last brought to.
//!    It is set on the first render, for rolling pools on every render (the orchestrator leaves
//!    rolling MachineDeployments alone, so there is nothing to wait for), and for in-place pools
//!    once the MachineDeployment rendered from the accepted hash has rolled out (status of the
//!    current generation, every machine in the new MachineSet). An in-place pool whose accepted
//!    hash differs from the current hash has a pending update: it is listed in
//!    `status.inPlaceUpdates.pendingWorkerUpdates` (`autoInPlaceUpdate` / `manualInPlaceUpdate`),
//!    a Manual pool has `ManualInPlaceWorkersUpdated=False`, and validation refuses a further
//!    node-relevant change unless forced.
//! 5. **Confined changes.** With `spec.maintenance.confineSpecUpdateRollout` and a usable window,
//!    a spec that differs from the accepted one outside the window is neither validated nor
//!    rendered: condition [`CONDITION_SPEC_UPDATE_CONFINED`]`=True` says when the window begins, and
//!    the pool is looked at again then (the `maintenance` controller's own changes, made in the
//!    window, are taken at once).
//! 6. **The halt**: the MachineDeployment's `InPlaceUpdateHalted` condition is mirrored into the
//!    pool conditions.

mod render;
mod status;
mod write;

use inplace_api::crd::{ImageCatalog, MachineDeployment, WorkerPool, WorkerPoolSpec};
use inplace_api::hash::machine_class_hash;
use inplace_api::keys::{
    ANNOTATION_OPERATION, CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED,
    OPERATION_FORCE_IN_PLACE_UPDATE, has_operation,
};
use inplace_api::pool::ResolvedPool;
use inplace_api::strategy::UpdateStrategy;
use inplace_api::validate::{ValidationContext, Violations, validate_pool, validate_pool_update};
use inplace_api::version::KubeVersion;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

pub use render::{
    ANNOTATION_MACHINE_CLASS_HASH, ANNOTATION_OSC_SECRET, LABEL_INSTANCE_TYPE, osc_secret_name,
};

use crate::error::{Error, is_conflict, kube};
use crate::events::Kind;
use crate::{Action, Context};
use write::Written;

/// Pool annotation holding the last accepted spec as JSON.
pub const ANNOTATION_ACCEPTED_SPEC: &str = "rackproof.dev/accepted-spec";
/// Pool annotation holding the control-plane version the accepted spec was accepted under.
pub const ANNOTATION_ACCEPTED_CONTROL_PLANE: &str = "rackproof.dev/accepted-control-plane-version";
/// Pool condition: whether the current spec was accepted.
pub const CONDITION_VALID: &str = "Valid";

/// Pool condition: `True` while a spec change waits for the maintenance window
/// (`confineSpecUpdateRollout`).
pub const CONDITION_SPEC_UPDATE_CONFINED: &str = "SpecUpdateConfined";

/// What validation decided about the pool's current spec.
enum Decision {
    /// The spec is the accepted one.
    Unchanged,
    /// The spec changed, but the pool confines changes to its maintenance window, which begins at
    /// the given instant; the accepted spec stays in force.
    Confined(jiff::Timestamp),
    Accepted,
    Refused(Violations),
}

pub(crate) async fn reconcile(pool: &WorkerPool, ctx: &Context) -> Result<Action, Error> {
    if pool.metadata.deletion_timestamp.is_some() {
        return Ok(Action::idle(ctx));
    }
    let namespace = pool.namespace().unwrap_or_default();
    let name = pool.name_any();
    let now = ctx.clock.now();
    let generation = pool.metadata.generation;
    let config = &ctx.config;
    let mut status = pool.status.clone().unwrap_or_default();

    let catalogs: Api<ImageCatalog> = Api::all(ctx.client.clone());
    let Some(catalog) = catalogs
        .get_opt(&config.catalog_name)
        .await
        .map_err(kube(format!("read imagecatalog {}", config.catalog_name)))?
    else {
        let message = format!(
            "image catalog {:?} does not exist; the pool is validated once it does",
            config.catalog_name
        );
        status::set_condition(
            &mut status.conditions,
            CONDITION_VALID,
            "Unknown",
            "ImageCatalogMissing",
            &message,
            generation,
            now,
        );
        write_status(pool, status, ctx).await?;
        return Ok(Action::idle(ctx));
    };

    let mut accepted = accepted_spec(pool);
    if accepted.is_none() && pool.annotations().contains_key(ANNOTATION_ACCEPTED_SPEC) {
        let message = format!(
            "annotation {ANNOTATION_ACCEPTED_SPEC} is not a pool spec; the pool is validated as new"
        );
        ctx.event_pool(pool, Kind::Warning, "AcceptedSpecUnreadable", &message)
            .await;
    }
    let recorded_control_plane = accepted_control_plane(pool);
    let mut control_plane = recorded_control_plane.unwrap_or(config.control_plane_version);
    let control_plane_moved = accepted.is_some() && control_plane != config.control_plane_version;
    let deployments: Api<MachineDeployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let md = deployments
        .get_opt(&name)
        .await
        .map_err(kube(format!("read machinedeployment {namespace}/{name}")))?;

    // Progress of the accepted spec, before judging the new one.
    let mut current_hash = status.current_hash.clone();
    let mut in_progress = false;
    if let Some(resolved) = accepted.as_ref().and_then(|s| resolve(s, &control_plane)) {
        (current_hash, in_progress) = progress(&resolved, current_hash, md.as_ref());
    }

    let decision = match &accepted {
        Some(old) if *old == pool.spec && !control_plane_moved => Decision::Unchanged,
        Some(_) if let Some(next) = confined_until(&pool.spec, now) => Decision::Confined(next),
        _ => {
            let vctx = ValidationContext {
                control_plane_version: config.control_plane_version,
                previous_control_plane_version: control_plane_moved.then_some(control_plane),
                catalog: &catalog.spec,
                annotations: pool.annotations(),
                update_in_progress: in_progress,
                now,
            };
            let result = match &accepted {
                None => validate_pool(&pool.spec, &vctx),
                Some(old) => validate_pool_update(old, &pool.spec, &vctx),
            };
            match result {
                Ok(()) => Decision::Accepted,
                Err(violations) => Decision::Refused(violations),
            }
        }
    };

    let mut pool_now = pool.clone();
    if !matches!(decision, Decision::Confined(_)) {
        status::remove_condition(&mut status.conditions, CONDITION_SPEC_UPDATE_CONFINED);
    }
    let mut action = Action::idle(ctx);
    match &decision {
        Decision::Confined(next) => {
            let message = format!(
                "the spec of generation {} waits for the maintenance window, which begins at {next}",
                generation.unwrap_or(0)
            );
            status::set_condition(
                &mut status.conditions,
                CONDITION_SPEC_UPDATE_CONFINED,
                "True",
                "WaitingForMaintenanceWindow",
                &message,
                generation,
                now,
            );
            action = action.min(Action::at(ctx, *next));
        }
        Decision::Unchanged => {
            if recorded_control_plane.is_none() {
                pool_now = store_accepted(pool, &control_plane, Force::Keep, ctx).await?;
            }
            let message = format!(
                "the spec of generation {} is in force",
                generation.unwrap_or(0)
            );
            status::set_condition(
                &mut status.conditions,
                CONDITION_VALID,
                "True",
                "SpecAccepted",
                &message,
                generation,
                now,
            );
        }
        Decision::Accepted => {
            pool_now =
                store_accepted(pool, &config.control_plane_version, Force::Consume, ctx).await?;
            accepted = Some(pool.spec.clone());
            let mut message = format!(
                "the spec of generation {} is in force",
                generation.unwrap_or(0)
            );
            if control_plane_moved {
                message.push_str(&format!(
                    " under control plane {} (was {control_plane})",
                    config.control_plane_version
                ));
            }
            control_plane = config.control_plane_version;
            status::set_condition(
                &mut status.conditions,
                CONDITION_VALID,
                "True",
                "SpecAccepted",
                &message,
                generation,
                now,
            );
            ctx.event_pool(pool, Kind::Normal, "SpecAccepted", &message)
                .await;
            if let Some(resolved) = resolve(&pool.spec, &control_plane) {
                (current_hash, _) = progress(&resolved, current_hash, md.as_ref());
            }
        }
        Decision::Refused(violations) => {
            let moved =
                control_plane_moved.then_some((control_plane, config.control_plane_version));
            let message =
                status::refusal_message(generation, violations, accepted.is_some(), moved);
            let reason = status::refusal_reason(violations);
            let already = status::condition(&status, CONDITION_VALID).is_some_and(|c| {
                c.status == "False" && c.message == message && c.observed_generation == generation
            });
            status::set_condition(
                &mut status.conditions,
                CONDITION_VALID,
                "False",
                &reason,
                &message,
                generation,
                now,
            );
            if !already {
                ctx.event_pool(pool, Kind::Warning, "SpecRefused", &message)
                    .await;
            }
        }
    }

    // Render the accepted spec.
    let mut rendered_md = md;
    if let Some(spec) = &accepted
        && let Some(resolved) = resolve(spec, &control_plane)
    {
        let rendered =
            render::render(&name, spec, &resolved, config).map_err(|e| Error::Invalid {
                object: format!("workerpool {namespace}/{name}"),
                why: rackproof_std::error_chain(&e),
            })?;
        match write::deployment(&deployments, &pool_now, spec, &rendered.deployment).await? {
            Written::Unchanged => {}
            written => {
                let verb = if written == Written::Created {
                    "created"
                } else {
                    "updated"
                };
                let message = format!(
                    "{verb} machinedeployment {namespace}/{name} for machine class hash {}",
                    rendered.class_hash.short()
                );
                let reason = if written == Written::Created {
                    "MachineDeploymentCreated"
                } else {
                    "MachineDeploymentUpdated"
                };
                ctx.event_pool(pool, Kind::Normal, reason, &message).await;
                rendered_md = deployments
                    .get_opt(&name)
                    .await
                    .map_err(kube(format!("read machinedeployment {namespace}/{name}")))?;
            }
        }
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &config.osc_namespace);
        let secret_name = rendered.secret.name_any();
        match write::secret(&secrets, &rendered.secret).await? {
            Written::Unchanged => {}
            written => {
                let verb = if written == Written::Created {
                    "created"
                } else {
                    "updated"
                };
                let message = format!(
                    "{verb} the operating system config in secret {}/{secret_name}",
                    config.osc_namespace
                );
                let reason = if written == Written::Created {
                    "OscSecretCreated"
                } else {
                    "OscSecretUpdated"
                };
                ctx.event_pool(pool, Kind::Normal, reason, &message).await;
            }
        }
        let hash = rendered.class_hash.as_str().to_owned();
        if status.current_hash.is_some()
            && status.current_hash != current_hash
            && current_hash.as_deref() == Some(hash.as_str())
        {
            ctx.event_pool(
                pool,
                Kind::Normal,
                "UpdateCompleted",
                &format!(
                    "every node runs machine class hash {}",
                    rendered.class_hash.short()
                ),
            )
            .await;
        }
        let pending =
            resolved.strategy.is_in_place() && current_hash.as_deref() != Some(hash.as_str());
        status.current_hash = current_hash;
        status.node_agent_secret_name = Some(secret_name);
        status.in_place_updates = status::pending_updates(&name, resolved.strategy, pending);
        manual_condition(
            &mut status,
            resolved.strategy,
            pending,
            rendered_md.as_ref(),
            generation,
            now,
        );
    }
    status::mirror_halt(
        &mut status.conditions,
        rendered_md.as_ref(),
        generation,
        now,
    );
    status.observed_generation = generation;
    write_status(&pool_now, status, ctx).await?;
    Ok(action)
}

/// With `confineSpecUpdateRollout` and a usable window that is not open at `now`: when it opens.
/// Changes are taken in the whole window, so one the maintenance makes near its end still lands.
fn confined_until(spec: &WorkerPoolSpec, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
    let maintenance = spec.maintenance.as_ref()?;
    if !maintenance.confine_spec_update_rollout() {
        return None;
    }
    let window = maintenance.window()?.ok()?;
    (!window.contains(now)).then(|| window.next_begin(now))
}

/// The accepted spec from the annotation, if present and readable.
fn accepted_spec(pool: &WorkerPool) -> Option<WorkerPoolSpec> {
    pool.annotations()
        .get(ANNOTATION_ACCEPTED_SPEC)
        .and_then(|json| serde_json::from_str(json).ok())
}

/// The control-plane version the accepted spec was accepted under, if recorded and readable.
fn accepted_control_plane(pool: &WorkerPool) -> Option<KubeVersion> {
    pool.annotations()
        .get(ANNOTATION_ACCEPTED_CONTROL_PLANE)
        .and_then(|text| KubeVersion::parse(text).ok())
}

fn resolve(spec: &WorkerPoolSpec, control_plane: &KubeVersion) -> Option<ResolvedPool> {
    ResolvedPool::resolve(spec, control_plane).ok()
}

/// The current hash after looking at the MachineDeployment, and whether an in-place update of
/// `accepted` is in progress.
fn progress(
    accepted: &ResolvedPool,
    current: Option<String>,
    md: Option<&MachineDeployment>,
) -> (Option<String>, bool) {
    let hash = machine_class_hash(accepted).as_str().to_owned();
    let done = !accepted.strategy.is_in_place()
        || current.is_none()
        || md.is_some_and(|md| {
            status::rendered_hash(md) == Some(hash.as_str()) && status::rolled_out(md)
        });
    let current = if done { Some(hash.clone()) } else { current };
    let in_progress = accepted.strategy.is_in_place() && current.as_deref() != Some(hash.as_str());
    (current, in_progress)
}

/// What [`store_accepted`] does with a force-in-place-update operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Force {
    /// The operation let a change through: remove it, as Gardener removes operation annotations.
    Consume,
    /// Nothing changed: leave it for the change it is meant for.
    Keep,
}

/// Writes the accepted-spec annotations (the pool's spec, accepted under `control_plane`), with
/// the force-in-place-update operation as `force` says; returns the pool as written.
async fn store_accepted(
    pool: &WorkerPool,
    control_plane: &KubeVersion,
    force: Force,
    ctx: &Context,
) -> Result<WorkerPool, Error> {
    let namespace = pool.namespace().unwrap_or_default();
    let name = pool.name_any();
    let spec = serde_json::to_string(&pool.spec).map_err(|e| Error::Invalid {
        object: format!("workerpool {namespace}/{name}"),
        why: format!("the spec can't be written as JSON: {e}"),
    })?;
    let mut annotations = serde_json::Map::new();
    annotations.insert(ANNOTATION_ACCEPTED_SPEC.to_owned(), json!(spec));
    annotations.insert(
        ANNOTATION_ACCEPTED_CONTROL_PLANE.to_owned(),
        json!(control_plane.to_string()),
    );
    if force == Force::Consume
        && let Some(operations) = pool.annotations().get(ANNOTATION_OPERATION)
        && has_operation(operations, OPERATION_FORCE_IN_PLACE_UPDATE)
    {
        let rest: Vec<&str> = operations
            .split(';')
            .map(str::trim)
            .filter(|op| *op != OPERATION_FORCE_IN_PLACE_UPDATE && !op.is_empty())
            .collect();
        annotations.insert(
            ANNOTATION_OPERATION.to_owned(),
            if rest.is_empty() {
                json!(null)
            } else {
                json!(rest.join(";"))
            },
        );
    }
    let api: Api<WorkerPool> = Api::namespaced(ctx.client.clone(), &namespace);
    let patch = json!({ "metadata": { "annotations": annotations } });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(kube(format!(
            "store the accepted spec of workerpool {namespace}/{name}"
        )))
}

/// `ManualInPlaceWorkersUpdated` for Manual pools: `False` while machines wait for a person.
fn manual_condition(
    status: &mut inplace_api::crd::WorkerPoolStatus,
    strategy: UpdateStrategy,
    pending: bool,
    md: Option<&MachineDeployment>,
    generation: Option<i64>,
    now: jiff::Timestamp,
) {
    let conditions = &mut status.conditions;
    if strategy != UpdateStrategy::ManualInPlaceUpdate {
        status::remove_condition(conditions, CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED);
        return;
    }
    if pending {
        let (replicas, updated) = md
            .and_then(|m| m.status.as_ref())
            .map_or((0, 0), |s| (s.replicas, s.updated_replicas));
        let waiting = (replicas - updated).max(0);
        let message = format!(
            "{waiting} of {replicas} machine(s) not updated yet: label their nodes node.machine.sapcloud.io/selected-for-update=true"
        );
        status::set_condition(
            conditions,
            CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED,
            "False",
            "WorkersPendingUpdate",
            &message,
            generation,
            now,
        );
    } else {
        let message = "every machine runs the accepted spec";
        status::set_condition(
            conditions,
            CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED,
            "True",
            "WorkersUpdated",
            message,
            generation,
            now,
        );
    }
}

/// Replaces the status when it changed; a conflict leaves it to the next pass.
async fn write_status(
    pool: &WorkerPool,
    want: inplace_api::crd::WorkerPoolStatus,
    ctx: &Context,
) -> Result<(), Error> {
    if pool.status.as_ref() == Some(&want) {
        return Ok(());
    }
    let namespace = pool.namespace().unwrap_or_default();
    let api: Api<WorkerPool> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut updated = pool.clone();
    updated.status = Some(want);
    match api
        .replace_status(&pool.name_any(), &PostParams::default(), &updated)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_conflict(&e) => Ok(()),
        Err(e) => Err(kube(format!(
            "update the status of workerpool {namespace}/{}",
            pool.name_any()
        ))(e)),
    }
}
