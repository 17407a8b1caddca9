//! Per-kind behaviour of the built-in types: defaulting on create, what create resets, and the
//! validation kube-apiserver does that clients rely on (names, pod containers, deployment
//! selectors), plus schema handling of custom resources.

mod admission;
mod defaults;
pub(crate) mod service;
mod validation;

use serde_json::{Value, json};

use crate::registry::Resource;

pub(crate) use admission::admit;
pub(crate) use defaults::{default, finish, zero};
pub(crate) use validation::validate;

/// The status an object starts with (what create resets it to). `None`: keep the client's.
pub(crate) fn initial_status(resource: &Resource, object: &Value) -> Option<Value> {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Node") => None,
        ("", "Pod") => {
            let qos = "BestEffort";
            Some(json!({"phase": "Pending", "qosClass": qos}))
        }
        ("", "Namespace") => Some(json!({"phase": "Active"})),
        ("", "Service") => Some(json!({"loadBalancer": {}})),
        _ if resource.status => {
            let _ = object;
            Some(json!({}))
        }
        _ => None,
    }
}
