//! Writes to Nodes and Machines that every controller shares: label/annotation/cordon patches
//! (JSON merge patches, which need no resourceVersion), the `InPlaceUpdate` condition and Machine
//! status (replaced over the caller's copy with its resourceVersion; on a 409 read afresh and
//! retried).

use std::collections::BTreeMap;

use inplace_api::crd::Machine;
use inplace_api::keys::{
    ANNOTATION_UPDATE_FAILED_REASON, CONDITION_IN_PLACE_UPDATE, LABEL_UPDATE_RESULT,
    MachineOperationType, MachinePhase, MachineState, REASON_READY_FOR_UPDATE,
    UPDATE_RESULT_FAILED,
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Api, ResourceExt};
use serde_json::{Map, Value, json};

use crate::Context;
use crate::error::{Error, is_conflict, is_not_found, kube};
use crate::write::Write;

/// How often a read-modify-write is tried before giving up with [`Error::Contended`].
pub(crate) const ATTEMPTS: usize = 8;

/// A metadata/spec change to a node: `Some` sets, `None` removes.
#[derive(Debug, Default)]
pub(crate) struct NodePatch {
    pub(crate) labels: BTreeMap<&'static str, Option<String>>,
    pub(crate) annotations: BTreeMap<&'static str, Option<String>>,
    pub(crate) unschedulable: Option<bool>,
}

impl NodePatch {
    pub(crate) fn label(mut self, key: &'static str, value: Option<&str>) -> Self {
        self.labels.insert(key, value.map(str::to_owned));
        self
    }

    pub(crate) fn annotation(mut self, key: &'static str, value: Option<&str>) -> Self {
        self.annotations.insert(key, value.map(str::to_owned));
        self
    }

    pub(crate) fn unschedulable(mut self, value: bool) -> Self {
        self.unschedulable = Some(value);
        self
    }

    /// Whether applying the patch to `node` would change anything.
    pub(crate) fn changes(&self, node: &Node) -> bool {
        let labels = node.metadata.labels.as_ref();
        let annotations = node.metadata.annotations.as_ref();
        let differs = |map: Option<&BTreeMap<String, String>>, key: &str, want: &Option<String>| {
            map.and_then(|m| m.get(key)) != want.as_ref()
        };
        self.labels.iter().any(|(k, v)| differs(labels, k, v))
            || self
                .annotations
                .iter()
                .any(|(k, v)| differs(annotations, k, v))
            || self.unschedulable.is_some_and(|u| {
                node.spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false)
                    != u
            })
    }

    /// `node` as it is once the patch is applied.
    pub(crate) fn apply(&self, node: &mut Node) {
        for (key, value) in &self.labels {
            let labels = node.metadata.labels.get_or_insert_with(BTreeMap::new);
            match value {
                Some(v) => labels.insert((*key).to_owned(), v.clone()),
                None => labels.remove(*key),
            };
        }
        for (key, value) in &self.annotations {
            let annotations = node.metadata.annotations.get_or_insert_with(BTreeMap::new);
            match value {
                Some(v) => annotations.insert((*key).to_owned(), v.clone()),
                None => annotations.remove(*key),
            };
        }
        if let Some(u) = self.unschedulable {
            node.spec.get_or_insert_with(Default::default).unschedulable = Some(u);
        }
    }

    fn to_json(&self) -> Value {
        let to_map = |m: &BTreeMap<&'static str, Option<String>>| {
            let mut out = Map::new();
            for (k, v) in m {
                out.insert(
                    (*k).to_owned(),
                    v.clone().map(Value::String).unwrap_or(Value::Null),
                );
            }
            Value::Object(out)
        };
        let mut patch = json!({ "metadata": { "labels": to_map(&self.labels), "annotations": to_map(&self.annotations) } });
        if let Some(u) = self.unschedulable {
            patch["spec"] = json!({ "unschedulable": u });
        }
        patch
    }
}

