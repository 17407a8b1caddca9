//! The resource registry: which group/version/resources are served, their kinds, scope,
//! subresources and selectable fields. Built-in kinds are fixed; CRDs add and remove entries.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// How a resource's `scale` subresource maps onto its object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScaleSpec {
    /// JSON pointer of the desired replicas (`/spec/replicas`).
    pub(crate) spec_replicas: String,
    /// JSON pointer of the observed replicas (`/status/replicas`).
    pub(crate) status_replicas: String,
    /// JSON pointer of the label selector string, if any.
    pub(crate) label_selector: Option<String>,
}

/// A served resource (one group, version and plural name).
#[derive(Debug, Clone)]
pub(crate) struct Resource {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) kind: String,
    pub(crate) namespaced: bool,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    pub(crate) status: bool,
    pub(crate) scale: Option<ScaleSpec>,
    pub(crate) eviction: bool,
    /// Strategic merge patch is accepted (built-in types only).
    pub(crate) strategic: bool,
    /// `openAPIV3Schema` of a custom resource version.
    pub(crate) schema: Option<Arc<Value>>,
    /// Field-selector fields beyond `metadata.name` and `metadata.namespace`.
    pub(crate) extra_fields: &'static [&'static str],
    /// Whether the main resource has a `spec` whose change bumps `generation`.
    pub(crate) generation: bool,
}

impl Resource {
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Storage key for the resource: objects are shared by every version of a group/resource.
    pub(crate) fn group_resource(&self) -> GroupResource {
        GroupResource {
            group: self.group.clone(),
            resource: self.plural.clone(),
        }
    }

    pub(crate) fn selectable_fields(&self) -> Vec<&'static str> {
        let mut fields = vec!["metadata.name", "metadata.namespace"];
        fields.extend_from_slice(self.extra_fields);
        fields
    }

    pub(crate) fn verbs(&self) -> Vec<&'static str> {
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// A group and a plural resource name: the key objects are stored under.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct GroupResource {
    pub(crate) group: String,
    pub(crate) resource: String,
}

/// The served resources, by group/version/plural.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    resources: BTreeMap<(String, String, String), Arc<Resource>>,
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    status: bool,
    scale: bool,
    fields: &'static [&'static str],
    generation: bool,
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

const BUILTINS: &[Builtin] = &[
    Builtin {
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short: &["ns"],
        status: true,
        scale: false,
        fields: &["status.phase"],
        generation: false,
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        short: &["no"],
        status: true,
        scale: false,
        fields: &["spec.unschedulable"],
        generation: false,
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short: &["po"],
        status: true,
        scale: false,
        fields: POD_FIELDS,
        generation: false,
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short: &["ev"],
        status: false,
        scale: false,
        fields: EVENT_FIELDS,
        generation: false,
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        short: &[],
        status: false,
        scale: false,
        fields: &["type"],
        generation: false,
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        short: &["cm"],
        status: false,
        scale: false,
        fields: &[],
        generation: false,
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        short: &["svc"],
        status: true,
        scale: false,
        fields: &[],
        generation: false,
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        namespaced: true,
        short: &["sa"],
        status: false,
        scale: false,
        fields: &[],
        generation: false,
    },
    Builtin {
        group: "apps",
        version: "v1",
        plural: "deployments",
        singular: "deployment",
        kind: "Deployment",
        namespaced: true,
        short: &["deploy"],
        status: true,
        scale: true,
        fields: &[],
        generation: true,
    },
    Builtin {
        group: "apps",
        version: "v1",
        plural: "replicasets",
        singular: "replicaset",
        kind: "ReplicaSet",
        namespaced: true,
        short: &["rs"],
        status: true,
        scale: true,
        fields: &[],
        generation: true,
    },
    Builtin {
        group: "apps",
        version: "v1",
        plural: "statefulsets",
        singular: "statefulset",
        kind: "StatefulSet",
        namespaced: true,
        short: &["sts"],
        status: true,
        scale: true,
        fields: &[],
        generation: true,
    },
    Builtin {
        group: "apps",
        version: "v1",
        plural: "daemonsets",
        singular: "daemonset",
        kind: "DaemonSet",
        namespaced: true,
        short: &["ds"],
        status: true,
        scale: false,
        fields: &[],
        generation: true,
    },
    Builtin {
        group: "policy",
        version: "v1",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind: "PodDisruptionBudget",
        namespaced: true,
        short: &["pdb"],
        status: true,
        scale: false,
        fields: &[],
        generation: true,
    },
    Builtin {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        short: &[],
        status: false,
        scale: false,
        fields: &[],
        generation: false,
    },
    Builtin {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short: &["ev"],
        status: false,
        scale: false,
        fields: &[],
        generation: false,
    },
    Builtin {
        group: "apiextensions.k8s.io",
        version: "v1",
        plural: "customresourcedefinitions",
        singular: "customresourcedefinition",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short: &["crd", "crds"],
        status: true,
        scale: false,
        fields: &[],
        generation: true,
    },
];

