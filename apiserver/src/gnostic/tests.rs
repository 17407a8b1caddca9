//! The conversion against documents the server serves and hand-written edge cases.

use super::json::*;
use super::messages::*;
use super::*;
use crate::registry::Registry;
use serde_json::{Map, json};

/// `Any.yaml` read back as JSON.
fn unyaml(any: &Any) -> Value {
    serde_saphyr::from_str(&any.yaml)
        .unwrap_or_else(|e| panic!("Any.yaml {:?} is YAML: {e}", any.yaml))
}

/// A decoded `Schema` as JSON, with the keys the conversion carries.
fn schema_json(schema: &Schema) -> Value {
    let mut out = Map::new();
    let mut text = |key: &str, value: &str| {
        if !value.is_empty() {
            out.insert(key.to_owned(), json!(value));
        }
    };
    text("$ref", &schema.xref);
    text("format", &schema.format);
    text("title", &schema.title);
    text("description", &schema.description);
    text("pattern", &schema.pattern);
    text("discriminator", &schema.discriminator);
    for (key, value) in [
        ("multipleOf", schema.multiple_of),
        ("maximum", schema.maximum),
        ("minimum", schema.minimum),
    ] {
        if value != 0.0 {
            out.insert(key.to_owned(), json!(value));
        }
    }
    for (key, value) in [
        ("maxLength", schema.max_length),
        ("minLength", schema.min_length),
        ("maxItems", schema.max_items),
        ("minItems", schema.min_items),
        ("maxProperties", schema.max_properties),
        ("minProperties", schema.min_properties),
    ] {
        if value != 0 {
            out.insert(key.to_owned(), json!(value));
        }
    }
    for (key, value) in [
        ("exclusiveMaximum", schema.exclusive_maximum),
        ("exclusiveMinimum", schema.exclusive_minimum),
        ("uniqueItems", schema.unique_items),
        ("readOnly", schema.read_only),
    ] {
        if value {
            out.insert(key.to_owned(), json!(true));
        }
    }
    if !schema.required.is_empty() {
        out.insert("required".to_owned(), json!(schema.required));
    }
    if !schema.r#enum.is_empty() {
        out.insert(
            "enum".to_owned(),
            Value::Array(schema.r#enum.iter().map(unyaml).collect()),
        );
    }
    if let Some(any) = &schema.default {
        out.insert("default".to_owned(), unyaml(any));
    }
    if let Some(any) = &schema.example {
        out.insert("example".to_owned(), unyaml(any));
    }
    match schema.r#type.as_ref().map(|t| t.value.as_slice()) {
        None => {}
        Some([single]) => {
            out.insert("type".to_owned(), json!(single));
        }
        Some(many) => {
            out.insert("type".to_owned(), json!(many));
        }
    }
    match schema.items.as_ref().map(|i| i.schema.as_slice()) {
        None => {}
        Some([single]) => {
            out.insert("items".to_owned(), schema_json(single));
        }
        Some(many) => {
            out.insert(
                "items".to_owned(),
                Value::Array(many.iter().map(schema_json).collect()),
            );
        }
    }
    match schema
        .additional_properties
        .as_ref()
        .and_then(|a| a.oneof.as_ref())
    {
        None => {}
        Some(additional_properties_item::Oneof::Boolean(flag)) => {
            out.insert("additionalProperties".to_owned(), json!(flag));
        }
        Some(additional_properties_item::Oneof::Schema(sub)) => {
            out.insert("additionalProperties".to_owned(), schema_json(sub));
        }
    }
    if !schema.all_of.is_empty() {
        out.insert(
            "allOf".to_owned(),
            Value::Array(schema.all_of.iter().map(schema_json).collect()),
        );
    }
    if let Some(properties) = &schema.properties {
        let map: Map<String, Value> = properties
            .additional_properties
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    p.value.as_ref().map(schema_json).unwrap_or(Value::Null),
                )
            })
            .collect();
        out.insert("properties".to_owned(), Value::Object(map));
    }
    for extension in &schema.vendor_extension {
        out.insert(
            extension.name.clone(),
            extension.value.as_ref().map(unyaml).unwrap_or(Value::Null),
        );
    }
    Value::Object(out)
}

