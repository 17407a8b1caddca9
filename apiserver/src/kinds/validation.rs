//! The validation kube-apiserver does that clients rely on: names, label and annotation keys
//! and values, node updates, pod containers, deployment selectors.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::pointer::At;
use crate::registry::Resource;
use crate::schema;

pub(super) fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

pub(super) fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// Total size of an object's annotations kube-apiserver accepts.
pub(super) const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

pub(super) const NAME_PART_RULE: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, the name part of qualified names and label values.
pub(super) fn is_name_part(text: &str) -> bool {
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
        ("", "Service") => super::service::validate(object, old, &mut causes),
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
pub(super) fn node_update_problems(new: &Value, old: &Value) -> Vec<(String, String)> {
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
pub(super) fn protected_spec(node: &Value, allowed: &[&str]) -> serde_json::Map<String, Value> {
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

pub(super) fn validate_pod_spec(
    spec: Option<&Value>,
    path: &str,
    causes: &mut Vec<(String, String)>,
) {
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
