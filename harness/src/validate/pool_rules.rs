//! The WorkerPool's own rules ([`inplace_api::validate`], the functions the orchestrator's
//! WorkerPool controller runs) applied to a scenario before it runs: the pool as the run creates
//! it, then each `update` step in order, as the run would change the pool. What the orchestrator
//! would refuse is refused here, at the place in the file that asks for it.
//!
//! The model follows the run: the catalog and the pool are the objects the run creates
//! ([`objects`]); an update that names a Kubernetes or control-plane version first moves the
//! control plane (the pool is judged under it, as a restarted orchestrator judges it), then
//! patches the pool. A step with `expectRefused` leaves the pool as it was. Whether an update is
//! still in progress is only known while the scenario runs, so the rule against starting a second
//! one (`UpdateInProgress`) is left to the run.

use inplace_api::crd::{Annotations, ImageCatalogSpec, WorkerPoolSpec};
use inplace_api::pool::field;
use inplace_api::validate::{ValidationContext, Violations, validate_pool, validate_pool_update};
use inplace_api::version::KubeVersion;
use jiff::Timestamp;
use serde_json::Value;

use crate::diagnostic::Diagnostic;
use crate::engine::cluster::objects;
use crate::load::LoadedScenario;
use crate::scenario::{Located, Pool, PoolUpdate, Position, Step, Strategy};

/// Every refusal of the pool rules, at the scenario field it comes from. Judging stops at the
/// first refused step: the steps after it would be judged against a pool the run never has.
pub(super) fn check(loaded: &LoadedScenario) -> Vec<Diagnostic> {
    let mut refusals = Refusals {
        loaded,
        problems: Vec::new(),
    };
    for pool in loaded.scenario.pools() {
        judge(loaded, pool, &mut refusals);
    }
    refusals.problems
}

/// The diagnostics found so far.
struct Refusals<'a> {
    loaded: &'a LoadedScenario,
    problems: Vec<Diagnostic>,
}

impl Refusals<'_> {
    fn refuse(&mut self, at: Position, message: String, help: String) {
        self.problems
            .push(self.loaded.sources.diagnostic(at, message).with_help(help));
    }

    /// Each violation: the rule's name and problem, and the rule's fix as help.
    fn report(&mut self, violations: &Violations, at: impl Fn(&str) -> Position) {
        for violation in &violations.0 {
            self.refuse(
                at(&violation.field),
                format!(
                    "the worker pool rules refuse this ({:?}): {}",
                    violation.rule, violation.problem
                ),
                violation.fix.clone(),
            );
        }
    }

    /// A Kubernetes version written in the scenario, or a refusal at it.
    fn version(&mut self, text: &Located<String>) -> Option<KubeVersion> {
        match KubeVersion::parse(text) {
            Ok(parsed) => Some(parsed),
            Err(e) => {
                self.refuse(
                    text.at,
                    format!("{:?} is not a Kubernetes version: {e}", text.value),
                    "write it as major.minor.patch, e.g. \"1.34.2\"".to_owned(),
                );
                None
            }
        }
    }
}

/// Judges one pool and the `update` steps that change it.
fn judge(loaded: &LoadedScenario, pool: &Pool, refusals: &mut Refusals<'_>) -> Option<()> {
    let scenario = &loaded.scenario;
    if *pool.strategy == Strategy::AutoRollingUpdate {
        refusals.refuse(
            pool.strategy.at,
            "strategy `AutoRollingUpdate` replaces machines, and rackproof tests only the in-place update path".to_owned(),
            "use `AutoInPlaceUpdate` or `ManualInPlaceUpdate`".to_owned(),
        );
        // The in-place rules would only add noise about settings the rolling path ignores.
        return None;
    }
    let mut control_plane =
        refusals.version(pool.control_plane.as_ref().unwrap_or(&pool.kubernetes))?;
    let catalog = objects::image_catalog(scenario).spec;
    let size = pool
        .size
        .unwrap_or_else(|| u32::try_from(scenario.lab.node_names().len()).unwrap_or(u32::MAX));
    let start = scenario
        .clock
        .start
        .map_or(jiff::Timestamp::UNIX_EPOCH, |s| s.0);
    let mut spec = objects::worker_pool(pool, size, start).spec;
    let no_annotations = Annotations::new();
    let rules = Rules {
        catalog: &catalog,
        annotations: &no_annotations,
    };
    if let Err(violations) = validate_pool(&spec, &rules.context(control_plane, None)) {
        refusals.report(&violations, |path| pool_position(pool, path));
        return None;
    }
    for step in &scenario.steps {
        let Step::Update(update) = step else { continue };
        let other_pool = update.pool.as_ref().is_some_and(|p| p.value != pool.name);
        if update.expect_refused.is_some() || other_pool {
            continue;
        }
        let at = |path: &str| update_position(update, pool, path);
        let next_control_plane = match update.control_plane.as_ref().or(update.kubernetes.as_ref())
        {
            Some(text) => refusals.version(text)?,
            None => control_plane,
        };
        if next_control_plane != control_plane {
            let moved = rules.context(next_control_plane, Some(control_plane));
            if let Err(violations) = validate_pool_update(&spec, &spec, &moved) {
                refusals.report(&violations, at);
                return None;
            }
        }
        let next = match updated(&spec, update) {
            Ok(next) => next,
            Err(problem) => {
                let at = update
                    .kubelet_config
                    .as_ref()
                    .map_or(Position::default(), |k| k.at);
                refusals.refuse(at, problem, "write the fields of a kubelet configuration, e.g. `kubeReserved: { cpu: 100m }`".to_owned());
                return None;
            }
        };
        let judged = validate_pool_update(&spec, &next, &rules.context(next_control_plane, None));
        if let Err(violations) = judged {
            refusals.report(&violations, at);
            return None;
        }
        (spec, control_plane) = (next, next_control_plane);
    }
    Some(())
}

