//! The gnostic `openapi_v2` messages, written after gnostic's `openapiv2/OpenAPIv2.proto` (same
//! field numbers), for the subset of Swagger 2.0 the server's documents use.

use prost::Message;

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
