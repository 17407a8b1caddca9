//! Field sets and `metadata.managedFields`: which manager owns which fields, in the `FieldsV1`
//! encoding (`f:name`, `k:{"name":"c"}`, `v:"x"`, `.`), and the bookkeeping after updates.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde_json::{Map, Value, json};

use crate::patch::strategic::{ListStrategy, list_strategy};
use crate::pointer::At;

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

/// Every field set in `object`, within `shape.scope`.
pub(crate) fn field_set(object: &Value, shape: Shape<'_>) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    let Some(map) = object.as_object() else {
        return out;
    };
    let builtin = shape.schema.is_none();
    for (key, value) in map {
        if !in_scope(key, shape.scope, builtin) {
            continue;
        }
        let path = vec![format!("f:{key}")];
        if key == "metadata" {
            for meta_key in [
                "generateName",
                "labels",
                "annotations",
                "finalizers",
                "ownerReferences",
            ] {
                if let Some(value) = value.get(meta_key) {
                    walk(
                        value,
                        vec![path[0].clone(), format!("f:{meta_key}")],
                        meta_key,
                        None,
                        true,
                        &mut out,
                    );
                }
            }
            continue;
        }
        walk(
            value,
            path,
            key,
            child_schema(shape.schema, key),
            builtin,
            &mut out,
        );
    }
    out
}

fn walk(
    value: &Value,
    path: Path,
    field: &str,
    schema: Option<&Value>,
    builtin: bool,
    out: &mut BTreeSet<Path>,
) {
    match value {
        Value::Object(map) if walks_into(map, schema, field, builtin) => {
            for (key, child) in map {
                let mut child_path = path.clone();
                child_path.push(format!("f:{key}"));
                walk(
                    child,
                    child_path,
                    key,
                    child_schema(schema, key),
                    builtin,
                    out,
                );
            }
        }
        Value::Array(items) => match list_kind(field, schema, builtin) {
            ListKind::Map(keys) => {
                for item in items {
                    let Some(step) = item_step(item, &keys) else {
                        out.insert(path.clone());
                        return;
                    };
                    let mut item_path = path.clone();
                    item_path.push(step);
                    out.insert(item_path.clone());
                    if let Some(map) = item.as_object() {
                        for (key, child) in map {
                            let mut child_path = item_path.clone();
                            child_path.push(format!("f:{key}"));
                            walk(
                                child,
                                child_path,
                                key,
                                child_schema(items_schema(schema), key),
                                builtin,
                                out,
                            );
                        }
                    }
                }
            }
            ListKind::Set => {
                for item in items {
                    let mut item_path = path.clone();
                    item_path.push(format!("v:{item}"));
                    out.insert(item_path);
                }
            }
            ListKind::Atomic => {
                out.insert(path);
            }
        },
        _ => {
            out.insert(path);
        }
    }
}

/// Fields of the built-in types that are atomic structs (`+structType=atomic`: a
/// `LabelSelector`), owned as a whole.
const ATOMIC_STRUCTS: &[&str] = &["selector"];

/// Fields of the built-in types whose values are Go maps, pointers or `omitempty` lists: absent
/// from a new, empty object, so that writing them adds the field itself (a `"."` entry in
/// `FieldsV1`) and not only its members.
const OPTIONAL_CONTAINERS: &[&str] = &[
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "data",
    "binaryData",
    "matchLabels",
    "nodeSelector",
    "limits",
    "requests",
    "capacity",
    "allocatable",
    "conditions",
    "addresses",
    "env",
    "ports",
    "volumeMounts",
    "volumes",
    "rollingUpdate",
    "conversion",
];

