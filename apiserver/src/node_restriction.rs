//! NodeRestriction admission for a node's writes to its own Node object, as kube-apiserver
//! v1.20's `NodeRestriction` plugin decides them (the node authorizer in `auth` has already
//! confined the node to its own Node):
//!
//! 1. On create, the node may not set a label outside the kubelet's allowed set (see
//!    [`is_forbidden_label`]).
//! 2. On update (the main resource and `status` alike, on the object as the request made it,
//!    before the status strategy resets the spec), it may not change its taints, nor add, remove
//!    or change a label outside the allowed set; labels it may not set but that are unchanged
//!    stay allowed.
//! 3. It may not change its `ownerReferences` either: a rule of later Kubernetes (not of v1.20,
//!    version difference V6 in the crate docs), which keeps a node from attaching its Node to an
//!    owner whose deletion would garbage-collect it, or from detaching it from its Machine.
//!
//! Each refusal is 403 Forbidden with kube-apiserver's admission wording:
//! `nodes "NAME" is forbidden: node "NAME" is not allowed to modify taints`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::auth::User;
use crate::error::ApiError;
use crate::pointer::At;

/// Labels a kubelet may set on its Node whatever their namespace (kubelet's `kubeletLabels`).
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// Label namespaces a kubelet may use, with their subdomains (`kubeletLabelNamespaces`).
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// The label namespace reserved for labels kubelets may never set, with its subdomains.
const NODE_RESTRICTION_NAMESPACE: &str = "node-restriction.kubernetes.io";

/// The prefix of a label key (`example.com` of `example.com/name`), empty without one.
fn label_namespace(key: &str) -> &str {
    key.split_once('/').map_or("", |(namespace, _)| namespace)
}