/// A JSON schema reduced to what Swagger 2.0 (and so gnostic) carries, proto3 defaults left out.
fn swagger_only(schema: &Value) -> Value {
    let Some(map) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let kept = match key.as_str() {
            "properties" => Value::Object(
                value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), swagger_only(v)))
                    .collect(),
            ),
            "items" | "additionalProperties" if value.is_object() => swagger_only(value),
            "items" | "allOf" => Value::Array(
                value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(swagger_only)
                    .collect(),
            ),
            "$ref"
            | "format"
            | "title"
            | "description"
            | "pattern"
            | "discriminator"
            | "type"
            | "enum"
            | "default"
            | "example"
            | "additionalProperties" => value.clone(),
            "multipleOf" | "maximum" | "minimum" => {
                value.as_f64().map_or_else(|| value.clone(), |n| json!(n))
            }
            "maxLength" | "minLength" | "maxItems" | "minItems" | "maxProperties"
            | "minProperties" | "exclusiveMaximum" | "exclusiveMinimum" | "uniqueItems"
            | "readOnly" | "required" => value.clone(),
            extension if extension.starts_with("x-") => value.clone(),
            _ => continue,
        };
        let default = matches!(&kept, Value::String(s) if s.is_empty() && key != "default" && key != "example")
            || matches!(&kept, Value::Bool(false) if key != "default" && key != "example" && key != "additionalProperties")
            || (kept.as_f64() == Some(0.0)
                && key != "default"
                && key != "example"
                && !key.starts_with("x-"))
            || matches!(&kept, Value::Array(a) if a.is_empty() && key == "required");
        if !default {
            out.insert(key.clone(), kept);
        }
    }
    Value::Object(out)
}

/// The non-body parameter `item` holds, if any.
fn non_body(item: &ParametersItem) -> Option<&non_body_parameter::Oneof> {
    let Some(parameters_item::Oneof::Parameter(param)) = &item.oneof else {
        return None;
    };
    let Some(parameter::Oneof::NonBodyParameter(non_body)) = &param.oneof else {
        return None;
    };
    non_body.oneof.as_ref()
}

