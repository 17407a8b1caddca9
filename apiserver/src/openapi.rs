//! OpenAPI documents: v3 (`/openapi/v3` index and one document per group/version) and v2
//! (`/openapi/v2`, JSON or gnostic protobuf, see [`crate::gnostic`]), built from k8s-openapi's schemas for built-in kinds and from CRD
//! schemas for custom resources. Every kind's schema carries
//! `x-kubernetes-group-version-kind`; every write operation declares the `fieldValidation`,
//! `fieldManager` and `dryRun` query parameters, which is what `kubectl apply` and
//! `kubectl explain` look for.

use std::sync::Arc;

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::discovery::KUBERNETES_VERSION;
use crate::registry::{Registry, Resource};
use crate::types;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    V2,
    V3,
}

impl Flavor {
    fn ref_prefix(self) -> &'static str {
        match self {
            Flavor::V2 => "#/definitions/",
            Flavor::V3 => "#/components/schemas/",
        }
    }
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

fn custom_name(resource: &Resource) -> String {
    let reversed: Vec<&str> = resource.group.split('.').rev().collect();
    format!(
        "{}.{}.{}",
        reversed.join("."),
        resource.version,
        resource.kind
    )
}

/// Each resource with the name of its schema definition.
type Named = Vec<(Arc<Resource>, String)>;

/// Definitions for `resources`, and each resource's definition name.
fn definitions(resources: &[Arc<Resource>], flavor: Flavor) -> (Map<String, Value>, Named) {
    let settings = match flavor {
        Flavor::V2 => SchemaSettings::draft07(),
        Flavor::V3 => SchemaSettings::openapi3(),
    };
    let mut generator = settings.into_generator();
    let meta_name = {
        use schemars::JsonSchema;
        generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>();
        generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>();
        generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions>();
        k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta::schema_name().into_owned()
    };
    let scale_name = types::schema("autoscaling", "Scale", &mut generator).unwrap_or_default();
    let mut names = Vec::new();
    let mut custom = Vec::new();
    for resource in resources {
        match types::schema(&resource.group, &resource.kind, &mut generator) {
            Some(name) if resource.schema.is_none() => names.push((resource.clone(), name)),
            _ => {
                let name = custom_name(resource);
                let mut schema = resource.schema.as_deref().cloned().unwrap_or_else(
                    || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                );
                if !schema.is_object() {
                    schema = json!({"type": "object"});
                }
                schema["type"] = json!("object");
                if !schema.get("properties").is_some_and(Value::is_object) {
                    schema["properties"] = json!({});
                }
                schema["properties"]["apiVersion"] = json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."});
                schema["properties"]["kind"] = json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."});
                schema["properties"]["metadata"] = json!({"$ref": format!("{}{meta_name}", flavor.ref_prefix()), "description": "Standard object's metadata."});
                if flavor == Flavor::V2
                    && let Err(error) = crate::gnostic::check_schema(&schema)
                {
                    // Like kube-apiserver, a schema that cannot be published does not take the
                    // document down: the kind is published without its schema.
                    tracing::warn!(kind = %name, %error, "publishing a CRD schema without its properties in /openapi/v2");
                    schema = fallback_schema(flavor, &meta_name);
                }
                custom.push((name.clone(), schema));
                names.push((resource.clone(), name));
            }
        }
    }
    let mut defs = generator.take_definitions(true);
    for def in defs.values_mut() {
        patch_extensions(def);
        if flavor == Flavor::V2 {
            collapse_ref_wrappers(def);
        }
    }
    if flavor == Flavor::V2 {
        for (name, def) in defs.iter_mut() {
            v2_shape(name, def);
        }
    }
    for (name, schema) in custom {
        defs.insert(name, schema);
    }
    for (resource, name) in &names {
        if let Some(def) = defs.get_mut(name).and_then(Value::as_object_mut) {
            let list = def
                .entry("x-kubernetes-group-version-kind")
                .or_insert_with(|| json!([]));
            let entry = gvk(&resource.group, &resource.version, &resource.kind);
            if let Some(items) = list.as_array_mut()
                && !items.contains(&entry)
            {
                items.push(entry);
            }
        }
    }
    if let Some(def) = defs.get_mut(&scale_name).and_then(Value::as_object_mut) {
        def.insert(
            "x-kubernetes-group-version-kind".to_owned(),
            json!([gvk("autoscaling", "v1", "Scale")]),
        );
    }
    (defs, names)
}

