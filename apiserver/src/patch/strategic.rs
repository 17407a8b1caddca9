//! Strategic merge patch for the built-in types we serve: lists with a merge key merge item by
//! item (`containers` by name, `conditions` by type, ...), `finalizers` merge as a set, every
//! other list is replaced. Supports the `$patch`, `$retainKeys`, `$deleteFromPrimitiveList/` and
//! `$setElementOrder/` directives.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// How a list field merges, by its field name (the Kubernetes types' `patchMergeKey` tags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// Items are objects identified by this key.
    Keyed(&'static str),
    /// Items are scalars merged as a set.
    Set,
    /// The list is replaced as a whole.
    Atomic,
}

/// The merge strategy of a list field of the built-in types.
pub(crate) fn list_strategy(field: &str) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "secrets" => ListStrategy::Keyed("name"),
        "volumeMounts" => ListStrategy::Keyed("mountPath"),
        "volumeDevices" => ListStrategy::Keyed("devicePath"),
        "ports" => ListStrategy::Keyed("containerPort"),
        "conditions" | "addresses" => ListStrategy::Keyed("type"),
        "ownerReferences" => ListStrategy::Keyed("uid"),
        "hostAliases" | "podIPs" | "hostIPs" => ListStrategy::Keyed("ip"),
        "topologySpreadConstraints" => ListStrategy::Keyed("topologyKey"),
        "finalizers" => ListStrategy::Set,
        _ => ListStrategy::Atomic,
    }
}

/// `original` with the strategic merge `patch` applied.
pub(crate) fn merge(original: &Value, patch: &Value) -> Result<Value, ApiError> {
    Ok(merge_value(Some(original), patch)?.unwrap_or(Value::Object(Map::new())))
}

fn merge_value(original: Option<&Value>, patch: &Value) -> Result<Option<Value>, ApiError> {
    match patch {
        Value::Object(patch_map) => {
            match patch_map.get("$patch").and_then(Value::as_str) {
                Some("delete") => return Ok(None),
                Some("replace") => {
                    let mut replaced = patch_map.clone();
                    replaced.remove("$patch");
                    return Ok(Some(strip_directives(Value::Object(replaced))));
                }
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "unknown patch type {other:?} in strategic merge patch"
                    )));
                }
                None => {}
            }
            let mut result = match original {
                Some(Value::Object(map)) => map.clone(),
                _ => Map::new(),
            };
            for (key, value) in patch_map {
                if key.starts_with("$setElementOrder/") || key == "$retainKeys" {
                    continue;
                }
                if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
                    let remove: Vec<&Value> = value
                        .as_array()
                        .map(|a| a.iter().collect())
                        .unwrap_or_default();
                    if let Some(Value::Array(items)) = result.get_mut(field) {
                        items.retain(|item| !remove.contains(&item));
                    }
                    continue;
                }
                if key.starts_with('$') {
                    return Err(ApiError::bad_request(format!(
                        "unknown directive {key:?} in strategic merge patch"
                    )));
                }
                if value.is_null() {
                    result.remove(key);
                    continue;
                }
                let order = patch_map
                    .get(&format!("$setElementOrder/{key}"))
                    .and_then(Value::as_array)
                    .map_or(items_of(value), Vec::as_slice);
                let merged = match (value, list_strategy(key)) {
                    (Value::Array(items), ListStrategy::Keyed(merge_key)) => {
                        let original = result
                            .get(key)
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default();
                        let replaced = items.iter().any(|item| {
                            item.get("$patch").and_then(Value::as_str) == Some("replace")
                        });
                        let merged = merge_keyed(original.clone(), items, merge_key, key)?;
                        Some(Value::Array(if replaced {
                            merged
                        } else {
                            element_order(merged, order, &original, Some(merge_key))
                        }))
                    }
                    (Value::Array(items), ListStrategy::Set) => {
                        let original = result
                            .get(key)
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default();
                        let mut merged = original.clone();
                        for item in items {
                            if !merged.contains(item) {
                                merged.push(item.clone());
                            }
                        }
                        Some(Value::Array(element_order(merged, order, &original, None)))
                    }
                    _ => merge_value(result.get(key), value)?,
                };
                match merged {
                    Some(v) => {
                        result.insert(key.clone(), v);
                    }
                    None => {
                        result.remove(key);
                    }
                }
            }
            if let Some(retain) = patch_map.get("$retainKeys").and_then(Value::as_array) {
                let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
                result.retain(|k, _| keep.contains(&k.as_str()));
            }
            Ok(Some(Value::Object(result)))
        }
        other => Ok(Some(other.clone())),
    }
}

fn items_of(value: &Value) -> &[Value] {
    value.as_array().map_or(&[], Vec::as_slice)
}

