//! The admission kube-apiserver's default plugins do to pods: priority from the PriorityClass
//! and the default not-ready/unreachable tolerations.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::pointer::At;
use crate::registry::Resource;

use super::defaults::set_default;

/// Well-known PriorityClasses kube-apiserver creates at startup, with their values.
pub(super) const SYSTEM_PRIORITY_CLASSES: &[(&str, i64)] = &[
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

/// How long pods tolerate `not-ready` and `unreachable` nodes unless they say otherwise.
pub(super) const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// What changes an object after its fields are tracked, for a create (`old` None) or an update
/// of the main resource: the namespace strategy's finalizer, and the mutating admission plugins
/// of kube-apiserver's default set that change what clients write:
/// - Priority: a pod's `priority` and `preemptionPolicy` from its PriorityClass (0 and
///   `PreemptLowerPriority` without one); kept from the old pod on updates.
/// - DefaultTolerationSeconds: pods tolerate `not-ready` and `unreachable` NoExecute taints
///   for 300 s unless they already tolerate them.
/// - TaintNodesByCondition: a new Node gets the `node.kubernetes.io/not-ready:NoSchedule` taint.
pub(crate) fn admit(
    resource: &Resource,
    object: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Pod") if object.get("spec").is_some_and(Value::is_object) => {
            admit_priority(object, old)?;
            default_tolerations(&mut object["spec"]);
        }
        // The namespace strategy (after field tracking, like admission): the `kubernetes`
        // finalizer on create, kept from the old namespace on updates.
        ("", "Namespace") if object.get("spec").is_none_or(Value::is_object) => match old
            .and_then(|old| old.at("/spec/finalizers"))
        {
            Some(finalizers) => object["spec"]["finalizers"] = finalizers.clone(),
            None if old.is_none() => set_default(object, "/spec/finalizers", json!(["kubernetes"])),
            None => {}
        },
        ("", "Node") if old.is_none() => {
            let taint = json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"});
            if !object.get("spec").is_none_or(Value::is_object) {
                return Ok(());
            }
            let taints = object["spec"].get("taints").cloned().unwrap_or(json!([]));
            if let Some(list) = taints.as_array() {
                let present = list.iter().any(|t| {
                    t.get("key") == taint.get("key") && t.get("effect") == taint.get("effect")
                });
                if !present {
                    let mut list = list.clone();
                    list.push(taint);
                    object["spec"]["taints"] = Value::Array(list);
                }
            }
        }
        _ => {}
    }
    Ok(())
}

pub(super) fn admit_priority(pod: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
    let spec = &mut pod["spec"];
    if let Some(old) = old {
        for field in ["priority", "preemptionPolicy"] {
            if let Some(value) = old.at(&format!("/spec/{field}")) {
                spec[field] = value.clone();
            }
        }
        return Ok(());
    }
    let name = pod
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let spec = &mut pod["spec"];
    let class = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let priority = if class.is_empty() {
        0
    } else {
        match SYSTEM_PRIORITY_CLASSES
            .iter()
            .find(|(known, _)| *known == class)
        {
            Some((_, value)) => *value,
            None => {
                return Err(ApiError::forbidden_by_admission(
                    "",
                    "pods",
                    &name,
                    &format!("no PriorityClass with name {class} was found"),
                ));
            }
        }
    };
    if let Some(given) = spec.get("priority").filter(|p| !p.is_null())
        && given.as_i64() != Some(priority)
    {
        return Err(ApiError::forbidden_by_admission(
            "",
            "pods",
            &name,
            &format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
            ),
        ));
    }
    spec["priority"] = json!(priority);
    match spec.get("preemptionPolicy").and_then(Value::as_str) {
        None => spec["preemptionPolicy"] = json!("PreemptLowerPriority"),
        Some("PreemptLowerPriority") => {}
        Some(other) => {
            return Err(ApiError::forbidden_by_admission(
                "",
                "pods",
                &name,
                &format!(
                    "the string value of PreemptionPolicy ({other}) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name"
                ),
            ));
        }
    }
    Ok(())
}

pub(super) fn default_tolerations(spec: &mut Value) {
    let existing = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let tolerates = |key: &str| {
        existing.iter().any(|t| {
            let t_key = t.get("key").and_then(Value::as_str).unwrap_or_default();
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or_default();
            (t_key == key || t_key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        })
    };
    let mut tolerations = existing.clone();
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        if !tolerates(key) {
            tolerations.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": DEFAULT_TOLERATION_SECONDS}));
        }
    }
    if tolerations.len() != existing.len() {
        spec["tolerations"] = Value::Array(tolerations);
    }
}
