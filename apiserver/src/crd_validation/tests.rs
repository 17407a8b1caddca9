//! The schema problems of CRDs as kube-apiserver v1.20 reports them.

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