impl Registry {
    /// The registry of built-in kinds.
    pub(crate) fn builtin() -> Self {
        let mut registry = Self::default();
        for b in BUILTINS {
            registry.insert(Resource {
                group: b.group.to_owned(),
                version: b.version.to_owned(),
                plural: b.plural.to_owned(),
                singular: b.singular.to_owned(),
                kind: b.kind.to_owned(),
                namespaced: b.namespaced,
                short_names: b.short.iter().map(|s| (*s).to_owned()).collect(),
                categories: if matches!(
                    b.kind,
                    "Pod" | "Service" | "Deployment" | "DaemonSet" | "ReplicaSet" | "StatefulSet"
                ) {
                    vec!["all".to_owned()]
                } else {
                    Vec::new()
                },
                status: b.status,
                scale: b.scale.then(|| ScaleSpec {
                    spec_replicas: "/spec/replicas".to_owned(),
                    status_replicas: "/status/replicas".to_owned(),
                    label_selector: None,
                }),
                eviction: b.kind == "Pod",
                strategic: true,
                schema: None,
                extra_fields: b.fields,
                generation: b.generation,
            });
        }
        registry
    }

    pub(crate) fn insert(&mut self, resource: Resource) {
        let key = (
            resource.group.clone(),
            resource.version.clone(),
            resource.plural.clone(),
        );
        self.resources.insert(key, Arc::new(resource));
    }

    /// Removes every version of `group`/`plural`.
    pub(crate) fn remove(&mut self, group: &str, plural: &str) {
        self.resources
            .retain(|(g, _, p), _| !(g == group && p == plural));
    }

    pub(crate) fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Resource>> {
        self.resources
            .get(&(group.to_owned(), version.to_owned(), plural.to_owned()))
            .cloned()
    }

    /// The resource serving `apiVersion`/`kind` (for owner references and apply).
    pub(crate) fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<Resource>> {
        let (group, version) = split_api_version(api_version);
        self.resources
            .values()
            .find(|r| {
                r.group == group
                    && r.version == version
                    && r.kind == kind
                    && !(r.group == "events.k8s.io" && kind != "Event")
            })
            .cloned()
    }

    /// Any served version of `group`/`plural`.
    pub(crate) fn any_version(&self, group: &str, plural: &str) -> Option<Arc<Resource>> {
        self.resources
            .values()
            .find(|r| r.group == group && r.plural == plural)
            .cloned()
    }

    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<Resource>> {
        self.resources.values()
    }

    /// Served `(group, version)` pairs, in registry order.
    pub(crate) fn group_versions(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (group, version, _) in self.resources.keys() {
            if !out.iter().any(|(g, v)| g == group && v == version) {
                out.push((group.clone(), version.clone()));
            }
        }
        out
    }
}

/// Splits `apps/v1` into `("apps", "v1")` and `v1` into `("", "v1")`.
pub(crate) fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}
