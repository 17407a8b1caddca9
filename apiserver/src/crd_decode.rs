//! Decoding a CRD's `openAPIV3Schema`s as kube-apiserver v1.20 decodes them into
//! `JSONSchemaProps`: a keyword of the wrong JSON type is a 400, unknown keys are dropped, and
//! zero values of `omitempty` fields are dropped (what kube-apiserver stores and serves back).

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::pointer::At;

/// How `JSONSchemaProps` (v1.20) decodes one keyword.
#[derive(Clone, Copy)]
pub(crate) enum Keyword {
    /// `string`, `omitempty`: `""` is dropped.
    Text,
    /// `*string`: kept even when empty.
    TextPointer,
    /// `bool`, `omitempty`: `false` is dropped.
    Flag,
    /// `*bool`: kept even when false.
    FlagPointer,
    /// `*float64`.
    Float,
    /// `*int64`.
    Integer,
    /// `*JSON`: any value (`null` is absent).
    Any,
    /// `[]JSON`.
    AnyList,
    /// `[]string`.
    TextList,
    /// `*JSONSchemaProps`.
    Schema,
    /// `[]JSONSchemaProps`.
    SchemaList,
    /// `map[string]JSONSchemaProps`.
    SchemaMap,
    /// `*JSONSchemaPropsOrArray`: a schema or a list of schemas.
    SchemaOrList,
    /// `*JSONSchemaPropsOrBool`: a schema or a boolean.
    SchemaOrFlag,
    /// `map[string]JSONSchemaPropsOrStringArray`.
    Dependencies,
    /// `*ExternalDocumentation`.
    ExternalDocs,
}

/// The keywords of `JSONSchemaProps` in Kubernetes 1.20, in the Go struct's field order.
pub(crate) const KEYWORDS: &[(&str, Keyword)] = &[
    ("id", Keyword::Text),
    ("$schema", Keyword::Text),
    ("$ref", Keyword::TextPointer),
    ("description", Keyword::Text),
    ("type", Keyword::Text),
    ("format", Keyword::Text),
    ("title", Keyword::Text),
    ("default", Keyword::Any),
    ("maximum", Keyword::Float),
    ("exclusiveMaximum", Keyword::Flag),
    ("minimum", Keyword::Float),
    ("exclusiveMinimum", Keyword::Flag),
    ("maxLength", Keyword::Integer),
    ("minLength", Keyword::Integer),
    ("pattern", Keyword::Text),
    ("maxItems", Keyword::Integer),
    ("minItems", Keyword::Integer),
    ("uniqueItems", Keyword::Flag),
    ("multipleOf", Keyword::Float),
    ("enum", Keyword::AnyList),
    ("maxProperties", Keyword::Integer),
    ("minProperties", Keyword::Integer),
    ("required", Keyword::TextList),
    ("items", Keyword::SchemaOrList),
    ("allOf", Keyword::SchemaList),
    ("oneOf", Keyword::SchemaList),
    ("anyOf", Keyword::SchemaList),
    ("not", Keyword::Schema),
    ("properties", Keyword::SchemaMap),
    ("additionalProperties", Keyword::SchemaOrFlag),
    ("patternProperties", Keyword::SchemaMap),
    ("dependencies", Keyword::Dependencies),
    ("additionalItems", Keyword::SchemaOrFlag),
    ("definitions", Keyword::SchemaMap),
    ("externalDocs", Keyword::ExternalDocs),
    ("example", Keyword::Any),
    ("nullable", Keyword::Flag),
    ("x-kubernetes-preserve-unknown-fields", Keyword::FlagPointer),
    ("x-kubernetes-embedded-resource", Keyword::Flag),
    ("x-kubernetes-int-or-string", Keyword::Flag),
    ("x-kubernetes-list-map-keys", Keyword::TextList),
    ("x-kubernetes-list-type", Keyword::TextPointer),
    ("x-kubernetes-map-type", Keyword::TextPointer),
];

