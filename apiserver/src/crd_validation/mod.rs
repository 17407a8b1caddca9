//! CRD schema validation as kube-apiserver v1.20 applies it to `apiextensions.k8s.io/v1`
//! (after [`crate::crd_decode`]): required schemas, the OpenAPI keywords CRDs may not use, the
//! structural-schema rules, list/map type extensions and defaults. Each problem is a
//! `(field path, message)` cause for a 422, with kube-apiserver's field paths.

mod openapi_rules;
mod structural;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

use crate::pointer::At;

use openapi_rules::openapi_rules;
use structural::{Level, completeness, defaults, has_unstructural_keyword, structural_invariants};

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
