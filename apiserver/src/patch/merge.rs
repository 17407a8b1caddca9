//! JSON merge patch (RFC 7386): objects merge recursively, `null` deletes, anything else replaces.

use serde_json::Value;

/// `original` with `patch` merged in.
pub(crate) fn merge(original: &Value, patch: &Value) -> Value {
    let Value::Object(patch_map) = patch else {
        return patch.clone();
    };
    let mut result = match original {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    for (key, value) in patch_map {
        if value.is_null() {
            result.remove(key);
        } else {
            let merged = merge(result.get(key).unwrap_or(&Value::Null), value);
            result.insert(key.clone(), merged);
        }
    }
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn follows_rfc_7386() {
        let original = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        let patch = json!({"a": "z", "c": {"f": null}, "l": [3]});
        assert_eq!(
            merge(&original, &patch),
            json!({"a": "z", "c": {"d": "e"}, "l": [3]})
        );
    }
}
