//! Running a scenario's steps, one after the other, as a person at the cluster would: edit the
//! pool, label nodes, remove failed marks, scale, wait.

use std::time::Duration;

use inplace_api::crd::WorkerPool;
use inplace_api::keys;
use inplace_api::version::KubeVersion;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use regex::Regex;
use serde_json::{Value, json};
use tracing::Instrument;

use crate::engine::cluster::objects::NAMESPACE;
use crate::engine::failure::{StepError, StepFailure};
use crate::engine::faults;
use crate::engine::judge::conditions::{Check, describe};
use crate::engine::judge::timeline::EntryKind;
use crate::engine::run::Ctx;
use crate::scenario::{Located, NodeName, PoolUpdate, RunCommand, Step};

/// How long the WorkerPool controller may take to accept or refuse a change.
const VALIDATION_WAIT: Duration = Duration::from_secs(300);

/// Runs every step, each in a `step{n, kind, node}` span (`n` counts from 1 in file order,
/// `kind` is the step's key or a fault step's fault, `node` the one node it names, if any). The
/// first step that fails ends the sequence.
pub(crate) async fn run(ctx: &Ctx) -> Result<(), StepFailure> {
    for (index, step) in ctx.scenario.steps.iter().enumerate() {
        let number = index + 1;
        let span = tracing::info_span!(
            "step",
            n = number,
            kind = %step.kind(),
            node = tracing::field::Empty,
        );
        if let Some(node) = step.node() {
            span.record("node", tracing::field::display(node));
        }
        async {
            ctx.shared.record(
                None,
                EntryKind::Step,
                format!("step {number}: {}", summary(step)),
            );
            one(ctx, step).await
        }
        .instrument(span)
        .await
        .map_err(|reason| StepFailure {
            number,
            summary: summary(step),
            reason,
        })?;
    }
    Ok(())
}

