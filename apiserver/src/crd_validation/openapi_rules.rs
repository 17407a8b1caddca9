//! The OpenAPI rules of kube-apiserver's `ValidateCustomResourceDefinitionOpenAPISchema`: the
//! keywords CRDs may not use, and the list/map type extensions.

use serde_json::Value;

use super::{Context, Problems, TYPES, flag, invalid, properties, single_items, subschemas, text};

/// kube-apiserver's `ValidateCustomResourceDefinitionOpenAPISchema`: keywords CRDs may not use
/// and the list/map extensions.
pub(super) fn openapi_rules(
    schema: &Value,
    at: &str,
    context: Context,
    root: bool,
    problems: &mut Problems,
) {
    let ty = text(schema, "type");
    if !ty.is_empty() && !TYPES.contains(&ty) {
        let supported: Vec<String> = TYPES.iter().map(|t| format!("\"{t}\"")).collect();
        problems.push((
            format!("{at}.type"),
            format!(
                "Unsupported value: {}: supported values: {}",
                schema["type"],
                supported.join(", ")
            ),
        ));
    }
    if schema.get("default").is_some()
        && let Some(reason) = &context.forbidden_defaults
    {
        problems.push((
            format!("{at}.default"),
            format!("Forbidden: must not be set {reason}"),
        ));
    }
    for (keyword, present) in [
        ("id", schema.get("id").is_some()),
        ("additionalItems", schema.get("additionalItems").is_some()),
        (
            "patternProperties",
            schema.get("patternProperties").is_some(),
        ),
        ("definitions", schema.get("definitions").is_some()),
        ("dependencies", schema.get("dependencies").is_some()),
        ("$ref", schema.get("$ref").is_some()),
    ] {
        if present {
            problems.push((
                format!("{at}.{keyword}"),
                format!("Forbidden: {keyword} is not supported"),
            ));
        }
    }
    if ty == "null" {
        problems.push((
            format!("{at}.type"),
            "Forbidden: type cannot be set to null, use nullable as an alternative".to_owned(),
        ));
    }
    if schema.get("items").is_some_and(Value::is_array) {
        problems.push((
            format!("{at}.items"),
            "Forbidden: items must be a schema object and not an array".to_owned(),
        ));
    }
    if context.inside_resource_meta && flag(schema, "x-kubernetes-embedded-resource") {
        problems.push((
            format!("{at}.x-kubernetes-embedded-resource"),
            "Forbidden: must not be used inside of resource meta".to_owned(),
        ));
    }
    if flag(schema, "uniqueItems") {
        problems.push((format!("{at}.uniqueItems"), "Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic".to_owned()));
    }
    if let Some(additional) = schema.get("additionalProperties") {
        if properties(schema).is_some()
            && (additional == &Value::Bool(false) || additional.is_object())
        {
            problems.push((
                format!("{at}.additionalProperties"),
                "Forbidden: additionalProperties and properties are mutual exclusive".to_owned(),
            ));
        }
        if additional.is_object() {
            let mut sub = context.clone();
            if context.inside_resource_meta {
                sub.forbidden_defaults =
                    Some("inside additionalProperties applying to object metadata".to_owned());
            }
            openapi_rules(
                additional,
                &format!("{at}.additionalProperties"),
                sub,
                false,
                problems,
            );
        }
    }
    let embedded = flag(schema, "x-kubernetes-embedded-resource");
    for (name, property) in properties(schema).into_iter().flatten() {
        let mut sub = context.clone();
        if (root || embedded) && matches!(name.as_str(), "metadata" | "kind" | "apiVersion") {
            sub.inside_resource_meta = true;
            if root {
                sub.forbidden_defaults = Some(format!("in top-level {name}"));
            }
        }
        openapi_rules(
            property,
            &format!("{at}.properties[{name}]"),
            sub,
            false,
            problems,
        );
    }
    for (here, sub) in subschemas(schema, at) {
        openapi_rules(&sub, &here, context.clone(), false, problems);
    }
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        problems.push((
            format!("{at}.x-kubernetes-preserve-unknown-fields"),
            "Invalid value: false: must be true or undefined".to_owned(),
        ));
    }
    list_and_map_types(schema, at, problems);
}

