//! The conversion of each part of the JSON document (path items, operations, parameters,
//! responses, schemas) into its gnostic message.

use serde_json::{Map, Value};

use super::json::{Path, any, anys, boolean, extensions, integer, number, object, string, strings};
use super::messages::*;

pub(super) fn path_item(value: &Value, at: &Path) -> Result<PathItem, String> {
    let map = object(value, at)?;
    let op = |key: &str| map.get(key).map(|v| operation(v, &at.key(key))).transpose();
    Ok(PathItem {
        xref: string(map, "$ref", at)?,
        get: op("get")?,
        put: op("put")?,
        post: op("post")?,
        delete: op("delete")?,
        options: op("options")?,
        head: op("head")?,
        patch: op("patch")?,
        parameters: parameters(map, at)?,
        vendor_extension: extensions(map),
    })
}

pub(super) fn operation(value: &Value, at: &Path) -> Result<Operation, String> {
    let map = object(value, at)?;
    let responses = match map.get("responses") {
        Some(value) => {
            let at = at.key("responses");
            let codes = object(value, &at)?;
            let mut out = Vec::new();
            for (code, response) in codes.iter().filter(|(k, _)| !k.starts_with("x-")) {
                out.push(NamedResponseValue {
                    name: code.clone(),
                    value: Some(response_value(response, &at.key(code))?),
                });
            }
            Some(Responses {
                response_code: out,
                vendor_extension: extensions(codes),
            })
        }
        None => None,
    };
    Ok(Operation {
        tags: strings(map, "tags", at)?,
        summary: string(map, "summary", at)?,
        description: string(map, "description", at)?,
        operation_id: string(map, "operationId", at)?,
        produces: strings(map, "produces", at)?,
        consumes: strings(map, "consumes", at)?,
        parameters: parameters(map, at)?,
        responses,
        schemes: strings(map, "schemes", at)?,
        deprecated: boolean(map, "deprecated", at)?,
        vendor_extension: extensions(map),
    })
}

pub(super) fn response_value(value: &Value, at: &Path) -> Result<ResponseValue, String> {
    let map = object(value, at)?;
    if map.contains_key("$ref") {
        let reference = JsonReference {
            xref: string(map, "$ref", at)?,
            description: string(map, "description", at)?,
        };
        return Ok(ResponseValue {
            oneof: Some(response_value::Oneof::JsonReference(reference)),
        });
    }
    let schema = map
        .get("schema")
        .map(|s| schema(s, &at.key("schema")))
        .transpose()?;
    let response = Response {
        description: string(map, "description", at)?,
        schema: schema.map(|s| SchemaItem {
            oneof: Some(schema_item::Oneof::Schema(s)),
        }),
        vendor_extension: extensions(map),
    };
    Ok(ResponseValue {
        oneof: Some(response_value::Oneof::Response(Box::new(response))),
    })
}

pub(super) fn parameters(
    map: &Map<String, Value>,
    at: &Path,
) -> Result<Vec<ParametersItem>, String> {
    let Some(value) = map.get("parameters") else {
        return Ok(Vec::new());
    };
    let at = at.key("parameters");
    let Value::Array(items) = value else {
        return Err(at.wrong("an array", value));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| parameters_item(item, &at.index(i)))
        .collect()
}

pub(super) fn parameters_item(value: &Value, at: &Path) -> Result<ParametersItem, String> {
    use non_body_parameter::Oneof as NonBody;
    let map = object(value, at)?;
    if map.contains_key("$ref") {
        let reference = JsonReference {
            xref: string(map, "$ref", at)?,
            description: string(map, "description", at)?,
        };
        return Ok(ParametersItem {
            oneof: Some(parameters_item::Oneof::JsonReference(reference)),
        });
    }
    let location = string(map, "in", at)?;
    let parameter = match location.as_str() {
        "body" => parameter::Oneof::BodyParameter(BodyParameter {
            description: string(map, "description", at)?,
            name: string(map, "name", at)?,
            r#in: location,
            required: boolean(map, "required", at)?,
            schema: map
                .get("schema")
                .map(|s| schema(s, &at.key("schema")))
                .transpose()?,
            vendor_extension: extensions(map),
        }),
        "query" | "formData" => {
            let sub = QueryParameterSubSchema {
                required: boolean(map, "required", at)?,
                r#in: location.clone(),
                description: string(map, "description", at)?,
                name: string(map, "name", at)?,
                allow_empty_value: boolean(map, "allowEmptyValue", at)?,
                r#type: string(map, "type", at)?,
                format: string(map, "format", at)?,
                items: map
                    .get("items")
                    .map(|i| primitives_items(i, &at.key("items")))
                    .transpose()?,
                collection_format: string(map, "collectionFormat", at)?,
                default: any(map, "default"),
                unique_items: boolean(map, "uniqueItems", at)?,
                r#enum: anys(map, "enum", at)?,
                vendor_extension: extensions(map),
            };
            let oneof = if location == "query" {
                NonBody::QueryParameterSubSchema(sub)
            } else {
                NonBody::FormDataParameterSubSchema(sub)
            };
            parameter::Oneof::NonBodyParameter(NonBodyParameter { oneof: Some(oneof) })
        }
        "path" | "header" => {
            let sub = PathParameterSubSchema {
                required: boolean(map, "required", at)?,
                r#in: location.clone(),
                description: string(map, "description", at)?,
                name: string(map, "name", at)?,
                r#type: string(map, "type", at)?,
                format: string(map, "format", at)?,
                items: map
                    .get("items")
                    .map(|i| primitives_items(i, &at.key("items")))
                    .transpose()?,
                collection_format: string(map, "collectionFormat", at)?,
                default: any(map, "default"),
                unique_items: boolean(map, "uniqueItems", at)?,
                r#enum: anys(map, "enum", at)?,
                vendor_extension: extensions(map),
            };
            let oneof = if location == "path" {
                NonBody::PathParameterSubSchema(sub)
            } else {
                NonBody::HeaderParameterSubSchema(sub)
            };
            parameter::Oneof::NonBodyParameter(NonBodyParameter { oneof: Some(oneof) })
        }
        other => {
            return Err(at.key("in").wrong(
                "body, query, formData, path or header",
                &Value::String(other.to_owned()),
            ));
        }
    };
    Ok(ParametersItem {
        oneof: Some(parameters_item::Oneof::Parameter(Box::new(Parameter {
            oneof: Some(parameter),
        }))),
    })
}