const WIDGETS: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "description": "What the widget should be.", "required": ["size"], "properties": {
                "size": {"type": "integer", "format": "int32", "minimum": 1, "description": "How big the widget is."},
                "color": {"type": "string", "default": "blue", "enum": ["blue", "red"]},
                "parts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}}}}}}}]}}"#;

fn registry() -> Registry {
    let mut registry = Registry::builtin();
    let crd: Value = serde_json::from_str(WIDGETS).unwrap();
    for resource in crate::crd::resources(&crd).unwrap() {
        registry.insert(resource);
    }
    registry
}

#[test]
fn protobuf_decodes_to_the_json_document() {
    let registry = registry();
    let json = crate::openapi::v2(&registry);
    let bytes = encode(&json).unwrap();
    let document = Document::decode(bytes.as_slice()).unwrap();
    assert_eq!(document.swagger, "2.0");
    assert_eq!(
        document.info.as_ref().map(|i| i.title.as_str()),
        Some("Kubernetes")
    );
    let definitions = &document.definitions.as_ref().unwrap().additional_properties;
    let json_definitions = json["definitions"].as_object().unwrap();
    assert_eq!(
        definitions
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        json_definitions
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
    for definition in definitions {
        let decoded = schema_json(definition.value.as_ref().unwrap());
        assert_eq!(
            decoded,
            swagger_only(&json_definitions[&definition.name]),
            "definition {}",
            definition.name
        );
    }
    let find = |suffix: &str| {
        definitions
            .iter()
            .find(|d| d.name.ends_with(suffix))
            .and_then(|d| d.value.as_ref())
            .unwrap_or_else(|| panic!("no definition {suffix}"))
    };
    let extension = |schema: &Schema, name: &str| {
        schema
            .vendor_extension
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
            .map(|a| a.yaml)
    };

    // A built-in kind: its GVK, and the strategic-merge keys kubectl 1.20 reads from here.
    let pod = find("core.v1.Pod");
    assert_eq!(
        unyaml(&Any {
            yaml: extension(pod, "x-kubernetes-group-version-kind").unwrap()
        }),
        json!([{"group": "", "version": "v1", "kind": "Pod"}])
    );
    let pod_properties: Vec<&str> = pod
        .properties
        .as_ref()
        .unwrap()
        .additional_properties
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let json_pod = json_definitions
        .iter()
        .find(|(k, _)| k.ends_with("core.v1.Pod"))
        .unwrap()
        .1;
    assert_eq!(
        pod_properties,
        json_pod["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        "properties keep their order"
    );
    let spec = find("core.v1.PodSpec");
    let containers = spec
        .properties
        .as_ref()
        .unwrap()
        .additional_properties
        .iter()
        .find(|p| p.name == "containers")
        .and_then(|p| p.value.as_ref())
        .unwrap();
    assert_eq!(
        extension(containers, "x-kubernetes-patch-strategy").as_deref(),
        Some("merge\n")
    );
    assert_eq!(
        extension(containers, "x-kubernetes-patch-merge-key").as_deref(),
        Some("name\n")
    );
    assert_eq!(
        containers.items.as_ref().unwrap().schema[0].xref,
        json_definitions
            .keys()
            .find(|k| k.ends_with("core.v1.Container"))
            .map(|k| format!("#/definitions/{k}"))
            .unwrap()
    );

    // The CRD's schema, as the server adds it.
    let widget = find("com.example.v1.Widget");
    assert_eq!(
        unyaml(&Any {
            yaml: extension(widget, "x-kubernetes-group-version-kind").unwrap()
        }),
        json!([{"group": "example.com", "version": "v1", "kind": "Widget"}])
    );
    let widget_spec = widget
        .properties
        .as_ref()
        .unwrap()
        .additional_properties
        .iter()
        .find(|p| p.name == "spec")
        .and_then(|p| p.value.clone())
        .unwrap();
    assert_eq!(widget_spec.description, "What the widget should be.");
    assert_eq!(widget_spec.required, vec!["size"]);
    let property = |name: &str| {
        widget_spec
            .properties
            .as_ref()
            .unwrap()
            .additional_properties
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.value.clone())
            .unwrap()
    };
    let size = property("size");
    assert_eq!(
        (
            size.description.as_str(),
            size.format.as_str(),
            size.minimum
        ),
        ("How big the widget is.", "int32", 1.0)
    );
    assert_eq!(size.r#type.unwrap().value, vec!["integer"]);
    assert_eq!(property("color").default.unwrap().yaml, "blue\n");
    assert_eq!(
        extension(&property("parts"), "x-kubernetes-list-type").as_deref(),
        Some("map\n")
    );
    assert_eq!(
        extension(&property("parts"), "x-kubernetes-list-map-keys").as_deref(),
        Some("[\"name\"]\n")
    );
    assert!(
        matches!(property("labels").additional_properties.and_then(|a| a.oneof), Some(additional_properties_item::Oneof::Schema(s)) if s.r#type.as_ref().map(|t| t.value.clone()) == Some(vec!["string".to_owned()]))
    );
    assert_eq!(
        extension(&property("port"), "x-kubernetes-int-or-string").as_deref(),
        Some("true\n")
    );

    // Paths: operations with their parameters, responses and extensions.
    let paths = &document.paths.as_ref().unwrap().path;
    assert_eq!(paths.len(), json["paths"].as_object().unwrap().len());
    let item = paths
        .iter()
        .find(|p| p.name == "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}")
        .and_then(|p| p.value.as_ref())
        .unwrap();
    let patch = item.patch.as_ref().unwrap();
    assert_eq!(patch.operation_id, "patchWidgetv1");
    assert!(
        !patch
            .consumes
            .contains(&"application/strategic-merge-patch+json".to_owned())
    );
    assert_eq!(
        extension(
            &Schema {
                vendor_extension: patch.vendor_extension.clone(),
                ..Default::default()
            },
            "x-kubernetes-action"
        )
        .as_deref(),
        Some("patch\n")
    );
    let query: Vec<&str> = patch
        .parameters
        .iter()
        .filter_map(|p| match non_body(p) {
            Some(non_body_parameter::Oneof::QueryParameterSubSchema(q)) => Some(q.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        query,
        vec![
            "pretty",
            "dryRun",
            "fieldManager",
            "fieldValidation",
            "force"
        ]
    );
    assert!(
        matches!(non_body(&item.parameters[1]), Some(non_body_parameter::Oneof::PathParameterSubSchema(p)) if p.name == "name" && p.required)
    );
    let ok = patch
        .responses
        .as_ref()
        .unwrap()
        .response_code
        .iter()
        .find(|r| r.name == "200")
        .and_then(|r| r.value.clone())
        .unwrap();
    let Some(response_value::Oneof::Response(ok)) = ok.oneof else {
        panic!("200 is a response")
    };
    assert!(
        matches!(ok.schema, Some(SchemaItem { oneof: Some(schema_item::Oneof::Schema(s)) }) if s.xref == "#/definitions/com.example.v1.Widget")
    );
}

/// Bytes worked out by hand from gnostic's `OpenAPIv2.proto` field numbers, for a fragment
/// gnostic encodes the same way (fields in number order, strings as YAML plain scalars).
#[test]
fn encodes_a_known_gnostic_fragment() {
    let fragment = json!({"definitions": {"a": {"description": "d", "type": "string", "x-kubernetes-patch-strategy": "merge"}}});
    let bytes = encode(&fragment).unwrap();
    let schema: &[u8] = &[
        0x22, 0x01, b'd', // description = 4
        0xB2, 0x01, 0x08, 0x0A, 0x06, b's', b't', b'r', b'i', b'n',
        b'g', // type = 22: TypeItem.value = 1
        0xFA, 0x01, 0x27, // vendor_extension = 31: NamedAny (39 bytes)
        0x0A, 0x1B, // name = 1 (27 bytes)
    ];
    let mut expected = Vec::new();
    expected.extend_from_slice(schema);
    expected.extend_from_slice(b"x-kubernetes-patch-strategy");
    expected.extend_from_slice(&[0x12, 0x08, 0x12, 0x06]); // value = 2: Any.yaml = 2 (6 bytes)
    expected.extend_from_slice(b"merge\n");
    let named = [
        &[
            0x0A,
            0x01,
            b'a',
            0x12,
            u8::try_from(expected.len()).unwrap(),
        ][..],
        &expected,
    ]
    .concat(); // NamedSchema: name = 1, value = 2
    let definitions = [&[0x0A, u8::try_from(named.len()).unwrap()][..], &named].concat(); // Definitions.additional_properties = 1
    let document = [
        &[0x4A, u8::try_from(definitions.len()).unwrap()][..],
        &definitions,
    ]
    .concat(); // Document.definitions = 9
    assert_eq!(bytes, document);
}

#[test]
fn yaml_is_plain_only_where_yaml_reads_it_back_unchanged() {
    assert_eq!(yaml(&json!("merge")), "merge\n");
    assert_eq!(yaml(&json!("retainKeys,merge")), "retainKeys,merge\n");
    assert_eq!(yaml(&json!("true")), "\"true\"\n");
    assert_eq!(yaml(&json!("")), "\"\"\n");
    assert_eq!(yaml(&json!("1.0")), "\"1.0\"\n");
    assert_eq!(
        yaml(&json!([{"group": "", "kind": "Pod"}])),
        "[{\"group\":\"\",\"kind\":\"Pod\"}]\n"
    );
    for value in [
        json!("no"),
        json!("a: b"),
        json!(3),
        json!(null),
        json!({"k": ["v", 1]}),
    ] {
        assert_eq!(
            serde_saphyr::from_str::<Value>(&yaml(&value)).unwrap(),
            value,
            "{value}"
        );
    }
}

#[test]
fn bad_input_is_an_error_naming_where() {
    let error =
        encode(&json!({"definitions": {"a/b": {"properties": {"x": {"maxLength": "ten"}}}}}))
            .unwrap_err();
    assert!(
        error.contains("/definitions/a~1b/properties/x/maxLength") && error.contains("an integer"),
        "{error}"
    );
    assert!(encode(&json!([])).is_err());
    assert!(
        encode(&json!({"paths": {"/x": {"get": {"parameters": [{"in": "cookie"}]}}}}))
            .unwrap_err()
            .contains("/paths/~1x/get/parameters/0/in")
    );
}
