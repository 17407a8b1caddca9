//! Defaulting on create (pod specs, node pod CIDRs, per-kind fields), what create resets, and
//! the empty fields kube-apiserver drops before storing.

use base64::Engine;
use serde_json::{Value, json};

use crate::pointer::At;
use crate::registry::Resource;
use crate::schema;

pub(super) fn set_default(object: &mut Value, pointer: &str, value: Value) {
    if object.at(pointer).is_some() {
        return;
    }
    let mut current = object;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if !current.is_object() {
            return;
        }
        if i == parts.len() - 1 {
            current[*part] = value;
            return;
        }
        if current.get(*part).is_none() {
            current[*part] = json!({});
        }
        current = &mut current[*part];
    }
}

pub(super) fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "/restartPolicy", json!("Always"));
    set_default(spec, "/terminationGracePeriodSeconds", json!(30));
    set_default(spec, "/dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "/schedulerName", json!("default-scheduler"));
    set_default(spec, "/securityContext", json!({}));
    for list in ["containers", "initContainers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for container in containers {
                if !container.is_object() {
                    continue;
                }
                let image = container
                    .get("image")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let tagless = !image.rsplit('/').next().unwrap_or_default().contains(':')
                    && !image.contains('@');
                let policy = if tagless || image.ends_with(":latest") {
                    "Always"
                } else {
                    "IfNotPresent"
                };
                set_default(container, "/imagePullPolicy", json!(policy));
                set_default(
                    container,
                    "/terminationMessagePath",
                    json!("/dev/termination-log"),
                );
                set_default(container, "/terminationMessagePolicy", json!("File"));
                set_default(container, "/resources", json!({}));
            }
        }
    }
}

/// `spec.podCIDR` and `spec.podCIDRs` as kube-apiserver v1.20's conversion keeps them (found
/// by the differential suite): a `podCIDR` that is not `podCIDRs`' first entry wins and becomes
/// its one entry; without `podCIDR`, it becomes `podCIDRs`' first entry.
pub(super) fn sync_pod_cidrs(node: &mut Value) {
    let Some(spec) = node.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let first = spec
        .get("podCIDRs")
        .and_then(Value::as_array)
        .and_then(|list| list.first())
        .cloned();
    let single = spec
        .get("podCIDR")
        .filter(|c| c.as_str().is_some_and(|c| !c.is_empty()))
        .cloned();
    match (single, first) {
        (Some(single), first) if first.as_ref() != Some(&single) => {
            spec.insert("podCIDRs".to_owned(), Value::Array(vec![single]));
        }
        (None, Some(first)) => {
            spec.insert("podCIDR".to_owned(), first);
        }
        _ => {}
    }
}

