//! Structural-schema handling for custom resources: pruning unknown fields (unless
//! `x-kubernetes-preserve-unknown-fields`), applying `default`s, and validating types,
//! `required`, `enum`, bounds and lengths.

use serde_json::{Map, Value};

/// Removes fields the schema does not declare. `apiVersion`, `kind` and `metadata` at the root
/// (and in `x-kubernetes-embedded-resource` objects) are kept.
pub(crate) fn prune(value: &mut Value, schema: &Value, root: bool) {
    match value {
        Value::Object(map) => {
            let preserve = schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true);
            let embedded = root
                || schema
                    .get("x-kubernetes-embedded-resource")
                    .and_then(Value::as_bool)
                    == Some(true);
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|v| v.is_object());
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(child) = properties.and_then(|p| p.get(&key)) {
                    if let Some(v) = map.get_mut(&key) {
                        prune(v, child, false);
                    }
                } else if let Some(child) = additional {
                    if let Some(v) = map.get_mut(&key) {
                        prune(v, child, false);
                    }
                } else if !preserve {
                    map.remove(&key);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    prune(item, item_schema, false);
                }
            }
        }
        _ => {}
    }
}

/// Fills in `default`s of absent (or null, non-nullable) properties, recursively.
pub(crate) fn default(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, child) in properties {
                    let nullable = child.get("nullable").and_then(Value::as_bool) == Some(true);
                    let missing = match map.get(key) {
                        None => true,
                        Some(Value::Null) => !nullable,
                        Some(_) => false,
                    };
                    if missing && let Some(default) = child.get("default") {
                        map.insert(key.clone(), default.clone());
                    }
                    if let Some(v) = map.get_mut(key) {
                        default(v, child);
                    }
                }
            }
            if let Some(additional) = schema.get("additionalProperties").filter(|v| v.is_object()) {
                let declared: Vec<String> = schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                for (key, v) in map.iter_mut() {
                    if !declared.contains(key) {
                        default(v, additional);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    default(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

/// Validates `value` against `schema`, appending `(field path, message)` for each violation.
pub(crate) fn validate(
    value: &Value,
    schema: &Value,
    path: &str,
    errors: &mut Vec<(String, String)>,
) {
    let nullable = schema.get("nullable").and_then(Value::as_bool) == Some(true);
    if value.is_null() {
        if !nullable && schema.get("type").is_some() {
            errors.push((
                path.to_owned(),
                format!(
                    "Invalid value: \"null\": {path} in body must be of type {}",
                    type_of_schema(schema)
                ),
            ));
        }
        return;
    }
    let int_or_string = schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true);
    if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let ok = match expected {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string() || (int_or_string && value.is_i64()),
            "integer" => value.is_i64() || value.is_u64() || (int_or_string && value.is_string()),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            _ => true,
        };
        if !ok {
            errors.push((
                path.to_owned(),
                format!(
                    "Invalid value: \"{}\": {path} in body must be of type {expected}: \"{}\"",
                    json_type(value),
                    json_type(value)
                ),
            ));
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        let supported: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        errors.push((
            path.to_owned(),
            format!(
                "Unsupported value: {value}: supported values: {}",
                supported.join(", ")
            ),
        ));
    }
    if let Some(number) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && number < min
        {
            errors.push((path.to_owned(), format!("Invalid value: {value}: {path} in body should be greater than or equal to {min}")));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && number > max
        {
            errors.push((
                path.to_owned(),
                format!(
                    "Invalid value: {value}: {path} in body should be less than or equal to {max}"
                ),
            ));
        }
    }
    if let Some(text) = value.as_str() {
        let length = text.chars().count() as u64;
        if schema
            .get("minLength")
            .and_then(Value::as_u64)
            .is_some_and(|min| length < min)
        {
            errors.push((
                path.to_owned(),
                format!(
                    "Invalid value: {value}: {path} in body should be at least {} chars long",
                    schema["minLength"]
                ),
            ));
        }
        if schema
            .get("maxLength")
            .and_then(Value::as_u64)
            .is_some_and(|max| length > max)
        {
            errors.push((
                path.to_owned(),
                format!(
                    "Too long: may not be more than {} bytes",
                    schema["maxLength"]
                ),
            ));
        }
    }
    match value {
        Value::Object(map) => validate_object(map, schema, path, errors),
        Value::Array(items) => {
            let count = items.len() as u64;
            if schema
                .get("minItems")
                .and_then(Value::as_u64)
                .is_some_and(|min| count < min)
            {
                errors.push((
                    path.to_owned(),
                    format!(
                        "Invalid value: {count}: {path} in body should have at least {} items",
                        schema["minItems"]
                    ),
                ));
            }
            if schema
                .get("maxItems")
                .and_then(Value::as_u64)
                .is_some_and(|max| count > max)
            {
                errors.push((
                    path.to_owned(),
                    format!(
                        "Too many: {count}: must have at most {} items",
                        schema["maxItems"]
                    ),
                ));
            }
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    validate(item, item_schema, &format!("{path}[{index}]"), errors);
                }
            }
        }
        _ => {}
    }
}

fn validate_object(
    map: &Map<String, Value>,
    schema: &Value,
    path: &str,
    errors: &mut Vec<(String, String)>,
) {
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(name) {
                errors.push((format!("{path}.{name}"), "Required value".to_owned()));
            }
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for (key, child) in map {
        if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let child_path = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
            validate(child, child_schema, &child_path, errors);
        } else if let Some(additional) =
            schema.get("additionalProperties").filter(|v| v.is_object())
        {
            validate(child, additional, &child_path, errors);
        }
    }
}

fn type_of_schema(schema: &Value) -> &str {
    schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("object")
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "default": "auto", "enum": ["auto", "manual"]},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}
        }})
    }

    #[test]
    fn prunes_defaults_and_validates() {
        let mut object = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"}, "junk": 1,
            "spec": {"size": 2, "unknown": true, "extra": {"anything": [1]}}});
        prune(&mut object, &schema(), true);
        default(&mut object, &schema());
        assert_eq!(
            object,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
            "spec": {"size": 2, "extra": {"anything": [1]}, "mode": "auto"}})
        );
        let mut errors = Vec::new();
        validate(&object, &schema(), "", &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        validate(
            &json!({"spec": {"size": 0, "mode": "other"}}),
            &schema(),
            "",
            &mut errors,
        );
        let fields: Vec<&str> = errors.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, vec!["spec.mode", "spec.size"]);
        errors.clear();
        validate(
            &json!({"spec": {"mode": "auto"}}),
            &schema(),
            "",
            &mut errors,
        );
        assert_eq!(errors[0].0, "spec.size");
    }
}
