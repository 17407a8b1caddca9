//! `metadata.managedFields` entries, and the bookkeeping of an Update write: the fast path when it applies, else the full one.

use super::*;

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
pub(super) fn entry_value(
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
pub(super) fn set_managed_fields(object: &mut Value, list: Vec<Value>) {
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
        && let FastPath::Edited(managed) = same_owners(old, new, writer, shape)
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
