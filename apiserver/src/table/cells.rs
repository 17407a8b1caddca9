//! The cells of a row: a custom column's value at its JSONPath, ages as kubectl prints them, and
//! kube-apiserver's columns for each built-in kind.

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::pointer::At;

use super::Column;

/// A custom column's cell: the value at its JSONPath (a date as an age), or null when absent.
pub(super) fn custom_cell(object: &Value, column: &Column, path: &str, now: Timestamp) -> Value {
    let Some(value) = json_path(object, path) else {
        return Value::Null;
    };
    match (column.kind, value) {
        ("date", Value::String(text)) => Value::String(age_of(Some(text), now)),
        (_, value) => value.clone(),
    }
}

/// The simple JSONPath of printer columns: `.a.b`, `.a[0].b`, `.a['b.c']`.
pub(super) fn json_path<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
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

pub(super) fn name_of(object: &Value) -> Value {
    object
        .at("/metadata/name")
        .cloned()
        .unwrap_or(Value::String(String::new()))
}

pub(super) fn text_at<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.at(pointer).and_then(Value::as_str)
}

pub(super) fn age(object: &Value, now: Timestamp) -> Value {
    Value::String(age_of(text_at(object, "/metadata/creationTimestamp"), now))
}

pub(super) fn age_of(timestamp: Option<&str>, now: Timestamp) -> String {
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

pub(super) fn or_none(value: Option<&str>) -> Value {
    Value::String(
        value
            .filter(|v| !v.is_empty())
            .unwrap_or("<none>")
            .to_owned(),
    )
}

pub(super) fn or_unknown(value: Option<&str>) -> Value {
    Value::String(
        value
            .filter(|v| !v.is_empty())
            .unwrap_or("<unknown>")
            .to_owned(),
    )
}

pub(super) fn node_cells(node: &Value, now: Timestamp) -> Vec<Value> {
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

pub(super) fn pod_cells(pod: &Value, now: Timestamp) -> Vec<Value> {
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

pub(super) fn event_cells(event: &Value, now: Timestamp) -> Vec<Value> {
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

pub(super) fn namespace_cells(namespace: &Value, now: Timestamp) -> Vec<Value> {
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

pub(super) fn entries(object: &Value, key: &str) -> usize {
    object
        .get(key)
        .and_then(Value::as_object)
        .map_or(0, serde_json::Map::len)
}

pub(super) fn config_map_cells(map: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name_of(map),
        json!(entries(map, "data") + entries(map, "binaryData")),
        age(map, now),
    ]
}

pub(super) fn secret_cells(secret: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name_of(secret),
        Value::String(text_at(secret, "/type").unwrap_or("Opaque").to_owned()),
        json!(entries(secret, "data")),
        age(secret, now),
    ]
}

/// kubectl's service columns: type, cluster IP, external IP, ports (`port[:nodePort]/protocol`),
/// age, and (wide) the selector.
pub(super) fn service_cells(service: &Value, now: Timestamp) -> Vec<Value> {
    let kind = text_at(service, "/spec/type").unwrap_or("ClusterIP");
    let strings = |pointer: &str| -> Vec<String> {
        service
            .at(pointer)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let mut external = strings("/spec/externalIPs");
    let external = match kind {
        "ExternalName" => text_at(service, "/spec/externalName")
            .unwrap_or_default()
            .to_owned(),
        "LoadBalancer" => {
            let ingress = service
                .at("/status/loadBalancer/ingress")
                .and_then(Value::as_array);
            let mut addresses: Vec<String> = ingress
                .into_iter()
                .flatten()
                .filter_map(|i| i.get("ip").or_else(|| i.get("hostname")))
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            addresses.append(&mut external);
            if addresses.is_empty() {
                "<pending>".to_owned()
            } else {
                addresses.join(",")
            }
        }
        _ if external.is_empty() => "<none>".to_owned(),
        _ => external.join(","),
    };
    let ports: Vec<String> = service
        .at("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let number = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            match p
                .get("nodePort")
                .and_then(Value::as_i64)
                .filter(|n| *n != 0)
            {
                Some(node_port) => format!("{number}:{node_port}/{protocol}"),
                None => format!("{number}/{protocol}"),
            }
        })
        .collect();
    let selector: Vec<String> = service
        .at("/spec/selector")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    let none_if_empty = |text: String| {
        if text.is_empty() {
            "<none>".to_owned()
        } else {
            text
        }
    };
    vec![
        name_of(service),
        Value::String(kind.to_owned()),
        or_none(text_at(service, "/spec/clusterIP")),
        Value::String(external),
        Value::String(none_if_empty(ports.join(","))),
        age(service, now),
        Value::String(none_if_empty(selector.join(","))),
    ]
}

pub(super) fn lease_cells(lease: &Value, now: Timestamp) -> Vec<Value> {
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

pub(super) fn deployment_cells(deployment: &Value, now: Timestamp) -> Vec<Value> {
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
