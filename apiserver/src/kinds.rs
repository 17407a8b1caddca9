//! Per-kind behaviour of the built-in types: defaulting on create, what create resets, and the
//! validation kube-apiserver does that clients rely on (names, pod containers, deployment
//! selectors), plus schema handling of custom resources.

use base64::Engine;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::pointer::At;
use crate::registry::Resource;
use crate::schema;

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// Total size of an object's annotations kube-apiserver accepts.
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

const NAME_PART_RULE: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, the name part of qualified names and label values.
fn is_name_part(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// What is wrong with `key` as a qualified name (`[prefix/]name`, kube's `IsQualifiedName`):
/// label and annotation keys.
pub(crate) fn qualified_name_problems(key: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let (prefix, name) = match key.split('/').collect::<Vec<_>>().as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => {
            problems.push(String::from("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
            return problems;
        }
    };
    match prefix {
        Some("") => problems.push("prefix part must be non-empty".to_owned()),
        Some(prefix) if !is_dns_subdomain(prefix) => problems.push("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_owned()),
        _ => {}
    }
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        problems.push("name part must be no more than 63 characters".to_owned());
    }
    if !name.is_empty() && !is_name_part(name) {
        problems.push(NAME_PART_RULE.to_owned());
    }
    problems
}

/// What is wrong with `value` as a label value (kube's `IsValidLabelValue`), if anything.
pub(crate) fn label_value_problem(value: &str) -> Option<String> {
    if value.len() > 63 {
        return Some("must be no more than 63 characters".to_owned());
    }
    (!value.is_empty() && !is_name_part(value)).then(|| "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_owned())
}

/// Validates `object` (after defaulting) as kube-apiserver would; 422 with the causes otherwise.
/// Validates `object` for a create (`old` None) or an update of `old`.
pub(crate) fn validate(
    resource: &Resource,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let name = object
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut causes: Vec<(String, String)> = Vec::new();
    let name_ok = match resource.plural.as_str() {
        "namespaces" => is_dns_label(name),
        _ => is_dns_subdomain(name),
    };
    if name.is_empty() {
        causes.push((
            "metadata.name".into(),
            "Required value: name or generateName is required".into(),
        ));
    } else if !name_ok {
        causes.push(("metadata.name".into(), format!("Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")));
    }
    if let Some(labels) = object.at("/metadata/labels") {
        match labels.as_object() {
            Some(map) => {
                for (key, value) in map {
                    for problem in qualified_name_problems(key) {
                        causes.push((
                            "metadata.labels".into(),
                            format!("Invalid value: {key:?}: {problem}"),
                        ));
                    }
                    match value.as_str() {
                        Some(text) => {
                            if let Some(problem) = label_value_problem(text) {
                                causes.push((
                                    "metadata.labels".into(),
                                    format!("Invalid value: {text:?}: {problem}"),
                                ));
                            }
                        }
                        None => causes.push((
                            format!("metadata.labels.{key}"),
                            "Invalid value: label values must be strings".into(),
                        )),
                    }
                }
            }
            None => causes.push((
                "metadata.labels".into(),
                "Invalid value: must be an object".into(),
            )),
        }
    }
    if let Some(annotations) = object
        .at("/metadata/annotations")
        .and_then(Value::as_object)
    {
        let mut total = 0;
        for (key, value) in annotations {
            for problem in qualified_name_problems(&key.to_lowercase()) {
                causes.push((
                    "metadata.annotations".into(),
                    format!("Invalid value: {key:?}: {problem}"),
                ));
            }
            total += key.len() + value.as_str().map_or(0, str::len);
        }
        if total > MAX_ANNOTATIONS_BYTES {
            causes.push((
                "metadata.annotations".into(),
                format!("Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes"),
            ));
        }
    }
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Pod") => validate_pod_spec(object.get("spec"), "spec", &mut causes),
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet") => {
            match object.at("/spec/selector") {
                None => causes.push(("spec.selector".into(), "Required value".into())),
                Some(selector) => {
                    let labels = object
                        .at("/spec/template/metadata/labels")
                        .cloned()
                        .unwrap_or(json!({}));
                    let matches = crate::selector::LabelSelector::from_object(selector)
                        .map(|s| {
                            !s.is_empty() && s.matches(&json!({"metadata": {"labels": labels}}))
                        })
                        .unwrap_or(false);
                    if !matches {
                        causes.push((
                            "spec.template.metadata.labels".into(),
                            "Invalid value: `selector` does not match template `labels`".into(),
                        ));
                    }
                }
            }
            validate_pod_spec(
                object.at("/spec/template/spec"),
                "spec.template.spec",
                &mut causes,
            );
            if object
                .at("/spec/replicas")
                .is_some_and(|r| r.as_i64().is_none_or(|r| r < 0))
            {
                causes.push((
                    "spec.replicas".into(),
                    "Invalid value: must be greater than or equal to 0".into(),
                ));
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            causes.extend(crate::crd_validation::schema_problems(object))
        }
        _ => {}
    }
    if let Some(root) = &resource.schema {
        schema::validate(object, root, "", &mut causes);
    }
    if let Some(old) = old
        && resource.group.is_empty()
        && resource.kind == "Node"
    {
        causes.extend(node_update_problems(object, old));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            &resource.group,
            &resource.kind,
            name,
            causes,
        ))
    }
}

