//! CRD schema validation as kube-apiserver v1.20 applies it to `apiextensions.k8s.io/v1`
//! (after [`crate::crd_decode`]): required schemas, the OpenAPI keywords CRDs may not use, the
//! structural-schema rules, list/map type extensions and defaults. Each problem is a
//! `(field path, message)` cause for a 422, with kube-apiserver's field paths.

use serde_json::{Map, Value};

use crate::pointer::At;

/// The `type`s a CRD schema may name.
const TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// The root keywords allowed when the status subresource is enabled, in Go field order.
const ROOT_WITH_STATUS: &[&str] = &[
    "description",
    "type",
    "format",
    "title",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "required",
    "items",
    "properties",
    "externalDocs",
    "example",
    "x-kubernetes-preserve-unknown-fields",
];

type Problems = Vec<(String, String)>;

/// The problems of `crd`'s schemas (already decoded by [`crate::crd_decode::decode_schemas`]).
pub(crate) fn schema_problems(crd: &Value) -> Problems {
    let mut problems = Vec::new();
    let Some(versions) = crd
        .at("/spec/versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
    else {
        return problems;
    };
    let validation = |version: &Value| version.get("schema").filter(|s| !s.is_null()).cloned();
    let status_enabled = |version: &Value| {
        version
            .at("/subresources/status")
            .is_some_and(|s| !s.is_null())
    };
    // kube-apiserver's internal version holds one top-level schema when every version has the
    // same one, and reports its problems under `spec.validation`.
    let first = validation(&versions[0]);
    if versions.iter().all(|v| validation(v) == first) {
        match first.as_ref().and_then(|v| v.get("openAPIV3Schema")) {
            Some(schema) => validate_root(
                schema,
                versions.iter().any(status_enabled),
                "spec.validation",
                &mut problems,
            ),
            None => {
                for index in 0..versions.len() {
                    problems.push((
                        format!("spec.versions[{index}].schema.openAPIV3Schema"),
                        "Required value: schemas are required".to_owned(),
                    ));
                }
            }
        }
    } else {
        for (index, version) in versions.iter().enumerate() {
            match validation(version)
                .as_ref()
                .and_then(|v| v.get("openAPIV3Schema"))
            {
                Some(schema) => validate_root(
                    schema,
                    status_enabled(version),
                    &format!("spec.versions[{index}].schema"),
                    &mut problems,
                ),
                None => problems.push((
                    format!("spec.versions[{index}].schema.openAPIV3Schema"),
                    "Required value: schemas are required".to_owned(),
                )),
            }
        }
    }
    problems
}

fn text<'a>(schema: &'a Value, key: &str) -> &'a str {
    schema.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .filter(|p| !p.is_empty())
}

/// `items` when it is a single schema.
fn single_items(schema: &Value) -> Option<&Value> {
    schema.get("items").filter(|i| i.is_object())
}

fn invalid(value: &Value, detail: &str) -> String {
    format!("Invalid value: {value}: {detail}")
}

/// One version's (or the top-level) `openAPIV3Schema` under `at` (`...schema` or `spec.validation`).
fn validate_root(schema: &Value, status_enabled: bool, at: &str, problems: &mut Problems) {
    let root = format!("{at}.openAPIV3Schema");
    let mut found = Vec::new();
    if status_enabled && let Some(map) = schema.as_object() {
        for (key, _) in crate::crd_decode::KEYWORDS
            .iter()
            .filter(|(key, _)| map.contains_key(*key))
        {
            if *key == "type" {
                if text(schema, "type") != "object" {
                    found.push((format!("{root}.type"), invalid(&schema["type"], "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled")));
                    break;
                }
                continue;
            }
            if !ROOT_WITH_STATUS.contains(key) {
                found.push((root.clone(), format!("Invalid value: {}: only {ROOT_WITH_STATUS:?} fields are allowed at the root of the schema if the status subresource is enabled", Value::Object(map.clone()))));
                break;
            }
        }
    }
    if flag(schema, "nullable") {
        found.push((
            format!("{root}.nullable"),
            "Forbidden: nullable cannot be true at the root".to_owned(),
        ));
    }
    openapi_rules(schema, &root, Context::default(), true, &mut found);
    if has_unstructural_keyword(schema) {
        // kube-apiserver cannot build a structural schema; it says so only when nothing else did.
        if found.is_empty() {
            found.push((
                root.clone(),
                "Invalid value: \"\": OpenAPIV3Schema 'schema' is not supported".to_owned(),
            ));
        }
    } else {
        let mut structural = Vec::new();
        structural_invariants(schema, Level::Root, &root, &mut structural);
        completeness(schema, Some(schema), &root, &root, &mut structural);
        if structural.is_empty() {
            defaults(schema, &root, true, false, &mut structural);
        }
        found.extend(structural);
    }
    problems.extend(found);
}