/// The maps and lists of `object` (within `shape.scope`) that kube's field tracking counts as
/// fields of their own when they are added: every one of a custom resource, the
/// [`OPTIONAL_CONTAINERS`] of built-in types. List items are in [`field_set`] already.
pub(crate) fn container_set(object: &Value, shape: Shape<'_>) -> BTreeSet<Path> {
    fn visit(
        value: &Value,
        path: &mut Path,
        field: &str,
        schema: Option<&Value>,
        builtin: bool,
        out: &mut BTreeSet<Path>,
    ) {
        let counts = !path.is_empty() && (!builtin || OPTIONAL_CONTAINERS.contains(&field));
        match value {
            Value::Object(map) if walks_into(map, schema, field, builtin) => {
                if counts {
                    out.insert(path.clone());
                }
                for (key, child) in map {
                    path.push(format!("f:{key}"));
                    visit(child, path, key, child_schema(schema, key), builtin, out);
                    path.pop();
                }
            }
            Value::Array(items) if !items.is_empty() => {
                let keys = match list_kind(field, schema, builtin) {
                    ListKind::Atomic => return,
                    ListKind::Set => None,
                    ListKind::Map(keys) => Some(keys),
                };
                if counts {
                    out.insert(path.clone());
                }
                if let Some(keys) = keys {
                    for item in items {
                        let (Some(step), Some(map)) = (item_step(item, &keys), item.as_object())
                        else {
                            continue;
                        };
                        path.push(step);
                        for (key, child) in map {
                            path.push(format!("f:{key}"));
                            visit(
                                child,
                                path,
                                key,
                                child_schema(items_schema(schema), key),
                                builtin,
                                out,
                            );
                            path.pop();
                        }
                        path.pop();
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    let Some(map) = object.as_object() else {
        return out;
    };
    let builtin = shape.schema.is_none();
    for (key, value) in map {
        if !in_scope(key, shape.scope, builtin) {
            continue;
        }
        if key == "metadata" {
            for meta_key in ["labels", "annotations", "finalizers", "ownerReferences"] {
                if let Some(value) = value.get(meta_key) {
                    visit(
                        value,
                        &mut vec!["f:metadata".to_owned(), format!("f:{meta_key}")],
                        meta_key,
                        None,
                        true,
                        &mut out,
                    );
                }
            }
            continue;
        }
        visit(
            value,
            &mut vec![format!("f:{key}")],
            key,
            child_schema(shape.schema, key),
            builtin,
            &mut out,
        );
    }
    out
}

/// Whether an object's members are fields of their own (not an empty or atomic value).
fn walks_into(
    map: &Map<String, Value>,
    schema: Option<&Value>,
    field: &str,
    builtin: bool,
) -> bool {
    let atomic = preserves_unknown_as_leaf(schema) || builtin && ATOMIC_STRUCTS.contains(&field);
    !map.is_empty() && !atomic
}

fn preserves_unknown_as_leaf(schema: Option<&Value>) -> bool {
    schema.is_some_and(|s| s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"))
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

/// One entry of `metadata.managedFields`.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) manager: String,
    pub(crate) operation: String,
    pub(crate) api_version: String,
    pub(crate) time: String,
    pub(crate) subresource: Option<String>,
    pub(crate) fields: BTreeSet<Path>,
}

pub(crate) fn entries(object: &Value) -> Vec<Entry> {
    let Some(list) = object
        .at("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .map(|e| Entry {
            manager: e
                .get("manager")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            operation: e
                .get("operation")
                .and_then(Value::as_str)
                .unwrap_or("Update")
                .to_owned(),
            api_version: e
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            time: e
                .get("time")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            subresource: e
                .get("subresource")
                .and_then(Value::as_str)
                .map(str::to_owned),
            fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
        })
        .collect()
}

pub(crate) fn store_entries(object: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            entry_value(
                &e.manager,
                &e.operation,
                &e.api_version,
                &e.time,
                e.subresource.as_deref(),
                to_fields_v1(&e.fields),
            )
        })
        .collect();
    set_managed_fields(object, list);
}

/// One entry of `metadata.managedFields` as stored.
fn entry_value(
    manager: &str,
    operation: &str,
    api_version: &str,
    time: &str,
    subresource: Option<&str>,
    fields: Value,
) -> Value {
    let mut entry = json!({
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    });
    if let Some(subresource) = subresource {
        entry["subresource"] = Value::String(subresource.to_owned());
    }
    entry
}

/// Sets `metadata.managedFields` to `list`, or removes it when `list` is empty.
fn set_managed_fields(object: &mut Value, list: Vec<Value>) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".to_owned(), Value::Array(list));
        }
    }
}

/// Who is writing, for managedFields.
#[derive(Debug, Clone)]
pub(crate) struct Writer<'a> {
    pub(crate) manager: &'a str,
    pub(crate) api_version: &'a str,
    pub(crate) time: &'a str,
    pub(crate) subresource: Option<&'a str>,
}

/// Records an Update-operation write: `writer` takes every field that changed from `old` to
/// `new`; fields that disappeared leave every manager.
pub(crate) fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    writer: &Writer<'_>,
    shape: Shape<'_>,
) {
    if let Some(old) = old
        && let Some(managed) = same_owners(old, new, writer, shape)
    {
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            match managed {
                Some(list) => meta.insert("managedFields".to_owned(), list),
                None => meta.remove("managedFields"),
            };
        }
        return;
    }
    if old.is_none_or(|old| {
        old.at("/metadata/managedFields")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
    }) && let Some(fields) = new_fields_tree(old, new, shape)
    {
        let list: Vec<Value> = fields
            .encode()
            .into_iter()
            .map(|fields| {
                entry_value(
                    writer.manager,
                    "Update",
                    writer.api_version,
                    writer.time,
                    writer.subresource,
                    fields,
                )
            })
            .collect();
        set_managed_fields(new, list);
        return;
    }
    record_every_field(old, new, writer, shape);
}

/// A `FieldsV1` tree being built: whether the path is a field of the set, and the steps under it.
#[derive(Debug, Default)]
struct Tree {
    own: bool,
    children: BTreeMap<String, Tree>,
}

impl Tree {
    fn child(&mut self, step: String) -> &mut Tree {
        self.children.entry(step).or_default()
    }

    /// The tree in `FieldsV1` as [`to_fields_v1`] writes it (steps in byte order, `"."` first);
    /// `None` when it holds no field.
    fn encode(self) -> Option<Value> {
        let mut map: Map<String, Value> = self
            .children
            .into_iter()
            .filter_map(|(step, child)| Some((step, child.encode()?)))
            .collect();
        if !self.own && map.is_empty() {
            return None;
        }
        if self.own && !map.is_empty() {
            map.insert(".".to_owned(), json!({}));
        }
        Some(Value::Object(map))
    }
}

