//! Structural schemas: the keywords that rule one out, kube-apiserver's structural invariants,
//! value validations and their completeness, and defaults.

use serde_json::Value;

use super::{Problems, flag, invalid, properties, single_items, text};

/// Keywords with which kube-apiserver cannot build a structural schema at all.
pub(super) fn has_unstructural_keyword(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    if [
        "id",
        "$schema",
        "$ref",
        "patternProperties",
        "dependencies",
        "additionalItems",
        "definitions",
    ]
    .iter()
    .any(|k| map.contains_key(*k))
        || map.get("items").is_some_and(Value::is_array)
        || map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false))
    {
        return true;
    }
    let mut children: Vec<&Value> = Vec::new();
    children.extend(
        map.get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|p| p.values()),
    );
    children.extend(map.get("additionalProperties").filter(|a| a.is_object()));
    children.extend(map.get("items").filter(|i| i.is_object()));
    children.extend(map.get("not"));
    for keyword in ["allOf", "oneOf", "anyOf"] {
        children.extend(
            map.get(keyword)
                .and_then(Value::as_array)
                .into_iter()
                .flatten(),
        );
    }
    children.into_iter().any(has_unstructural_keyword)
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Level {
    Root,
    Item,
    Field,
}

/// kube-apiserver's structural-schema invariants (`validateStructuralInvariants`).
pub(super) fn structural_invariants(
    schema: &Value,
    level: Level,
    at: &str,
    problems: &mut Problems,
) {
    let ty = text(schema, "type");
    let embedded = flag(schema, "x-kubernetes-embedded-resource");
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let int_or_string = flag(schema, "x-kubernetes-int-or-string");
    if ty == "array" && single_items(schema).is_none() {
        problems.push((
            format!("{at}.items"),
            "Required value: must be specified".to_owned(),
        ));
    }
    if let Some(items) = single_items(schema) {
        structural_invariants(items, Level::Item, &format!("{at}.items"), problems);
    }
    for (name, property) in properties(schema).into_iter().flatten() {
        structural_invariants(
            property,
            Level::Field,
            &format!("{at}.properties[{name}]"),
            problems,
        );
    }
    if let Some(additional) = schema.get("additionalProperties") {
        if level == Level::Root {
            problems.push((
                format!("{at}.additionalProperties"),
                "Forbidden: must not be used at the root".to_owned(),
            ));
        }
        if additional.is_object() {
            structural_invariants(
                additional,
                Level::Field,
                &format!("{at}.additionalProperties"),
                problems,
            );
        }
    }
    if int_or_string && preserve {
        problems.push((
            format!("{at}.x-kubernetes-preserve-unknown-fields"),
            "Invalid value: true: must be false if x-kubernetes-int-or-string is true".to_owned(),
        ));
    }
    if int_or_string && embedded {
        problems.push((
            format!("{at}.x-kubernetes-embedded-resource"),
            "Invalid value: true: must be false if x-kubernetes-int-or-string is true".to_owned(),
        ));
    }
    let skip_any_of = is_int_or_string_any_of(schema);
    let skip_first_all_of_any_of = schema
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .is_some_and(is_int_or_string_any_of);
    value_validation(schema, skip_any_of, skip_first_all_of_any_of, at, problems);
    if embedded && ty != "object" {
        if ty.is_empty() {
            problems.push((
                format!("{at}.type"),
                "Required value: must be object if x-kubernetes-embedded-resource is true"
                    .to_owned(),
            ));
        } else {
            problems.push((
                format!("{at}.type"),
                invalid(
                    &schema["type"],
                    "must be object if x-kubernetes-embedded-resource is true",
                ),
            ));
        }
    } else if ty.is_empty() && !int_or_string && !preserve {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        problems.push((format!("{at}.type"), format!("Required value: {detail}")));
    }
    if embedded && schema.get("additionalProperties").is_some() {
        problems.push((
            format!("{at}.additionalProperties"),
            "Forbidden: must not be used if x-kubernetes-embedded-resource is set".to_owned(),
        ));
    }
    if level == Level::Root && !ty.is_empty() && ty != "object" {
        problems.push((
            format!("{at}.type"),
            invalid(&schema["type"], "must be object at the root"),
        ));
    }
    let check_metadata = level == Level::Root || embedded;
    let property = |name: &str| properties(schema).and_then(|p| p.get(name));
    if check_metadata {
        for (name, wanted) in [
            ("kind", "string"),
            ("apiVersion", "string"),
            ("metadata", "object"),
        ] {
            if let Some(sub) = property(name)
                && text(sub, "type") != wanted
            {
                let shown = Value::String(text(sub, "type").to_owned());
                problems.push((
                    format!("{at}.properties[{name}].type"),
                    invalid(&shown, &format!("must be {wanted}")),
                ));
            }
        }
    }
    if level == Level::Root
        && let Some(metadata) = property("metadata")
        && !restricts_only_names(metadata)
    {
        problems.push((format!("{at}.properties[metadata]"), "Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified".to_owned()));
    }
    if embedded && !preserve && properties(schema).is_none() {
        problems.push((format!("{at}.properties"), "Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields".to_owned()));
    }
}

