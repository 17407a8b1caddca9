//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/GROUP` and the resource lists of
//! each group/version, including subresources and verbs; and aggregated discovery
//! (`apidiscovery.k8s.io/v2`) for `/api` and `/apis`.

use serde_json::{Value, json};

use crate::registry::{Registry, Resource};

/// The Kubernetes version this server reports being compatible with.
pub const KUBERNETES_VERSION: (&str, &str) = ("1", "35");

pub(crate) fn version() -> Value {
    json!({
        "major": KUBERNETES_VERSION.0,
        "minor": KUBERNETES_VERSION.1,
        "gitVersion": format!("v{}.{}.0-rackproof", KUBERNETES_VERSION.0, KUBERNETES_VERSION.1),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "rust",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}

pub(crate) fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
}

fn group_entry(registry: &Registry, group: &str) -> Value {
    let versions: Vec<Value> = registry
        .group_versions()
        .into_iter()
        .filter(|(g, _)| g == group)
        .map(|(g, v)| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

pub(crate) fn groups(registry: &Registry) -> Value {
    let mut names: Vec<String> = Vec::new();
    for (group, _) in registry.group_versions() {
        if !group.is_empty() && !names.contains(&group) {
            names.push(group);
        }
    }
    let groups: Vec<Value> = names.iter().map(|g| group_entry(registry, g)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn group(registry: &Registry, group: &str) -> Value {
    let mut entry = group_entry(registry, group);
    entry["kind"] = json!("APIGroup");
    entry["apiVersion"] = json!("v1");
    entry
}

fn entries(resource: &Resource) -> Vec<Value> {
    let mut out = vec![json!({
        "name": resource.plural,
        "singularName": resource.singular,
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": resource.verbs(),
        "shortNames": resource.short_names,
        "categories": resource.categories,
    })];
    if out[0]["shortNames"].as_array().is_some_and(Vec::is_empty) {
        out[0].as_object_mut().map(|m| m.remove("shortNames"));
    }
    if out[0]["categories"].as_array().is_some_and(Vec::is_empty) {
        out[0].as_object_mut().map(|m| m.remove("categories"));
    }
    if resource.status {
        out.push(json!({"name": format!("{}/status", resource.plural), "singularName": "", "namespaced": resource.namespaced, "kind": resource.kind, "verbs": ["get", "patch", "update"]}));
    }
    if resource.scale.is_some() {
        out.push(json!({"name": format!("{}/scale", resource.plural), "singularName": "", "namespaced": resource.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
    }
    if resource.eviction {
        out.push(json!({"name": format!("{}/eviction", resource.plural), "singularName": "", "namespaced": resource.namespaced, "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]}));
    }
    out
}

pub(crate) fn resources(registry: &Registry, group: &str, version: &str) -> Value {
    let list: Vec<Value> = registry
        .all()
        .filter(|r| r.group == group && r.version == version)
        .flat_map(|r| entries(r))
        .collect();
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list})
}

/// Content type of an aggregated discovery response.
pub(crate) const AGGREGATED_MEDIA_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

fn aggregated_resource(resource: &Resource) -> Value {
    let mut subresources = Vec::new();
    if resource.status {
        subresources.push(json!({"subresource": "status", "responseKind": {"group": resource.group, "version": resource.version, "kind": resource.kind}, "verbs": ["get", "patch", "update"]}));
    }
    if resource.scale.is_some() {
        subresources.push(json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]}));
    }
    if resource.eviction {
        subresources.push(json!({"subresource": "eviction", "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"}, "verbs": ["create"]}));
    }
    let mut entry = json!({
        "resource": resource.plural,
        "responseKind": {"group": resource.group, "version": resource.version, "kind": resource.kind},
        "scope": if resource.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": resource.singular,
        "verbs": resource.verbs(),
    });
    if !resource.short_names.is_empty() {
        entry["shortNames"] = json!(resource.short_names);
    }
    if !resource.categories.is_empty() {
        entry["categories"] = json!(resource.categories);
    }
    if !subresources.is_empty() {
        entry["subresources"] = json!(subresources);
    }
    entry
}

/// `APIGroupDiscoveryList` of the core group (`core`) or of every named group.
pub(crate) fn aggregated(registry: &Registry, core: bool) -> Value {
    let mut items: Vec<Value> = Vec::new();
    let mut groups: Vec<String> = Vec::new();
    for (group, _) in registry.group_versions() {
        if group.is_empty() == core && !groups.contains(&group) {
            groups.push(group);
        }
    }
    for group in groups {
        let versions: Vec<Value> = registry
            .group_versions()
            .into_iter()
            .filter(|(g, _)| *g == group)
            .map(|(g, v)| {
                let resources: Vec<Value> = registry
                    .all()
                    .filter(|r| r.group == g && r.version == v)
                    .map(|r| aggregated_resource(r))
                    .collect();
                json!({"version": v, "resources": resources, "freshness": "Current"})
            })
            .collect();
        let metadata = if group.is_empty() {
            json!({"creationTimestamp": null})
        } else {
            json!({"name": group, "creationTimestamp": null})
        };
        items.push(json!({"metadata": metadata, "versions": versions}));
    }
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}