/// The fields of `new` (within `shape.scope`) that [`record_every_field`] gives a writer when
/// no one owned anything before (a create, against the kind's zero value): those whose value
/// differs from `old`'s and the containers `old` lacks, found in one walk of both. `None` for
/// a keyed list item without its keys, which the full bookkeeping handles.
fn new_fields_tree(old: Option<&Value>, new: &Value, shape: Shape<'_>) -> Option<Tree> {
    let mut root = Tree::default();
    let Some(map) = new.as_object() else {
        return Some(root);
    };
    let builtin = shape.schema.is_none();
    for (key, value) in map {
        if !in_scope(key, shape.scope, builtin) {
            continue;
        }
        let node = root.child(format!("f:{key}"));
        let before = old.and_then(|old| old.get(key));
        if key == "metadata" {
            for meta_key in [
                "generateName",
                "labels",
                "annotations",
                "finalizers",
                "ownerReferences",
            ] {
                if let Some(value) = value.get(meta_key) {
                    grow(
                        node.child(format!("f:{meta_key}")),
                        value,
                        before.and_then(|m| m.get(meta_key)),
                        meta_key,
                        None,
                        true,
                    )?;
                }
            }
            continue;
        }
        grow(
            node,
            value,
            before,
            key,
            child_schema(shape.schema, key),
            builtin,
        )?;
    }
    Some(root)
}

/// Adds to `tree` (the node of `field`, which holds `value`, and `before` in the old object)
/// what [`field_set`] and [`container_set`] list under it and differs from `before`.
fn grow(
    tree: &mut Tree,
    value: &Value,
    before: Option<&Value>,
    field: &str,
    schema: Option<&Value>,
    builtin: bool,
) -> Option<()> {
    let container = !builtin || OPTIONAL_CONTAINERS.contains(&field);
    match value {
        Value::Object(map) if walks_into(map, schema, field, builtin) => {
            tree.own |= container && before.is_none();
            for (key, child) in map {
                grow(
                    tree.child(format!("f:{key}")),
                    child,
                    before.and_then(|b| b.get(key)),
                    key,
                    child_schema(schema, key),
                    builtin,
                )?;
            }
        }
        Value::Array(items) => {
            let kind = list_kind(field, schema, builtin);
            tree.own |=
                container && !items.is_empty() && kind != ListKind::Atomic && before.is_none();
            let before_items = before.and_then(Value::as_array);
            match kind {
                ListKind::Map(keys) => {
                    for item in items {
                        let step = item_step(item, &keys)?;
                        let before_item = before_items.and_then(|olds| {
                            olds.iter()
                                .find(|old| keys.iter().all(|k| old.get(k) == item.get(k)))
                        });
                        let node = tree.child(step);
                        node.own |= before_item != Some(item);
                        for (key, child) in item.as_object()? {
                            grow(
                                node.child(format!("f:{key}")),
                                child,
                                before_item.and_then(|b| b.get(key)),
                                key,
                                child_schema(items_schema(schema), key),
                                builtin,
                            )?;
                        }
                    }
                }
                ListKind::Set => {
                    for item in items
                        .iter()
                        .filter(|item| before_items.is_none_or(|olds| !olds.contains(item)))
                    {
                        tree.child(format!("v:{item}")).own = true;
                    }
                }
                ListKind::Atomic => tree.own |= before != Some(value),
            }
        }
        _ => tree.own |= before != Some(value),
    }
    Some(())
}

/// The full bookkeeping of [`record_update`]: every field of both objects listed and compared.
fn record_every_field(old: Option<&Value>, new: &mut Value, writer: &Writer<'_>, shape: Shape<'_>) {
    let mut list = old.map(entries).unwrap_or_default();
    let new_fields = field_set(new, shape);
    let new_containers = container_set(new, shape);
    let mut changed: BTreeSet<Path> = new_fields
        .iter()
        .filter(|path| old.is_none_or(|old| lookup(old, path) != lookup(new, path)))
        .cloned()
        .collect();
    // Maps and lists that were not there before are fields of their own.
    changed.extend(
        new_containers
            .iter()
            .filter(|path| old.is_none_or(|old| lookup(old, path).is_none()))
            .cloned(),
    );
    // Every field of the new object; a write of every scope already walked them all.
    let all_new = if shape.scope == Scope::All {
        let mut all_new = new_fields;
        all_new.extend(new_containers);
        all_new
    } else {
        let all = Shape {
            schema: shape.schema,
            scope: Scope::All,
        };
        let mut all_new = field_set(new, all);
        all_new.extend(container_set(new, all));
        all_new
    };
    for entry in &mut list {
        entry
            .fields
            .retain(|p| all_new.contains(p) && !changed.contains(p));
    }
    if !changed.is_empty() {
        let position = list.iter().position(|e| {
            e.manager == writer.manager
                && e.operation == "Update"
                && e.subresource.as_deref() == writer.subresource
        });
        let entry = match position {
            Some(i) => &mut list[i],
            None => {
                list.push(Entry {
                    manager: writer.manager.to_owned(),
                    operation: "Update".to_owned(),
                    api_version: writer.api_version.to_owned(),
                    time: String::new(),
                    subresource: writer.subresource.map(str::to_owned),
                    fields: BTreeSet::new(),
                });
                list.last_mut().expect("just pushed")
            }
        };
        entry.fields.extend(changed);
        entry.time = writer.time.to_owned();
        entry.api_version = writer.api_version.to_owned();
    }
    store_entries(new, &list);
}

