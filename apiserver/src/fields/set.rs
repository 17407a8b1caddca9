//! The field set of an object: every field, list item and container a write can own, walked as kube-apiserver's field tracking walks it.

use super::*;

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

pub(super) fn walk(
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
pub(super) const ATOMIC_STRUCTS: &[&str] = &["selector"];

/// Fields of the built-in types whose values are Go maps, pointers or `omitempty` lists: absent
/// from a new, empty object, so that writing them adds the field itself (a `"."` entry in
/// `FieldsV1`) and not only its members.
pub(super) const OPTIONAL_CONTAINERS: &[&str] = &[
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
pub(super) fn walks_into(
    map: &Map<String, Value>,
    schema: Option<&Value>,
    field: &str,
    builtin: bool,
) -> bool {
    let atomic = preserves_unknown_as_leaf(schema) || builtin && ATOMIC_STRUCTS.contains(&field);
    !map.is_empty() && !atomic
}

pub(super) fn preserves_unknown_as_leaf(schema: Option<&Value>) -> bool {
    schema.is_some_and(|s| s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"))
}
