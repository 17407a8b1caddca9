//! Executes a parsed [`Action`] against the core: authorization, then get/list/watch, create,
//! update, patch (merge, JSON, strategic, apply), delete, deletecollection, eviction and scale.
//! Transport-free: it returns a [`Reply`] that the HTTP layer renders.

use std::sync::{Arc, MutexGuard};

use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};

use crate::Core;
use crate::apply;
use crate::auth::{self, User};
use crate::discovery;
use crate::error::{ApiError, success_status};
use crate::fields::{self, Scope, Shape, Writer};
use crate::kinds;
use crate::metrics::Labels;
use crate::node_restriction;
use crate::patch::{self, PatchType};
use crate::pdb;
use crate::pointer::At;
use crate::registry::{Resource, split_api_version};
use crate::request::{
    self, Action, DeleteOptions, ListOptions, RawRequest, Subresource, Target, WriteOptions,
};
use crate::state::{State, key, meta_str};
use crate::store::{Key, Slot};
use crate::watch;

mod delete;
mod patches;
mod read;
mod write;

use delete::{delete, delete_collection, evict};
use patches::{patch, scale_of, update_scale};
use read::{get, list};
use write::{create, update, write_over};

/// Who sent a request.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    pub(crate) user: User,
    pub(crate) user_agent: String,
}

/// What the transport sends back.
pub(crate) enum Reply {
    Json(u16, Value),
    /// JSON with a specific media type (aggregated discovery).
    Typed(u16, Value, &'static str),
    /// Plain text (health endpoints, metrics).
    Text(u16, String),
    /// JSON already encoded (lists and gets spliced from the store's cached encodings).
    Encoded(u16, Bytes),
    Watch(futures::stream::BoxStream<'static, Result<Bytes, std::convert::Infallible>>),
    /// A negotiated document (`/openapi/v2`): sent with `Vary: Accept` and its ETag, or as 304
    /// when the request's `If-None-Match` names that ETag.
    Document {
        body: Bytes,
        content_type: &'static str,
        etag: String,
    },
}

impl Reply {
    /// The HTTP status the transport sends.
    fn code(&self) -> u16 {
        match self {
            Reply::Json(code, _)
            | Reply::Typed(code, _, _)
            | Reply::Encoded(code, _)
            | Reply::Text(code, _) => *code,
            Reply::Watch(_) | Reply::Document { .. } => 200,
        }
    }
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Json(code, _) | Reply::Typed(code, _, _) | Reply::Encoded(code, _) => {
                write!(f, "Reply::Json({code})")
            }
            Reply::Text(code, _) => write!(f, "Reply::Text({code})"),
            Reply::Watch(_) => f.write_str("Reply::Watch"),
            Reply::Document { content_type, .. } => write!(f, "Reply::Document({content_type})"),
        }
    }
}

/// An object as served at `resource`'s version: apiVersion and kind set.
pub(crate) fn present(resource: &Resource, object: &Value) -> Value {
    let Some(map) = object.as_object() else {
        return object.clone();
    };
    let mut ordered = serde_json::Map::with_capacity(map.len() + 2);
    ordered.insert("apiVersion".to_owned(), json!(resource.api_version()));
    ordered.insert("kind".to_owned(), json!(resource.kind));
    for (k, v) in map {
        if k != "apiVersion" && k != "kind" {
            ordered.insert(k.clone(), v.clone());
        }
    }
    Value::Object(ordered)
}

/// Appends `object` as served at `resource`'s version, from the object's encoded members
/// (see [`crate::store::Slot`]): the same text as encoding [`present`]'s result.
pub(crate) fn splice_object(out: &mut Vec<u8>, resource: &Resource, members: &[u8]) {
    out.extend_from_slice(b"{\"apiVersion\":");
    write_json_str(out, &resource.api_version());
    out.extend_from_slice(b",\"kind\":");
    write_json_str(out, &resource.kind);
    if !members.is_empty() {
        out.push(b',');
        out.extend_from_slice(members);
    }
    out.push(b'}');
}