/// Applies `patch` to the node unless it is already in that state. A missing node is not an error.
pub(crate) async fn patch_node(
    ctx: &Context,
    node: &Node,
    patch: NodePatch,
) -> Result<bool, Error> {
    if !patch.changes(node) {
        return Ok(false);
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    let api: Api<Node> = Api::all(ctx.client.clone());
    match ctx
        .write(&api, Write::MergePatch(&name, patch.to_json()))
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(kube(format!("patch node {name}"))(e)),
    }
}

/// A JSON merge patch of `node` that applies only to the version of it `node` is: it carries
/// `metadata.resourceVersion`, which the API server checks (409 when the Node changed since).
/// Returns the Node as written (labels, annotations and cordon of the patch applied, the new
/// resourceVersion), or `None` on a conflict or when the Node is gone.
pub(crate) async fn patch_node_if_unchanged(
    ctx: &Context,
    node: &Node,
    patch: &NodePatch,
) -> Result<Option<Node>, Error> {
    let name = node.name_any();
    let mut body = patch.to_json();
    body["metadata"]["resourceVersion"] = json!(node.metadata.resource_version);
    let api: Api<Node> = Api::all(ctx.client.clone());
    match ctx.write(&api, Write::MergePatch(&name, body)).await {
        Ok(version) => {
            let mut written = node.clone();
            patch.apply(&mut written);
            written.metadata.resource_version = version;
            Ok(Some(written))
        }
        Err(e) if is_conflict(&e) || is_not_found(&e) => Ok(None),
        Err(e) => Err(kube(format!("patch node {name}"))(e)),
    }
}

/// Writes the failed mark of an update timeout (label `update-result=failed`, the reason
/// annotation) unless a result is there first.
///
/// The decision "no result came in time" was taken on `node` as this pass read it; the agent may
/// have written its result since. So the mark is a merge patch carrying that read's
/// resourceVersion: if the Node changed meanwhile the server refuses it, the Node is read afresh
/// and the decision taken again — a Node that carries an `update-result` by then keeps it, and
/// so does one whose `InPlaceUpdate` condition no longer says `ReadyForUpdate` (someone reset
/// it). Returns the marked Node, or `None` when there is nothing to mark any more.
pub(crate) async fn mark_timed_out(
    ctx: &Context,
    node: &Node,
    reason: &str,
) -> Result<Option<Node>, Error> {
    let name = node.name_any();
    let api: Api<Node> = Api::all(ctx.client.clone());
    let mark = NodePatch::default()
        .label(LABEL_UPDATE_RESULT, Some(UPDATE_RESULT_FAILED))
        .annotation(ANNOTATION_UPDATE_FAILED_REASON, Some(reason));
    let mut current = node.clone();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            current = match api.get(&name).await {
                Ok(n) => n,
                Err(e) if is_not_found(&e) => return Ok(None),
                Err(e) => return Err(kube(format!("read node {name}"))(e)),
            };
        }
        let waiting = label(&current, LABEL_UPDATE_RESULT).is_none()
            && in_place_condition(&current).and_then(|c| c.reason.as_deref())
                == Some(REASON_READY_FOR_UPDATE);
        if !waiting {
            return Ok(None);
        }
        if let Some(marked) = patch_node_if_unchanged(ctx, &current, &mark).await? {
            return Ok(Some(marked));
        }
    }
    Err(Error::Contended {
        action: format!("mark node {name} failed after its update timeout"),
    })
}

/// The node's `InPlaceUpdate` condition, if any.
pub(crate) fn in_place_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == CONDITION_IN_PLACE_UPDATE)
}

