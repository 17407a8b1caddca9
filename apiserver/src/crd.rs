//! CustomResourceDefinitions: validating a CRD, turning its served versions into registry
//! entries (with `status` and `scale` subresources), and the status kube-apiserver reports
//! (`Established`, `NamesAccepted`, `acceptedNames`, `storedVersions`).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::pointer::At;
use crate::registry::{Resource, ScaleSpec};

/// The registry entries for every served version of `crd`.
pub(crate) fn resources(crd: &Value) -> Result<Vec<Resource>, ApiError> {
    let name = crd
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let invalid = |field: &str, why: &str| {
        ApiError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            name,
            vec![(field.to_owned(), why.to_owned())],
        )
    };
    let spec = crd
        .get("spec")
        .ok_or_else(|| invalid("spec", "Required value"))?;
    let text = |pointer: &str| {
        spec.at(pointer)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let group = text("/group").ok_or_else(|| invalid("spec.group", "Required value"))?;
    let plural =
        text("/names/plural").ok_or_else(|| invalid("spec.names.plural", "Required value"))?;
    let kind = text("/names/kind").ok_or_else(|| invalid("spec.names.kind", "Required value"))?;
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            "metadata.name",
            &format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let namespaced = match text("/scope") {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        _ => {
            return Err(invalid(
                "spec.scope",
                "Unsupported value: supported values: \"Cluster\", \"Namespaced\"",
            ));
        }
    };
    let singular = text("/names/singular")
        .map(str::to_owned)
        .unwrap_or_else(|| kind.to_lowercase());
    let strings = |pointer: &str| -> Vec<String> {
        spec.at(pointer)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| invalid("spec.versions", "Required value"))?;
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage != 1 {
        return Err(invalid(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    let mut out = Vec::new();
    for version in versions {
        let version_name = version
            .get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid("spec.versions[].name", "Required value"))?;
        if version.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let subresources = version.get("subresources");
        let scale = subresources
            .and_then(|s| s.get("scale"))
            .map(|scale| ScaleSpec {
                spec_replicas: json_path_to_pointer(
                    scale
                        .get("specReplicasPath")
                        .and_then(Value::as_str)
                        .unwrap_or(".spec.replicas"),
                ),
                status_replicas: json_path_to_pointer(
                    scale
                        .get("statusReplicasPath")
                        .and_then(Value::as_str)
                        .unwrap_or(".status.replicas"),
                ),
                label_selector: scale
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(json_path_to_pointer),
            });
        out.push(Resource {
            group: group.to_owned(),
            version: version_name.to_owned(),
            plural: plural.to_owned(),
            singular: singular.clone(),
            kind: kind.to_owned(),
            namespaced,
            short_names: strings("/names/shortNames"),
            categories: strings("/names/categories"),
            status: subresources.and_then(|s| s.get("status")).is_some(),
            scale,
            eviction: false,
            strategic: false,
            schema: version.at("/schema/openAPIV3Schema").cloned().map(Arc::new),
            extra_fields: &[],
            generation: true,
        });
    }
    Ok(out)
}

fn json_path_to_pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |mut acc, part| {
            acc.push('/');
            acc.push_str(part);
            acc
        })
}

/// The status kube-apiserver sets on an accepted CRD.
pub(crate) fn accepted_status(crd: &Value, now: &str) -> Value {
    let names = crd.at("/spec/names").cloned().unwrap_or_else(|| json!({}));
    let mut accepted = names;
    if accepted.get("singular").is_none() {
        let kind = accepted
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_lowercase();
        accepted["singular"] = Value::String(kind);
    }
    if accepted.get("listKind").is_none() {
        let kind = accepted
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        accepted["listKind"] = Value::String(format!("{kind}List"));
    }
    let mut stored: Vec<Value> = crd
        .at("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(storage) = crd
        .at("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|v| {
            v.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name"))
        && !stored.contains(storage)
    {
        stored.push(storage.clone());
    }
    json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now, "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": now, "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
        ],
        "acceptedNames": accepted,
        "storedVersions": stored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_versions_become_resources() {
        let crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}}}]}});
        let resources = resources(&crd).unwrap();
        assert_eq!(resources.len(), 1);
        assert!(resources[0].status);
        assert_eq!(
            resources[0].scale.as_ref().unwrap().spec_replicas,
            "/spec/size"
        );
        assert_eq!(resources[0].singular, "widget");
        let mut bad = crd.clone();
        bad["metadata"]["name"] = json!("other");
        assert_eq!(super::resources(&bad).unwrap_err().code, 422);
    }
}