fn write_json_str(out: &mut Vec<u8>, text: &str) {
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

/// Parses, authorizes and runs one request under a single hold of the state lock (one hold
/// rather than three keeps 32 concurrent clients from queueing on it). A watch starts after the
/// lock is released, because its stream takes the lock itself.
pub(crate) fn handle(
    core: &Arc<Core>,
    state: MutexGuard<'_, State>,
    ctx: &Context,
    raw: RawRequest<'_>,
) -> Result<Reply, ApiError> {
    let started = core.now();
    let mut labels = Labels {
        verb: method_verb(raw.method),
        group: String::new(),
        resource: String::new(),
    };
    let result = dispatch(core, state, ctx, raw, &mut labels);
    let code = match &result {
        Ok(reply) => reply.code(),
        Err(error) => error.code,
    };
    let took =
        std::time::Duration::try_from(core.now().duration_since(started)).unwrap_or_default();
    core.metrics.record(labels, code, took);
    result
}

/// kube-apiserver's verb label for a request that did not get as far as its action.
fn method_verb(method: &http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        _ => "OTHER",
    }
}

/// The verb, group and resource a request is counted under (see [`crate::metrics`]).
fn labels_of(action: &Action, method: &http::Method) -> Labels {
    let verb = match action {
        Action::Get(_) => "GET",
        Action::List(..) => "LIST",
        Action::Watch(..) => "WATCH",
        Action::Create(..) | Action::Evict(..) | Action::AccessReview(_) => "POST",
        Action::Update(..) => "PUT",
        Action::Patch(..) => "PATCH",
        Action::Delete(..) => "DELETE",
        Action::DeleteCollection(..) => "DELETECOLLECTION",
        _ => method_verb(method),
    };
    let (group, resource) = match action.verb_and_target() {
        Some((_, target)) => (
            target.resource.group.clone(),
            target.resource.plural.clone(),
        ),
        None => match action {
            Action::AccessReview(_) => (
                "authorization.k8s.io".to_owned(),
                "selfsubjectaccessreviews".to_owned(),
            ),
            _ => (String::new(), String::new()),
        },
    };
    Labels {
        verb,
        group,
        resource,
    }
}

fn dispatch(
    core: &Arc<Core>,
    mut state: MutexGuard<'_, State>,
    ctx: &Context,
    raw: RawRequest<'_>,
    labels: &mut Labels,
) -> Result<Reply, ApiError> {
    let now = core.now_text();
    let table = crate::table::requested(raw.accept);
    let include_object = match table {
        Some(_) => crate::table::IncludeObject::parse(
            request::query_value(raw.query, "includeObject").as_deref(),
        )?,
        None => crate::table::IncludeObject::default(),
    };
    let method = raw.method.clone();
    let action = request::parse(raw, &state.registry)?;
    *labels = labels_of(&action, &method);
    auth::authorize(&state, &ctx.user, &action)?;
    let printed = match (&action, table) {
        (Action::Get(target) | Action::List(target, _), Some(version)) if target.sub.is_none() => {
            Some((target.resource.clone(), version))
        }
        _ => None,
    };
    match action {
        Action::Watch(target, options) => {
            drop(state);
            let watching = core
                .metrics
                .watching(&target.resource.group, &target.resource.plural);
            let stream = watch::start(
                core.clone(),
                &ctx.user,
                target.resource.clone(),
                target.namespace.clone(),
                options,
            )?;
            // The stream holds the guard: the watch counts until the client goes.
            let stream = futures::StreamExt::map(stream, move |chunk| {
                let _counted = &watching;
                chunk
            });
            Ok(Reply::Watch(Box::pin(stream)))
        }
        Action::Metrics => {
            if !ctx.user.is_admin() {
                return Err(ApiError::forbidden_path(&ctx.user.name, "get", "/metrics"));
            }
            drop(state);
            Ok(Reply::Text(200, core.metrics.render()))
        }
        other => {
            let reply = execute(&mut state, ctx, other, &now)?;
            match printed {
                Some((resource, version)) => Ok(as_table(
                    &state,
                    core,
                    &resource,
                    version,
                    include_object,
                    reply,
                )),
                None => Ok(reply),
            }
        }
    }
}

