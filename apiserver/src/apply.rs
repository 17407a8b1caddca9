//! Server-side apply (`application/apply-patch+yaml`):
//!
//! 1. The applied configuration's fields are computed (lists by their merge keys).
//! 2. Every field another manager owns whose live value differs from the applied one is a
//!    conflict: 409 listing them, unless `force`, which takes them over.
//! 3. The configuration is merged into the live object (maps recursively, keyed lists by key,
//!    sets as unions, other lists replaced).
//! 4. Fields this manager applied before but no longer does are removed, unless another manager
//!    still owns them.
//! 5. The manager's `Apply` entry becomes exactly the applied fields.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::fields::{self, Entry, ListKind, Path, Shape, Writer};

/// A conflict: the field (rendered) and kube-apiserver's message for it.
pub(crate) type Conflict = (String, String);

/// Applies `applied` over `live` (None: the object does not exist yet) for `writer`.
pub(crate) fn apply(
    live: Option<&Value>,
    applied: &Value,
    writer: &Writer<'_>,
    force: bool,
    shape: Shape<'_>,
) -> Result<Value, Vec<Conflict>> {
    let mut applied = strip_nulls(applied.clone());
    if let Some(meta) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in [
            "managedFields",
            "creationTimestamp",
            "uid",
            "resourceVersion",
            "generation",
            "deletionTimestamp",
        ] {
            meta.remove(key);
        }
    }
    let applied_fields = fields::field_set(&applied, shape);
    let mut list = live.map(fields::entries).unwrap_or_default();
    let is_mine = |e: &Entry| {
        e.manager == writer.manager
            && e.operation == "Apply"
            && e.subresource.as_deref() == writer.subresource
    };

    if let Some(live) = live {
        let mut conflicts: Vec<(Path, Conflict)> = Vec::new();
        for entry in list.iter().filter(|e| !is_mine(e)) {
            for path in entry.fields.intersection(&applied_fields) {
                if path.last().is_some_and(|s| s.starts_with("k:")) {
                    continue;
                }
                if fields::lookup(live, path) != fields::lookup(&applied, path) {
                    let using = if entry.operation == "Update" {
                        format!(" using {}", entry.api_version)
                    } else {
                        String::new()
                    };
                    let rendered = fields::render(path);
                    conflicts.push((
                        path.clone(),
                        (
                            rendered.clone(),
                            format!("conflict with \"{}\"{using}: {rendered}", entry.manager),
                        ),
                    ));
                }
            }
        }
        if !conflicts.is_empty() {
            if !force {
                return Err(conflicts.into_iter().map(|(_, c)| c).collect());
            }
            let taken: BTreeSet<Path> = conflicts.into_iter().map(|(p, _)| p).collect();
            for entry in list.iter_mut().filter(|e| !is_mine(e)) {
                entry.fields.retain(|p| !taken.contains(p));
            }
        }
    }

    let mut merged = match live {
        Some(live) => merge(live, &applied, "", shape.schema, shape.schema.is_none()),
        None => applied.clone(),
    };

    let previous: BTreeSet<Path> = list
        .iter()
        .filter(|e| is_mine(e))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let others: Vec<&BTreeSet<Path>> = list
        .iter()
        .filter(|e| !is_mine(e))
        .map(|e| &e.fields)
        .collect();
    let mut removed: Vec<&Path> = previous.difference(&applied_fields).collect();
    removed.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for path in removed {
        let still_owned = others
            .iter()
            .any(|set| set.iter().any(|p| p.starts_with(path)));
        if !still_owned {
            fields::remove(&mut merged, path);
        }
    }

    list.retain(|e| !is_mine(e));
    let mut all = fields::field_set(
        &merged,
        Shape {
            schema: shape.schema,
            scope: fields::Scope::All,
        },
    );
    all.extend(fields::container_set(
        &merged,
        Shape {
            schema: shape.schema,
            scope: fields::Scope::All,
        },
    ));
    for entry in &mut list {
        entry.fields.retain(|p| all.contains(p));
    }
    list.push(Entry {
        manager: writer.manager.to_owned(),
        operation: "Apply".to_owned(),
        api_version: writer.api_version.to_owned(),
        time: writer.time.to_owned(),
        subresource: writer.subresource.map(str::to_owned),
        fields: applied_fields,
    });
    fields::store_entries(&mut merged, &list);
    Ok(merged)
}

fn strip_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

fn merge(
    live: &Value,
    applied: &Value,
    field: &str,
    schema: Option<&Value>,
    builtin: bool,
) -> Value {
    match (live, applied) {
        (Value::Object(live_map), Value::Object(applied_map)) => {
            let mut result: Map<String, Value> = live_map.clone();
            for (key, value) in applied_map {
                let child_schema = fields::child_schema(schema, key);
                let merged = match result.get(key) {
                    Some(existing) => merge(existing, value, key, child_schema, builtin),
                    None => value.clone(),
                };
                result.insert(key.clone(), merged);
            }
            Value::Object(result)
        }
        (Value::Array(live_items), Value::Array(applied_items)) => {
            match fields::list_kind(field, schema, builtin) {
                ListKind::Map(keys) => {
                    let mut result = live_items.clone();
                    for item in applied_items {
                        let step = fields::item_step(item, &keys);
                        let position = step.as_ref().and_then(|s| {
                            result.iter().position(|existing| {
                                fields::item_step(existing, &keys).as_ref() == Some(s)
                            })
                        });
                        match position {
                            Some(i) => {
                                result[i] = merge(
                                    &result[i],
                                    item,
                                    "",
                                    fields::items_schema(schema),
                                    builtin,
                                )
                            }
                            None => result.push(item.clone()),
                        }
                    }
                    Value::Array(result)
                }
                ListKind::Set => {
                    let mut result = live_items.clone();
                    for item in applied_items {
                        if !result.contains(item) {
                            result.push(item.clone());
                        }
                    }
                    Value::Array(result)
                }
                ListKind::Atomic => applied.clone(),
            }
        }
        _ => applied.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::fields::Scope;

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            api_version: "apps/v1",
            time: "2024-01-01T00:00:00Z",
            subresource: None,
        }
    }

    const SHAPE: Shape<'static> = Shape {
        schema: None,
        scope: Scope::NoStatus,
    };

    #[test]
    fn conflicts_then_force_takes_over_and_dropped_fields_go() {
        let first = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "1"}}, "spec": {"replicas": 1, "paused": false}});
        let live = apply(None, &first, &writer("alice"), false, SHAPE).unwrap();
        let second = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 3}});
        let conflicts = apply(Some(&live), &second, &writer("bob"), false, SHAPE).unwrap_err();
        assert_eq!(
            conflicts,
            vec![(
                ".spec.replicas".to_owned(),
                "conflict with \"alice\": .spec.replicas".to_owned()
            )]
        );
        let forced = apply(Some(&live), &second, &writer("bob"), true, SHAPE).unwrap();
        assert_eq!(forced["spec"]["replicas"], 3);
        // alice re-applies without `paused` and without the label: both go (she alone owned them).
        let third =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}});
        let after = apply(Some(&forced), &third, &writer("alice"), false, SHAPE).unwrap();
        assert_eq!(after["spec"], json!({"replicas": 3}));
        assert!(
            after["metadata"]
                .get("labels")
                .is_none_or(|l| l.get("a").is_none())
        );
        let managers: Vec<&str> = after["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, vec!["bob"]);
    }
}
