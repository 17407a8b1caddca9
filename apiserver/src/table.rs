//! Server-side printing: a get or list asked for `as=Table` (kubectl's `get`) is answered with a
//! `meta.k8s.io` Table whose columns are kube-apiserver's for that kind — nodes, pods, events,
//! namespaces, config maps, secrets, leases, deployments — or, for a custom resource, its CRD
//! version's `additionalPrinterColumns` (a CRD without any gets `Age`), so `kubectl get -o wide`
//! prints what it prints against a real server. Other kinds get kube-apiserver's default
//! columns, `Name` and `Created At`. Rows carry the object's metadata
//! (`includeObject=Metadata`, the default), the whole object (`Object`) or nothing (`None`).

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::pointer::At;
use crate::registry::Resource;

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

/// A custom column's cell: the value at its JSONPath (a date as an age), or null when absent.
fn custom_cell(object: &Value, column: &Column, path: &str, now: Timestamp) -> Value {
    let Some(value) = json_path(object, path) else {
        return Value::Null;
    };
    match (column.kind, value) {
        ("date", Value::String(text)) => Value::String(age_of(Some(text), now)),
        (_, value) => value.clone(),
    }
}

/// The simple JSONPath of printer columns: `.a.b`, `.a[0].b`, `.a['b.c']`.
fn json_path<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut rest = path.strip_prefix('$').unwrap_or(path);
    let mut current = object;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            current = current.get(&after[..end])?;
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let key = &after[..end];
            current = match key.parse::<usize>() {
                Ok(index) => current.get(index)?,
                Err(_) => current.get(key.trim_matches(|c| c == '\'' || c == '"'))?,
            };
            rest = &after[end + 1..];
        } else {
            return None;
        }
    }
    Some(current)
}

fn name_of(object: &Value) -> Value {
    object
        .at("/metadata/name")
        .cloned()
        .unwrap_or(Value::String(String::new()))
}

fn text_at<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.at(pointer).and_then(Value::as_str)
}

fn age(object: &Value, now: Timestamp) -> Value {
    Value::String(age_of(text_at(object, "/metadata/creationTimestamp"), now))
}

fn age_of(timestamp: Option<&str>, now: Timestamp) -> String {
    match timestamp.and_then(|t| t.parse::<Timestamp>().ok()) {
        Some(then) => human_duration(now.as_second() - then.as_second()),
        None => "<unknown>".to_owned(),
    }
}

/// kube's `duration.HumanDuration`: two significant units at most, coarser as time goes on.
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    let seconds = seconds.max(0);
    let minutes = seconds / 60;
    let hours = seconds / 3600;
    let days = hours / 24;
    let years = days / 365;
    let with = |major: i64, unit: &str, minor: i64, minor_unit: &str| {
        if minor == 0 {
            format!("{major}{unit}")
        } else {
            format!("{major}{unit}{minor}{minor_unit}")
        }
    };
    if seconds < 120 {
        format!("{seconds}s")
    } else if minutes < 10 {
        with(minutes, "m", seconds % 60, "s")
    } else if minutes < 180 {
        format!("{minutes}m")
    } else if hours < 8 {
        with(hours, "h", minutes % 60, "m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        with(days, "d", hours % 24, "h")
    } else if hours < 24 * 365 * 2 {
        format!("{days}d")
    } else if hours < 24 * 365 * 8 {
        with(years, "y", days % 365, "d")
    } else {
        format!("{years}y")
    }
}

fn or_none(value: Option<&str>) -> Value {
    Value::String(
        value
            .filter(|v| !v.is_empty())
            .unwrap_or("<none>")
            .to_owned(),
    )
}

fn or_unknown(value: Option<&str>) -> Value {
    Value::String(
        value
            .filter(|v| !v.is_empty())
            .unwrap_or("<unknown>")
            .to_owned(),
    )
}