/// The schema published for a custom kind whose own schema cannot be: any object, with
/// `apiVersion`, `kind` and `metadata` described.
fn fallback_schema(flavor: Flavor, meta_name: &str) -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
        "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
        "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
        "metadata": {"$ref": format!("{}{meta_name}", flavor.ref_prefix()), "description": "Standard object's metadata."},
    }})
}

/// The OpenAPI v2 shape kube-apiserver gives the types whose Go JSON is not one schema type
/// (schemars writes `oneOf` or `x-kubernetes-int-or-string` for them, and `type: object` for
/// `JSON`, which kubectl 1.20's client-side validation then enforces): `JSON` and
/// `JSONSchemaPropsOr*` carry only a description, `IntOrString` is a string of format
/// `int-or-string` and `Quantity` a string.
fn v2_shape(name: &str, def: &mut Value) {
    let description = def.get("description").cloned().unwrap_or_else(|| json!(""));
    let suffix = name.rsplit('.').next().unwrap_or_default();
    *def = match (name, suffix) {
        (
            _,
            "JSON"
            | "JSONSchemaPropsOrBool"
            | "JSONSchemaPropsOrArray"
            | "JSONSchemaPropsOrStringArray",
        ) if name.contains(".apiextensions.") => json!({"description": description}),
        ("io.k8s.apimachinery.pkg.util.intstr.IntOrString", _) => {
            json!({"description": description, "type": "string", "format": "int-or-string"})
        }
        ("io.k8s.apimachinery.pkg.api.resource.Quantity", _) => {
            json!({"description": description, "type": "string"})
        }
        _ => return,
    };
}

/// Turns schemars' draft-07 `{"allOf": [{"$ref": R}], "description": D}` (how it keeps siblings
/// of a `$ref`) back into `{"$ref": R, "description": D}`, as kube-apiserver writes references in
/// OpenAPI v2: kubectl's v2 readers (explain, client-side validation, strategic-merge lookups)
/// follow `$ref` and ignore `allOf`. Walks every schema position of `schema`.
fn collapse_ref_wrappers(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    let single_ref = map
        .get("allOf")
        .and_then(Value::as_array)
        .filter(|all| all.len() == 1)
        .and_then(|all| all[0].as_object())
        .filter(|only| only.len() == 1)
        .and_then(|only| only.get("$ref"))
        .cloned();
    if let Some(reference) = single_ref
        && !map.contains_key("$ref")
    {
        map.remove("allOf");
        map.insert("$ref".to_owned(), reference);
    }
    if let Some(properties) = map.get_mut("properties").and_then(Value::as_object_mut) {
        properties.values_mut().for_each(collapse_ref_wrappers);
    }
    for key in ["items", "additionalProperties"] {
        match map.get_mut(key) {
            Some(Value::Array(list)) => list.iter_mut().for_each(collapse_ref_wrappers),
            Some(sub) => collapse_ref_wrappers(sub),
            None => {}
        }
    }
    if let Some(Value::Array(list)) = map.get_mut("allOf") {
        list.iter_mut().for_each(collapse_ref_wrappers);
    }
}

/// Marks the list properties of a built-in kind's schema with how strategic merge patch merges
/// them here (`x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`, as kube-apiserver
/// publishes them), from the table the server's own strategic merge uses, so clients that compute
/// patches from the document (kubectl's client-side apply) merge lists as the server does.
fn patch_extensions(def: &mut Value) {
    use crate::patch::strategic::{ListStrategy, list_strategy};
    let Some(properties) = def.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (field, property) in properties.iter_mut() {
        let Some(property) = property.as_object_mut() else {
            continue;
        };
        if property.get("type").and_then(Value::as_str) != Some("array") {
            continue;
        }
        match list_strategy(field) {
            ListStrategy::Keyed(key) => {
                property.insert("x-kubernetes-patch-strategy".to_owned(), json!("merge"));
                property.insert("x-kubernetes-patch-merge-key".to_owned(), json!(key));
            }
            ListStrategy::Set => {
                property.insert("x-kubernetes-patch-strategy".to_owned(), json!("merge"));
            }
            ListStrategy::Atomic => {}
        }
    }
}

fn parameter(flavor: Flavor, name: &str, location: &str, description: &str) -> Value {
    match flavor {
        Flavor::V2 => {
            json!({"name": name, "in": location, "type": "string", "uniqueItems": true, "description": description, "required": location == "path"})
        }
        Flavor::V3 => {
            json!({"name": name, "in": location, "schema": {"type": "string", "uniqueItems": true}, "description": description, "required": location == "path"})
        }
    }
}