/// The fast path of [`record_update`] for the commonest writes: heartbeats, status updates,
/// labels or annotations added or removed, conditions added or removed. It applies when the
/// object's shape changed at most by members removed from maps and items removed from keyed
/// lists that keep some, and by scalar members and items of scalars added to maps and keyed
/// lists that had some (set lists equal); when the writer alone owns every field it changed; and
/// when no one owns a field it added. Then `old`'s `managedFields` are edited instead of every
/// field of both objects being listed and compared: an added field joins the writer's entry, a
/// removed one leaves every entry with all under it (an entry left empty goes), and the writer's
/// entry gets the write's time when it changed or added something. `Some(list)`: the new
/// `managedFields` (`None`: none); `None`: the write needs the full bookkeeping.
fn same_owners(
    old: &Value,
    new: &Value,
    writer: &Writer<'_>,
    shape: Shape<'_>,
) -> Option<Option<Value>> {
    let (old_map, new_map) = (old.as_object()?, new.as_object()?);
    let builtin = shape.schema.is_none();
    let mut changes = Changes {
        stack: Vec::new(),
        changed: Vec::new(),
        added: Vec::new(),
        removed: Vec::new(),
    };
    for key in old_map
        .keys()
        .chain(new_map.keys().filter(|k| !old_map.contains_key(*k)))
    {
        if !in_scope(key, shape.scope, builtin) {
            continue;
        }
        let (before, after) = (old_map.get(key), new_map.get(key));
        changes.stack.push(Step::Field(key));
        if key == "metadata" {
            for meta_key in [
                "generateName",
                "labels",
                "annotations",
                "finalizers",
                "ownerReferences",
            ] {
                changes.stack.push(Step::Field(meta_key));
                changes.compare(
                    before.and_then(|m| m.get(meta_key)),
                    after.and_then(|m| m.get(meta_key)),
                    meta_key,
                    None,
                    true,
                )?;
                changes.stack.pop();
            }
        } else {
            changes.compare(before, after, key, child_schema(shape.schema, key), builtin)?;
        }
        changes.stack.pop();
    }
    let list = old.at("/metadata/managedFields").and_then(Value::as_array);
    let Changes {
        changed,
        added,
        removed,
        ..
    } = changes;
    if changed.is_empty() && added.is_empty() && removed.is_empty() {
        return Some(list.map(|l| Value::Array(l.clone())));
    }
    let list = list?;
    let writes = !changed.is_empty() || !added.is_empty();
    let is_writer = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(writer.manager)
            && e.get("operation").and_then(Value::as_str) == Some("Update")
            && e.get("subresource").and_then(Value::as_str) == writer.subresource
    };
    let position = list.iter().position(is_writer);
    if writes && position.is_none() {
        return None;
    }
    for path in &changed {
        let owned_by_writer_only = list
            .iter()
            .enumerate()
            .all(|(i, e)| owns(e, path) == (Some(i) == position));
        if !owned_by_writer_only {
            return None;
        }
    }
    if added
        .iter()
        .any(|path| list.iter().any(|e| fields_node(e, path).is_some()))
    {
        return None;
    }
    let mut list = list.clone();
    for entry in &mut list {
        for path in &removed {
            if let Some(fields) = entry.get_mut("fieldsV1").and_then(Value::as_object_mut) {
                remove_subtree(fields, path);
            }
        }
    }
    if let Some(position) = position.filter(|_| writes) {
        let entry = list[position].as_object_mut()?;
        for path in &added {
            add_leaf(entry.get_mut("fieldsV1")?.as_object_mut()?, path);
        }
        entry.insert("time".to_owned(), Value::String(writer.time.to_owned()));
        entry.insert(
            "apiVersion".to_owned(),
            Value::String(writer.api_version.to_owned()),
        );
    }
    list.retain(|e| {
        e.get("fieldsV1")
            .and_then(Value::as_object)
            .is_some_and(|fields| !fields.is_empty())
    });
    Some((!list.is_empty()).then_some(Value::Array(list)))
}

/// Adds the leaf `path` to a `FieldsV1` tree as [`to_fields_v1`] would encode it (a JSON map
/// keeps its members in byte order, `"."` first); a leaf that gains members keeps its own field
/// with a `"."`.
fn add_leaf(node: &mut Map<String, Value>, path: &[String]) {
    let Some((step, rest)) = path.split_first() else {
        return;
    };
    let existed = node.contains_key(step);
    if !existed {
        node.insert(step.clone(), json!({}));
    }
    let Some(child) = node.get_mut(step).and_then(Value::as_object_mut) else {
        return;
    };
    if !rest.is_empty() {
        if existed && child.is_empty() {
            child.insert(".".to_owned(), json!({}));
        }
        add_leaf(child, rest);
    }
}