fn node_cells(node: &Value, now: Timestamp) -> Vec<Value> {
    let conditions = node
        .at("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut status = match conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        .and_then(|c| c.get("status").and_then(Value::as_str))
    {
        Some("True") => "Ready".to_owned(),
        Some("False") => "NotReady".to_owned(),
        _ => "Unknown".to_owned(),
    };
    if node.at("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<&str> = node
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(key, value)| {
                    if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
                        Some(role)
                    } else if key == "kubernetes.io/role" {
                        value.as_str()
                    } else {
                        None
                    }
                })
                .filter(|role| !role.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort_unstable();
    roles.dedup();
    let address = |kind: &str| {
        node.at("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|addresses| {
                addresses
                    .iter()
                    .find(|a| a.get("type").and_then(Value::as_str) == Some(kind))
            })
            .and_then(|a| a.get("address").and_then(Value::as_str))
    };
    vec![
        name_of(node),
        Value::String(status),
        or_none((!roles.is_empty()).then(|| roles.join(",")).as_deref()),
        age(node, now),
        Value::String(
            text_at(node, "/status/nodeInfo/kubeletVersion")
                .unwrap_or_default()
                .to_owned(),
        ),
        or_none(address("InternalIP")),
        or_none(address("ExternalIP")),
        or_unknown(text_at(node, "/status/nodeInfo/osImage")),
        or_unknown(text_at(node, "/status/nodeInfo/kernelVersion")),
        or_unknown(text_at(node, "/status/nodeInfo/containerRuntimeVersion")),
    ]
}

