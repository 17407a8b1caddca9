//! PodDisruptionBudgets: the status kube-controller-manager's disruption controller would keep
//! (kept here synchronously after every pod or budget change), and the eviction decision.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::pointer::At;
use crate::selector::LabelSelector;
use crate::state::{State, gr, meta_str};
use crate::store::Key;

fn pod_ready(pod: &Value) -> bool {
    pod.get("metadata")
        .and_then(|m| m.get("deletionTimestamp"))
        .is_none()
        && pod
            .get("status")
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("Ready")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            })
}

/// Whether a change of a pod from `before` to `after` (`None`: absent) can change a budget's
/// status: the pod appeared or went, or its labels, readiness or controller changed. Everything
/// else a pod write changes (heartbeat-like status fields, annotations, the node) no budget
/// counts.
pub(crate) fn counts_differ(before: Option<&Value>, after: Option<&Value>) -> bool {
    fn labels(pod: &Value) -> Option<&Value> {
        pod.get("metadata").and_then(|m| m.get("labels"))
    }
    fn owners(pod: &Value) -> Option<&Value> {
        pod.get("metadata").and_then(|m| m.get("ownerReferences"))
    }
    match (before, after) {
        (Some(before), Some(after)) => {
            labels(before) != labels(after)
                || pod_ready(before) != pod_ready(after)
                || owners(before) != owners(after)
        }
        (None, None) => false,
        (Some(_), None) | (None, Some(_)) => true,
    }
}

/// An int-or-string (`3` or `"50%"`) scaled against `total`.
fn scaled(value: &Value, total: i64, round_up: bool) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let percent: i64 = s.strip_suffix('%')?.parse().ok()?;
            let product = percent * total;
            Some(if round_up {
                (product + 99) / 100
            } else {
                product / 100
            })
        }
        _ => None,
    }
}

fn selector_of(pdb: &Value) -> Option<LabelSelector> {
    // A budget with an empty or missing selector matches no pods (policy/v1 matches all pods
    // with an empty selector `{}`).
    pdb.at("/spec/selector")
        .and_then(|s| LabelSelector::from_object(s).ok())
}

/// Whether a budget's expected pods are its pods' controllers' replicas (kube-controller-manager's
/// disruption controller: with `maxUnavailable`, or `minAvailable` as a percentage), rather than
/// the pods that exist (an integer `minAvailable`).
fn counts_by_controllers(pdb: &Value) -> bool {
    pdb.at("/spec/maxUnavailable").is_some()
        || pdb.at("/spec/minAvailable").is_some_and(Value::is_string)
}

/// What a budget counts among its namespace's pods, kept between refreshes (in [`State`]) so that
/// a pod change moves the counts by what that pod took away and added. With a thousand pods per
/// namespace, counting every pod after every pod change was quadratic.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tally {
    pods: i64,
    healthy: i64,
    /// Matching pods without a controller.
    uncontrolled: i64,
    /// Matching pods per controller, by (kind, name, uid).
    controllers: BTreeMap<(String, String, String), i64>,
}

