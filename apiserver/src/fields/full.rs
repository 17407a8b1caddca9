//! The full bookkeeping: every field of the old and the new object listed and compared (and the one-walk variant for a write no one owned anything before).

use super::*;

/// A `FieldsV1` tree being built: whether the path is a field of the set, and the steps under it.
#[derive(Debug, Default)]
pub(super) struct Tree {
    own: bool,
    children: BTreeMap<String, Tree>,
}

impl Tree {
    fn child(&mut self, step: String) -> &mut Tree {
        self.children.entry(step).or_default()
    }

    /// The tree in `FieldsV1` as [`to_fields_v1`] writes it (steps in byte order, `"."` first);
    /// `None` when it holds no field.
    pub(super) fn encode(self) -> Option<Value> {
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
pub(super) fn new_fields_tree(old: Option<&Value>, new: &Value, shape: Shape<'_>) -> Option<Tree> {
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
pub(super) fn grow(
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
pub(super) fn record_every_field(
    old: Option<&Value>,
    new: &mut Value,
    writer: &Writer<'_>,
    shape: Shape<'_>,
) {
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