/// Decodes every `spec.versions[].schema.openAPIV3Schema` of `crd` in place. A value of the
/// wrong JSON type is a 400 naming where it is, as kube-apiserver's decoding error is.
pub(crate) fn decode_schemas(crd: &mut Value) -> Result<(), ApiError> {
    let Some(versions) = crd.at_mut("/spec/versions").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    for (index, version) in versions.iter_mut().enumerate() {
        let Some(version) = version.as_object_mut() else {
            continue;
        };
        let at = format!("spec.versions[{index}].schema");
        match version.get_mut("schema") {
            None => {}
            Some(Value::Null) => {
                version.remove("schema");
            }
            Some(Value::Object(validation)) => match validation.remove("openAPIV3Schema") {
                None | Some(Value::Null) => {}
                Some(schema) => {
                    let decoded = decode_schema(schema, &format!("{at}.openAPIV3Schema"))
                        .map_err(cannot_handle)?;
                    validation.insert("openAPIV3Schema".to_owned(), decoded);
                }
            },
            Some(other) => return Err(cannot_handle(wrong(&at, "an object", other))),
        }
    }
    Ok(())
}

fn cannot_handle(why: String) -> ApiError {
    ApiError::bad_request(format!(
        "CustomResourceDefinition in version \"v1\" cannot be handled as a CustomResourceDefinition: {why}"
    ))
}

fn wrong(at: &str, expected: &str, found: &Value) -> String {
    let mut text = found.to_string();
    if text.len() > 60 {
        let cut = (0..=60)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push_str("...");
    }
    format!("{at}: expected {expected}, found {text}")
}

/// One `JSONSchemaProps`: an object (or `null`, the zero schema).
fn decode_schema(value: Value, at: &str) -> Result<Value, String> {
    let map = match value {
        Value::Null => return Ok(Value::Object(Map::new())),
        Value::Object(map) => map,
        other => return Err(wrong(at, "a JSON schema object", &other)),
    };
    let mut out = Map::new();
    for (key, value) in map {
        let Some((_, keyword)) = KEYWORDS.iter().find(|(name, _)| *name == key) else {
            continue;
        };
        let here = format!("{at}.{key}");
        if let Some(decoded) = decode_keyword(*keyword, value, &here)? {
            out.insert(key, decoded);
        }
    }
    Ok(Value::Object(out))
}