fn response(flavor: Flavor, reference: &str) -> Value {
    match flavor {
        Flavor::V2 => {
            json!({"200": {"description": "OK", "schema": {"$ref": reference}}, "401": {"description": "Unauthorized"}})
        }
        Flavor::V3 => {
            json!({"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": reference}}}}, "401": {"description": "Unauthorized"}})
        }
    }
}

fn operation(
    flavor: Flavor,
    action: &str,
    id: String,
    kind: &Value,
    reference: &str,
    write: bool,
    patch: Option<bool>,
) -> Value {
    let mut parameters = vec![parameter(
        flavor,
        "pretty",
        "query",
        "If 'true', then the output is pretty printed.",
    )];
    if write {
        parameters.push(parameter(
            flavor,
            "dryRun",
            "query",
            "When present, indicates that modifications should not be persisted.",
        ));
        parameters.push(parameter(flavor, "fieldManager", "query", "fieldManager is a name associated with the actor or entity that is making these changes."));
        parameters.push(parameter(flavor, "fieldValidation", "query", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields: Ignore, Warn or Strict."));
    }
    if patch.is_some() {
        parameters.push(parameter(
            flavor,
            "force",
            "query",
            "Force is going to \"force\" Apply requests.",
        ));
    }
    let mut op = json!({
        "operationId": id,
        "parameters": parameters,
        "responses": response(flavor, reference),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": kind,
    });
    if let Some(strategic) = patch {
        // Strategic merge is advertised only where it is served: kubectl picks it from here.
        let mut types = vec![
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ];
        if strategic {
            types.push("application/strategic-merge-patch+json");
        }
        match flavor {
            Flavor::V2 => op["consumes"] = json!(types),
            Flavor::V3 => {
                let content: Map<String, Value> = types
                    .iter()
                    .map(|t| ((*t).to_owned(), json!({"schema": {"type": "object"}})))
                    .collect();
                op["requestBody"] = json!({"content": content, "required": true});
            }
        }
    }
    op
}

fn paths(
    names: &[(Arc<Resource>, String)],
    flavor: Flavor,
    scale_name: &str,
) -> Map<String, Value> {
    let mut out = Map::new();
    for (resource, name) in names {
        let base = if resource.group.is_empty() {
            format!("/api/{}", resource.version)
        } else {
            format!("/apis/{}/{}", resource.group, resource.version)
        };
        let collection = if resource.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", resource.plural)
        } else {
            format!("{base}/{}", resource.plural)
        };
        let item = format!("{collection}/{{name}}");
        let kind = gvk(&resource.group, &resource.version, &resource.kind);
        let reference = format!("{}{name}", flavor.ref_prefix());
        let id = |verb: &str, suffix: &str| {
            format!("{verb}{}{}{suffix}", resource.kind, resource.version)
        };
        let mut path_params = Vec::new();
        if resource.namespaced {
            path_params.push(parameter(
                flavor,
                "namespace",
                "path",
                "object name and auth scope, such as for teams and projects",
            ));
        }
        out.insert(collection.clone(), json!({
            "get": operation(flavor, "list", id("list", ""), &kind, &reference, false, None),
            "post": operation(flavor, "post", id("create", ""), &kind, &reference, true, None),
            "delete": operation(flavor, "deletecollection", id("deleteCollection", ""), &kind, &reference, false, None),
            "parameters": path_params.clone(),
        }));
        let mut item_params = path_params.clone();
        item_params.push(parameter(flavor, "name", "path", "name of the object"));
        out.insert(item.clone(), json!({
            "get": operation(flavor, "get", id("read", ""), &kind, &reference, false, None),
            "put": operation(flavor, "put", id("replace", ""), &kind, &reference, true, None),
            "patch": operation(flavor, "patch", id("patch", ""), &kind, &reference, true, Some(resource.strategic)),
            "delete": operation(flavor, "delete", id("delete", ""), &kind, &reference, false, None),
            "parameters": item_params.clone(),
        }));
        if resource.status {
            out.insert(format!("{item}/status"), json!({
                "get": operation(flavor, "get", id("read", "Status"), &kind, &reference, false, None),
                "put": operation(flavor, "put", id("replace", "Status"), &kind, &reference, true, None),
                "patch": operation(flavor, "patch", id("patch", "Status"), &kind, &reference, true, Some(resource.strategic)),
                "parameters": item_params.clone(),
            }));
        }
        if resource.scale.is_some() {
            let scale_kind = gvk("autoscaling", "v1", "Scale");
            let scale_ref = format!("{}{scale_name}", flavor.ref_prefix());
            out.insert(format!("{item}/scale"), json!({
                "get": operation(flavor, "get", id("read", "Scale"), &scale_kind, &scale_ref, false, None),
                "put": operation(flavor, "put", id("replace", "Scale"), &scale_kind, &scale_ref, true, None),
                "patch": operation(flavor, "patch", id("patch", "Scale"), &scale_kind, &scale_ref, true, Some(true)),
                "parameters": item_params,
            }));
        }
    }
    out
}

fn info() -> Value {
    json!({"title": "Kubernetes", "version": format!("v{}.{}.0", KUBERNETES_VERSION.0, KUBERNETES_VERSION.1)})
}

/// The protobuf media type kubectl (up to 1.26) asks `/openapi/v2` for.
const V2_PROTOBUF_AT: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The same, spelled as kube-openapi also accepts it, and the Content-Type it answers with for
/// either spelling (Go's `mime` package rejects the `@` one, and client-go checks it).
pub(crate) const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The Content-Type `/openapi/v2` answers `accept` with, as kube-openapi negotiates it: clauses
/// by decreasing `q` (more specific first among equals), the first one matching JSON or either
/// protobuf spelling wins (`*/*` and an empty header get JSON); None when nothing matches (406).
pub(crate) fn negotiate_v2(accept: &str) -> Option<&'static str> {
    const OFFERED: [(&str, &str); 3] = [
        ("application/json", "application/json"),
        (V2_PROTOBUF_AT, V2_PROTOBUF),
        (V2_PROTOBUF, V2_PROTOBUF),
    ];
    let accept = if accept.trim().is_empty() {
        "*/*"
    } else {
        accept
    };
    let mut clauses: Vec<(f64, u8, &str, &str)> = Vec::new();
    for clause in accept.split(',') {
        let mut parts = clause.split(';');
        let media = parts.next().unwrap_or_default().trim();
        let (kind, sub) = media.split_once('/').unwrap_or((media, "*"));
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f64>().ok())
            .unwrap_or(1.0);
        let specificity = u8::from(kind != "*") + u8::from(sub != "*");
        clauses.push((q, specificity, kind.trim(), sub.trim()));
    }
    clauses.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    clauses.iter().find_map(|(_, _, kind, sub)| {
        OFFERED.into_iter().find_map(|(offered, answered)| {
            let (offered_kind, offered_sub) = offered.split_once('/').unwrap_or((offered, ""));
            let matched = (*kind == "*" || kind.eq_ignore_ascii_case(offered_kind))
                && (*sub == "*" || sub.eq_ignore_ascii_case(offered_sub));
            matched.then_some(answered)
        })
    })
}

