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

mod convert;
mod json;
mod messages;
#[cfg(test)]
mod tests;

use prost::Message;
use serde_json::Value;

pub(crate) use convert::check_schema;
use convert::{path_item, schema};
use json::{Path, extensions, object, string, strings};
use messages::{Definitions, Document, Info, NamedPathItem, NamedSchema, Paths};
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