/// Where `item` is in `list`: by `merge_key` for lists of objects, by value otherwise.
fn position_in(list: &[Value], item: &Value, merge_key: Option<&str>) -> Option<usize> {
    match merge_key {
        Some(key) => {
            let wanted = item.get(key)?;
            list.iter().position(|other| other.get(key) == Some(wanted))
        }
        None => list.iter().position(|other| other == item),
    }
}

/// Orders a merged list as kube's strategic merge does: the items named in the patch (or in
/// its `$setElementOrder`) in that order, the other items in their original order, the two
/// interleaved by the original order where both are known and patch items first otherwise.
fn element_order(
    merged: Vec<Value>,
    order: &[Value],
    original: &[Value],
    merge_key: Option<&str>,
) -> Vec<Value> {
    let (mut patched, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| position_in(order, item, merge_key).is_some());
    patched.sort_by_key(|item| position_in(order, item, merge_key));
    let mut out = Vec::with_capacity(patched.len() + server_only.len());
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        patched.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                matches!((position_in(original, l, merge_key), position_in(original, r, merge_key)), (Some(li), Some(ri)) if li < ri)
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

fn merge_keyed(
    mut current: Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    field: &str,
) -> Result<Vec<Value>, ApiError> {
    if patch
        .iter()
        .any(|item| item.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Ok(patch
            .iter()
            .filter(|item| item.get("$patch").is_none())
            .map(|item| strip_directives(item.clone()))
            .collect());
    }
    for item in patch {
        let Some(key_value) = item.get(merge_key) else {
            return Err(ApiError::bad_request(format!(
                "map: {item} does not contain declared merge key: {merge_key} (in {field})"
            )));
        };
        let position = current
            .iter()
            .position(|existing| existing.get(merge_key) == Some(key_value));
        if item.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(position) = position {
                current.remove(position);
            }
            continue;
        }
        match position {
            Some(position) => {
                if let Some(merged) = merge_value(Some(&current[position]), item)? {
                    current[position] = merged;
                }
            }
            None => current.push(strip_directives(item.clone())),
        }
    }
    Ok(current)
}

fn strip_directives(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k, strip_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(strip_directives).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merges_lists_by_their_merge_keys() {
        let original = json!({
            "metadata": {"finalizers": ["a"], "labels": {"x": "1"}},
            "spec": {"containers": [{"name": "c", "image": "old", "env": [{"name": "A", "value": "1"}]}], "tolerations": [{"key": "t"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "Other", "status": "True"}]}
        });
        let patch = json!({
            "metadata": {"finalizers": ["b"], "labels": {"x": null}},
            "spec": {"containers": [{"name": "c", "image": "new", "env": [{"name": "B", "value": "2"}]}], "tolerations": [{"key": "u"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Other", "$patch": "delete"}]}
        });
        let merged = merge(&original, &patch).unwrap();
        assert_eq!(
            merged["metadata"],
            json!({"finalizers": ["b", "a"], "labels": {}}),
            "patch items come first, as in kube"
        );
        assert_eq!(
            merged["spec"]["containers"],
            json!([{"name": "c", "image": "new", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]}])
        );
        assert_eq!(merged["spec"]["tolerations"], json!([{"key": "u"}]));
        assert_eq!(
            merged["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}])
        );
    }

    #[test]
    fn merged_lists_keep_the_original_order_around_patched_items() {
        let original = json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}, {"type": "C"}]}, "metadata": {"finalizers": ["x", "y"]}});
        let patch = json!({"status": {"conditions": [{"type": "B", "status": "True"}, {"type": "D"}]}, "metadata": {"finalizers": ["y", "z"]}});
        let merged = merge(&original, &patch).unwrap();
        let types: Vec<&str> = merged["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["A", "B", "D", "C"]);
        assert_eq!(merged["metadata"]["finalizers"], json!(["x", "y", "z"]));
        let ordered =
            json!({"metadata": {"$setElementOrder/finalizers": ["y", "x"], "finalizers": ["x"]}});
        assert_eq!(
            merge(&original, &ordered).unwrap()["metadata"]["finalizers"],
            json!(["y", "x"])
        );
    }

    #[test]
    fn directives_replace_and_delete_from_primitive_lists() {
        let original = json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"containers": [{"name": "x"}, {"name": "y"}], "m": {"a": 1, "b": 2}}});
        let patch = json!({
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {"containers": [{"name": "z"}, {"$patch": "replace"}], "m": {"$patch": "replace", "c": 3}}
        });
        let merged = merge(&original, &patch).unwrap();
        assert_eq!(
            merged,
            json!({"metadata": {"finalizers": ["b"]}, "spec": {"containers": [{"name": "z"}], "m": {"c": 3}}})
        );
        assert_eq!(
            merge(
                &original,
                &json!({"spec": {"containers": [{"image": "no-name"}]}})
            )
            .unwrap_err()
            .code,
            400
        );
    }
}