/// A pod's controller, from its owner references: (kind, name, uid).
fn controller_of(pod: &Value) -> Option<(String, String, String)> {
    let owner = pod
        .at("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o.get("controller") == Some(&json!(true)))?;
    let text = |field: &str| owner.get(field).and_then(Value::as_str).map(str::to_owned);
    Some((text("kind")?, text("name")?, text("uid")?))
}

impl Tally {
    /// Every pod in `pods` the selector matches.
    fn of(selector: Option<&LabelSelector>, pods: &[&Value]) -> Self {
        let mut tally = Self::default();
        for pod in pods {
            tally.count(selector, Some(pod), 1);
        }
        tally
    }

    /// Counts `pod` in (`sign` 1) or out (-1) when the selector matches it.
    fn count(&mut self, selector: Option<&LabelSelector>, pod: Option<&Value>, sign: i64) {
        let Some(pod) = pod.filter(|pod| selector.is_some_and(|s| s.matches(pod))) else {
            return;
        };
        self.pods += sign;
        self.healthy += sign * i64::from(pod_ready(pod));
        match controller_of(pod) {
            Some(controller) => {
                let pods = self.controllers.entry(controller.clone()).or_default();
                *pods += sign;
                if *pods == 0 {
                    self.controllers.remove(&controller);
                }
            }
            None => self.uncontrolled += sign,
        }
    }

    /// The replicas of the pods' controllers, each once; `None` when a pod has no controller, or
    /// one whose scale is unknown or missing (the real controller's `NoControllerRef`: no
    /// disruption). A ReplicaSet, StatefulSet or ReplicationController's `spec.replicas` (a
    /// Deployment's ReplicaSet counts with its own).
    fn replicas(&self, state: &State, namespace: &str) -> Option<i64> {
        if self.uncontrolled > 0 {
            return None;
        }
        let mut replicas = 0;
        for (kind, name, uid) in self.controllers.keys() {
            let (group, resource) = match kind.as_str() {
                "ReplicaSet" => ("apps", "replicasets"),
                "StatefulSet" => ("apps", "statefulsets"),
                "ReplicationController" => ("", "replicationcontrollers"),
                _ => return None,
            };
            let controller = state.store.get(&Key {
                gr: gr(group, resource),
                namespace: namespace.to_owned(),
                name: name.clone(),
            })?;
            if meta_str(controller, "uid") != Some(uid.as_str()) {
                return None;
            }
            replicas += controller
                .at("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
        }
        Some(replicas)
    }
}

/// The status fields of `pdb` for `expected` matching pods of which `healthy` are ready; with
/// `controllers` (see [`counts_by_controllers`]), `expected` is their replicas, and `None`
/// allows no disruption.
fn status(
    pdb: &Value,
    (expected, healthy): (i64, i64),
    controllers: Option<Option<i64>>,
    now: &str,
) -> Value {
    let (expected, no_controller) = match controllers {
        Some(Some(replicas)) => (replicas, false),
        Some(None) => (expected, true),
        None => (expected, false),
    };
    let desired = if let Some(min) = pdb.at("/spec/minAvailable") {
        scaled(min, expected, true).unwrap_or(0)
    } else if let Some(max) = pdb.at("/spec/maxUnavailable") {
        (expected - scaled(max, expected, true).unwrap_or(0)).max(0)
    } else {
        0
    };
    let allowed = if no_controller {
        0
    } else {
        (healthy - desired).max(0)
    };
    let previous = pdb.at("/status/conditions/0");
    let (status, reason) = if no_controller {
        ("False", "SyncFailed")
    } else if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let transition = match previous {
        Some(p) if p.get("status").and_then(Value::as_str) == Some(status) => {
            p.get("lastTransitionTime").cloned().unwrap_or(json!(now))
        }
        _ => json!(now),
    };
    json!({
        "observedGeneration": pdb.at("/metadata/generation").cloned().unwrap_or(json!(1)),
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [{
            "type": "DisruptionAllowed", "status": status, "reason": reason, "message": "",
            "observedGeneration": pdb.at("/metadata/generation").cloned().unwrap_or(json!(1)),
            "lastTransitionTime": transition,
        }],
    })
}

/// Why budgets are looked at again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// A budget changed: every budget of the namespace counts every pod again.
    Budget,
    /// A pod changed: budgets are looked at only if some pod of the namespace changed what they
    /// count since the last time (the store records those changes, see [`counts_differ`]), and
    /// their tallies move by what those pods added and took away. The counts stay exact: every
    /// budget write (its creation, a new selector, a status someone else wrote) counts every
    /// pod again.
    Pod,
    /// A controller (ReplicaSet, StatefulSet, ReplicationController) changed: its replicas may
    /// be a budget's expected pods.
    Controller,
}

/// Recomputes the status of every budget in `namespace`, writing only those that changed.
/// Reads the pods in place (no copies), and only when a budget has no tally yet.
pub(crate) fn refresh_namespace(state: &mut State, namespace: &str, trigger: Trigger, now: &str) {
    let changes = state.store.take_counted_pod_changes(namespace);
    if trigger == Trigger::Pod && changes.is_empty() {
        return;
    }
    if trigger == Trigger::Budget {
        // Counted afresh below, and a deleted budget's tally goes.
        state
            .budget_tallies
            .retain(|key, _| key.namespace != namespace);
    }
    let pdbs_gr = gr("policy", "poddisruptionbudgets");
    let pods_gr = gr("", "pods");
    let mut changed: Vec<(String, Value)> = Vec::new();
    let mut tallies: Vec<(Key, Tally)> = Vec::new();
    {
        let mut budgets = state
            .store
            .range(&pdbs_gr, Some(namespace), None)
            .peekable();
        if budgets.peek().is_none() {
            return;
        }
        let mut pods: Option<Vec<&Value>> = None;
        for ((_, name), pdb) in budgets {
            let selector = selector_of(pdb);
            let key = Key {
                gr: pdbs_gr.clone(),
                namespace: namespace.to_owned(),
                name: name.clone(),
            };
            let tally = match (trigger, state.budget_tallies.get(&key)) {
                (Trigger::Pod | Trigger::Controller, Some(tally)) => {
                    let mut tally = tally.clone();
                    for change in &changes {
                        tally.count(selector.as_ref(), change.before.as_deref(), -1);
                        tally.count(selector.as_ref(), change.after.as_deref(), 1);
                    }
                    tally
                }
                _ => {
                    let pods = pods.get_or_insert_with(|| {
                        state
                            .store
                            .range(&pods_gr, Some(namespace), None)
                            .map(|(_, v)| &**v)
                            .collect()
                    });
                    Tally::of(selector.as_ref(), pods)
                }
            };
            let controllers = counts_by_controllers(pdb).then(|| tally.replicas(state, namespace));
            let status = status(pdb, (tally.pods, tally.healthy), controllers, now);
            tallies.push((key, tally));
            let mut comparable = status.clone();
            if let (Some(old), Some(new)) = (
                pdb.at("/status/conditions/0/lastTransitionTime"),
                comparable.at_mut("/conditions/0/lastTransitionTime"),
            ) {
                *new = old.clone();
            }
            if pdb.get("status") == Some(&comparable) {
                continue;
            }
            let mut pdb = (**pdb).clone();
            pdb["status"] = status;
            changed.push((name.clone(), pdb));
        }
    }
    state.budget_tallies.extend(tallies);
    for (name, pdb) in changed {
        state.store.put(
            &Key {
                gr: pdbs_gr.clone(),
                namespace: namespace.to_owned(),
                name,
            },
            pdb,
        );
    }
}

/// Whether evicting `pod` is allowed now; Err(429) when a budget forbids it.
pub(crate) fn check_eviction(state: &State, pod: &Value) -> Result<(), ApiError> {
    let phase = pod
        .at("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    if matches!(phase, "Succeeded" | "Failed" | "Pending") {
        return Ok(());
    }
    let namespace = meta_str(pod, "namespace").unwrap_or_default();
    let matching: Vec<&Value> = state
        .store
        .range(&gr("policy", "poddisruptionbudgets"), Some(namespace), None)
        .map(|(_, v)| &**v)
        .filter(|pdb| {
            pdb.at("/spec/selector")
                .and_then(|s| LabelSelector::from_object(s).ok())
                .is_some_and(|s| s.matches(pod))
        })
        .collect();
    match matching.as_slice() {
        [] => Ok(()),
        [pdb] => {
            let allowed = pdb
                .at("/status/disruptionsAllowed")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let healthy = pdb
                .at("/status/currentHealthy")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let desired = pdb
                .at("/status/desiredHealthy")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let always = pdb
                .at("/spec/unhealthyPodEvictionPolicy")
                .and_then(Value::as_str)
                == Some("AlwaysAllow");
            if !pod_ready(pod) && (always || healthy >= desired) {
                return Ok(());
            }
            if allowed > 0 {
                return Ok(());
            }
            let name = meta_str(pdb, "name").unwrap_or_default();
            Err(ApiError::too_many_requests("Cannot evict pod as it would violate the pod's disruption budget.").with_details(json!({
                "causes": [{"reason": "DisruptionBudget", "message": format!("The disruption budget {name} needs {desired} healthy pods and has {healthy} currently")}]
            })))
        }
        _ => Err(ApiError::internal(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compute(pdb: &Value, pods: &[&Value], now: &str) -> Value {
        let tally = Tally::of(selector_of(pdb).as_ref(), pods);
        status(pdb, (tally.pods, tally.healthy), None, now)
    }

    fn pod(name: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name, "labels": {"app": "a"}}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    #[test]
    fn status_follows_min_available_and_max_unavailable() {
        let pods = [pod("a", true), pod("b", true), pod("c", false)];
        let refs: Vec<&Value> = pods.iter().collect();
        let min = json!({"metadata": {"generation": 1}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "a"}}}});
        let status = compute(&min, &refs, "t");
        assert_eq!(
            (
                status["expectedPods"].as_i64(),
                status["currentHealthy"].as_i64(),
                status["desiredHealthy"].as_i64(),
                status["disruptionsAllowed"].as_i64()
            ),
            (Some(3), Some(2), Some(2), Some(0))
        );
        let max = json!({"metadata": {"generation": 1}, "spec": {"maxUnavailable": "34%", "selector": {"matchLabels": {"app": "a"}}}});
        let status = compute(&max, &refs, "t");
        assert_eq!(status["desiredHealthy"], 1);
        assert_eq!(status["disruptionsAllowed"], 1);
    }
}