/// One keyword's value; None when Go would leave it unset (or omit it when encoding).
fn decode_keyword(keyword: Keyword, value: Value, at: &str) -> Result<Option<Value>, String> {
    if value.is_null() {
        return Ok(None);
    }
    let decoded = match keyword {
        Keyword::Text => match value {
            Value::String(text) if text.is_empty() => return Ok(None),
            Value::String(_) => value,
            other => return Err(wrong(at, "a string", &other)),
        },
        Keyword::TextPointer => match value {
            Value::String(_) => value,
            other => return Err(wrong(at, "a string", &other)),
        },
        Keyword::Flag => match value {
            Value::Bool(false) => return Ok(None),
            Value::Bool(true) => value,
            other => return Err(wrong(at, "a boolean", &other)),
        },
        Keyword::FlagPointer => match value {
            Value::Bool(_) => value,
            other => return Err(wrong(at, "a boolean", &other)),
        },
        Keyword::Float => match value {
            Value::Number(_) => value,
            other => return Err(wrong(at, "a number", &other)),
        },
        Keyword::Integer => match value {
            Value::Number(ref n) if n.is_i64() => value,
            other => return Err(wrong(at, "an integer", &other)),
        },
        Keyword::Any => value,
        Keyword::AnyList => match value {
            Value::Array(items) if items.is_empty() => return Ok(None),
            Value::Array(_) => value,
            other => return Err(wrong(at, "an array", &other)),
        },
        Keyword::TextList => match value {
            Value::Array(items) if items.is_empty() => return Ok(None),
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    match item {
                        Value::String(_) => out.push(item),
                        Value::Null => out.push(Value::String(String::new())),
                        other => return Err(wrong(&format!("{at}[{i}]"), "a string", &other)),
                    }
                }
                Value::Array(out)
            }
            other => return Err(wrong(at, "an array of strings", &other)),
        },
        Keyword::Schema => decode_schema(value, at)?,
        Keyword::SchemaList => match value {
            Value::Array(items) if items.is_empty() => return Ok(None),
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| decode_schema(s, &format!("{at}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            other => return Err(wrong(at, "an array of JSON schemas", &other)),
        },
        Keyword::SchemaMap => match value {
            Value::Object(map) if map.is_empty() => return Ok(None),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, s)| decode_schema(s, &format!("{at}[{k}]")).map(|s| (k, s)))
                    .collect::<Result<_, _>>()?,
            ),
            other => return Err(wrong(at, "an object of JSON schemas", &other)),
        },
        // Go's JSONSchemaPropsOrArray decodes anything but an object or a non-empty list as
        // an empty value, which encodes as nothing useful: treat it as unset.
        Keyword::SchemaOrList => match value {
            Value::Object(_) => decode_schema(value, at)?,
            Value::Array(items) if !items.is_empty() => Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| decode_schema(s, &format!("{at}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            _ => return Ok(None),
        },
        Keyword::SchemaOrFlag => match value {
            Value::Object(_) => decode_schema(value, at)?,
            Value::Bool(_) => value,
            other => return Err(wrong(at, "a boolean or a JSON schema", &other)),
        },
        Keyword::Dependencies => match value {
            Value::Object(map) if map.is_empty() => return Ok(None),
            Value::Object(map) => {
                let mut out = Map::new();
                for (name, dependency) in map {
                    let here = format!("{at}[{name}]");
                    let decoded = match dependency {
                        Value::Object(_) => decode_schema(dependency, &here)?,
                        Value::Array(_) => decode_keyword(Keyword::TextList, dependency, &here)?
                            .unwrap_or(Value::Null),
                        _ => Value::Null,
                    };
                    out.insert(name, decoded);
                }
                Value::Object(out)
            }
            other => return Err(wrong(at, "an object", &other)),
        },
        Keyword::ExternalDocs => match value {
            Value::Object(map) => {
                let mut out = Map::new();
                for (key, value) in map {
                    if matches!(key.as_str(), "description" | "url")
                        && let Some(text) =
                            decode_keyword(Keyword::Text, value, &format!("{at}.{key}"))?
                    {
                        out.insert(key, text);
                    }
                }
                Value::Object(out)
            }
            other => return Err(wrong(at, "an object", &other)),
        },
    };
    Ok(Some(decoded))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn crd(schema: Value) -> Value {
        json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}})
    }

    #[test]
    fn wrong_json_types_are_bad_requests_naming_where() {
        for (schema, at) in [
            (
                json!({"type": "object", "properties": [{"a": 1}]}),
                "openAPIV3Schema.properties:",
            ),
            (
                json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": "yes"}}}),
                "properties[a].x-kubernetes-int-or-string:",
            ),
            (
                json!({"type": "object", "required": "a"}),
                "openAPIV3Schema.required:",
            ),
            (
                json!({"type": "object", "required": [1]}),
                "openAPIV3Schema.required[0]:",
            ),
            (json!({"type": ["string"]}), "openAPIV3Schema.type:"),
            (
                json!({"type": "object", "properties": {"a": "string"}}),
                "properties[a]:",
            ),
            (
                json!({"type": "string", "minLength": "3"}),
                "openAPIV3Schema.minLength:",
            ),
            (
                json!({"type": "string", "maxLength": 1.5}),
                "openAPIV3Schema.maxLength:",
            ),
            (
                json!({"type": "object", "additionalProperties": "no"}),
                "openAPIV3Schema.additionalProperties:",
            ),
            (json!([1]), "openAPIV3Schema:"),
        ] {
            let error = decode_schemas(&mut crd(schema.clone())).unwrap_err();
            assert_eq!((error.code, error.reason), (400, "BadRequest"), "{schema}");
            assert!(
                error
                    .message
                    .contains(&format!("spec.versions[0].schema.{at}"))
                    || error.message.contains(at),
                "{schema}: {}",
                error.message
            );
        }
    }

    #[test]
    fn unknown_keys_and_zero_values_are_dropped() {
        let mut object = crd(
            json!({"type": "object", "tpye": "x", "description": "", "nullable": false, "required": [],
            "x-kubernetes-preserve-unknown-fields": false, "properties": {"a": {"type": "string", "xml": {}, "default": null, "enum": ["x", null]}},
            "items": "junk", "externalDocs": {"url": "u", "other": 1}}),
        );
        decode_schemas(&mut object).unwrap();
        assert_eq!(
            object["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
            json!({"type": "object",
            "x-kubernetes-preserve-unknown-fields": false, "properties": {"a": {"type": "string", "enum": ["x", null]}}, "externalDocs": {"url": "u"}})
        );
    }
}