/// What stays the same for every judgement of one scenario.
struct Rules<'a> {
    catalog: &'a ImageCatalogSpec,
    annotations: &'a Annotations,
}

impl<'a> Rules<'a> {
    fn context(
        &self,
        control_plane: KubeVersion,
        previous: Option<KubeVersion>,
    ) -> ValidationContext<'a> {
        ValidationContext {
            control_plane_version: control_plane,
            previous_control_plane_version: previous,
            catalog: self.catalog,
            annotations: self.annotations,
            update_in_progress: false,
            // The catalog a scenario makes has no expiration dates, so the time judged by
            // does not matter.
            now: Timestamp::UNIX_EPOCH,
        }
    }
}

/// Where in the scenario's `pool` the pool field `path` comes from.
fn pool_position(pool: &Pool, path: &str) -> Position {
    let written = match path {
        field::MAX_SURGE => pool.max_surge.at,
        field::MAX_UNAVAILABLE => pool.max_unavailable.at,
        field::IMAGE_VERSION => pool.os.at,
        field::KUBERNETES_VERSION => pool.kubernetes.at,
        _ => pool.strategy.at,
    };
    if written.line == 0 {
        pool.strategy.at
    } else {
        written
    }
}

/// Where in an `update` step the pool field `path` comes from (the pool's own fields when the
/// step does not change them).
fn update_position(update: &PoolUpdate, pool: &Pool, path: &str) -> Position {
    let written = match path {
        field::IMAGE_VERSION => update.os.as_ref().map(|v| v.at),
        field::KUBERNETES_VERSION => update
            .kubernetes
            .as_ref()
            .or(update.control_plane.as_ref())
            .map(|v| v.at),
        kubelet if kubelet.starts_with("spec.kubernetes.kubelet") => {
            update.kubelet_config.as_ref().map(|v| v.at)
        }
        _ => None,
    };
    let first_written = || {
        [
            update.os.as_ref().map(|v| v.at),
            update.kubernetes.as_ref().map(|v| v.at),
            update.control_plane.as_ref().map(|v| v.at),
            update.kubelet_config.as_ref().map(|v| v.at),
        ]
        .into_iter()
        .flatten()
        .next()
    };
    written
        .or_else(first_written)
        .unwrap_or_else(|| pool_position(pool, path))
}

/// The pool spec after `update`, as the run's merge patch leaves it (credentials rotations,
/// which no rule judges, are left out); an error when the kubelet configuration can't be one.
fn updated(spec: &WorkerPoolSpec, update: &PoolUpdate) -> Result<WorkerPoolSpec, String> {
    let mut next = spec.clone();
    if let Some(os) = &update.os {
        next.machine.image.version = os.value.clone();
    }
    let kubernetes = next.kubernetes.get_or_insert_with(Default::default);
    if let Some(version) = &update.kubernetes {
        kubernetes.version = Some(version.value.clone());
    }
    if let Some(kubelet) = &update.kubelet_config {
        let mut merged = serde_json::to_value(kubernetes.kubelet.take().unwrap_or_default())
            .map_err(|e| format!("the pool's kubelet configuration can't be written: {e}"))?;
        merge_patch(&mut merged, &Value::Object(kubelet.value.clone()));
        kubernetes.kubelet = Some(
            serde_json::from_value(merged)
                .map_err(|e| format!("`kubeletConfig` is not a kubelet configuration: {e}"))?,
        );
    }
    Ok(next)
}

/// JSON merge patch (RFC 7386), as the API server applies the run's patch: objects merge key by
/// key, `null` removes a key, anything else replaces.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}