/// Removes `path` and every path under it from a `FieldsV1` tree, with the nodes that are left
/// holding nothing, as [`to_fields_v1`] would encode the set without them. Whether it was there.
fn remove_subtree(node: &mut Map<String, Value>, path: &[String]) -> bool {
    let Some((step, rest)) = path.split_first() else {
        return false;
    };
    if rest.is_empty() {
        return node.remove(step).is_some();
    }
    let Some(child) = node.get_mut(step).and_then(Value::as_object_mut) else {
        return false;
    };
    if !remove_subtree(child, rest) {
        return false;
    }
    if child.is_empty() {
        node.remove(step);
    } else if child.len() == 1 && child.contains_key(".") {
        child.clear();
    }
    true
}

/// Whether managedFields entry `entry` owns the field at `path` itself: its `FieldsV1` node is
/// a leaf, or carries the `"."` marker of a map or list item that is a field of its own.
fn owns(entry: &Value, path: &Path) -> bool {
    fields_node(entry, path)
        .and_then(Value::as_object)
        .is_some_and(|node| node.is_empty() || node.contains_key("."))
}

/// The node of managedFields entry `entry`'s `FieldsV1` at `path`, if any.
fn fields_node<'v>(entry: &'v Value, path: &Path) -> Option<&'v Value> {
    entry.get("fieldsV1").and_then(|fields| {
        path.iter()
            .try_fold(fields, |fields, step| fields.get(step))
    })
}

/// One step of the path [`Changes`] is at, rendered only when a change is found there.
enum Step<'a> {
    Field(&'a str),
    Item(&'a Value, Rc<[String]>),
}

/// The fields that changed between two objects of the same shape, found by walking both as
/// [`field_set`] walks one.
struct Changes<'a> {
    stack: Vec<Step<'a>>,
    /// Fields whose value changed.
    changed: Vec<Path>,
    /// Fields added: scalar members of maps that had members before, keyed list items (each
    /// before its members) of lists that had items.
    added: Vec<Path>,
    /// Fields removed, each with every field under it: members of maps that keep members,
    /// items of keyed lists that keep items.
    removed: Vec<Path>,
}

impl<'a> Changes<'a> {
    /// Adds the path of every field that differs between `before` and `after`, `field` with
    /// `schema` (list kinds and atomic maps as in [`walk`]); `None` when their shapes differ
    /// otherwise than by scalar members of maps (keyed list items added, removed or reordered, a
    /// map emptied or filled, a member that is a map or list added or removed, a set list or a
    /// type changed).
    fn compare(
        &mut self,
        before: Option<&'a Value>,
        after: Option<&'a Value>,
        field: &str,
        schema: Option<&'a Value>,
        builtin: bool,
    ) -> Option<()> {
        // Most of a write is what was there: equal values hold no change, whatever their shape.
        // Past this, `before` and `after` differ.
        if before == after {
            return Some(());
        }
        match (before, after) {
            (Some(Value::Object(b)), Some(Value::Object(a))) => match (
                walks_into(b, schema, field, builtin),
                walks_into(a, schema, field, builtin),
            ) {
                (false, false) => self.changed_leaf(),
                (true, true) => self.members(b, a, schema, builtin),
                _ => None,
            },
            (Some(Value::Array(b)), Some(Value::Array(a))) => {
                match list_kind(field, schema, builtin) {
                    ListKind::Atomic => self.changed_leaf(),
                    ListKind::Set => None,
                    ListKind::Map(keys) => {
                        self.keyed_items(b, a, keys.into(), items_schema(schema), builtin)
                    }
                }
            }
            (Some(b), Some(a))
                if !b.is_object() && !b.is_array() && !a.is_object() && !a.is_array() =>
            {
                self.changed_leaf()
            }
            _ => None,
        }
    }

    /// Compares two non-empty keyed lists item by item, matched by their keys (the order of the
    /// items is not a field); `schema` is the items'. An item on one side only is added (with its
    /// members, which must be scalars) or removed (with everything under it).
    fn keyed_items(
        &mut self,
        b: &'a [Value],
        a: &'a [Value],
        keys: Rc<[String]>,
        schema: Option<&'a Value>,
        builtin: bool,
    ) -> Option<()> {
        if keys.is_empty() || b.is_empty() || a.is_empty() {
            return None;
        }
        let steps = |items: &[Value]| -> Option<Vec<String>> {
            let steps: Vec<String> = items
                .iter()
                .map(|item| item.as_object().and_then(|_| item_step(item, &keys)))
                .collect::<Option<_>>()?;
            let unique: BTreeSet<&String> = steps.iter().collect();
            (unique.len() == steps.len()).then_some(steps)
        };
        let (b_steps, a_steps) = (steps(b)?, steps(a)?);
        for (before, step) in b.iter().zip(&b_steps) {
            self.stack.push(Step::Item(before, keys.clone()));
            match a_steps.iter().position(|s| s == step) {
                Some(i) => {
                    let (b_item, a_item) = (before.as_object()?, a[i].as_object()?);
                    let found = self.changed.len() + self.added.len() + self.removed.len();
                    self.members(b_item, a_item, schema, builtin)?;
                    // A changed member changes the item, a field of its own.
                    if self.changed.len() + self.added.len() + self.removed.len() > found {
                        self.changed.push(self.path());
                    }
                }
                None => self.removed.push(self.path()),
            }
            self.stack.pop();
        }
        for (after, _) in a
            .iter()
            .zip(&a_steps)
            .filter(|(_, step)| !b_steps.contains(step))
        {
            self.stack.push(Step::Item(after, keys.clone()));
            self.added.push(self.path());
            for (key, member) in after.as_object()? {
                if member.is_object() || member.is_array() {
                    return None;
                }
                self.stack.push(Step::Field(key));
                self.added.push(self.path());
                self.stack.pop();
            }
            self.stack.pop();
        }
        Some(())
    }