/// kube-apiserver's `ValidateNodeUpdate` rules for fields only a cloud provider or the IPAM
/// controller sets, for every user: `spec.podCIDRs` and `spec.providerID` may go from unset to a
/// value, never change after.
fn node_update_problems(new: &Value, old: &Value) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    let cidrs = |node: &Value| -> Vec<Value> {
        node.at("/spec/podCIDRs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (old_cidrs, new_cidrs) = (cidrs(old), cidrs(new));
    if !old_cidrs.is_empty() {
        // kube-apiserver compares the lists entry by entry and reports each changed entry.
        let changed = if old_cidrs.len() == new_cidrs.len() {
            old_cidrs
                .iter()
                .zip(&new_cidrs)
                .filter(|(a, b)| a != b)
                .count()
        } else {
            1
        };
        for _ in 0..changed {
            causes.push((
                "spec.podCIDRs".into(),
                "Forbidden: node updates may not change podCIDR except from \"\" to valid".into(),
            ));
        }
    }
    let provider = |node: &Value| {
        node.at("/spec/providerID")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let old_provider = provider(old);
    if !old_provider.is_empty() && old_provider != provider(new) {
        causes.push((
            "spec.providerID".into(),
            "Forbidden: node updates may not change providerID except from \"\" to valid".into(),
        ));
    }
    // Any other spec change, and a change of the two above once set, is refused as a whole
    // (kube-apiserver's last check, on the field path `[]`).
    let mut allowed = vec!["unschedulable", "taints", "configSource", "podCIDR"];
    if old_cidrs.is_empty() {
        allowed.push("podCIDRs");
    }
    if old_provider.is_empty() {
        allowed.push("providerID");
    }
    if protected_spec(new, &allowed) != protected_spec(old, &allowed) {
        causes.push((
            "[]".into(),
            "Forbidden: node updates may only change labels, taints, or capacity (or configSource, if the DynamicKubeletConfig feature gate is enabled)".into(),
        ));
    }
    causes
}

/// A Node's spec without the fields in `allowed` and without empty values (Go's zero values
/// and absent fields compare equal).
fn protected_spec(node: &Value, allowed: &[&str]) -> serde_json::Map<String, Value> {
    node.get("spec")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(key, value)| {
            !allowed.contains(&key.as_str())
                && !matches!(value, Value::Null | Value::Bool(false))
                && value.as_str() != Some("")
                && value.as_array().is_none_or(|list| !list.is_empty())
                && value.as_object().is_none_or(|map| !map.is_empty())
        })
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

fn validate_pod_spec(spec: Option<&Value>, path: &str, causes: &mut Vec<(String, String)>) {
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    match containers {
        None => causes.push((format!("{path}.containers"), "Required value".into())),
        Some(list) if list.is_empty() => {
            causes.push((format!("{path}.containers"), "Required value".into()))
        }
        Some(list) => {
            for (i, container) in list.iter().enumerate() {
                match container.get("name").and_then(Value::as_str) {
                    None | Some("") => causes.push((format!("{path}.containers[{i}].name"), "Required value".into())),
                    Some(name) if !is_dns_label(name) => causes.push((format!("{path}.containers[{i}].name"), format!("Invalid value: {name:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"))),
                    Some(_) => {}
                }
                if container
                    .get("image")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    causes.push((
                        format!("{path}.containers[{i}].image"),
                        "Required value".into(),
                    ));
                }
            }
        }
    }
}

fn set_default(object: &mut Value, pointer: &str, value: Value) {
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

fn default_pod_spec(spec: &mut Value) {
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
fn sync_pod_cidrs(node: &mut Value) {
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
fn null_condition_times(object: &mut Value, fields: &[&str]) {
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
fn drop_empty(resource: &Resource, object: &mut Value) {
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

/// Well-known PriorityClasses kube-apiserver creates at startup, with their values.
const SYSTEM_PRIORITY_CLASSES: &[(&str, i64)] = &[
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

/// How long pods tolerate `not-ready` and `unreachable` nodes unless they say otherwise.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

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

fn admit_priority(pod: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
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

fn default_tolerations(spec: &mut Value) {
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
