//! The typed (k8s-openapi) view of the built-in kinds: their OpenAPI schemas and a round trip
//! through the Rust types that reveals unknown fields for `fieldValidation=Strict`.

use k8s_openapi::api::{apps, coordination, core, events, policy};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::{JsonSchema, SchemaGenerator};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn roundtrip_as<T: DeserializeOwned + Serialize>(object: &Value) -> Option<Value> {
    let typed: T = serde_json::from_value(object.clone()).ok()?;
    serde_json::to_value(typed).ok()
}

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
    generator.subschema_for::<T>();
    T::schema_name().into_owned()
}

macro_rules! builtins {
    ($( ($group:literal, $kind:literal, $ty:ty) ),* $(,)?) => {
        /// The object after a round trip through its Rust type (None: not a built-in kind, or it
        /// does not decode).
        pub(crate) fn roundtrip(group: &str, kind: &str, object: &Value) -> Option<Value> {
            match (group, kind) {
                $( ($group, $kind) => roundtrip_as::<$ty>(object), )*
                _ => None,
            }
        }

        /// Adds the schema of a built-in kind to `generator`; returns its definition name.
        pub(crate) fn schema(group: &str, kind: &str, generator: &mut SchemaGenerator) -> Option<String> {
            match (group, kind) {
                $( ($group, $kind) => Some(schema_of::<$ty>(generator)), )*
                _ => None,
            }
        }
    };
}

builtins! {
    ("", "Namespace", core::v1::Namespace),
    ("", "Node", core::v1::Node),
    ("", "Pod", core::v1::Pod),
    ("", "Event", core::v1::Event),
    ("", "Secret", core::v1::Secret),
    ("", "ConfigMap", core::v1::ConfigMap),
    ("", "ServiceAccount", core::v1::ServiceAccount),
    ("", "Service", core::v1::Service),
    ("apps", "Deployment", apps::v1::Deployment),
    ("apps", "ReplicaSet", apps::v1::ReplicaSet),
    ("apps", "StatefulSet", apps::v1::StatefulSet),
    ("apps", "DaemonSet", apps::v1::DaemonSet),
    ("policy", "PodDisruptionBudget", policy::v1::PodDisruptionBudget),
    ("policy", "Eviction", policy::v1::Eviction),
    ("coordination.k8s.io", "Lease", coordination::v1::Lease),
    ("events.k8s.io", "Event", events::v1::Event),
    ("apiextensions.k8s.io", "CustomResourceDefinition", CustomResourceDefinition),
    ("autoscaling", "Scale", k8s_openapi::api::autoscaling::v1::Scale),
}

/// Paths (`spec.foo`) present in `original` but dropped by `decoded`: unknown fields.
pub(crate) fn unknown_fields(
    original: &Value,
    decoded: &Value,
    prefix: &str,
    out: &mut Vec<String>,
) {
    match (original, decoded) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                match b.get(key) {
                    Some(other) => unknown_fields(value, other, &path, out),
                    None if value.is_null() => {}
                    None => out.push(path),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (index, (x, y)) in a.iter().zip(b.iter()).enumerate() {
                unknown_fields(x, y, &format!("{prefix}[{index}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn roundtrip_reveals_unknown_fields() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1}, "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolice": "x"}]}});
        let decoded = roundtrip("", "Pod", &pod).unwrap();
        let mut unknown = Vec::new();
        unknown_fields(&pod, &decoded, "", &mut unknown);
        assert_eq!(
            unknown,
            vec!["metadata.bogus", "spec.containers[0].imagePullPolice"]
        );
    }
}