/// What applies to defaults below a schema node.
#[derive(Clone, Default)]
struct Context {
    /// Why defaults are forbidden here, if they are.
    forbidden_defaults: Option<String>,
    /// Inside the schema of `metadata`, `apiVersion` or `kind` of a resource.
    inside_resource_meta: bool,
}

/// Every schema position the OpenAPI rules recurse into.
fn subschemas(schema: &Value, at: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    if let Some(not) = schema.get("not") {
        out.push((format!("{at}.not"), not.clone()));
    }
    for keyword in ["allOf", "oneOf", "anyOf"] {
        for (i, sub) in schema
            .get(keyword)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            out.push((format!("{at}.{keyword}[{i}]"), sub.clone()));
        }
    }
    for (name, sub) in schema
        .get("definitions")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        out.push((format!("{at}.definitions[{name}]"), sub.clone()));
    }
    match schema.get("items") {
        Some(Value::Array(list)) => out.extend(
            list.iter()
                .enumerate()
                .map(|(i, sub)| (format!("{at}.items[{i}]"), sub.clone())),
        ),
        Some(single) => out.push((format!("{at}.items"), single.clone())),
        None => {}
    }
    for (name, sub) in schema
        .get("dependencies")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if sub.is_object() {
            out.push((format!("{at}.dependencies[{name}]"), sub.clone()));
        }
    }
    out
}