/// Whether `namespace` is `domain` or one of its subdomains.
fn within(namespace: &str, domain: &str) -> bool {
    namespace == domain
        || namespace
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

fn is_kubelet_label(key: &str) -> bool {
    let namespace = label_namespace(key);
    KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES
            .iter()
            .any(|allowed| within(namespace, allowed))
}

/// Whether a node may not add, remove or change label `key` on its own Node: every
/// `node-restriction.kubernetes.io` label, and every other `kubernetes.io` or `k8s.io` label
/// outside the kubelet's set (`kubernetes.io/hostname`, `kubernetes.io/{arch,os}`,
/// `beta.kubernetes.io/{arch,os,instance-type}`, `node.kubernetes.io/instance-type`,
/// `{failure-domain.beta,topology}.kubernetes.io/{zone,region}`, and the namespaces
/// `kubelet.kubernetes.io` and `node.kubernetes.io`). Labels of other domains are the node's.
pub(crate) fn is_forbidden_label(key: &str) -> bool {
    let namespace = label_namespace(key);
    if within(namespace, NODE_RESTRICTION_NAMESPACE) {
        return true;
    }
    let kubernetes = within(namespace, "kubernetes.io") || within(namespace, "k8s.io");
    kubernetes && !is_kubelet_label(key)
}

fn labels(object: &Value) -> Map<String, Value> {
    object
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// The forbidden labels among those that differ between `new` and `old` (absent = no labels).
fn forbidden_changes(new: &Value, old: Option<&Value>) -> BTreeSet<String> {
    let new = labels(new);
    let old = old.map(labels).unwrap_or_default();
    new.keys()
        .chain(old.keys())
        .filter(|key| new.get(*key) != old.get(*key) && is_forbidden_label(key))
        .cloned()
        .collect()
}

/// A list field compared as Go's semantic equality compares slices: absent, `null` and `[]`
/// are the same; within items, empty strings and `null` count as absent (`omitempty`).
fn list_at(object: &Value, path: &str) -> Vec<Value> {
    let Some(items) = object.at(path).and_then(Value::as_array) else {
        return Vec::new();
    };
    items
        .iter()
        .map(|item| match item.as_object() {
            Some(map) => Value::Object(
                map.iter()
                    .filter(|(_, v)| !v.is_null() && v.as_str() != Some(""))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            None => item.clone(),
        })
        .collect()
}

fn refuse(name: &str, why: String) -> ApiError {
    ApiError::forbidden_by_admission("", "nodes", name, &why)
}

/// Rule 1: a node registering its Node (`object`, named `name`) with forbidden labels.
pub(crate) fn admit_create(user: &User, name: &str, object: &Value) -> Result<(), ApiError> {
    let Some(node) = user.node_name() else {
        return Ok(());
    };
    let forbidden = forbidden_changes(object, None);
    if forbidden.is_empty() {
        return Ok(());
    }
    Err(refuse(
        name,
        format!(
            "node {node:?} is not allowed to set the following labels: {}",
            forbidden.into_iter().collect::<Vec<_>>().join(", ")
        ),
    ))
}

/// Rules 2 and 3: a node's write of `new` over its Node `old` (named `name`).
pub(crate) fn admit_update(
    user: &User,
    name: &str,
    new: &Value,
    old: &Value,
) -> Result<(), ApiError> {
    let Some(node) = user.node_name() else {
        return Ok(());
    };
    if list_at(new, "/spec/taints") != list_at(old, "/spec/taints") {
        return Err(refuse(
            name,
            format!("node {node:?} is not allowed to modify taints"),
        ));
    }
    if list_at(new, "/metadata/ownerReferences") != list_at(old, "/metadata/ownerReferences") {
        return Err(refuse(
            name,
            format!("node {node:?} is not allowed to modify ownerReferences"),
        ));
    }
    let forbidden = forbidden_changes(new, Some(old));
    if forbidden.is_empty() {
        return Ok(());
    }
    Err(refuse(
        name,
        format!(
            "is not allowed to modify labels: {}",
            forbidden.into_iter().collect::<Vec<_>>().join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_kubelets_labels_are_allowed_and_other_kubernetes_labels_are_not() {
        for allowed in [
            "kubernetes.io/hostname",
            "kubernetes.io/arch",
            "kubernetes.io/os",
            "beta.kubernetes.io/instance-type",
            "node.kubernetes.io/instance-type",
            "topology.kubernetes.io/zone",
            "failure-domain.beta.kubernetes.io/region",
            "kubelet.kubernetes.io/anything",
            "node.kubernetes.io/exclude-from-external-load-balancers",
            "sub.node.kubernetes.io/x",
            "worker.gardener.cloud/pool",
            "node.machine.sapcloud.io/update-result",
            "pool",
            "example.com/kubernetes.io",
            "notkubernetes.io/x",
        ] {
            assert!(!is_forbidden_label(allowed), "{allowed} should be allowed");
        }
        for forbidden in [
            "node-role.kubernetes.io/master",
            "node-restriction.kubernetes.io/x",
            "sub.node-restriction.kubernetes.io/x",
            "kubernetes.io/role",
            "k8s.io/x",
            "example.k8s.io/x",
            "topology.kubernetes.io/rack",
        ] {
            assert!(
                is_forbidden_label(forbidden),
                "{forbidden} should be forbidden"
            );
        }
    }

    #[test]
    fn an_unchanged_forbidden_label_and_an_equal_empty_taint_list_pass() {
        let user = User::node("n");
        let old =
            json!({"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/worker": ""}}});
        let new = json!({"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/worker": "", "pool": "b"}}, "spec": {"taints": []}});
        assert!(admit_update(&user, "n", &new, &old).is_ok());
        let removed = json!({"metadata": {"name": "n", "labels": {}}});
        let error = admit_update(&user, "n", &removed, &old).expect_err("removal is a change");
        assert_eq!(error.status()["code"], 403);
    }

    #[test]
    fn only_node_identities_are_restricted() {
        let old = json!({"metadata": {"name": "n"}});
        let new = json!({"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
        assert!(admit_update(&User::admin(), "n", &new, &old).is_ok());
        assert!(admit_update(&User::node("n"), "n", &new, &old).is_err());
    }
}