/// Defaults every write gets (create and update).
pub(crate) fn default(resource: &Resource, object: &mut Value) {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Service") => super::service::default(object),
        ("", "Pod") => {
            if let Some(spec) = object.get_mut("spec") {
                default_pod_spec(spec);
                // A Pod's own default (SetDefaults_Pod), not one of pod templates.
                set_default(spec, "/enableServiceLinks", json!(true));
            }
            null_condition_times(object, &["lastProbeTime", "lastTransitionTime"]);
        }
        // NodeStatus' structs without omitempty: always written, zero-valued if unset.
        ("", "Node") if object.get("status").is_none_or(Value::is_object) => {
            sync_pod_cidrs(object);
            set_default(
                object,
                "/status/daemonEndpoints/kubeletEndpoint/Port",
                json!(0),
            );
            for field in [
                "machineID",
                "systemUUID",
                "bootID",
                "kernelVersion",
                "osImage",
                "containerRuntimeVersion",
                "kubeletVersion",
                "kubeProxyVersion",
                "operatingSystem",
                "architecture",
            ] {
                set_default(object, &format!("/status/nodeInfo/{field}"), json!(""));
            }
            null_condition_times(object, &["lastHeartbeatTime", "lastTransitionTime"]);
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            set_default(object, "/spec/conversion", json!({"strategy": "None"}));
            let storage: Vec<Value> = object
                .at("/spec/versions")
                .and_then(Value::as_array)
                .map(|versions| {
                    versions
                        .iter()
                        .filter(|v| v.get("storage") == Some(&json!(true)))
                        .filter_map(|v| v.get("name").cloned())
                        .collect()
                })
                .unwrap_or_default();
            if !storage.is_empty()
                && object
                    .at("/status/storedVersions")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty)
                && object.get("status").is_none_or(Value::is_object)
            {
                object["status"]["storedVersions"] = Value::Array(storage);
            }
        }
        ("apps", "Deployment") => {
            set_default(object, "/spec/replicas", json!(1));
            set_default(
                object,
                "/spec/strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
            );
            set_default(object, "/spec/revisionHistoryLimit", json!(10));
            set_default(object, "/spec/progressDeadlineSeconds", json!(600));
            if let Some(spec) = object.at_mut("/spec/template/spec") {
                default_pod_spec(spec);
            }
        }
        ("apps", "ReplicaSet" | "StatefulSet") => {
            set_default(object, "/spec/replicas", json!(1));
            if let Some(spec) = object.at_mut("/spec/template/spec") {
                default_pod_spec(spec);
            }
        }
        ("apps", "DaemonSet") => {
            set_default(
                object,
                "/spec/updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            set_default(object, "/spec/revisionHistoryLimit", json!(10));
            if let Some(spec) = object.at_mut("/spec/template/spec") {
                default_pod_spec(spec);
            }
        }
        ("", "Secret") => {
            set_default(object, "/type", json!("Opaque"));
            if let Some(Value::Object(string_data)) =
                object.as_object_mut().and_then(|o| o.remove("stringData"))
            {
                if !object.get("data").is_some_and(Value::is_object) {
                    object["data"] = json!({});
                }
                for (key, value) in string_data {
                    let text = value.as_str().unwrap_or_default();
                    object["data"][key] =
                        json!(base64::engine::general_purpose::STANDARD.encode(text));
                }
            }
        }
        ("", "Namespace") => {
            set_default(object, "/status/phase", json!("Active"));
            let name = object.at("/metadata/name").cloned().unwrap_or(Value::Null);
            if name.is_string() {
                if !object.at("/metadata/labels").is_some_and(Value::is_object) {
                    object["metadata"]["labels"] = json!({});
                }
                object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
            }
        }
        _ => {}
    }
    if let Some(root) = &resource.schema {
        schema::prune(object, root, true);
        schema::default(object, root);
    }
}

/// Condition times are `metav1.Time` values (not pointers): unset, they are written as `null`.
pub(super) fn null_condition_times(object: &mut Value, fields: &[&str]) {
    let Some(conditions) = object
        .at_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for condition in conditions.iter_mut().filter(|c| c.is_object()) {
        for field in fields {
            set_default(condition, &format!("/{field}"), Value::Null);
        }
    }
}

/// The kind's zero value as far as it shows in JSON: what a create's managedFields are
/// compared against (kube-apiserver compares with a new, empty object of the kind).
pub(crate) fn zero(resource: &Resource) -> Value {
    if resource.schema.is_some() {
        return json!({});
    }
    // Built-in kinds' `spec` and `status` are structs, present (empty) in a new object.
    let mut zero = json!({"spec": {}, "status": {}});
    if resource.group.is_empty() && resource.kind == "Node" {
        default(resource, &mut zero);
    }
    zero
}

/// The last step before a built-in object is stored: what its serialization leaves out.
pub(crate) fn finish(resource: &Resource, object: &mut Value) {
    if resource.schema.is_none() {
        drop_empty(resource, object);
    }
}

/// Built-in types serialize empty maps and lists of `omitempty` fields (and `false` of
/// `omitempty` booleans) as absent: removes those kube-apiserver would not write back.
pub(super) fn drop_empty(resource: &Resource, object: &mut Value) {
    let empty = |v: &Value| {
        v.as_object().is_some_and(serde_json::Map::is_empty)
            || v.as_array().is_some_and(Vec::is_empty)
            || v.is_null()
    };
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "labels",
            "annotations",
            "finalizers",
            "ownerReferences",
            "managedFields",
        ] {
            if meta.get(field).is_some_and(empty) {
                meta.remove(field);
            }
        }
    }
    let Some(map) = object.as_object_mut() else {
        return;
    };
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "ConfigMap" | "Secret") => {
            for field in ["data", "binaryData"] {
                if map.get(field).is_some_and(empty) {
                    map.remove(field);
                }
            }
        }
        ("", "Node") => {
            if let Some(spec) = map.get_mut("spec").and_then(Value::as_object_mut) {
                if spec.get("unschedulable") == Some(&Value::Bool(false)) {
                    spec.remove("unschedulable");
                }
                if spec.get("taints").is_some_and(empty) {
                    spec.remove("taints");
                }
            }
        }
        _ => {}
    }
}