/// A one-line description of a step for the timeline.
pub(crate) fn summary(step: &Step) -> String {
    let names = |nodes: &[NodeName]| {
        nodes
            .iter()
            .map(|n| n.value.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match step {
        Step::Update(u) => {
            let mut parts = Vec::new();
            if let Some(os) = &u.os {
                parts.push(format!("os {}", os.value));
            }
            if let Some(k) = &u.kubernetes {
                parts.push(format!("kubernetes {k}"));
            }
            if let Some(k) = &u.control_plane {
                parts.push(format!("control plane {k}"));
            }
            if u.kubelet_config.is_some() {
                parts.push("kubelet config".to_owned());
            }
            if u.rotate_ca {
                parts.push("CA rotation".to_owned());
            }
            if u.rotate_service_account_key {
                parts.push("service-account key rotation".to_owned());
            }
            if u.force {
                parts.push("forced".to_owned());
            }
            match &u.pool {
                Some(pool) => format!("update pool {}: {}", pool.value, parts.join(", ")),
                None => format!("update the pool: {}", parts.join(", ")),
            }
        }
        Step::Select(n) => format!("select {}", names(n)),
        Step::Unselect(n) => format!("unselect {}", names(n)),
        Step::ClearFailed(n) => format!("remove the failed mark of {}", names(n)),
        Step::Scale(scale) => match &scale.pool {
            Some(pool) => format!("scale pool {} to {}", pool.value, scale.nodes.value),
            None => format!("scale the pool to {}", scale.nodes.value),
        },
        Step::Sleep(d) => format!("sleep {d}"),
        Step::WaitUntil(w) => format!("wait until {} (at most {})", describe(&w.until), w.within),
        Step::Run(r) => format!("run {}", r.command.join(" ")),
        Step::Fault(_) => "fire a fault".to_owned(),
        Step::Publish(p) => format!(
            "publish a new build of {} that boots as {:?}; nodes that download it from now on get it",
            p.version.value, p.boot
        ),
        Step::MaintenanceOperation(op) => match &op.pool {
            Some(pool) => format!(
                "ask for maintenance operation {} in pool {}'s next window",
                op.operation.value, pool.value
            ),
            None => format!(
                "ask for maintenance operation {} in the next window",
                op.operation.value
            ),
        },
    }
}

async fn one(ctx: &Ctx, step: &Step) -> Result<(), StepError> {
    match step {
        Step::Update(update) => update_pool(ctx, update).await,
        Step::Select(nodes) => {
            label_nodes(ctx, nodes, keys::LABEL_SELECTED_FOR_UPDATE, Some("true")).await
        }
        Step::Unselect(nodes) => {
            label_nodes(ctx, nodes, keys::LABEL_SELECTED_FOR_UPDATE, None).await
        }
        Step::ClearFailed(nodes) => label_nodes(ctx, nodes, keys::LABEL_UPDATE_RESULT, None).await,
        Step::MaintenanceOperation(op) => {
            patch_pool(
                ctx,
                pool_of(ctx, op.pool.as_ref()),
                json!({"metadata": {"annotations": {keys::ANNOTATION_MAINTENANCE_OPERATION: op.operation.value}}}),
            )
            .await
        }
        Step::Scale(scale) => {
            let pool = pool_of(ctx, scale.pool.as_ref());
            let count = scale.nodes.value;
            let count_i32 = i32::try_from(count)
                .map_err(|_| StepError::Invalid(format!("{count} nodes is too many")))?;
            patch_pool(
                ctx,
                pool,
                json!({"spec": {"minimum": count_i32, "maximum": count_i32}}),
            )
            .await?;
            // The pool's size is what its judgments (rolloutComplete, maxUnavailable) count.
            if let Some(state) = ctx.shared.judge().world.pools.get_mut(pool) {
                state.size = count;
            }
            Ok(())
        }
        Step::Sleep(span) => {
            ctx.shared.clock().sleep(span.get()).await;
            Ok(())
        }
        Step::WaitUntil(wait) => {
            let check = Check::new(&wait.until);
            if ctx
                .shared
                .wait_until(wait.within.get(), |judge| check.holds(&judge.world))
                .await
            {
                Ok(())
            } else {
                Err(StepError::NotWithin {
                    condition: check.describe(),
                    within: wait.within.to_string(),
                })
            }
        }
        Step::Run(run) => run_command(ctx, run).await,
        Step::Fault(action) => {
            faults::fire(ctx, action).await;
            Ok(())
        }
        Step::Publish(publish) => ctx
            .lab
            .publish(&publish.version, &publish.boot)
            .map_err(StepError::Lab),
    }
}

/// Runs a `run` step's command through the run's outside door; the step fails on any other exit
/// code than the expected one.
async fn run_command(ctx: &Ctx, run: &RunCommand) -> Result<(), StepError> {
    let outside = ctx.outside.as_ref().ok_or(StepError::NoOutside)?;
    let outcome = outside.run_step(run).await.map_err(StepError::Command)?;
    let ended = outcome
        .code
        .map_or_else(|| "a signal".to_owned(), |c| format!("exit code {c}"));
    let output = if outcome.output.is_empty() {
        String::new()
    } else {
        format!("; output:\n{}", outcome.output)
    };
    ctx.shared.record(
        None,
        EntryKind::Step,
        format!("`{}` ended with {ended}{output}", run.command.join(" ")),
    );
    if outcome.code == Some(run.expect_exit) {
        Ok(())
    } else {
        Err(StepError::Exit {
            ended,
            expected: run.expect_exit,
            output,
        })
    }
}

async fn label_nodes(
    ctx: &Ctx,
    nodes: &[NodeName],
    key: &str,
    value: Option<&str>,
) -> Result<(), StepError> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    for node in nodes {
        let patch = json!({"metadata": {"labels": {key: value}}});
        api.patch(&node.value, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| StepError::Api {
                action: format!("label node {}", node.value),
                source,
            })?;
    }
    Ok(())
}

/// The WorkerPool a step acts on: the one it names, else the first (validation has a step
/// name its pool when there are several).
fn pool_of<'a>(ctx: &'a Ctx, named: Option<&'a Located<String>>) -> &'a str {
    named.map_or(ctx.scenario.first_pool().name.as_str(), |p| {
        p.value.as_str()
    })
}

/// Merge-patches the WorkerPool `pool`.
async fn patch_pool(ctx: &Ctx, pool: &str, patch: Value) -> Result<(), StepError> {
    let api: Api<WorkerPool> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    api.patch(pool, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|source| StepError::Api {
            action: format!("change worker pool {pool}"),
            source,
        })
}

async fn update_pool(ctx: &Ctx, update: &PoolUpdate) -> Result<(), StepError> {
    let pool = pool_of(ctx, update.pool.as_ref());
    let control_plane = update.control_plane.as_ref().or(update.kubernetes.as_ref());
    if let Some(version) = control_plane {
        let parsed = KubeVersion::parse(version)
            .map_err(|e| StepError::Invalid(format!("control-plane version {version:?}: {e}")))?;
        let mut supervisor = ctx.supervisor();
        supervisor.set_control_plane_version(parsed, &ctx.shared);
    }
    let now = jiff::fmt::temporal::DateTimePrinter::new()
        .precision(Some(0))
        .timestamp_to_string(&ctx.shared.clock().now());
    let mut spec = serde_json::Map::new();
    if let Some(os) = &update.os {
        spec.insert("machine".into(), json!({"image": {"version": os.value}}));
    }
    let mut kubernetes = serde_json::Map::new();
    if let Some(version) = &update.kubernetes {
        kubernetes.insert("version".into(), json!(version));
    }
    if let Some(kubelet) = &update.kubelet_config {
        kubernetes.insert("kubelet".into(), Value::Object(kubelet.value.clone()));
    }
    if !kubernetes.is_empty() {
        spec.insert("kubernetes".into(), Value::Object(kubernetes));
    }
    let mut rotation = serde_json::Map::new();
    if update.rotate_ca {
        rotation.insert(
            "certificateAuthorities".into(),
            json!({"lastInitiationTime": now}),
        );
    }
    if update.rotate_service_account_key {
        rotation.insert(
            "serviceAccountKey".into(),
            json!({"lastInitiationTime": now}),
        );
    }
    if !rotation.is_empty() {
        spec.insert("credentialsRotation".into(), Value::Object(rotation));
    }
    let mut patch = json!({"spec": spec});
    if update.force {
        patch["metadata"] = json!({"annotations": {keys::ANNOTATION_OPERATION: keys::OPERATION_FORCE_IN_PLACE_UPDATE}});
    }
    let generation = current_generation(ctx, pool).await?;
    patch_pool(ctx, pool, patch).await?;
    let verdict = wait_validated(ctx, pool, generation).await?;
    match (&update.expect_refused, verdict) {
        (None, Validation::Accepted) => {
            let mut judge = ctx.shared.judge();
            if let Some(state) = judge.world.pools.get_mut(pool) {
                state.update_requested = true;
                if let Some(os) = &update.os {
                    state.target_os = os.value.clone();
                }
                if let Some(version) = &update.kubernetes {
                    state.target_kubernetes = version.value.clone();
                }
            }
            Ok(())
        }
        (None, Validation::Refused { reason, message }) => {
            Err(StepError::Refused { reason, message })
        }
        (Some(pattern), Validation::Accepted) => Err(StepError::NotRefused {
            pattern: pattern.clone(),
        }),
        (Some(pattern), Validation::Refused { reason, message }) => {
            let regex = Regex::new(pattern).map_err(|e| {
                StepError::Invalid(format!("expectRefused {pattern:?} is not a regex: {e}"))
            })?;
            if regex.is_match(&reason) || regex.is_match(&message) {
                ctx.shared.record(
                    None,
                    EntryKind::Step,
                    format!("refused as expected: {reason}: {message}"),
                );
                Ok(())
            } else {
                Err(StepError::RefusedOtherwise {
                    pattern: pattern.clone(),
                    reason,
                    message,
                })
            }
        }
    }
}

/// What the WorkerPool controller said about a change.
enum Validation {
    Accepted,
    Refused { reason: String, message: String },
}

async fn current_generation(ctx: &Ctx, pool: &str) -> Result<i64, StepError> {
    let api: Api<WorkerPool> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let object = api.get(pool).await.map_err(|source| StepError::Api {
        action: format!("read worker pool {pool}"),
        source,
    })?;
    Ok(object.metadata.generation.unwrap_or(0))
}

/// Waits until the WorkerPool controller judged a generation newer than `before` (condition
/// `Valid` with a newer `observedGeneration`).
async fn wait_validated(ctx: &Ctx, name: &str, before: i64) -> Result<Validation, StepError> {
    let api: Api<WorkerPool> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let clock = ctx.shared.clock().clone();
    let deadline = clock.instant() + VALIDATION_WAIT;
    let mut last = String::from("no Valid condition");
    while clock.instant() < deadline {
        let pool = api.get(name).await.map_err(|source| StepError::Api {
            action: format!("read worker pool {name}"),
            source,
        })?;
        let valid = pool.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == inplace_orchestrator::workerpool::CONDITION_VALID)
        });
        if let Some(valid) = valid {
            last = format!(
                "Valid={} reason {} ({})",
                valid.status, valid.reason, valid.message
            );
            if valid.observed_generation.unwrap_or(0) > before {
                match valid.status.as_str() {
                    "True" => return Ok(Validation::Accepted),
                    "False" => {
                        return Ok(Validation::Refused {
                            reason: valid.reason.clone(),
                            message: valid.message.clone(),
                        });
                    }
                    _ => {}
                }
            }
        }
        clock.sleep(Duration::from_secs(1)).await;
    }
    Err(StepError::NotJudged {
        within: rackproof_clock::format_duration(VALIDATION_WAIT),
        last,
    })
}
