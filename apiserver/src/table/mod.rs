//! Server-side printing: a get or list asked for `as=Table` (kubectl's `get`) is answered with a
//! `meta.k8s.io` Table whose columns are kube-apiserver's for that kind — nodes, pods, events,
//! namespaces, config maps, secrets, leases, deployments — or, for a custom resource, its CRD
//! version's `additionalPrinterColumns` (a CRD without any gets `Age`), so `kubectl get -o wide`
//! prints what it prints against a real server. Other kinds get kube-apiserver's default
//! columns, `Name` and `Created At`. Rows carry the object's metadata
//! (`includeObject=Metadata`, the default), the whole object (`Object`) or nothing (`None`).

mod cells;
#[cfg(test)]
mod tests;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::pointer::At;
use crate::registry::Resource;

use cells::{
    config_map_cells, custom_cell, deployment_cells, event_cells, lease_cells, name_of,
    namespace_cells, node_cells, pod_cells, secret_cells, service_cells,
};

/// The Table version a client asked for in its Accept header, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TableVersion {
    V1,
    V1beta1,
}

impl TableVersion {
    fn api_version(self) -> &'static str {
        match self {
            Self::V1 => "meta.k8s.io/v1",
            Self::V1beta1 => "meta.k8s.io/v1beta1",
        }
    }
}

/// The first Table media type in `accept`, in the client's order of preference.
pub(crate) fn requested(accept: &str) -> Option<TableVersion> {
    accept.split(',').find_map(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        if !params.contains(&"as=Table") || !params.contains(&"g=meta.k8s.io") {
            return None;
        }
        if params.contains(&"v=v1") {
            Some(TableVersion::V1)
        } else if params.contains(&"v=v1beta1") {
            Some(TableVersion::V1beta1)
        } else {
            None
        }
    })
}

/// What a row carries besides its cells (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    pub(crate) fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("") | Some("Metadata") => Ok(Self::Metadata),
            Some("None") => Ok(Self::None),
            Some("Object") => Ok(Self::Object),
            Some(other) => Err(ApiError::bad_request(format!(
                "includeObject must be one of None, Metadata or Object, not {other:?}"
            ))),
        }
    }
}

/// One column: its header, type, format and whether it shows only with `-o wide` (priority 1).
#[derive(Debug, Clone)]
struct Column {
    name: String,
    kind: &'static str,
    format: &'static str,
    description: String,
    priority: u8,
}

impl Column {
    fn new(name: &str, kind: &'static str, format: &'static str, priority: u8) -> Self {
        Self {
            name: name.to_owned(),
            kind,
            format,
            description: String::new(),
            priority,
        }
    }

    fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// How the cells of one kind are computed.
enum Printer {
    Builtin(fn(&Value, Timestamp) -> Vec<Value>, Vec<Column>),
    /// A custom resource's printer columns: a JSONPath each (after `Name`).
    Custom(Vec<(Column, String)>),
    Default,
}

/// The Table for a get (`object`) or a list (`items` of a List).
pub(crate) fn render(
    version: TableVersion,
    include: IncludeObject,
    resource: &Resource,
    crd: Option<&Value>,
    reply: &Value,
    now: Timestamp,
) -> Value {
    let printer = printer(resource, crd);
    let columns: Vec<Value> = match &printer {
        Printer::Builtin(_, columns) => columns.iter().map(Column::definition).collect(),
        Printer::Custom(columns) => std::iter::once(name_column())
            .chain(columns.iter().map(|(c, _)| c.clone()))
            .map(|c| c.definition())
            .collect(),
        Printer::Default => vec![
            name_column().definition(),
            Column::new("Created At", "date", "", 0).definition(),
        ],
    };
    let (objects, metadata): (Vec<&Value>, Value) = match reply.get("items") {
        Some(Value::Array(items)) => (
            items.iter().collect(),
            reply.get("metadata").cloned().unwrap_or_else(|| json!({})),
        ),
        _ => (
            vec![reply],
            json!({"resourceVersion": reply.at("/metadata/resourceVersion").cloned().unwrap_or(Value::Null)}),
        ),
    };
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|object| {
            let cells = match &printer {
                Printer::Builtin(cells, _) => cells(object, now),
                Printer::Custom(columns) => std::iter::once(name_of(object))
                    .chain(
                        columns
                            .iter()
                            .map(|(column, path)| custom_cell(object, column, path, now)),
                    )
                    .collect(),
                Printer::Default => vec![
                    name_of(object),
                    object
                        .at("/metadata/creationTimestamp")
                        .cloned()
                        .unwrap_or(Value::Null),
                ],
            };
            let mut row = json!({"cells": cells});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": version.api_version(),
                        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
                    });
                }
                IncludeObject::Object => row["object"] = object.clone(),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": version.api_version(),
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

fn name_column() -> Column {
    let mut column = Column::new("Name", "string", "name", 0);
    column.description = "Name must be unique within a namespace.".to_owned();
    column
}