/// A get's or list's reply as the Table a client asked for (see [`crate::table`]).
fn as_table(
    state: &State,
    core: &Core,
    resource: &Resource,
    version: crate::table::TableVersion,
    include: crate::table::IncludeObject,
    reply: Reply,
) -> Reply {
    let value = match reply {
        Reply::Json(_, value) => value,
        Reply::Encoded(_, bytes) => match serde_json::from_slice(&bytes) {
            Ok(value) => value,
            Err(_) => return Reply::Encoded(200, bytes),
        },
        other => return other,
    };
    let crd = state.store.slot(&Key {
        gr: crate::registry::GroupResource {
            group: "apiextensions.k8s.io".to_owned(),
            resource: "customresourcedefinitions".to_owned(),
        },
        namespace: String::new(),
        name: format!("{}.{}", resource.plural, resource.group),
    });
    let table = crate::table::render(
        version,
        include,
        resource,
        crd.map(|slot| slot.object.as_ref()),
        &value,
        core.now(),
    );
    Reply::Json(200, table)
}

fn execute(state: &mut State, ctx: &Context, action: Action, now: &str) -> Result<Reply, ApiError> {
    match action {
        Action::Get(target) => get(state, &target),
        Action::List(target, options) => list(state, &target, &options),
        Action::Create(target, body, options) => create(state, ctx, &target, body, &options, now),
        Action::Update(target, body, options) => update(state, ctx, &target, body, &options, now),
        Action::Patch(target, kind, body, options) => {
            patch(state, ctx, &target, kind, &body, &options, now)
        }
        Action::Delete(target, options) => delete(state, &target, &options, now)
            .map(|deleted| Reply::Json(200, deleted.answer(&target))),
        Action::DeleteCollection(target, list_options, options) => {
            delete_collection(state, &target, &list_options, &options, now)
        }
        Action::Evict(target, body) => evict(state, &target, &body, now),
        Action::AccessReview(body) => Ok(Reply::Json(
            201,
            crate::access_review::review(state, &ctx.user, body)?,
        )),
        Action::Version => Ok(Reply::Json(200, discovery::version())),
        Action::Health(request) => Ok(Reply::Text(200, crate::health::answer(&request)?)),
        Action::CoreVersions { aggregated: false } => {
            Ok(Reply::Json(200, discovery::core_versions()))
        }
        Action::Groups { aggregated: false } => {
            Ok(Reply::Json(200, discovery::groups(&state.registry)))
        }
        Action::CoreVersions { aggregated: true } => Ok(Reply::Typed(
            200,
            discovery::aggregated(&state.registry, true),
            discovery::AGGREGATED_MEDIA_TYPE,
        )),
        Action::Groups { aggregated: true } => Ok(Reply::Typed(
            200,
            discovery::aggregated(&state.registry, false),
            discovery::AGGREGATED_MEDIA_TYPE,
        )),
        Action::GroupVersions { group } => {
            Ok(Reply::Json(200, discovery::group(&state.registry, &group)))
        }
        Action::Resources { group, version } => Ok(Reply::Json(
            200,
            discovery::resources(&state.registry, &group, &version),
        )),
        Action::OpenApiV2 { media_type } => {
            let (body, etag) = crate::openapi::v2_encoded(&state.registry, media_type)
                .map_err(ApiError::internal)?;
            Ok(Reply::Document {
                body,
                content_type: media_type,
                etag,
            })
        }
        Action::OpenApiV3Root => Ok(Reply::Json(200, crate::openapi::v3_root(&state.registry))),
        Action::OpenApiV3 { group, version } => {
            match crate::openapi::v3(&state.registry, &group, &version) {
                Some(document) => Ok(Reply::Json(200, document)),
                None => Err(ApiError::path_not_found(&format!(
                    "/openapi/v3/apis/{group}/{version}"
                ))),
            }
        }
        Action::Watch(..) | Action::Metrics => Err(ApiError::internal(
            "watches and metrics are answered by dispatch(), outside the state lock",
        )),
    }
}

fn current(state: &State, target: &Target) -> Result<Arc<Value>, ApiError> {
    let k = key(&target.resource, target.namespace(), target.name());
    state.store.get(&k).cloned().ok_or_else(|| {
        ApiError::not_found(
            &target.resource.group,
            &target.resource.plural,
            target.name(),
        )
    })
}

