//! Per-kind behaviour of the built-in types: defaulting on create, what create resets, and the
//! validation kube-apiserver does that clients rely on (names, pod containers, deployment
//! selectors), plus schema handling of custom resources.

use base64::Engine;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::registry::Resource;
use crate::schema;

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// Validates `object` (after defaulting) as kube-apiserver would; 422 with the causes otherwise.
pub(crate) fn validate(resource: &Resource, object: &Value) -> Result<(), ApiError> {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let mut causes: Vec<(String, String)> = Vec::new();
    let name_ok = match resource.plural.as_str() {
        "namespaces" => is_dns_label(name),
        _ => is_dns_subdomain(name),
    };
    if name.is_empty() {
        causes.push(("metadata.name".into(), "Required value: name or generateName is required".into()));
    } else if !name_ok {
        causes.push(("metadata.name".into(), format!("Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")));
    }
    if let Some(labels) = object.pointer("/metadata/labels") {
        match labels.as_object() {
            Some(map) => {
                for (key, value) in map {
                    if !value.is_string() {
                        causes.push((format!("metadata.labels.{key}"), "Invalid value: label values must be strings".into()));
                    }
                }
            }
            None => causes.push(("metadata.labels".into(), "Invalid value: must be an object".into())),
        }
    }
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Pod") => validate_pod_spec(object.get("spec"), "spec", &mut causes),
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet") => {
            match object.pointer("/spec/selector") {
                None => causes.push(("spec.selector".into(), "Required value".into())),
                Some(selector) => {
                    let labels = object.pointer("/spec/template/metadata/labels").cloned().unwrap_or(json!({}));
                    let matches = crate::selector::LabelSelector::from_object(selector).map(|s| !s.is_empty() && s.matches(&json!({"metadata": {"labels": labels}}))).unwrap_or(false);
                    if !matches {
                        causes.push(("spec.template.metadata.labels".into(), "Invalid value: `selector` does not match template `labels`".into()));
                    }
                }
            }
            validate_pod_spec(object.pointer("/spec/template/spec"), "spec.template.spec", &mut causes);
            if object.pointer("/spec/replicas").is_some_and(|r| r.as_i64().is_none_or(|r| r < 0)) {
                causes.push(("spec.replicas".into(), "Invalid value: must be greater than or equal to 0".into()));
            }
        }
        _ => {}
    }
    if let Some(root) = &resource.schema {
        schema::validate(object, root, "", &mut causes);
    }
    if causes.is_empty() { Ok(()) } else { Err(ApiError::invalid(&resource.group, &resource.kind, name, causes)) }
}

fn validate_pod_spec(spec: Option<&Value>, path: &str, causes: &mut Vec<(String, String)>) {
    let containers = spec.and_then(|s| s.get("containers")).and_then(Value::as_array);
    match containers {
        None => causes.push((format!("{path}.containers"), "Required value".into())),
        Some(list) if list.is_empty() => causes.push((format!("{path}.containers"), "Required value".into())),
        Some(list) => {
            for (i, container) in list.iter().enumerate() {
                if container.get("name").and_then(Value::as_str).is_none_or(|n| !is_dns_label(n)) {
                    causes.push((format!("{path}.containers[{i}].name"), "Required value".into()));
                }
                if container.get("image").and_then(Value::as_str).is_none_or(str::is_empty) {
                    causes.push((format!("{path}.containers[{i}].image"), "Required value".into()));
                }
            }
        }
    }
}

fn set_default(object: &mut Value, pointer: &str, value: Value) {
    if object.pointer(pointer).is_some() {
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

fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "/restartPolicy", json!("Always"));
    set_default(spec, "/terminationGracePeriodSeconds", json!(30));
    set_default(spec, "/dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "/schedulerName", json!("default-scheduler"));
    set_default(spec, "/securityContext", json!({}));
    set_default(spec, "/enableServiceLinks", json!(true));
    for list in ["containers", "initContainers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for container in containers {
                if !container.is_object() {
                    continue;
                }
                let image = container.get("image").and_then(Value::as_str).unwrap_or_default().to_owned();
                let tagless = !image.rsplit('/').next().unwrap_or_default().contains(':') && !image.contains('@');
                let policy = if tagless || image.ends_with(":latest") { "Always" } else { "IfNotPresent" };
                set_default(container, "/imagePullPolicy", json!(policy));
                set_default(container, "/terminationMessagePath", json!("/dev/termination-log"));
                set_default(container, "/terminationMessagePolicy", json!("File"));
                set_default(container, "/resources", json!({}));
            }
        }
    }
}

/// Defaults every write gets (create and update).
pub(crate) fn default(resource: &Resource, object: &mut Value) {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Pod") => {
            if let Some(spec) = object.get_mut("spec") {
                default_pod_spec(spec);
            }
        }
        ("apps", "Deployment") => {
            set_default(object, "/spec/replicas", json!(1));
            set_default(object, "/spec/strategy", json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}));
            set_default(object, "/spec/revisionHistoryLimit", json!(10));
            set_default(object, "/spec/progressDeadlineSeconds", json!(600));
            if let Some(spec) = object.pointer_mut("/spec/template/spec") {
                default_pod_spec(spec);
            }
        }
        ("apps", "ReplicaSet" | "StatefulSet") => {
            set_default(object, "/spec/replicas", json!(1));
            if let Some(spec) = object.pointer_mut("/spec/template/spec") {
                default_pod_spec(spec);
            }
        }
        ("apps", "DaemonSet") => {
            set_default(object, "/spec/updateStrategy", json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}));
            set_default(object, "/spec/revisionHistoryLimit", json!(10));
            if let Some(spec) = object.pointer_mut("/spec/template/spec") {
                default_pod_spec(spec);
            }
        }
        ("", "Secret") => {
            set_default(object, "/type", json!("Opaque"));
            if let Some(Value::Object(string_data)) = object.as_object_mut().and_then(|o| o.remove("stringData")) {
                if !object.get("data").is_some_and(Value::is_object) {
                    object["data"] = json!({});
                }
                for (key, value) in string_data {
                    let text = value.as_str().unwrap_or_default();
                    object["data"][key] = json!(base64::engine::general_purpose::STANDARD.encode(text));
                }
            }
        }
        ("", "Namespace") => {
            set_default(object, "/spec/finalizers", json!(["kubernetes"]));
            let name = object.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
            if name.is_string() {
                if !object.pointer("/metadata/labels").is_some_and(Value::is_object) {
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

/// The status an object starts with (what create resets it to). `None`: keep the client's.
pub(crate) fn initial_status(resource: &Resource, object: &Value) -> Option<Value> {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Node") => None,
        ("", "Pod") => {
            let qos = "BestEffort";
            Some(json!({"phase": "Pending", "qosClass": qos}))
        }
        ("", "Namespace") => Some(json!({"phase": "Active"})),
        _ if resource.status => {
            let _ = object;
            Some(json!({}))
        }
        _ => None,
    }
}