fn printer(resource: &Resource, crd: Option<&Value>) -> Printer {
    let columns = |spec: &[(&str, &'static str, &'static str, u8)]| {
        spec.iter()
            .map(|(name, kind, format, priority)| {
                if *format == "name" {
                    name_column()
                } else {
                    Column::new(name, kind, format, *priority)
                }
            })
            .collect::<Vec<_>>()
    };
    match (resource.group.as_str(), resource.plural.as_str()) {
        ("", "nodes") => Printer::Builtin(
            node_cells,
            columns(&[
                ("Name", "string", "name", 0),
                ("Status", "string", "", 0),
                ("Roles", "string", "", 0),
                ("Age", "string", "", 0),
                ("Version", "string", "", 0),
                ("Internal-IP", "string", "", 1),
                ("External-IP", "string", "", 1),
                ("OS-Image", "string", "", 1),
                ("Kernel-Version", "string", "", 1),
                ("Container-Runtime", "string", "", 1),
            ]),
        ),
        ("", "pods") => Printer::Builtin(
            pod_cells,
            columns(&[
                ("Name", "string", "name", 0),
                ("Ready", "string", "", 0),
                ("Status", "string", "", 0),
                ("Restarts", "integer", "", 0),
                ("Age", "string", "", 0),
                ("IP", "string", "", 1),
                ("Node", "string", "", 1),
                ("Nominated Node", "string", "", 1),
                ("Readiness Gates", "string", "", 1),
            ]),
        ),
        ("", "events") => Printer::Builtin(
            event_cells,
            columns(&[
                ("Last Seen", "string", "", 0),
                ("Type", "string", "", 0),
                ("Reason", "string", "", 0),
                ("Object", "string", "", 0),
                ("Subobject", "string", "", 1),
                ("Source", "string", "", 1),
                ("Message", "string", "", 0),
                ("First Seen", "string", "", 1),
                ("Count", "string", "", 1),
                ("Name", "string", "", 1),
            ]),
        ),
        ("", "namespaces") => Printer::Builtin(
            namespace_cells,
            columns(&[
                ("Name", "string", "name", 0),
                ("Status", "string", "", 0),
                ("Age", "string", "", 0),
            ]),
        ),
        ("", "configmaps") => Printer::Builtin(
            config_map_cells,
            columns(&[
                ("Name", "string", "name", 0),
                ("Data", "string", "", 0),
                ("Age", "string", "", 0),
            ]),
        ),
        ("", "services") => Printer::Builtin(
            service_cells,
            columns(&[
                ("Name", "string", "name", 0),
                ("Type", "string", "", 0),
                ("Cluster-IP", "string", "", 0),
                ("External-IP", "string", "", 0),
                ("Port(s)", "string", "", 0),
                ("Age", "string", "", 0),
                ("Selector", "string", "", 1),
            ]),
        ),
        ("", "secrets") => Printer::Builtin(
            secret_cells,
            columns(&[
                ("Name", "string", "name", 0),
                ("Type", "string", "", 0),
                ("Data", "string", "", 0),
                ("Age", "string", "", 0),
            ]),
        ),
        ("coordination.k8s.io", "leases") => Printer::Builtin(
            lease_cells,
            columns(&[
                ("Name", "string", "name", 0),
                ("Holder", "string", "", 0),
                ("Age", "string", "", 0),
            ]),
        ),
        ("apps", "deployments") => Printer::Builtin(
            deployment_cells,
            columns(&[
                ("Name", "string", "name", 0),
                ("Ready", "string", "", 0),
                ("Up-to-date", "string", "", 0),
                ("Available", "string", "", 0),
                ("Age", "string", "", 0),
                ("Containers", "string", "", 1),
                ("Images", "string", "", 1),
                ("Selector", "string", "", 1),
            ]),
        ),
        _ => match crd {
            Some(crd) => Printer::Custom(crd_columns(crd, &resource.version)),
            None => Printer::Default,
        },
    }
}

/// A CRD version's `additionalPrinterColumns`, or `Age` when it has none.
fn crd_columns(crd: &Value, version: &str) -> Vec<(Column, String)> {
    let declared = crd
        .at("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|versions| {
            versions
                .iter()
                .find(|v| v.get("name").and_then(Value::as_str) == Some(version))
        })
        .and_then(|v| v.get("additionalPrinterColumns"))
        .and_then(Value::as_array);
    let Some(declared) = declared else {
        return vec![(
            Column::new("Age", "date", "", 0),
            ".metadata.creationTimestamp".to_owned(),
        )];
    };
    declared
        .iter()
        .map(|c| {
            let text = |key: &str| c.get(key).and_then(Value::as_str).unwrap_or_default();
            let kind = match text("type") {
                "integer" => "integer",
                "number" => "number",
                "boolean" => "boolean",
                "date" => "date",
                _ => "string",
            };
            let mut column = Column::new(
                text("name"),
                kind,
                "",
                u8::try_from(c.get("priority").and_then(Value::as_u64).unwrap_or(0))
                    .unwrap_or(u8::MAX),
            );
            column.description = text("description").to_owned();
            (column, text("jsonPath").to_owned())
        })
        .collect()
}