/// `/openapi/v2` encoded as `media_type` (a Content-Type from [`negotiate_v2`]), with its ETag: the SHA-512 of
/// the body in upper-case hex, as kube-openapi computes it. The protobuf form is converted from
/// the JSON document.
pub(crate) fn v2_encoded(
    registry: &Registry,
    media_type: &str,
) -> Result<(bytes::Bytes, String), String> {
    use sha2::Digest;
    let document = v2(registry);
    let body = if media_type == "application/json" {
        serde_json::to_vec(&document)
            .map_err(|e| format!("encoding the OpenAPI v2 document as JSON: {e}"))?
    } else {
        crate::gnostic::encode(&document)
            .map_err(|e| format!("encoding the OpenAPI v2 document as protobuf: {e}"))?
    };
    let etag = sha2::Sha512::digest(&body)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    Ok((bytes::Bytes::from(body), etag))
}

/// `/openapi/v2` as JSON.
pub(crate) fn v2(registry: &Registry) -> Value {
    let resources: Vec<Arc<Resource>> = registry.all().cloned().collect();
    let (defs, names) = definitions(&resources, Flavor::V2);
    let scale = scale_definition(&defs);
    json!({"swagger": "2.0", "info": info(), "paths": paths(&names, Flavor::V2, &scale), "definitions": defs})
}

fn scale_definition(defs: &Map<String, Value>) -> String {
    defs.keys()
        .find(|k| k.ends_with("autoscaling.v1.Scale"))
        .cloned()
        .unwrap_or_default()
}