pub(super) fn list_and_map_types(schema: &Value, at: &str, problems: &mut Problems) {
    let ty = text(schema, "type");
    let map_type = schema.get("x-kubernetes-map-type").and_then(Value::as_str);
    let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let type_must_be = |wanted: &str, extension: &str, problems: &mut Problems| {
        if ty.is_empty() {
            problems.push((
                format!("{at}.type"),
                format!("Required value: must be {wanted} if {extension} is specified"),
            ));
        } else {
            problems.push((
                format!("{at}.type"),
                invalid(
                    &schema["type"],
                    &format!("must be {wanted} if {extension} is specified"),
                ),
            ));
        }
    };
    if let Some(map_type) = map_type {
        if ty != "object" {
            type_must_be("object", "x-kubernetes-map-type", problems);
        }
        if !matches!(map_type, "atomic" | "granular") {
            problems.push((
                format!("{at}.x-kubernetes-map-type"),
                format!(
                    "Unsupported value: {}: supported values: \"atomic\", \"granular\"",
                    schema["x-kubernetes-map-type"]
                ),
            ));
        }
    }
    let items = single_items(schema);
    if let Some(list_type) = list_type {
        if ty != "array" {
            type_must_be("array", "x-kubernetes-list-type", problems);
        } else if list_type == "set"
            && let Some(items) = items
        {
            let item_list = items.get("x-kubernetes-list-type").and_then(Value::as_str);
            match text(items, "type") {
                "array" if item_list.is_some_and(|t| t != "atomic") => {
                    problems.push((
                        format!("{at}.items.x-kubernetes-list-type"),
                        invalid(
                            &items["x-kubernetes-list-type"],
                            "must be atomic as item of a list with x-kubernetes-list-type=set",
                        ),
                    ));
                }
                "object"
                    if items.get("x-kubernetes-map-type").and_then(Value::as_str)
                        != Some("atomic") =>
                {
                    let shown = items
                        .get("x-kubernetes-list-type")
                        .cloned()
                        .unwrap_or(Value::Null);
                    problems.push((
                        format!("{at}.items.x-kubernetes-map-type"),
                        invalid(
                            &shown,
                            "must be atomic as item of a list with x-kubernetes-list-type=set",
                        ),
                    ));
                }
                _ => {}
            }
        }
        if !matches!(list_type, "atomic" | "set" | "map") {
            problems.push((
                format!("{at}.x-kubernetes-list-type"),
                format!(
                    "Unsupported value: {}: supported values: \"atomic\", \"map\", \"set\"",
                    schema["x-kubernetes-list-type"]
                ),
            ));
        }
    }
    if !keys.is_empty() {
        match list_type {
            None => problems.push((
                format!("{at}.x-kubernetes-list-type"),
                "Required value: must be map if x-kubernetes-list-map-keys is non-empty".to_owned(),
            )),
            Some("map") => {}
            Some(_) => problems.push((
                format!("{at}.x-kubernetes-list-type"),
                invalid(
                    &schema["x-kubernetes-list-type"],
                    "must be map if x-kubernetes-list-map-keys is non-empty",
                ),
            )),
        }
    }
    if list_type == Some("map") {
        if keys.is_empty() {
            problems.push((
                format!("{at}.x-kubernetes-list-map-keys"),
                "Required value: must not be empty if x-kubernetes-list-type is map".to_owned(),
            ));
        }
        match schema.get("items") {
            None => problems.push((format!("{at}.items"), "Required value: must have a schema if x-kubernetes-list-type is map".to_owned())),
            Some(Value::Array(_)) => problems.push((format!("{at}.items"), "Invalid value: \"array\": must only have a single schema if x-kubernetes-list-type is map".to_owned())),
            Some(items) if text(items, "type") != "object" => {
                problems.push((format!("{at}.items.type"), invalid(items.get("type").unwrap_or(&Value::String(String::new())), "must be object if parent array's x-kubernetes-list-type is map")));
            }
            Some(items) => {
                let item_properties = items.get("properties").and_then(Value::as_object);
                let all_keys = schema.get("x-kubernetes-list-map-keys").cloned().unwrap_or(Value::Null);
                let mut seen = Vec::new();
                for key in &keys {
                    match item_properties.and_then(|p| p.get(*key)) {
                        Some(property) if matches!(text(property, "type"), "array" | "object") => {
                            problems.push((format!("{at}.items.properties[{key}].type"), invalid(&items["type"], "must be a scalar type if parent array's x-kubernetes-list-type is map")));
                        }
                        Some(_) => {}
                        None => problems.push((format!("{at}.x-kubernetes-list-map-keys"), invalid(&all_keys, "entries must all be names of item properties"))),
                    }
                    if seen.contains(key) {
                        problems.push((format!("{at}.x-kubernetes-list-map-keys"), invalid(&all_keys, "must not contain duplicate entries")));
                    }
                    seen.push(key);
                }
            }
        }
    }
    if let (Some(list_type @ ("set" | "map")), Some(items)) = (list_type, items) {
        if flag(items, "nullable") {
            problems.push((
                format!("{at}.items.nullable"),
                format!("Forbidden: cannot be nullable when x-kubernetes-list-type is {list_type}"),
            ));
        }
        if list_type == "map" {
            let required: Vec<&str> = items
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for key in &keys {
                let Some(property) = items.get("properties").and_then(|p| p.get(*key)) else {
                    continue;
                };
                if !required.contains(key) && property.get("default").is_none() {
                    problems.push((format!("{at}.items.properties[{key}].default"), "Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property".to_owned()));
                }
                if flag(property, "nullable") {
                    problems.push((format!("{at}.items.properties[{key}].nullable"), "Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable".to_owned()));
                }
            }
        }
    }
}