/// Whether a root `metadata` schema says nothing but its type, a default, and schemas for
/// `name` and/or `generateName`.
pub(super) fn restricts_only_names(metadata: &Value) -> bool {
    let Some(map) = metadata.as_object() else {
        return true;
    };
    map.iter().all(|(key, value)| match key.as_str() {
        "type" | "default" => true,
        "properties" => value
            .as_object()
            .is_some_and(|p| p.keys().all(|k| k == "name" || k == "generateName")),
        _ => false,
    })
}

/// `anyOf: [{type: integer}, {type: string}]`, the int-or-string pattern.
pub(super) fn is_int_or_string_any_of(schema: &Value) -> bool {
    schema
        .get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|any| {
            any.len() == 2
                && any[0] == serde_json::json!({"type": "integer"})
                && any[1] == serde_json::json!({"type": "string"})
        })
}

/// The value validations (`anyOf`, `allOf`, `oneOf`, `not`, `pattern`) of a schema node.
pub(super) fn value_validation(
    schema: &Value,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    at: &str,
    problems: &mut Problems,
) {
    if !skip_any_of {
        for (i, sub) in schema
            .get("anyOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            nested_value_validation(sub, false, &format!("{at}.anyOf[{i}]"), problems);
        }
    }
    for (i, sub) in schema
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        nested_value_validation(
            sub,
            skip_first_all_of_any_of && i == 0,
            &format!("{at}.allOf[{i}]"),
            problems,
        );
    }
    for (i, sub) in schema
        .get("oneOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        nested_value_validation(sub, false, &format!("{at}.oneOf[{i}]"), problems);
    }
    if let Some(not) = schema.get("not") {
        nested_value_validation(not, false, &format!("{at}.not"), problems);
    }
    let pattern = text(schema, "pattern");
    if !pattern.is_empty()
        && let Err(error) = regex::Regex::new(pattern)
    {
        let reason = error
            .to_string()
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_owned();
        problems.push((
            format!("{at}.pattern"),
            invalid(
                &schema["pattern"],
                &format!("must be a valid regular expression, but isn't: {reason}"),
            ),
        ));
    }
}

/// A schema under `anyOf`/`allOf`/`oneOf`/`not`: it may only validate values, not specify them.
pub(super) fn nested_value_validation(
    schema: &Value,
    skip_any_of: bool,
    at: &str,
    problems: &mut Problems,
) {
    value_validation(schema, skip_any_of, false, at, problems);
    if let Some(items) = single_items(schema) {
        nested_value_validation(items, false, &format!("{at}.items"), problems);
    }
    for (name, property) in properties(schema).into_iter().flatten() {
        nested_value_validation(
            property,
            false,
            &format!("{at}.properties[{name}]"),
            problems,
        );
    }
    let forbidden = [
        (
            "type",
            !text(schema, "type").is_empty(),
            "must be empty to be structural",
        ),
        (
            "additionalProperties",
            schema.get("additionalProperties").is_some(),
            "must be undefined to be structural",
        ),
        (
            "default",
            schema.get("default").is_some(),
            "must be undefined to be structural",
        ),
        (
            "title",
            !text(schema, "title").is_empty(),
            "must be empty to be structural",
        ),
        (
            "description",
            !text(schema, "description").is_empty(),
            "must be empty to be structural",
        ),
        (
            "nullable",
            flag(schema, "nullable"),
            "must be false to be structural",
        ),
        (
            "x-kubernetes-preserve-unknown-fields",
            flag(schema, "x-kubernetes-preserve-unknown-fields"),
            "must be false to be structural",
        ),
        (
            "x-kubernetes-embedded-resource",
            flag(schema, "x-kubernetes-embedded-resource"),
            "must be false to be structural",
        ),
        (
            "x-kubernetes-int-or-string",
            flag(schema, "x-kubernetes-int-or-string"),
            "must be false to be structural",
        ),
        (
            "x-kubernetes-list-map-keys",
            schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .is_some_and(|k| !k.is_empty()),
            "must be empty to be structural",
        ),
        (
            "x-kubernetes-list-type",
            schema.get("x-kubernetes-list-type").is_some(),
            "must be undefined to be structural",
        ),
        (
            "x-kubernetes-map-type",
            schema.get("x-kubernetes-map-type").is_some(),
            "must be undefined to be structural",
        ),
    ];
    for (keyword, present, detail) in forbidden {
        if present {
            problems.push((format!("{at}.{keyword}"), format!("Forbidden: {detail}")));
        }
    }
    if properties(schema).is_some_and(|p| p.contains_key("metadata")) {
        problems.push((
            format!("{at}.properties[metadata]"),
            "Forbidden: must not be specified in a nested context".to_owned(),
        ));
    }
}

