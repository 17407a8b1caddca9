//! Field sets and `metadata.managedFields`: which manager owns which fields, in the `FieldsV1`
//! encoding (`f:name`, `k:{"name":"c"}`, `v:"x"`, `.`), and the bookkeeping after updates.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde_json::{Map, Value, json};

use crate::patch::strategic::{ListStrategy, list_strategy};
use crate::pointer::At;

mod fast;
mod full;
mod managed;
mod set;

use fast::{FastPath, same_owners};
use full::{new_fields_tree, record_every_field};
pub(crate) use managed::{Entry, Writer, entries, record_update, store_entries};
use set::{OPTIONAL_CONTAINERS, walks_into};
pub(crate) use set::{container_set, field_set};

/// A path through an object, each step in `FieldsV1` syntax.
pub(crate) type Path = Vec<String>;

/// How list fields are identified while walking an object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape<'a> {
    /// A CRD's `openAPIV3Schema`; `None` for built-in types (merge keys by field name).
    pub(crate) schema: Option<&'a Value>,
    /// Only `status` (a status subresource write; with `metadata` for built-in types), or
    /// everything but `status` when the resource has a status subresource.
    pub(crate) scope: Scope,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    All,
    NoStatus,
    StatusOnly,
}

/// How a list merges in server-side apply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ListKind {
    Map(Vec<String>),
    Set,
    Atomic,
}

pub(crate) fn list_kind(field: &str, schema: Option<&Value>, builtin: bool) -> ListKind {
    if let Some(schema) = schema {
        return match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => ListKind::Map(
                schema
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            Some("set") => ListKind::Set,
            _ if builtin => from_strategy(field),
            _ => ListKind::Atomic,
        };
    }
    if builtin {
        from_strategy(field)
    } else {
        ListKind::Atomic
    }
}

fn from_strategy(field: &str) -> ListKind {
    match list_strategy(field) {
        ListStrategy::Keyed(key) => ListKind::Map(vec![key.to_owned()]),
        ListStrategy::Set => ListKind::Set,
        ListStrategy::Atomic => ListKind::Atomic,
    }
}

/// Schema of property `key` under `schema`.
pub(crate) fn child_schema<'a>(schema: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    let schema = schema?;
    schema
        .get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| schema.get("additionalProperties").filter(|v| v.is_object()))
}

pub(crate) fn items_schema(schema: Option<&Value>) -> Option<&Value> {
    schema?.get("items")
}

/// The item key step of a list item (`k:{"name":"c"}`), if it carries the keys.
pub(crate) fn item_step(item: &Value, keys: &[String]) -> Option<String> {
    let mut key_map = Map::new();
    for key in keys {
        key_map.insert(key.clone(), item.get(key)?.clone());
    }
    Some(format!("k:{}", Value::Object(key_map)))
}

/// Whether the top-level field `key` belongs to a write of `scope`.
fn in_scope(key: &str, scope: Scope, builtin: bool) -> bool {
    match key {
        "apiVersion" | "kind" => false,
        "status" => scope != Scope::NoStatus,
        // Status writes of built-in types may change metadata too (their status strategies
        // reset only the spec); a custom resource's status write changes only status.
        "metadata" => scope != Scope::StatusOnly || builtin,
        _ => scope != Scope::StatusOnly,
    }
}

/// The value at `path` in `object`.
pub(crate) fn lookup<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut current = object;
    for step in path {
        current = step_into(current, step)?;
    }
    Some(current)
}

fn step_into<'a>(value: &'a Value, step: &str) -> Option<&'a Value> {
    if let Some(field) = step.strip_prefix("f:") {
        return value.get(field);
    }
    let items = value.as_array()?;
    if let Some(key) = step.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(key).ok()?;
        return items
            .iter()
            .find(|item| key.iter().all(|(k, v)| item.get(k) == Some(v)));
    }
    if let Some(literal) = step.strip_prefix("v:") {
        let literal: Value = serde_json::from_str(literal).ok()?;
        return items.iter().find(|item| **item == literal);
    }
    None
}