fn hash(resources: &[Arc<Resource>]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for resource in resources {
        let text = format!(
            "{}/{}/{}/{}/{}",
            resource.group,
            resource.version,
            resource.plural,
            resource.kind,
            resource
                .schema
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_default()
        );
        for byte in text.bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016X}")
}

/// `/openapi/v3`: where each group/version's document lives.
pub(crate) fn v3_root(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, version) in registry.group_versions() {
        let resources: Vec<Arc<Resource>> = registry
            .all()
            .filter(|r| r.group == group && r.version == version)
            .cloned()
            .collect();
        let key = if group.is_empty() {
            format!("api/{version}")
        } else {
            format!("apis/{group}/{version}")
        };
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", hash(&resources))}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/GROUP/VERSION`; None when not served.
pub(crate) fn v3(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Arc<Resource>> = registry
        .all()
        .filter(|r| r.group == group && r.version == version)
        .cloned()
        .collect();
    if resources.is_empty() {
        return None;
    }
    let (defs, names) = definitions(&resources, Flavor::V3);
    let scale = scale_definition(&defs);
    Some(
        json!({"openapi": "3.0.0", "info": info(), "paths": paths(&names, Flavor::V3, &scale), "components": {"schemas": defs}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_is_negotiated_as_kube_openapi_does() {
        assert_eq!(negotiate_v2(""), Some("application/json"));
        assert_eq!(negotiate_v2("*/*"), Some("application/json"));
        assert_eq!(
            negotiate_v2("application/com.github.proto-openapi.spec.v2@v1.0+protobuf"),
            Some(V2_PROTOBUF)
        );
        assert_eq!(
            negotiate_v2("application/com.github.proto-openapi.spec.v2.v1.0+protobuf"),
            Some(V2_PROTOBUF)
        );
        assert_eq!(
            negotiate_v2(
                "application/json;q=0.5, application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
            ),
            Some(V2_PROTOBUF)
        );
        assert_eq!(
            negotiate_v2(
                "application/*, application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
            ),
            Some(V2_PROTOBUF),
            "more specific first"
        );
        assert_eq!(
            negotiate_v2(
                "application/json, application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
            ),
            Some("application/json")
        );
        assert_eq!(negotiate_v2("application/yaml"), None);
        assert_eq!(negotiate_v2("text/html, application/protobuf"), None);
    }

    #[test]
    fn v2_references_and_special_types_are_shaped_as_kube_apiserver_writes_them() {
        let v2 = v2(&Registry::builtin());
        let definitions = v2["definitions"].as_object().unwrap();
        let spec = &definitions["io.k8s.api.core.v1.Pod"]["properties"]["spec"];
        assert_eq!(spec["$ref"], "#/definitions/io.k8s.api.core.v1.PodSpec");
        assert!(spec.get("allOf").is_none() && spec["description"].is_string());
        let containers = &definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(
            (
                &containers["x-kubernetes-patch-strategy"],
                &containers["x-kubernetes-patch-merge-key"]
            ),
            (&json!("merge"), &json!("name"))
        );
        assert_eq!(
            definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["tolerations"]
                .get("x-kubernetes-patch-strategy"),
            None
        );
        let int_or_string = &definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"];
        assert_eq!(
            (&int_or_string["type"], &int_or_string["format"]),
            (&json!("string"), &json!("int-or-string"))
        );
        let any_json = definitions["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON"]
            .as_object()
            .unwrap();
        assert_eq!(any_json.keys().collect::<Vec<_>>(), vec!["description"]);
        let v3 = v3(&Registry::builtin(), "", "v1").unwrap();
        assert!(
            v3["components"]["schemas"]["io.k8s.api.core.v1.Pod"]["properties"]["spec"]["allOf"]
                .is_array(),
            "v3 keeps allOf, as kube-apiserver's v3 does"
        );
    }

    #[test]
    fn v2_etag_is_the_sha512_of_each_encoding() {
        let registry = Registry::builtin();
        let (json, json_tag) = v2_encoded(&registry, "application/json").unwrap();
        let (protobuf, protobuf_tag) = v2_encoded(&registry, V2_PROTOBUF).unwrap();
        assert_ne!(json, protobuf);
        assert_ne!(json_tag, protobuf_tag);
        assert_eq!(json_tag.len(), 128);
        assert!(
            json_tag
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        );
        assert_eq!(
            v2_encoded(&registry, V2_PROTOBUF).unwrap().1,
            protobuf_tag,
            "stable across requests"
        );
    }
}