pub(super) fn primitives_items(value: &Value, at: &Path) -> Result<PrimitivesItems, String> {
    let map = object(value, at)?;
    Ok(PrimitivesItems {
        r#type: string(map, "type", at)?,
        format: string(map, "format", at)?,
        items: map
            .get("items")
            .map(|i| primitives_items(i, &at.key("items")).map(Box::new))
            .transpose()?,
        collection_format: string(map, "collectionFormat", at)?,
        default: any(map, "default"),
        unique_items: boolean(map, "uniqueItems", at)?,
        r#enum: anys(map, "enum", at)?,
        vendor_extension: extensions(map),
    })
}

pub(super) fn named_schemas(value: &Value, at: &Path) -> Result<Vec<NamedSchema>, String> {
    let mut out = Vec::new();
    for (name, property) in object(value, at)? {
        out.push(NamedSchema {
            name: name.clone(),
            value: Some(schema(property, &at.key(name))?),
        });
    }
    Ok(out)
}

/// Whether `value` converts to gnostic's `Schema`; the error names where it does not.
pub(crate) fn check_schema(value: &Value) -> Result<(), String> {
    schema(value, &Path::root()).map(|_| ())
}

/// A JSON schema as gnostic's `Schema`.
pub(super) fn schema(value: &Value, at: &Path) -> Result<Schema, String> {
    let map = object(value, at)?;
    let r#type = match map.get("type") {
        None => None,
        Some(Value::String(single)) => Some(TypeItem {
            value: vec![single.clone()],
        }),
        Some(Value::Array(_)) => Some(TypeItem {
            value: strings(map, "type", at)?,
        }),
        Some(other) => {
            return Err(at
                .key("type")
                .wrong("a string or an array of strings", other));
        }
    };
    let items = match map.get("items") {
        None => None,
        Some(Value::Array(list)) => {
            let at = at.key("items");
            Some(ItemsItem {
                schema: list
                    .iter()
                    .enumerate()
                    .map(|(i, s)| schema(s, &at.index(i)))
                    .collect::<Result<_, _>>()?,
            })
        }
        Some(single) => Some(ItemsItem {
            schema: vec![schema(single, &at.key("items"))?],
        }),
    };
    let additional_properties = match map.get("additionalProperties") {
        None => None,
        Some(Value::Bool(flag)) => Some(AdditionalPropertiesItem {
            oneof: Some(additional_properties_item::Oneof::Boolean(*flag)),
        }),
        Some(other) => {
            let sub = schema(other, &at.key("additionalProperties"))?;
            Some(AdditionalPropertiesItem {
                oneof: Some(additional_properties_item::Oneof::Schema(Box::new(sub))),
            })
        }
    };
    let all_of = match map.get("allOf") {
        None => Vec::new(),
        Some(Value::Array(list)) => {
            let at = at.key("allOf");
            list.iter()
                .enumerate()
                .map(|(i, s)| schema(s, &at.index(i)))
                .collect::<Result<_, _>>()?
        }
        Some(other) => return Err(at.key("allOf").wrong("an array of schemas", other)),
    };
    let properties = map
        .get("properties")
        .map(|p| named_schemas(p, &at.key("properties")))
        .transpose()?;
    Ok(Schema {
        xref: string(map, "$ref", at)?,
        format: string(map, "format", at)?,
        title: string(map, "title", at)?,
        description: string(map, "description", at)?,
        default: any(map, "default"),
        multiple_of: number(map, "multipleOf", at)?,
        maximum: number(map, "maximum", at)?,
        exclusive_maximum: boolean(map, "exclusiveMaximum", at)?,
        minimum: number(map, "minimum", at)?,
        exclusive_minimum: boolean(map, "exclusiveMinimum", at)?,
        max_length: integer(map, "maxLength", at)?,
        min_length: integer(map, "minLength", at)?,
        pattern: string(map, "pattern", at)?,
        max_items: integer(map, "maxItems", at)?,
        min_items: integer(map, "minItems", at)?,
        unique_items: boolean(map, "uniqueItems", at)?,
        max_properties: integer(map, "maxProperties", at)?,
        min_properties: integer(map, "minProperties", at)?,
        required: strings(map, "required", at)?,
        r#enum: anys(map, "enum", at)?,
        additional_properties,
        r#type,
        items,
        all_of,
        properties: properties.map(|p| Properties {
            additional_properties: p,
        }),
        discriminator: string(map, "discriminator", at)?,
        read_only: boolean(map, "readOnly", at)?,
        example: any(map, "example"),
        vendor_extension: extensions(map),
    })
}