/// Every field or array a value validation names must also be specified by the structural
/// part (`validateStructuralCompleteness`, which kube-apiserver applies to the root's value
/// validations).
pub(super) fn completeness(
    validation: &Value,
    structural: Option<&Value>,
    structural_at: &str,
    validation_at: &str,
    problems: &mut Problems,
) {
    let mut nested: Vec<(String, &Value)> = Vec::new();
    if let Some(not) = validation.get("not") {
        nested.push((format!("{validation_at}.not"), not));
    }
    for keyword in ["allOf", "anyOf", "oneOf"] {
        for (i, sub) in validation
            .get(keyword)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            nested.push((format!("{validation_at}.{keyword}[{i}]"), sub));
        }
    }
    for (here, sub) in nested {
        nested_completeness(sub, structural, structural_at, &here, problems);
    }
}

pub(super) fn nested_completeness(
    validation: &Value,
    structural: Option<&Value>,
    structural_at: &str,
    validation_at: &str,
    problems: &mut Problems,
) {
    let Some(structural) = structural else {
        problems.push((
            structural_at.to_owned(),
            format!("Required value: because it is defined in {validation_at}"),
        ));
        return;
    };
    completeness(
        validation,
        Some(structural),
        structural_at,
        validation_at,
        problems,
    );
    if let Some(items) = single_items(validation) {
        nested_completeness(
            items,
            single_items(structural),
            &format!("{structural_at}.items"),
            &format!("{validation_at}.items"),
            problems,
        );
    }
    for (name, property) in properties(validation).into_iter().flatten() {
        let s_at = format!("{structural_at}.properties[{name}]");
        let v_at = format!("{validation_at}.properties[{name}]");
        match structural.get("properties").and_then(|p| p.get(name)) {
            None => problems.push((
                s_at,
                format!("Required value: because it is defined in {v_at}"),
            )),
            Some(sub) => nested_completeness(property, Some(sub), &s_at, &v_at, problems),
        }
    }
}

/// Defaults must survive pruning and be valid against their own schema (the root counts as an
/// embedded resource; defaults inside resource metadata are forbidden by the OpenAPI rules).
pub(super) fn defaults(
    schema: &Value,
    at: &str,
    resource: bool,
    inside_meta: bool,
    problems: &mut Problems,
) {
    let resource = resource || flag(schema, "x-kubernetes-embedded-resource");
    if let Some(default) = schema.get("default").filter(|_| !inside_meta) {
        let mut pruned = default.clone();
        crate::schema::prune(&mut pruned, schema, resource);
        if &pruned != default {
            problems.push((
                format!("{at}.default"),
                invalid(default, "must not have unknown fields"),
            ));
        }
        crate::schema::validate(default, schema, &format!("{at}.default"), problems);
    }
    if let Some(items) = single_items(schema) {
        defaults(items, &format!("{at}.items"), false, inside_meta, problems);
    }
    for (name, property) in properties(schema).into_iter().flatten() {
        let meta = inside_meta
            || (resource && matches!(name.as_str(), "metadata" | "apiVersion" | "kind"));
        defaults(
            property,
            &format!("{at}.properties[{name}]"),
            false,
            meta,
            problems,
        );
    }
}