/// Sets (`Some(reason, message)`) or removes (`None`) the `InPlaceUpdate` condition of `node`.
///
/// As [`update_machine_status`] does, the first attempt writes over `node` as the caller has it
/// (the pass's copy from the watch cache) with its resourceVersion; a stale copy is refused with
/// a conflict and the next attempt reads the Node afresh, and a copy that already says what is
/// wanted is read again before deciding there is nothing to do. Returns the Node as it now is —
/// the written copy carrying the resourceVersion the server answered with — so a second condition
/// in the same pass writes over it without a conflict.
pub(crate) async fn set_condition(
    ctx: &Context,
    node: &Node,
    value: Option<(&str, &str)>,
    now: Timestamp,
) -> Result<Node, Error> {
    let name = node.name_any();
    let api: Api<Node> = Api::all(ctx.client.clone());
    let mut cached = Some(node.clone());
    for _ in 0..ATTEMPTS {
        let from_cache = cached.is_some();
        let mut current = match cached.take() {
            Some(n) => n,
            None => match api.get(&name).await {
                Ok(n) => n,
                Err(e) if is_not_found(&e) => return Ok(node.clone()),
                Err(e) => return Err(kube(format!("read node {name}"))(e)),
            },
        };
        if !with_condition(&mut current, value, now) {
            if from_cache {
                continue;
            }
            return Ok(current);
        }
        match ctx.write(&api, Write::ReplaceStatus(&name, &current)).await {
            Ok(version) => {
                current.metadata.resource_version = version;
                return Ok(current);
            }
            Err(e) if is_conflict(&e) => continue,
            Err(e) if is_not_found(&e) => return Ok(current),
            Err(e) => {
                return Err(kube(format!(
                    "update the InPlaceUpdate condition of node {name}"
                ))(e));
            }
        }
    }
    Err(Error::Contended {
        action: format!("update the InPlaceUpdate condition of node {name}"),
    })
}

/// Sets or removes the `InPlaceUpdate` condition of `node`; whether that changed it.
fn with_condition(node: &mut Node, value: Option<(&str, &str)>, now: Timestamp) -> bool {
    let status = node.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let existing = conditions
        .iter()
        .position(|c| c.type_ == CONDITION_IN_PLACE_UPDATE);
    match (value, existing) {
        (None, None) => false,
        (None, Some(i)) => {
            conditions.remove(i);
            true
        }
        (Some((reason, message)), found) => {
            if let Some(i) = found
                && conditions[i].reason.as_deref() == Some(reason)
                && conditions[i].message.as_deref() == Some(message)
            {
                return false;
            }
            let condition = NodeCondition {
                type_: CONDITION_IN_PLACE_UPDATE.to_owned(),
                status: "True".to_owned(),
                reason: Some(reason.to_owned()),
                message: Some(message.to_owned()),
                last_transition_time: Some(Time(now)),
                last_heartbeat_time: Some(Time(now)),
            };
            match found {
                Some(i) => conditions[i] = condition,
                None => conditions.push(condition),
            }
            true
        }
    }
}

/// A change to a Machine's status.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PhaseChange {
    pub(crate) phase: MachinePhase,
    pub(crate) description: String,
    pub(crate) state: MachineState,
    pub(crate) operation: MachineOperationType,
}

/// Sets the Machine's phase (stamping `lastUpdateTime` only when the phase changes) and, if given,
/// its conditions (copied from the node).
///
/// The first attempt writes over `machine` as the caller read it (from the watch cache), with its
/// resourceVersion: if that copy is stale the server refuses with a conflict and the next attempt
/// reads the Machine afresh. A copy that already says what is wanted proves nothing (it may be
/// older than a write since), so then the Machine is read before deciding there is nothing to do.
pub(crate) async fn update_machine_status(
    ctx: &Context,
    machine: &Machine,
    change: Option<&PhaseChange>,
    conditions: Option<&[NodeCondition]>,
    now: Timestamp,
) -> Result<(), Error> {
    let namespace = machine.namespace().unwrap_or_default();
    let name = machine.name_any();
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut cached = Some(machine.clone());
    for _ in 0..ATTEMPTS {
        let from_cache = cached.is_some();
        let mut machine = match cached.take() {
            Some(m) => m,
            None => match api.get(&name).await {
                Ok(m) => m,
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) => return Err(kube(format!("read machine {namespace}/{name}"))(e)),
            },
        };
        let before = machine.status.clone();
        let status = machine.status.get_or_insert_with(Default::default);
        if let Some(change) = change
            && status.current_status.phase.as_ref() != Some(&change.phase)
        {
            status.current_status.phase = Some(change.phase.clone());
            status.current_status.last_update_time = Some(Time(now));
            status.last_operation.description = change.description.clone();
            status.last_operation.state = Some(change.state.clone());
            status.last_operation.type_ = Some(change.operation.clone());
            status.last_operation.last_update_time = Some(Time(now));
        }
        if let Some(conditions) = conditions {
            status.conditions = conditions.to_vec();
        }
        if machine.status == before {
            if from_cache {
                continue;
            }
            return Ok(());
        }
        match ctx.write(&api, Write::ReplaceStatus(&name, &machine)).await {
            Ok(_) => return Ok(()),
            Err(e) if is_conflict(&e) => continue,
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => {
                return Err(kube(format!(
                    "update the status of machine {namespace}/{name}"
                ))(e));
            }
        }
    }
    Err(Error::Contended {
        action: format!("update the status of machine {namespace}/{name}"),
    })
}

