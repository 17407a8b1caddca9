//! The fast path of the Update bookkeeping: `old`'s managedFields edited in place for the commonest writes (heartbeats, status updates, labels and conditions added or removed).

use super::*;

/// The fast path of [`record_update`] for the commonest writes: heartbeats, status updates,
/// labels or annotations added or removed, conditions added or removed. It applies when the
/// object's shape changed at most by members removed from maps and items removed from keyed
/// lists that keep some, and by scalar members and items of scalars added to maps and keyed
/// lists that had some (set lists equal); when the writer alone owns every field it changed; and
/// when no one owns a field it added. Then `old`'s `managedFields` are edited instead of every
/// field of both objects being listed and compared: an added field joins the writer's entry, a
/// removed one leaves every entry with all under it (an entry left empty goes), and the writer's
/// entry gets the write's time when it changed or added something.
pub(super) fn same_owners(
    old: &Value,
    new: &Value,
    writer: &Writer<'_>,
    shape: Shape<'_>,
) -> FastPath {
    match edit(old, new, writer, shape) {
        Ok(managed_fields) => FastPath::Edited(managed_fields),
        Err(Unsupported) => FastPath::NeedsFullBookkeeping,
    }
}

/// What the fast path made of a write.
#[derive(Debug, PartialEq)]
pub(super) enum FastPath {
    /// It applied: the new `managedFields` (`None`: no entry is left).
    Edited(Option<Value>),
    /// The write is outside what it handles: the full bookkeeping must run.
    NeedsFullBookkeeping,
}

/// A write, or a part of it, outside what the fast path handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unsupported;

/// `Some` value, or [`Unsupported`].
fn known<T>(value: Option<T>) -> Result<T, Unsupported> {
    value.ok_or(Unsupported)
}

/// [`same_owners`]' work: the new `managedFields`, or why the fast path does not apply.
fn edit(
    old: &Value,
    new: &Value,
    writer: &Writer<'_>,
    shape: Shape<'_>,
) -> Result<Option<Value>, Unsupported> {
    let (old_map, new_map) = (known(old.as_object())?, known(new.as_object())?);
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
        return Ok(list.map(|l| Value::Array(l.clone())));
    }
    let list = known(list)?;
    let writes = !changed.is_empty() || !added.is_empty();
    let is_writer = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(writer.manager)
            && e.get("operation").and_then(Value::as_str) == Some("Update")
            && e.get("subresource").and_then(Value::as_str) == writer.subresource
    };
    let position = list.iter().position(is_writer);
    if writes && position.is_none() {
        return Err(Unsupported);
    }
    for path in &changed {
        let owned_by_writer_only = list
            .iter()
            .enumerate()
            .all(|(i, e)| owns(e, path) == (Some(i) == position));
        if !owned_by_writer_only {
            return Err(Unsupported);
        }
    }
    if added
        .iter()
        .any(|path| list.iter().any(|e| fields_node(e, path).is_some()))
    {
        return Err(Unsupported);
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
        let entry = known(list[position].as_object_mut())?;
        for path in &added {
            let fields = known(entry.get_mut("fieldsV1").and_then(Value::as_object_mut))?;
            add_leaf(fields, path);
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
    Ok((!list.is_empty()).then_some(Value::Array(list)))
}

/// Adds the leaf `path` to a `FieldsV1` tree as [`to_fields_v1`] would encode it (a JSON map
/// keeps its members in byte order, `"."` first); a leaf that gains members keeps its own field
/// with a `"."`.
pub(super) fn add_leaf(node: &mut Map<String, Value>, path: &[String]) {
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
pub(super) fn remove_subtree(node: &mut Map<String, Value>, path: &[String]) -> bool {
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
pub(super) fn owns(entry: &Value, path: &Path) -> bool {
    fields_node(entry, path)
        .and_then(Value::as_object)
        .is_some_and(|node| node.is_empty() || node.contains_key("."))
}

/// The node of managedFields entry `entry`'s `FieldsV1` at `path`, if any.
pub(super) fn fields_node<'v>(entry: &'v Value, path: &Path) -> Option<&'v Value> {
    entry.get("fieldsV1").and_then(|fields| {
        path.iter()
            .try_fold(fields, |fields, step| fields.get(step))
    })
}

/// One step of the path [`Changes`] is at, rendered only when a change is found there.
pub(super) enum Step<'a> {
    Field(&'a str),
    Item(&'a Value, Rc<[String]>),
}

/// The fields that changed between two objects of the same shape, found by walking both as
/// [`field_set`] walks one.
pub(super) struct Changes<'a> {
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
    /// `schema` (list kinds and atomic maps as in [`walk`]); [`Unsupported`] when their shapes differ
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
    ) -> Result<(), Unsupported> {
        // Most of a write is what was there: equal values hold no change, whatever their shape.
        // Past this, `before` and `after` differ.
        if before == after {
            return Ok(());
        }
        match (before, after) {
            (Some(Value::Object(b)), Some(Value::Object(a))) => match (
                walks_into(b, schema, field, builtin),
                walks_into(a, schema, field, builtin),
            ) {
                (false, false) => self.changed_leaf(),
                (true, true) => self.members(b, a, schema, builtin),
                _ => Err(Unsupported),
            },
            (Some(Value::Array(b)), Some(Value::Array(a))) => {
                match list_kind(field, schema, builtin) {
                    ListKind::Atomic => self.changed_leaf(),
                    ListKind::Set => Err(Unsupported),
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
            _ => Err(Unsupported),
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
    ) -> Result<(), Unsupported> {
        if keys.is_empty() || b.is_empty() || a.is_empty() {
            return Err(Unsupported);
        }
        let steps = |items: &[Value]| -> Option<Vec<String>> {
            let steps: Vec<String> = items
                .iter()
                .map(|item| item.as_object().and_then(|_| item_step(item, &keys)))
                .collect::<Option<_>>()?;
            let unique: BTreeSet<&String> = steps.iter().collect();
            (unique.len() == steps.len()).then_some(steps)
        };
        let (b_steps, a_steps) = (known(steps(b))?, known(steps(a))?);
        for (before, step) in b.iter().zip(&b_steps) {
            self.stack.push(Step::Item(before, keys.clone()));
            match a_steps.iter().position(|s| s == step) {
                Some(i) => {
                    let (b_item, a_item) = (known(before.as_object())?, known(a[i].as_object())?);
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
            for (key, member) in known(after.as_object())? {
                if member.is_object() || member.is_array() {
                    return Err(Unsupported);
                }
                self.stack.push(Step::Field(key));
                self.added.push(self.path());
                self.stack.pop();
            }
            self.stack.pop();
        }
        Ok(())
    }

    /// Compares the members of two maps (or keyed list items) that both have members, `schema`
    /// being the maps'; a member only before is removed, a scalar member only after added.
    fn members(
        &mut self,
        b: &'a Map<String, Value>,
        a: &'a Map<String, Value>,
        schema: Option<&'a Value>,
        builtin: bool,
    ) -> Result<(), Unsupported> {
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
                return Err(Unsupported);
            }
            self.stack.push(Step::Field(key));
            self.added.push(self.path());
            self.stack.pop();
        }
        Ok(())
    }

    /// A field kept whole whose value changed.
    fn changed_leaf(&mut self) -> Result<(), Unsupported> {
        self.changed.push(self.path());
        Ok(())
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
mod tests;
