//! The OpenAPI v2 document as gnostic protobuf (`openapi_v2.Document`, what kube-apiserver serves
//! for `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`), converted from the
//! JSON document so the two never disagree.
//!
//! The messages are written by hand after gnostic's `openapiv2/OpenAPIv2.proto` (same field
//! numbers), for the subset of Swagger 2.0 the server's documents use. Like gnostic, vendor
//! extensions (`x-…`) are `NamedAny` whose `Any.yaml` holds the value as YAML; keys that are
//! not Swagger 2.0 (OpenAPI v3 keywords in CRD schemas such as `anyOf` or `nullable`) are
//! dropped, as kube-apiserver's v2 conversion of CRD schemas does. A key of the wrong JSON type
//! is an error naming where it is.

use prost::Message;
use serde_json::{Map, Value};

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Document {
    #[prost(string, tag = "1")]
    pub(crate) swagger: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) info: Option<Info>,
    #[prost(string, tag = "3")]
    pub(crate) host: String,
    #[prost(string, tag = "4")]
    pub(crate) base_path: String,
    #[prost(string, repeated, tag = "5")]
    pub(crate) schemes: Vec<String>,
    #[prost(string, repeated, tag = "6")]
    pub(crate) consumes: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub(crate) produces: Vec<String>,
    #[prost(message, optional, tag = "8")]
    pub(crate) paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    pub(crate) definitions: Option<Definitions>,
    #[prost(message, repeated, tag = "16")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Info {
    #[prost(string, tag = "1")]
    pub(crate) title: String,
    #[prost(string, tag = "2")]
    pub(crate) version: String,
    #[prost(string, tag = "3")]
    pub(crate) description: String,
    #[prost(message, repeated, tag = "7")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Any {
    #[prost(string, tag = "2")]
    pub(crate) yaml: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedAny {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<Any>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Paths {
    #[prost(message, repeated, tag = "1")]
    pub(crate) vendor_extension: Vec<NamedAny>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedPathItem {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<PathItem>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct PathItem {
    #[prost(string, tag = "1")]
    pub(crate) xref: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    pub(crate) put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    pub(crate) post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    pub(crate) delete: Option<Operation>,
    #[prost(message, optional, tag = "6")]
    pub(crate) options: Option<Operation>,
    #[prost(message, optional, tag = "7")]
    pub(crate) head: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    pub(crate) patch: Option<Operation>,
    #[prost(message, repeated, tag = "9")]
    pub(crate) parameters: Vec<ParametersItem>,
    #[prost(message, repeated, tag = "10")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Operation {
    #[prost(string, repeated, tag = "1")]
    pub(crate) tags: Vec<String>,
    #[prost(string, tag = "2")]
    pub(crate) summary: String,
    #[prost(string, tag = "3")]
    pub(crate) description: String,
    #[prost(string, tag = "5")]
    pub(crate) operation_id: String,
    #[prost(string, repeated, tag = "6")]
    pub(crate) produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub(crate) consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    pub(crate) parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    pub(crate) responses: Option<Responses>,
    #[prost(string, repeated, tag = "10")]
    pub(crate) schemes: Vec<String>,
    #[prost(bool, tag = "11")]
    pub(crate) deprecated: bool,
    #[prost(message, repeated, tag = "13")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct JsonReference {
    #[prost(string, tag = "1")]
    pub(crate) xref: String,
    #[prost(string, tag = "2")]
    pub(crate) description: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ParametersItem {
    #[prost(oneof = "parameters_item::Oneof", tags = "1, 2")]
    pub(crate) oneof: Option<parameters_item::Oneof>,
}

pub(crate) mod parameters_item {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Oneof {
        #[prost(message, tag = "1")]
        Parameter(Box<super::Parameter>),
        #[prost(message, tag = "2")]
        JsonReference(super::JsonReference),
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Parameter {
    #[prost(oneof = "parameter::Oneof", tags = "1, 2")]
    pub(crate) oneof: Option<parameter::Oneof>,
}

pub(crate) mod parameter {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Oneof {
        #[prost(message, tag = "1")]
        BodyParameter(super::BodyParameter),
        #[prost(message, tag = "2")]
        NonBodyParameter(super::NonBodyParameter),
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct BodyParameter {
    #[prost(string, tag = "1")]
    pub(crate) description: String,
    #[prost(string, tag = "2")]
    pub(crate) name: String,
    #[prost(string, tag = "3")]
    pub(crate) r#in: String,
    #[prost(bool, tag = "4")]
    pub(crate) required: bool,
    #[prost(message, optional, tag = "5")]
    pub(crate) schema: Option<Schema>,
    #[prost(message, repeated, tag = "6")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NonBodyParameter {
    #[prost(oneof = "non_body_parameter::Oneof", tags = "1, 2, 3, 4")]
    pub(crate) oneof: Option<non_body_parameter::Oneof>,
}

pub(crate) mod non_body_parameter {
    #[derive(Clone, PartialEq, prost::Oneof)]
    #[expect(clippy::enum_variant_names, reason = "gnostic's message names")]
    pub(crate) enum Oneof {
        /// `HeaderParameterSubSchema`: numbered as the path one.
        #[prost(message, tag = "1")]
        HeaderParameterSubSchema(super::PathParameterSubSchema),
        /// `FormDataParameterSubSchema`: numbered as the query one.
        #[prost(message, tag = "2")]
        FormDataParameterSubSchema(super::QueryParameterSubSchema),
        #[prost(message, tag = "3")]
        QueryParameterSubSchema(super::QueryParameterSubSchema),
        #[prost(message, tag = "4")]
        PathParameterSubSchema(super::PathParameterSubSchema),
    }
}

/// gnostic's `QueryParameterSubSchema` (and `FormDataParameterSubSchema`, numbered alike).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct QueryParameterSubSchema {
    #[prost(bool, tag = "1")]
    pub(crate) required: bool,
    #[prost(string, tag = "2")]
    pub(crate) r#in: String,
    #[prost(string, tag = "3")]
    pub(crate) description: String,
    #[prost(string, tag = "4")]
    pub(crate) name: String,
    #[prost(bool, tag = "5")]
    pub(crate) allow_empty_value: bool,
    #[prost(string, tag = "6")]
    pub(crate) r#type: String,
    #[prost(string, tag = "7")]
    pub(crate) format: String,
    #[prost(message, optional, tag = "8")]
    pub(crate) items: Option<PrimitivesItems>,
    #[prost(string, tag = "9")]
    pub(crate) collection_format: String,
    #[prost(message, optional, tag = "10")]
    pub(crate) default: Option<Any>,
    #[prost(bool, tag = "20")]
    pub(crate) unique_items: bool,
    #[prost(message, repeated, tag = "21")]
    pub(crate) r#enum: Vec<Any>,
    #[prost(message, repeated, tag = "23")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

/// gnostic's `PathParameterSubSchema` (and `HeaderParameterSubSchema`, numbered alike).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct PathParameterSubSchema {
    #[prost(bool, tag = "1")]
    pub(crate) required: bool,
    #[prost(string, tag = "2")]
    pub(crate) r#in: String,
    #[prost(string, tag = "3")]
    pub(crate) description: String,
    #[prost(string, tag = "4")]
    pub(crate) name: String,
    #[prost(string, tag = "5")]
    pub(crate) r#type: String,
    #[prost(string, tag = "6")]
    pub(crate) format: String,
    #[prost(message, optional, tag = "7")]
    pub(crate) items: Option<PrimitivesItems>,
    #[prost(string, tag = "8")]
    pub(crate) collection_format: String,
    #[prost(message, optional, tag = "9")]
    pub(crate) default: Option<Any>,
    #[prost(bool, tag = "19")]
    pub(crate) unique_items: bool,
    #[prost(message, repeated, tag = "20")]
    pub(crate) r#enum: Vec<Any>,
    #[prost(message, repeated, tag = "22")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct PrimitivesItems {
    #[prost(string, tag = "1")]
    pub(crate) r#type: String,
    #[prost(string, tag = "2")]
    pub(crate) format: String,
    #[prost(message, optional, boxed, tag = "3")]
    pub(crate) items: Option<Box<PrimitivesItems>>,
    #[prost(string, tag = "4")]
    pub(crate) collection_format: String,
    #[prost(message, optional, tag = "5")]
    pub(crate) default: Option<Any>,
    #[prost(bool, tag = "15")]
    pub(crate) unique_items: bool,
    #[prost(message, repeated, tag = "16")]
    pub(crate) r#enum: Vec<Any>,
    #[prost(message, repeated, tag = "18")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Responses {
    #[prost(message, repeated, tag = "1")]
    pub(crate) response_code: Vec<NamedResponseValue>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedResponseValue {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<ResponseValue>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ResponseValue {
    #[prost(oneof = "response_value::Oneof", tags = "1, 2")]
    pub(crate) oneof: Option<response_value::Oneof>,
}

pub(crate) mod response_value {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Oneof {
        #[prost(message, tag = "1")]
        Response(Box<super::Response>),
        #[prost(message, tag = "2")]
        JsonReference(super::JsonReference),
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Response {
    #[prost(string, tag = "1")]
    pub(crate) description: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) schema: Option<SchemaItem>,
    #[prost(message, repeated, tag = "5")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct SchemaItem {
    #[prost(oneof = "schema_item::Oneof", tags = "1")]
    pub(crate) oneof: Option<schema_item::Oneof>,
}

pub(crate) mod schema_item {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Oneof {
        #[prost(message, tag = "1")]
        Schema(super::Schema),
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Definitions {
    #[prost(message, repeated, tag = "1")]
    pub(crate) additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedSchema {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Schema {
    #[prost(string, tag = "1")]
    pub(crate) xref: String,
    #[prost(string, tag = "2")]
    pub(crate) format: String,
    #[prost(string, tag = "3")]
    pub(crate) title: String,
    #[prost(string, tag = "4")]
    pub(crate) description: String,
    #[prost(message, optional, tag = "5")]
    pub(crate) default: Option<Any>,
    #[prost(double, tag = "6")]
    pub(crate) multiple_of: f64,
    #[prost(double, tag = "7")]
    pub(crate) maximum: f64,
    #[prost(bool, tag = "8")]
    pub(crate) exclusive_maximum: bool,
    #[prost(double, tag = "9")]
    pub(crate) minimum: f64,
    #[prost(bool, tag = "10")]
    pub(crate) exclusive_minimum: bool,
    #[prost(int64, tag = "11")]
    pub(crate) max_length: i64,
    #[prost(int64, tag = "12")]
    pub(crate) min_length: i64,
    #[prost(string, tag = "13")]
    pub(crate) pattern: String,
    #[prost(int64, tag = "14")]
    pub(crate) max_items: i64,
    #[prost(int64, tag = "15")]
    pub(crate) min_items: i64,
    #[prost(bool, tag = "16")]
    pub(crate) unique_items: bool,
    #[prost(int64, tag = "17")]
    pub(crate) max_properties: i64,
    #[prost(int64, tag = "18")]
    pub(crate) min_properties: i64,
    #[prost(string, repeated, tag = "19")]
    pub(crate) required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    pub(crate) r#enum: Vec<Any>,
    #[prost(message, optional, tag = "21")]
    pub(crate) additional_properties: Option<AdditionalPropertiesItem>,
    #[prost(message, optional, tag = "22")]
    pub(crate) r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    pub(crate) items: Option<ItemsItem>,
    #[prost(message, repeated, tag = "24")]
    pub(crate) all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    pub(crate) properties: Option<Properties>,
    #[prost(string, tag = "26")]
    pub(crate) discriminator: String,
    #[prost(bool, tag = "27")]
    pub(crate) read_only: bool,
    #[prost(message, optional, tag = "30")]
    pub(crate) example: Option<Any>,
    #[prost(message, repeated, tag = "31")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct AdditionalPropertiesItem {
    #[prost(oneof = "additional_properties_item::Oneof", tags = "1, 2")]
    pub(crate) oneof: Option<additional_properties_item::Oneof>,
}

pub(crate) mod additional_properties_item {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Oneof {
        #[prost(message, tag = "1")]
        Schema(Box<super::Schema>),
        #[prost(bool, tag = "2")]
        Boolean(bool),
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    pub(crate) value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    pub(crate) schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Properties {
    #[prost(message, repeated, tag = "1")]
    pub(crate) additional_properties: Vec<NamedSchema>,
}

/// The JSON document (`/openapi/v2`) encoded as gnostic protobuf.
pub(crate) fn encode(document: &Value) -> Result<Vec<u8>, String> {
    Ok(convert(document)?.encode_to_vec())
}

/// The JSON document as a gnostic `Document`.
pub(crate) fn convert(document: &Value) -> Result<Document, String> {
    let at = Path::root();
    let map = object(document, &at)?;
    let info = match map.get("info") {
        Some(value) => {
            let at = at.key("info");
            let info = object(value, &at)?;
            Some(Info {
                title: string(info, "title", &at)?,
                version: string(info, "version", &at)?,
                description: string(info, "description", &at)?,
                vendor_extension: extensions(info),
            })
        }
        None => None,
    };
    let paths = match map.get("paths") {
        Some(value) => {
            let at = at.key("paths");
            let paths = object(value, &at)?;
            let mut out = Vec::new();
            for (name, item) in paths.iter().filter(|(k, _)| k.starts_with('/')) {
                out.push(NamedPathItem {
                    name: name.clone(),
                    value: Some(path_item(item, &at.key(name))?),
                });
            }
            Some(Paths {
                vendor_extension: extensions(paths),
                path: out,
            })
        }
        None => None,
    };
    let definitions = match map.get("definitions") {
        Some(value) => {
            let at = at.key("definitions");
            let mut out = Vec::new();
            for (name, def) in object(value, &at)? {
                out.push(NamedSchema {
                    name: name.clone(),
                    value: Some(schema(def, &at.key(name))?),
                });
            }
            Some(Definitions {
                additional_properties: out,
            })
        }
        None => None,
    };
    Ok(Document {
        swagger: string(map, "swagger", &at)?,
        info,
        host: string(map, "host", &at)?,
        base_path: string(map, "basePath", &at)?,
        schemes: strings(map, "schemes", &at)?,
        consumes: strings(map, "consumes", &at)?,
        produces: strings(map, "produces", &at)?,
        paths,
        definitions,
        vendor_extension: extensions(map),
    })
}

/// Where a value sits in the document, for error messages (a JSON pointer).
#[derive(Clone)]
struct Path(String);

impl Path {
    fn root() -> Self {
        Path(String::new())
    }

    fn key(&self, key: &str) -> Self {
        Path(format!(
            "{}/{}",
            self.0,
            key.replace('~', "~0").replace('/', "~1")
        ))
    }

    fn index(&self, index: usize) -> Self {
        Path(format!("{}/{index}", self.0))
    }

    fn wrong(&self, expected: &str, found: &Value) -> String {
        let at = if self.0.is_empty() { "/" } else { &self.0 };
        format!("OpenAPI v2 document at {at}: expected {expected}, found {found}")
    }
}

fn object<'a>(value: &'a Value, at: &Path) -> Result<&'a Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| at.wrong("an object", value))
}

fn string(map: &Map<String, Value>, key: &str, at: &Path) -> Result<String, String> {
    match map.get(key) {
        None => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(other) => Err(at.key(key).wrong("a string", other)),
    }
}

fn boolean(map: &Map<String, Value>, key: &str, at: &Path) -> Result<bool, String> {
    match map.get(key) {
        None => Ok(false),
        Some(Value::Bool(flag)) => Ok(*flag),
        Some(other) => Err(at.key(key).wrong("a boolean", other)),
    }
}

fn number(map: &Map<String, Value>, key: &str, at: &Path) -> Result<f64, String> {
    match map.get(key) {
        None => Ok(0.0),
        Some(value) => value
            .as_f64()
            .ok_or_else(|| at.key(key).wrong("a number", value)),
    }
}

fn integer(map: &Map<String, Value>, key: &str, at: &Path) -> Result<i64, String> {
    match map.get(key) {
        None => Ok(0),
        Some(value) => value
            .as_i64()
            .ok_or_else(|| at.key(key).wrong("an integer", value)),
    }
}

fn strings(map: &Map<String, Value>, key: &str, at: &Path) -> Result<Vec<String>, String> {
    match map.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| at.key(key).index(i).wrong("a string", item))
            })
            .collect(),
        Some(other) => Err(at.key(key).wrong("an array of strings", other)),
    }
}

fn any(map: &Map<String, Value>, key: &str) -> Option<Any> {
    map.get(key).map(|value| Any { yaml: yaml(value) })
}

fn anys(map: &Map<String, Value>, key: &str, at: &Path) -> Result<Vec<Any>, String> {
    match map.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            Ok(items.iter().map(|item| Any { yaml: yaml(item) }).collect())
        }
        Some(other) => Err(at.key(key).wrong("an array", other)),
    }
}

/// The `x-` keys of `map`, in order, as gnostic carries them.
fn extensions(map: &Map<String, Value>) -> Vec<NamedAny> {
    map.iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny {
            name: k.clone(),
            value: Some(Any { yaml: yaml(v) }),
        })
        .collect()
}

/// `value` as YAML text, as gnostic's `Any.yaml` holds it. Strings that YAML reads back
/// unchanged without quotes are written plain (`merge\n`, as gnostic writes them); any other
/// value is written as JSON, which is YAML (flow style) that every YAML reader accepts.
pub(crate) fn yaml(value: &Value) -> String {
    let plain = |text: &str| {
        const SPECIAL: &[&str] = &["y", "n", "yes", "no", "on", "off", "true", "false", "null"];
        text.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ','))
            && !SPECIAL.contains(&text.to_ascii_lowercase().as_str())
    };
    match value {
        Value::String(text) if plain(text) => format!("{text}\n"),
        other => format!("{other}\n"),
    }
}

fn path_item(value: &Value, at: &Path) -> Result<PathItem, String> {
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

fn operation(value: &Value, at: &Path) -> Result<Operation, String> {
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

fn response_value(value: &Value, at: &Path) -> Result<ResponseValue, String> {
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

fn parameters(map: &Map<String, Value>, at: &Path) -> Result<Vec<ParametersItem>, String> {
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

fn parameters_item(value: &Value, at: &Path) -> Result<ParametersItem, String> {
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

fn primitives_items(value: &Value, at: &Path) -> Result<PrimitivesItems, String> {
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

fn named_schemas(value: &Value, at: &Path) -> Result<Vec<NamedSchema>, String> {
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
fn schema(value: &Value, at: &Path) -> Result<Schema, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

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
                Some(non_body_parameter::Oneof::QueryParameterSubSchema(q)) => {
                    Some(q.name.as_str())
                }
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
            error.contains("/definitions/a~1b/properties/x/maxLength")
                && error.contains("an integer"),
            "{error}"
        );
        assert!(encode(&json!([])).is_err());
        assert!(
            encode(&json!({"paths": {"/x": {"get": {"parameters": [{"in": "cookie"}]}}}}))
                .unwrap_err()
                .contains("/paths/~1x/get/parameters/0/in")
        );
    }
}