    /// Compares the members of two maps (or keyed list items) that both have members, `schema`
    /// being the maps'; a member only before is removed, a scalar member only after added.
    fn members(
        &mut self,
        b: &'a Map<String, Value>,
        a: &'a Map<String, Value>,
        schema: Option<&'a Value>,
        builtin: bool,
    ) -> Option<()> {
        for (key, before) in b {
            self.stack.push(Step::Field(key));
            match a.get(key) {
                Some(after) => self.compare(
                    Some(before),
                    Some(after),
                    key,
                    child_schema(schema, key),
                    builtin,
                )?,
                None => self.removed.push(self.path()),
            }
            self.stack.pop();
        }
        for (key, after) in a.iter().filter(|(key, _)| !b.contains_key(*key)) {
            if after.is_object() || after.is_array() {
                return None;
            }
            self.stack.push(Step::Field(key));
            self.added.push(self.path());
            self.stack.pop();
        }
        Some(())
    }

    /// A field kept whole whose value changed.
    fn changed_leaf(&mut self) -> Option<()> {
        self.changed.push(self.path());
        Some(())
    }

    fn path(&self) -> Path {
        self.stack
            .iter()
            .map(|step| match step {
                Step::Field(key) => format!("f:{key}"),
                Step::Item(item, keys) => item_step(item, keys).unwrap_or_default(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path gives what the full bookkeeping gives, for writes it takes and writes it
    /// leaves to the full path alike.
    #[test]
    fn a_heartbeat_keeps_ownership_and_moves_only_the_writers_time() {
        let shape = Shape {
            schema: None,
            scope: Scope::All,
        };
        let kubelet = |time| Writer {
            manager: "kubelet",
            api_version: "coordination.k8s.io/v1",
            time,
            subresource: None,
        };
        let admin = Writer {
            manager: "admin",
            api_version: "coordination.k8s.io/v1",
            time: "t1",
            subresource: None,
        };
        let lease = |renew: &str, holder: &str| {
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "n", "resourceVersion": "7", "labels": {"a": "1"}},
            "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": 40}})
        };
        let mut created = lease("r0", "n");
        record_update(Some(&json!({})), &mut created, &kubelet("t0"), shape);
        let full = |old: &Value, new: &Value, writer: &Writer<'_>| {
            let mut expected = new.clone();
            let mut list = entries(old);
            let changed: BTreeSet<Path> = field_set(new, shape)
                .into_iter()
                .filter(|p| lookup(old, p) != lookup(new, p))
                .collect();
            for entry in &mut list {
                entry.fields.retain(|p| !changed.contains(p));
            }
            if let Some(entry) = list.iter_mut().find(|e| e.manager == writer.manager) {
                entry.fields.extend(changed);
                entry.time = writer.time.to_owned();
            }
            store_entries(&mut expected, &list);
            expected
        };
        // The kubelet renews: it owns renewTime, so the fast path applies.
        let mut renewed = lease("r1", "n");
        renewed["metadata"]["managedFields"] = created["metadata"]["managedFields"].clone();
        let expected = full(&created, &renewed, &kubelet("t2"));
        assert!(same_owners(&created, &renewed, &kubelet("t2"), shape).is_some());
        record_update(Some(&created), &mut renewed, &kubelet("t2"), shape);
        assert_eq!(
            renewed["metadata"]["managedFields"],
            expected["metadata"]["managedFields"]
        );
        assert_eq!(renewed["metadata"]["managedFields"][0]["time"], "t2");
        // Someone else changes the holder: ownership moves, the full path runs.
        let mut taken = lease("r1", "other");
        assert!(same_owners(&renewed, &taken, &admin, shape).is_none());
        record_update(Some(&renewed), &mut taken, &admin, shape);
        let owners: Vec<&str> = taken["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(owners, ["kubelet", "admin"]);
        assert!(
            taken["metadata"]["managedFields"][1]["fieldsV1"]["f:spec"]
                .get("f:holderIdentity")
                .is_some()
        );
        assert!(
            taken["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
                .get("f:holderIdentity")
                .is_none()
        );
        // A new scalar no one owns: the fast path adds it to the kubelet's fields.
        let mut grown = taken.clone();
        grown["spec"]["leaseTransitions"] = json!(1);
        assert!(same_owners(&taken, &grown, &kubelet("t3"), shape).is_some());
        let mut full_grown = grown.clone();
        record_every_field(Some(&taken), &mut full_grown, &kubelet("t3"), shape);
        record_update(Some(&taken), &mut grown, &kubelet("t3"), shape);
        assert_eq!(
            grown["metadata"]["managedFields"].to_string(),
            full_grown["metadata"]["managedFields"].to_string()
        );
        assert!(
            grown["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
                .get("f:leaseTransitions")
                .is_some()
        );
        // Nothing changed: managedFields stay exactly as they were.
        let mut same = taken.clone();
        record_update(Some(&taken), &mut same, &kubelet("t4"), shape);
        assert_eq!(
            same["metadata"]["managedFields"],
            taken["metadata"]["managedFields"]
        );
    }

    /// Status writes that change members of keyed list items (a Node's conditions) take the
    /// fast path when the writer alone owns what changed, and give exactly what the full
    /// bookkeeping gives; every other change falls back to it.
    #[test]
    fn keyed_list_members_take_the_fast_path_only_when_the_writer_owns_them() {
        let shape = Shape {
            schema: None,
            scope: Scope::StatusOnly,
        };
        let writer = |manager, time| Writer {
            manager,
            api_version: "v1",
            time,
            subresource: Some("status"),
        };
        let node = |ready_beat: &str, update_status: &str, images: Value| {
            json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "labels": {"a": "1"}},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True", "lastHeartbeatTime": ready_beat},
                    {"type": "InPlaceUpdate", "status": update_status, "reason": "r"},
                ],
                "images": images,
                "nodeInfo": {"osImage": "os 1"},
            }})
        };
        // The agent writes the Ready condition and the rest; the orchestrator its own condition.
        let mut base = node("t0", "False", json!([{"names": ["a"]}]));
        record_update(
            Some(&json!({"metadata": {}})),
            &mut base,
            &writer("agent", "t0"),
            shape,
        );
        let mut next = node("t0", "True", json!([{"names": ["a"]}]));
        next["metadata"]["managedFields"] = base["metadata"]["managedFields"].clone();
        record_update(Some(&base), &mut next, &writer("orchestrator", "t1"), shape);
        let base = next;
        let fast_and_full = |new: Value, manager: &'static str| {
            let (mut fast, mut full) = (new.clone(), new);
            let taken = same_owners(&base, &fast, &writer(manager, "t9"), shape).is_some();
            record_update(Some(&base), &mut fast, &writer(manager, "t9"), shape);
            record_every_field(Some(&base), &mut full, &writer(manager, "t9"), shape);
            assert_eq!(
                fast["metadata"]["managedFields"], full["metadata"]["managedFields"],
                "{manager} writing {fast:#}"
            );
            taken
        };
        // The agent's heartbeat moves its own condition's time: fast.
        assert!(fast_and_full(
            node("t2", "True", json!([{"names": ["a"]}])),
            "agent"
        ));
        // The orchestrator's condition changes again, by the orchestrator: fast.
        assert!(fast_and_full(
            node("t0", "False", json!([{"names": ["a"]}])),
            "orchestrator"
        ));
        // The agent writes the orchestrator's condition: ownership moves, full path.
        assert!(!fast_and_full(
            node("t0", "False", json!([{"names": ["a"]}])),
            "agent"
        ));
        // The agent changes a member it owns (reason) of the item the orchestrator took over:
        // the item moves to the agent, full path.
        let mut reason = base.clone();
        reason["status"]["conditions"][1]["reason"] = json!("r2");
        assert!(!fast_and_full(reason, "agent"));
        // An atomic list (images) changed by its owner: fast; by someone else: full.
        assert!(fast_and_full(
            node("t0", "True", json!([{"names": ["b"]}])),
            "agent"
        ));
        assert!(!fast_and_full(
            node("t0", "True", json!([{"names": ["b"]}])),
            "orchestrator"
        ));
        // A condition of scalars added, or one removed, or the conditions reordered: fast.
        let mut added = base.clone();
        added["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "DiskPressure", "status": "False"}));
        assert!(fast_and_full(added, "orchestrator"));
        let mut removed = base.clone();
        removed["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .remove(1);
        assert!(fast_and_full(removed, "agent"));
        let mut reordered = base.clone();
        reordered["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .reverse();
        assert!(fast_and_full(reordered, "agent"));
        // A condition with a map member added, or the last one removed: full path.
        let mut nested = base.clone();
        nested["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "X", "details": {"a": "b"}}));
        assert!(!fast_and_full(nested, "agent"));
        let mut emptied = base.clone();
        emptied["status"]["conditions"] = json!([]);
        assert!(!fast_and_full(emptied, "agent"));
        // A member added to a condition by the item's owner: fast; by someone else: full.
        let mut grown = base.clone();
        grown["status"]["conditions"][0]["message"] = json!("m");
        assert!(fast_and_full(grown.clone(), "agent"));
        assert!(!fast_and_full(grown, "orchestrator"));
        // An empty map that gains members: full path.
        let mut empty = base.clone();
        empty["status"]["nodeInfo"] = json!({});
        let mut filled = empty.clone();
        filled["status"]["nodeInfo"] = json!({"osImage": "os 2"});
        assert!(same_owners(&empty, &filled, &writer("agent", "t9"), shape).is_none());
    }

    /// Random writes by three managers (labels and annotations set and removed, condition
    /// members changed, added and removed, conditions added and removed, spec fields) give the
    /// same `managedFields`, member order included, on the fast path as on the full one, for a
    /// built-in kind (whole object and status writes) and a custom resource; and so does the
    /// one-walk path of writes over objects no one owned anything of (creates).
    #[test]
    fn the_fast_path_gives_what_the_full_bookkeeping_gives_for_random_writes() {
        let mut seed: u64 = 0x5eed;
        let mut next = move |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        // As a custom resource: maps of strings and a keyed list of conditions.
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "additionalProperties": {"type": "string"}},
            "status": {"type": "object", "properties": {
                "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object", "additionalProperties": {"type": "string"}}},
                "nodeInfo": {"type": "object", "properties": {"osImage": {"type": "string"}}},
            }},
        }});
        for (scope, schema) in [
            (Scope::All, None),
            (Scope::StatusOnly, None),
            (Scope::All, Some(&schema)),
        ] {
            let shape = Shape { schema, scope };
            let subresource = (scope == Scope::StatusOnly).then_some("status");
            let mut current = json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "n", "labels": {"l0": "x"}, "annotations": {"a0": "x"}},
                "spec": {"podCIDR": "10.0.0.0/24"},
                "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"osImage": "os"}}});
            let (mut fast_taken, mut shape_changes) = (0, 0);
            for round in 0..3000 {
                let mut new = current.clone();
                new["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("managedFields");
                let key = format!("{}", next(4));
                let value = json!(format!("v{}", next(3)));
                match next(9) {
                    0 => new["metadata"]["labels"][format!("l{key}")] = value,
                    1 => {
                        _ = new["metadata"]["labels"]
                            .as_object_mut()
                            .unwrap()
                            .remove(&format!("l{key}"))
                    }
                    2 => new["metadata"]["annotations"][format!("a{key}")] = value,
                    3 => {
                        _ = new["metadata"]["annotations"]
                            .as_object_mut()
                            .unwrap()
                            .remove(&format!("a{key}"))
                    }
                    4 => new["spec"][format!("s{key}")] = value,
                    5 => {
                        _ = new["spec"]
                            .as_object_mut()
                            .unwrap()
                            .remove(&format!("s{key}"))
                    }
                    6 | 7 => {
                        let conditions = new["status"]["conditions"].as_array_mut().unwrap();
                        let i = next(conditions.len() as u64) as usize;
                        match next(3) {
                            0 => {
                                conditions[i]["status"] =
                                    json!(if next(2) == 0 { "True" } else { "False" })
                            }
                            1 => conditions[i][format!("m{key}")] = value,
                            _ => {
                                _ = conditions[i]
                                    .as_object_mut()
                                    .unwrap()
                                    .remove(&format!("m{key}"))
                            }
                        }
                    }
                    _ => {
                        let conditions = new["status"]["conditions"].as_array_mut().unwrap();
                        let kind = format!("C{key}");
                        match conditions.iter().position(|c| c["type"] == kind.as_str()) {
                            Some(i) if conditions.len() > 1 => _ = conditions.remove(i),
                            Some(_) => {}
                            None => conditions.push(json!({"type": kind, "status": "Unknown"})),
                        }
                    }
                }
                let manager = ["agent", "orchestrator", "admin"][next(3) as usize];
                let time = format!("t{round}");
                let writer = Writer {
                    manager,
                    api_version: "v1",
                    time: &time,
                    subresource,
                };
                if let Some(managed) = same_owners(&current, &new, &writer, shape) {
                    fast_taken += 1;
                    let mut fast = new.clone();
                    fast["metadata"]["managedFields"] = managed.unwrap_or(Value::Null);
                    let mut full = new.clone();
                    record_every_field(Some(&current), &mut full, &writer, shape);
                    let shown = |object: &Value| {
                        object["metadata"]
                            .get("managedFields")
                            .filter(|m| !m.is_null())
                            .map(Value::to_string)
                    };
                    assert_eq!(
                        shown(&fast),
                        shown(&full),
                        "round {round}: {manager} writing {new:#}\nover {current:#}"
                    );
                } else {
                    shape_changes += 1;
                }
                // With no one owning anything before (as a create against the zero value), the
                // one-walk path gives what the full bookkeeping gives.
                let mut unowned = current.clone();
                unowned["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("managedFields");
                let (mut walked, mut full) = (new.clone(), new.clone());
                record_update(Some(&unowned), &mut walked, &writer, shape);
                record_every_field(Some(&unowned), &mut full, &writer, shape);
                assert_eq!(
                    walked["metadata"]
                        .get("managedFields")
                        .map(Value::to_string),
                    full["metadata"].get("managedFields").map(Value::to_string),
                    "round {round}: over {unowned:#}"
                );
                record_update(Some(&current), &mut new, &writer, shape);
                current = new;
            }
            assert!(
                fast_taken > 1000 && shape_changes > 100,
                "{scope:?}: fast {fast_taken}, full {shape_changes}"
            );
        }
    }

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