/// The reply with a stored object: its slot's cached encoding, spliced.
fn slot_reply(code: u16, resource: &Resource, slot: &Slot) -> Reply {
    let members = slot.members_json();
    let mut body = Vec::with_capacity(members.len() + 64);
    splice_object(&mut body, resource, members);
    Reply::Encoded(code, Bytes::from(body))
}

/// The reply with `object` as a write stored it at `k`: spliced from the slot's encoding, which
/// the write's watch event shares, so a write is encoded once; encoded afresh if the write
/// deleted it instead (the last finalizer gone).
fn stored_reply(
    state: &State,
    code: u16,
    resource: &Resource,
    k: &Key,
    object: &Arc<Value>,
) -> Reply {
    match state.store.slot(k) {
        Some(slot) if Arc::ptr_eq(&slot.object, object) => slot_reply(code, resource, slot),
        _ => Reply::Json(code, present(resource, object)),
    }
}

fn check_type(resource: &Resource, body: &Value) -> Result<(), ApiError> {
    if let Some(api_version) = body.get("apiVersion").and_then(Value::as_str) {
        let (group, _) = split_api_version(api_version);
        if group != resource.group {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                resource.api_version()
            )));
        }
    }
    if let Some(kind) = body.get("kind").and_then(Value::as_str)
        && kind != resource.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            resource.kind
        )));
    }
    if !body.get("metadata").is_none_or(Value::is_object) {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

/// `fieldValidation=Strict`: 400 listing the fields the kind does not declare.
fn check_strict(
    resource: &Resource,
    object: &Value,
    options: &WriteOptions,
) -> Result<(), ApiError> {
    if !options.strict {
        return Ok(());
    }
    let decoded = match &resource.schema {
        Some(root) => {
            let mut pruned = object.clone();
            crate::schema::prune(&mut pruned, root, true);
            Some(pruned)
        }
        None => crate::types::roundtrip(&resource.group, &resource.kind, object),
    };
    let mut unknown = Vec::new();
    if let Some(decoded) = decoded {
        crate::types::unknown_fields(object, &decoded, "", &mut unknown);
    }
    if unknown.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    Err(ApiError::bad_request(format!(
        "strict decoding error: {}",
        list.join(", ")
    )))
}

/// What kube-apiserver's typed decoding does to a body beyond `fieldValidation`: for CRDs,
/// their schemas' keywords are type-checked (400) and unknown ones dropped.
fn decode_typed_parts(resource: &Resource, object: &mut Value) -> Result<(), ApiError> {
    if resource.group == "apiextensions.k8s.io" && resource.kind == "CustomResourceDefinition" {
        crate::crd_decode::decode_schemas(object)?;
    }
    Ok(())
}

fn shape(resource: &Resource, sub: Option<Subresource>) -> Shape<'_> {
    let scope = match sub {
        Some(Subresource::Status) => Scope::StatusOnly,
        _ if resource.status => Scope::NoStatus,
        _ => Scope::All,
    };
    Shape {
        schema: resource.schema.as_deref(),
        scope,
    }
}

fn manager(ctx: &Context, options: &WriteOptions) -> String {
    if let Some(m) = &options.field_manager {
        return m.clone();
    }
    let prefix = ctx.user_agent.split('/').next().unwrap_or_default();
    if prefix.is_empty() {
        "unknown".to_owned()
    } else {
        prefix.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::registry::Registry;

    #[test]
    fn spliced_objects_encode_as_presented_objects() {
        let nodes = Registry::builtin()
            .get("", "v1", "nodes")
            .expect("nodes are built in");
        for object in [
            json!({"metadata": {"name": "n", "labels": {"a": "\"quoted\" \\ ü"}}, "kind": "Stale", "spec": {"taints": []}, "apiVersion": "old/v0"}),
            json!({"metadata": {"name": "n"}}),
            json!({}),
        ] {
            let mut spliced = Vec::new();
            splice_object(&mut spliced, &nodes, &crate::store::members_json(&object));
            assert_eq!(
                String::from_utf8(spliced).unwrap(),
                serde_json::to_string(&present(&nodes, &object)).unwrap()
            );
        }
    }
}