/// Removes the field, list item or set value at `path`.
pub(crate) fn remove(object: &mut Value, path: &[String]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut current = object;
    for step in parent_path {
        let next = if let Some(field) = step.strip_prefix("f:") {
            current.get_mut(field)
        } else {
            let found = step_into(current, step).cloned();
            current.as_array_mut().and_then(|items| {
                items
                    .iter_mut()
                    .find(|item| Some(&**item) == found.as_ref())
            })
        };
        match next {
            Some(next) => current = next,
            None => return,
        }
    }
    if let Some(field) = last.strip_prefix("f:") {
        if let Some(map) = current.as_object_mut() {
            map.remove(field);
        }
    } else if let Some(found) = step_into(current, last).cloned()
        && let Some(items) = current.as_array_mut()
    {
        items.retain(|item| *item != found);
    }
}

/// Encodes a set as `FieldsV1`.
pub(crate) fn to_fields_v1(set: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for step in path {
            node = node
                .entry(step.clone())
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("fields nodes are objects");
        }
    }
    // A node that is in the set itself and has children gets a "." marker.
    fn mark(node: &mut Map<String, Value>, prefix: &mut Path, set: &BTreeSet<Path>) {
        for (step, child) in node.iter_mut() {
            prefix.push(step.clone());
            if let Some(child) = child.as_object_mut()
                && !child.is_empty()
            {
                mark(child, prefix, set);
                if set.contains(prefix) {
                    child.insert(".".to_owned(), json!({}));
                }
            }
            prefix.pop();
        }
    }
    mark(&mut root, &mut Vec::new(), set);
    Value::Object(root)
}

/// Decodes `FieldsV1`.
pub(crate) fn from_fields_v1(value: &Value) -> BTreeSet<Path> {
    fn visit(node: &Map<String, Value>, prefix: &mut Path, out: &mut BTreeSet<Path>) {
        for (step, child) in node {
            if step == "." {
                out.insert(prefix.clone());
                continue;
            }
            prefix.push(step.clone());
            match child.as_object() {
                Some(map) if !map.is_empty() => visit(map, prefix, out),
                _ => {
                    out.insert(prefix.clone());
                }
            }
            prefix.pop();
        }
    }
    let mut out = BTreeSet::new();
    if let Some(map) = value.as_object() {
        visit(map, &mut Vec::new(), &mut out);
    }
    out
}

/// Renders a path as kube-apiserver does in conflict messages: `.spec.containers[name="c"].image`.
pub(crate) fn render(path: &[String]) -> String {
    let mut out = String::new();
    for step in path {
        if let Some(field) = step.strip_prefix("f:") {
            out.push('.');
            out.push_str(field);
        } else if let Some(key) = step.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
            let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(value) = step.strip_prefix("v:") {
            out.push_str(&format!("[={value}]"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_v1_round_trips_with_item_markers() {
        let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x"]},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let set = field_set(
            &object,
            Shape {
                schema: None,
                scope: Scope::All,
            },
        );
        let encoded = to_fields_v1(&set);
        assert_eq!(
            encoded,
            json!({
                "f:metadata": {"f:finalizers": {"v:\"x\"": {}}, "f:labels": {"f:a": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}
            })
        );
        assert_eq!(from_fields_v1(&encoded), set);
        let path: Path = vec![
            "f:spec".into(),
            "f:containers".into(),
            "k:{\"name\":\"c\"}".into(),
            "f:image".into(),
        ];
        assert_eq!(lookup(&object, &path), Some(&json!("i")));
        assert_eq!(render(&path), ".spec.containers[name=\"c\"].image");
        let mut removed = object.clone();
        remove(&mut removed, &path[..3]);
        assert_eq!(removed["spec"]["containers"], json!([]));
    }
}