/// Node conditions as copied onto a Machine: heartbeat times dropped so the copy changes only
/// when a condition does.
pub(crate) fn mirrored_conditions(node: &Node) -> Vec<NodeCondition> {
    let mut conditions: Vec<NodeCondition> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|mut c| {
            c.last_heartbeat_time = None;
            c
        })
        .collect();
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    conditions
}

/// Whether the node's `Ready` condition is `True`.
pub(crate) fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// A label of the node.
pub(crate) fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use rackproof_apiserver::ApiServer;
    use rackproof_clock::Clock;

    use super::*;
    use crate::Config;

    fn reasons(node: &Node) -> Vec<(String, Option<String>)> {
        let conditions = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        conditions
            .into_iter()
            .map(|c| (c.type_, c.reason))
            .collect()
    }

    /// A condition written over a stale copy keeps what others wrote since; a copy that already
    /// says what is wanted is checked against the API; the returned Node takes the next write.
    #[tokio::test(start_paused = true)]
    async fn a_condition_written_over_a_stale_copy_loses_nothing() {
        let clock = Clock::simulated("2026-01-01T00:00:00Z".parse().unwrap());
        let server = ApiServer::new(clock.clone());
        let ctx = Context::new(server.admin_client(), clock.clone(), Config::default());
        let api: Api<Node> = Api::all(ctx.client.clone());
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
        let copy = api.create(&Default::default(), &node).await.unwrap();

        // The kubelet reports Ready after the copy was taken.
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}});
        api.patch_status("n1", &Default::default(), &kube::api::Patch::Merge(ready))
            .await
            .unwrap();
        let written = set_condition(
            &ctx,
            &copy,
            Some(("SelectedForUpdate", "selected")),
            clock.now(),
        )
        .await
        .unwrap();
        let stored = api.get("n1").await.unwrap();
        assert_eq!(
            reasons(&stored),
            vec![
                ("Ready".into(), Some("KubeletReady".into())),
                (
                    CONDITION_IN_PLACE_UPDATE.into(),
                    Some("SelectedForUpdate".into())
                )
            ]
        );
        assert_eq!(
            written.metadata.resource_version, stored.metadata.resource_version,
            "the returned Node is the stored one"
        );

        // Someone removes the condition; a copy that still shows it does not end the matter.
        let mut cleared = stored.clone();
        cleared
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()
            .retain(|c| c.type_ != CONDITION_IN_PLACE_UPDATE);
        api.replace_status("n1", &Default::default(), &cleared)
            .await
            .unwrap();
        let again = set_condition(
            &ctx,
            &written,
            Some(("SelectedForUpdate", "selected")),
            clock.now(),
        )
        .await
        .unwrap();
        assert_eq!(
            reasons(&api.get("n1").await.unwrap()).len(),
            2,
            "the condition is written again"
        );

        // The returned Node takes the next condition at once.
        let next = set_condition(
            &ctx,
            &again,
            Some(("DrainSuccessful", "drained")),
            clock.now(),
        )
        .await
        .unwrap();
        let stored = api.get("n1").await.unwrap();
        assert_eq!(
            next.metadata.resource_version,
            stored.metadata.resource_version
        );
        assert_eq!(reasons(&stored)[1].1.as_deref(), Some("DrainSuccessful"));
    }
}