/// kube-apiserver's `ValidateCustomResourceDefinitionOpenAPISchema`: keywords CRDs may not use
/// and the list/map extensions.
fn openapi_rules(schema: &Value, at: &str, context: Context, root: bool, problems: &mut Problems) {
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

fn list_and_map_types(schema: &Value, at: &str, problems: &mut Problems) {
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

/// Keywords with which kube-apiserver cannot build a structural schema at all.
fn has_unstructural_keyword(schema: &Value) -> bool {
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
enum Level {
    Root,
    Item,
    Field,
}

/// kube-apiserver's structural-schema invariants (`validateStructuralInvariants`).
fn structural_invariants(schema: &Value, level: Level, at: &str, problems: &mut Problems) {
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
fn restricts_only_names(metadata: &Value) -> bool {
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
fn is_int_or_string_any_of(schema: &Value) -> bool {
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
fn value_validation(
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
fn nested_value_validation(schema: &Value, skip_any_of: bool, at: &str, problems: &mut Problems) {
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
fn completeness(
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

fn nested_completeness(
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
fn defaults(schema: &Value, at: &str, resource: bool, inside_meta: bool, problems: &mut Problems) {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn one_version(schema: Value) -> Value {
        json!({"spec": {"versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]}})
    }

    fn causes(schema: Value) -> Vec<(String, String)> {
        let mut crd = one_version(schema);
        crate::crd_decode::decode_schemas(&mut crd).unwrap();
        let mut problems = schema_problems(&crd);
        problems.sort();
        problems
    }

    fn fields(schema: Value) -> Vec<String> {
        causes(schema)
            .into_iter()
            .map(|(field, message)| format!("{field}: {}", crate::error::cause_reason(&message)))
            .collect()
    }

    const ROOT: &str = "spec.validation.openAPIV3Schema";

    #[test]
    fn valid_schemas_pass() {
        for schema in [
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}),
            json!({"type": "object", "properties": {"a": {"type": "object", "additionalProperties": false}}}),
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}}}}),
            json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": true}, "b": {"x-kubernetes-preserve-unknown-fields": true}}}),
            json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "anyOf": [{"maxLength": 3}], "default": "x"}}}),
            json!({"type": "object", "properties": {"a": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}}}}}}),
        ] {
            assert_eq!(causes(schema.clone()), vec![], "{schema}");
        }
    }

    #[test]
    fn problems_are_reported_as_kube_apiserver_reports_them() {
        let at = |rest: &str| format!("{ROOT}{rest}");
        for (schema, expected) in [
            (
                json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"tpye": "string"}}}}}),
                vec![at(
                    ".properties[spec].properties[a].type: FieldValueRequired",
                )],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "strin"}}}),
                vec![at(".properties[a].type: FieldValueNotSupported")],
            ),
            (
                json!({"type": "string"}),
                vec![at(".type: FieldValueInvalid")],
            ),
            (
                json!({"properties": {"a": {"type": "string"}}}),
                vec![at(".type: FieldValueRequired")],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}}),
                vec![at(".properties[a].uniqueItems: FieldValueForbidden")],
            ),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#/definitions/x"}}}),
                vec![at(".properties[a].$ref: FieldValueForbidden")],
            ),
            (
                json!({"type": "object", "definitions": {"x": {"type": "string"}}}),
                vec![at(".definitions: FieldValueForbidden")],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}}),
                vec![at(".properties[a].items: FieldValueForbidden")],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "array"}}}),
                vec![at(".properties[a].items: FieldValueRequired")],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}, "additionalProperties": {"type": "string"}}}}),
                vec![at(
                    ".properties[a].additionalProperties: FieldValueForbidden",
                )],
            ),
            (
                json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}),
                vec![at(".properties[metadata]: FieldValueForbidden")],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "null"}}}),
                vec![
                    at(".properties[a].type: FieldValueForbidden"),
                    at(".properties[a].type: FieldValueNotSupported"),
                ],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "anyOf": [{"type": "string"}]}}}),
                vec![at(".properties[a].anyOf[0].type: FieldValueForbidden")],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "object", "default": {"x": 1}}}}),
                vec![at(".properties[a].default: FieldValueInvalid")],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}),
                vec![at(".properties[a].pattern: FieldValueInvalid")],
            ),
            (
                json!({"type": "object", "$schema": "x"}),
                vec![at(": FieldValueInvalid")],
            ),
            (
                json!({"type": "object", "anyOf": [{"properties": {"b": {"maxLength": 1}}}]}),
                vec![at(".properties[b]: FieldValueRequired")],
            ),
            (
                json!({"type": "object", "additionalProperties": {"type": "string"}}),
                vec![at(".additionalProperties: FieldValueForbidden")],
            ),
            (
                json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}}),
                vec![at(".properties[metadata].default: FieldValueForbidden")],
            ),
        ] {
            assert_eq!(fields(schema.clone()), expected, "{schema}");
        }
    }

    #[test]
    fn schemas_are_required_and_located_per_version_when_they_differ() {
        let mut crd = one_version(json!({"type": "object"}));
        crd["spec"]["versions"][0]
            .as_object_mut()
            .unwrap()
            .remove("schema");
        assert_eq!(
            schema_problems(&crd),
            vec![(
                "spec.versions[0].schema.openAPIV3Schema".to_owned(),
                "Required value: schemas are required".to_owned()
            )]
        );
        let crd = json!({"spec": {"versions": [
            {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v2", "schema": {"openAPIV3Schema": {"type": "string"}}},
        ]}});
        assert_eq!(
            schema_problems(&crd)[0].0,
            "spec.versions[1].schema.openAPIV3Schema.type"
        );
    }

    #[test]
    fn status_subresource_restricts_the_root() {
        let mut crd = one_version(
            json!({"type": "object", "anyOf": [{"required": ["spec"]}], "properties": {"spec": {"type": "object"}}}),
        );
        crd["spec"]["versions"][0]["subresources"] = json!({"status": {}});
        let problems = schema_problems(&crd);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, ROOT);
    }
}