fn pod_cells(pod: &Value, now: Timestamp) -> Vec<Value> {
    let containers = pod
        .at("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let statuses = pod
        .at("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let ready = statuses
        .iter()
        .filter(|s| s.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|s| s.get("restartCount").and_then(Value::as_i64))
        .sum();
    let mut reason = text_at(pod, "/status/reason")
        .or_else(|| text_at(pod, "/status/phase"))
        .unwrap_or("Pending")
        .to_owned();
    for status in statuses.iter().rev() {
        if let Some(waiting) = status
            .at("/state/waiting/reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
        {
            reason = waiting.to_owned();
        } else if let Some(terminated) = status.at("/state/terminated") {
            reason = match terminated.get("reason").and_then(Value::as_str) {
                Some(r) if !r.is_empty() => r.to_owned(),
                _ => match terminated.get("signal").and_then(Value::as_i64) {
                    Some(signal) if signal != 0 => format!("Signal:{signal}"),
                    _ => format!(
                        "ExitCode:{}",
                        terminated
                            .get("exitCode")
                            .and_then(Value::as_i64)
                            .unwrap_or(0)
                    ),
                },
            };
        }
    }
    if pod.at("/metadata/deletionTimestamp").is_some() && reason != "NodeLost" {
        reason = "Terminating".to_owned();
    }
    let gates = pod
        .at("/spec/readinessGates")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let readiness_gates = if gates == 0 {
        "<none>".to_owned()
    } else {
        let conditions = pod
            .at("/status/conditions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let passed = pod
            .at("/spec/readinessGates")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|gate| {
                conditions.iter().any(|c| {
                    c.get("type") == gate.get("conditionType")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            })
            .count();
        format!("{passed}/{gates}")
    };
    vec![
        name_of(pod),
        Value::String(format!("{ready}/{containers}")),
        Value::String(reason),
        json!(restarts),
        age(pod, now),
        or_none(text_at(pod, "/status/podIP")),
        or_none(text_at(pod, "/spec/nodeName")),
        or_none(text_at(pod, "/status/nominatedNodeName")),
        Value::String(readiness_gates),
    ]
}

fn event_cells(event: &Value, now: Timestamp) -> Vec<Value> {
    let first = text_at(event, "/firstTimestamp").or_else(|| text_at(event, "/eventTime"));
    let last = text_at(event, "/lastTimestamp")
        .or_else(|| text_at(event, "/series/lastObservedTime"))
        .or(first);
    let kind = text_at(event, "/involvedObject/kind").unwrap_or_default();
    let source = match (
        text_at(event, "/source/component").filter(|c| !c.is_empty()),
        text_at(event, "/source/host").filter(|h| !h.is_empty()),
    ) {
        (Some(component), Some(host)) => format!("{component}, {host}"),
        (Some(component), None) => component.to_owned(),
        (None, _) => text_at(event, "/reportingComponent")
            .unwrap_or_default()
            .to_owned(),
    };
    let count = event
        .get("count")
        .and_then(Value::as_i64)
        .or_else(|| event.at("/series/count").and_then(Value::as_i64))
        .unwrap_or(1);
    vec![
        Value::String(age_of(last, now)),
        Value::String(text_at(event, "/type").unwrap_or_default().to_owned()),
        Value::String(text_at(event, "/reason").unwrap_or_default().to_owned()),
        Value::String(format!(
            "{}/{}",
            kind.to_lowercase(),
            text_at(event, "/involvedObject/name").unwrap_or_default()
        )),
        Value::String(
            text_at(event, "/involvedObject/fieldPath")
                .unwrap_or_default()
                .to_owned(),
        ),
        Value::String(source),
        Value::String(text_at(event, "/message").unwrap_or_default().to_owned()),
        Value::String(age_of(first, now)),
        Value::String(count.to_string()),
        name_of(event),
    ]
}

fn namespace_cells(namespace: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name_of(namespace),
        Value::String(
            text_at(namespace, "/status/phase")
                .unwrap_or("Active")
                .to_owned(),
        ),
        age(namespace, now),
    ]
}

fn entries(object: &Value, key: &str) -> usize {
    object
        .get(key)
        .and_then(Value::as_object)
        .map_or(0, serde_json::Map::len)
}

fn config_map_cells(map: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name_of(map),
        json!(entries(map, "data") + entries(map, "binaryData")),
        age(map, now),
    ]
}

fn secret_cells(secret: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name_of(secret),
        Value::String(text_at(secret, "/type").unwrap_or("Opaque").to_owned()),
        json!(entries(secret, "data")),
        age(secret, now),
    ]
}

fn lease_cells(lease: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name_of(lease),
        Value::String(
            text_at(lease, "/spec/holderIdentity")
                .unwrap_or_default()
                .to_owned(),
        ),
        age(lease, now),
    ]
}

fn deployment_cells(deployment: &Value, now: Timestamp) -> Vec<Value> {
    let number = |pointer: &str| deployment.at(pointer).and_then(Value::as_i64).unwrap_or(0);
    let containers = deployment
        .at("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let joined = |key: &str| {
        containers
            .iter()
            .filter_map(|c| c.get(key).and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(",")
    };
    let selector = deployment
        .at("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    vec![
        name_of(deployment),
        Value::String(format!(
            "{}/{}",
            number("/status/readyReplicas"),
            deployment
                .at("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1)
        )),
        json!(number("/status/updatedReplicas")),
        json!(number("/status/availableReplicas")),
        age(deployment, now),
        Value::String(joined("name")),
        Value::String(joined("image")),
        Value::String(selector),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_kubectl_prints_them() {
        let cases = [
            (0, "0s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (30 * 3600, "30h"),
            (3 * 86400 + 3600, "3d1h"),
            (20 * 86400, "20d"),
            (3 * 365 * 86400 + 86400, "3y1d"),
            (-5, "<invalid>"),
        ];
        for (seconds, text) in cases {
            assert_eq!(human_duration(seconds), text, "{seconds}s");
        }
    }

    #[test]
    fn the_first_table_media_type_is_taken() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(requested(kubectl), Some(TableVersion::V1));
        assert_eq!(
            requested("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
            Some(TableVersion::V1beta1)
        );
        assert_eq!(requested("application/json"), None);
    }

    #[test]
    fn printer_column_paths_reach_nested_and_indexed_members() {
        let object =
            json!({"status": {"phase": "Running", "conditions": [{"type": "Ready"}]}, "a.b": 1});
        assert_eq!(json_path(&object, ".status.phase"), Some(&json!("Running")));
        assert_eq!(
            json_path(&object, ".status.conditions[0].type"),
            Some(&json!("Ready"))
        );
        assert_eq!(json_path(&object, "['a.b']"), Some(&json!(1)));
        assert_eq!(json_path(&object, ".status.missing"), None);
    }
}
