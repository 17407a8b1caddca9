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

fn get(state: &State, target: &Target) -> Result<Reply, ApiError> {
    let k = key(&target.resource, target.namespace(), target.name());
    let slot = state.store.slot(&k).ok_or_else(|| {
        ApiError::not_found(
            &target.resource.group,
            &target.resource.plural,
            target.name(),
        )
    })?;
    match target.sub {
        Some(Subresource::Scale) => Ok(Reply::Json(200, scale_of(&target.resource, &slot.object))),
        _ => Ok(slot_reply(200, &target.resource, slot)),
    }
}

/// A list, encoded by splicing each item's cached encoding (see [`crate::store::Slot`]).
fn list(state: &State, target: &Target, options: &ListOptions) -> Result<Reply, ApiError> {
    let resource = &target.resource;
    let (list_rv, after) = match &options.continue_token {
        Some(token) => decode_continue(token)?,
        None => (state.store.resource_version(), None),
    };
    if let Some(rv) = options
        .resource_version
        .as_deref()
        .filter(|rv| !rv.is_empty())
    {
        rv.parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))?;
    }
    let mut items = Vec::new();
    let mut last_key = None;
    let mut more = false;
    let mut remaining = 0usize;
    // A list of the pods bound to one node reads only those (the store indexes them).
    let on_node = (resource.group.is_empty() && resource.plural == "pods")
        .then(|| options.fields.pinned("spec.nodeName"))
        .flatten()
        .filter(|n| !n.is_empty());
    let slots: Box<dyn Iterator<Item = _>> = match on_node {
        Some(node) => Box::new(state.store.pod_slots_on_node(
            node,
            target.namespace.as_deref(),
            after,
        )),
        None => Box::new(state.store.slots(
            &resource.group_resource(),
            target.namespace.as_deref(),
            after,
        )),
    };
    for (key, slot) in slots {
        let object = &slot.object;
        if !(options.labels.matches(object) && options.fields.matches(object)) {
            continue;
        }
        if options.limit.is_some_and(|limit| items.len() >= limit) {
            more = true;
            remaining += 1;
            continue;
        }
        items.push(slot.members_json());
        last_key = Some(key);
    }
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if more && let Some(last) = last_key {
        metadata["continue"] = json!(encode_continue(list_rv, last));
        metadata["remainingItemCount"] = json!(remaining);
    }
    let api_version = resource.api_version();
    let per_item = api_version.len() + resource.kind.len() + 32;
    let mut body =
        Vec::with_capacity(items.iter().map(|m| m.len() + per_item).sum::<usize>() + 256);
    body.extend_from_slice(b"{\"apiVersion\":");
    write_json_str(&mut body, &api_version);
    body.extend_from_slice(b",\"kind\":");
    write_json_str(&mut body, &format!("{}List", resource.kind));
    body.extend_from_slice(b",\"metadata\":");
    let _ = serde_json::to_writer(&mut body, &metadata);
    body.extend_from_slice(b",\"items\":[");
    for (i, members) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        splice_object(&mut body, resource, members);
    }
    body.extend_from_slice(b"]}");
    Ok(Reply::Encoded(200, Bytes::from(body)))
}

fn encode_continue(rv: u64, last: &(String, String)) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": [last.0, last.1]});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, Option<(String, String)>), ApiError> {
    let invalid = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| invalid())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    let rv = value
        .get("rv")
        .and_then(Value::as_u64)
        .ok_or_else(invalid)?;
    let start = value
        .get("start")
        .and_then(Value::as_array)
        .ok_or_else(invalid)?;
    match start.as_slice() {
        [Value::String(ns), Value::String(name)] => Ok((rv, Some((ns.clone(), name.clone())))),
        _ => Err(invalid()),
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

fn create(
    state: &mut State,
    ctx: &Context,
    target: &Target,
    mut body: Value,
    options: &WriteOptions,
    now: &str,
) -> Result<Reply, ApiError> {
    let resource = target.resource.clone();
    check_type(&resource, &body)?;
    check_strict(&resource, &body, options)?;
    decode_typed_parts(&resource, &mut body)?;
    if body.get("metadata").is_none() {
        body["metadata"] = json!({});
    }
    let namespace = target.namespace().to_owned();
    if resource.namespaced {
        if let Some(ns) = meta_str(&body, "namespace").filter(|ns| !ns.is_empty())
            && ns != namespace
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        body["metadata"]["namespace"] = json!(namespace);
        check_namespace(state, &namespace, &ctx.user, "create", &resource)?;
    } else if let Some(meta) = body["metadata"].as_object_mut() {
        meta.remove("namespace");
    }
    if meta_str(&body, "name").is_none_or(str::is_empty)
        && let Some(prefix) = meta_str(&body, "generateName").filter(|p| !p.is_empty())
    {
        let name = format!("{prefix}{}", state.name_suffix());
        body["metadata"]["name"] = json!(name);
    }
    let name = meta_str(&body, "name").unwrap_or_default().to_owned();
    auth::check_node_body(&ctx.user, target, Some(&name))?;
    if is_node(&resource) {
        node_restriction::admit_create(&ctx.user, &name, &body)?;
    }
    let k = key(&resource, &namespace, &name);
    if !name.is_empty() && state.store.get(&k).is_some() {
        return Err(ApiError::already_exists(
            &resource.group,
            &resource.plural,
            &name,
        ));
    }
    let mut object = prepare_create(state, &resource, body, now);
    kinds::finish(&resource, &mut object);
    // As kube-apiserver: the request's fields (with defaults) are recorded before admission
    // and the create strategy change the object, against the kind's zero value.
    let writer = Writer {
        manager: &manager(ctx, options),
        api_version: &resource.api_version(),
        time: now,
        subresource: None,
    };
    fields::record_update(
        Some(&kinds::zero(&resource)),
        &mut object,
        &writer,
        Shape {
            schema: resource.schema.as_deref(),
            scope: Scope::All,
        },
    );
    kinds::admit(&resource, &mut object, None)?;
    match kinds::initial_status(&resource, &object) {
        Some(_) if !resource.strategic => {
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
        }
        Some(status) => object["status"] = status,
        None => {}
    }
    if resource.group == "apiextensions.k8s.io" {
        object["status"] = crate::crd::accepted_status(&object, now);
    }
    kinds::finish(&resource, &mut object);
    kinds::validate(&resource, &object, None)?;
    if options.dry_run {
        return Ok(Reply::Json(201, present(&resource, &object)));
    }
    let stored = state.write(&resource, &k, object, now)?;
    Ok(stored_reply(state, 201, &resource, &k, &stored))
}

/// System metadata of a new object, and the kind's defaults.
fn prepare_create(state: &mut State, resource: &Resource, mut body: Value, now: &str) -> Value {
    let uid = state.uid();
    if let Some(meta) = body["metadata"].as_object_mut() {
        for field in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "managedFields",
            "selfLink",
        ] {
            meta.remove(field);
        }
        meta.insert("uid".to_owned(), json!(uid));
        meta.insert("creationTimestamp".to_owned(), json!(now));
        if resource.generation || resource.kind == "Pod" {
            meta.insert("generation".to_owned(), json!(1));
        } else {
            meta.remove("generation");
        }
    }
    kinds::default(resource, &mut body);
    body
}

fn check_namespace(
    state: &State,
    namespace: &str,
    user: &User,
    verb: &str,
    resource: &Resource,
) -> Result<(), ApiError> {
    let ns = state.store.get(&crate::store::Key {
        gr: crate::state::gr("", "namespaces"),
        namespace: String::new(),
        name: namespace.to_owned(),
    });
    match ns {
        None => Err(ApiError::not_found("", "namespaces", namespace)),
        Some(ns) if ns.at("/metadata/deletionTimestamp").is_some() => Err(ApiError::forbidden(
            &user.name,
            verb,
            &resource.group,
            &resource.plural,
            namespace,
            &format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            ),
        )),
        Some(_) => Ok(()),
    }
}

fn update(
    state: &mut State,
    ctx: &Context,
    target: &Target,
    body: Value,
    options: &WriteOptions,
    now: &str,
) -> Result<Reply, ApiError> {
    let resource = target.resource.clone();
    if target.sub == Some(Subresource::Scale) {
        return update_scale(state, ctx, target, body, options, now);
    }
    check_type(&resource, &body)?;
    check_strict(&resource, &body, options)?;
    if let Some(name) = meta_str(&body, "name")
        && name != target.name()
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            target.name()
        )));
    }
    auth::check_node_body(&ctx.user, target, Some(target.name()))?;
    let k = key(&resource, target.namespace(), target.name());
    let Some(old) = state.store.get(&k).cloned() else {
        let creatable = matches!(
            (resource.group.as_str(), resource.plural.as_str()),
            ("coordination.k8s.io", "leases") | ("", "events") | ("events.k8s.io", "events")
        );
        if creatable && target.sub.is_none() {
            return create(state, ctx, target, body, options, now);
        }
        return Err(ApiError::not_found(
            &resource.group,
            &resource.plural,
            target.name(),
        ));
    };
    let written = write_over(state, ctx, target, &old, body, options, now, None)?;
    Ok(written.reply(state, &resource))
}

/// What a write answers with.
enum Written {
    /// The object stored at this key (the write's, or the unchanged one for a no-op).
    Stored(Key, Arc<Value>),
    /// An object the store does not hold: a dry run's, or one the write deleted.
    Unstored(Value),
}

impl Written {
    /// The reply (see [`stored_reply`]).
    fn reply(self, state: &State, resource: &Resource) -> Reply {
        match self {
            Written::Stored(k, object) => stored_reply(state, 200, resource, &k, &object),
            Written::Unstored(object) => Reply::Json(200, present(resource, &object)),
        }
    }

    /// The object as written.
    fn object(self) -> Arc<Value> {
        match self {
            Written::Stored(_, object) => object,
            Written::Unstored(object) => Arc::new(object),
        }
    }
}

/// Writes `incoming` over `old` for a PUT or a patch: preconditions, what each subresource may
/// change, generation, finalizer rules, managedFields, the no-op shortcut.
#[expect(
    clippy::too_many_arguments,
    reason = "one write path shared by update, patch and apply"
)]
fn write_over(
    state: &mut State,
    ctx: &Context,
    target: &Target,
    old: &Arc<Value>,
    mut incoming: Value,
    options: &WriteOptions,
    now: &str,
    applied_fields: Option<Value>,
) -> Result<Written, ApiError> {
    let resource = target.resource.clone();
    if !incoming.is_object() {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    }
    match incoming.get("metadata") {
        None | Some(Value::Null) => incoming["metadata"] = json!({}),
        Some(Value::Object(_)) => {}
        Some(_) => return Err(ApiError::bad_request("metadata must be an object")),
    }
    // Admission sees the object as the request made it, before the resourceVersion check
    // and the strategies (as kube-apiserver's mutating admission does).
    if is_node(&resource) {
        node_restriction::admit_update(&ctx.user, target.name(), &incoming, old)?;
    }
    if let Some(rv) = meta_str(&incoming, "resourceVersion").filter(|rv| !rv.is_empty())
        && Some(rv) != meta_str(old, "resourceVersion")
    {
        return Err(ApiError::conflict(
            &resource.group,
            &resource.plural,
            target.name(),
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    let mut new = match target.sub {
        Some(Subresource::Status) => {
            let Some(incoming) = incoming.as_object_mut() else {
                return Err(ApiError::bad_request("the object must be a JSON object"));
            };
            // Built-in status strategies keep the object's metadata from the request (labels,
            // annotations, ...) and reset only the spec; custom resources keep only status.
            let meta = resource.schema.is_none().then(|| {
                let mut meta = incoming.remove("metadata").unwrap_or_else(|| json!({}));
                keep_system_metadata(&mut meta, old);
                let (group, kind) = (resource.group.as_str(), resource.kind.as_str());
                if group == "apps" && kind == "Deployment" {
                    copy_field(&mut meta, old, "labels");
                }
                if group.is_empty() && kind == "Pod" {
                    copy_field(&mut meta, old, "ownerReferences");
                }
                meta
            });
            with_members(old, meta, incoming.remove("status"))
        }
        _ => {
            let mut new = incoming;
            keep_system_metadata(&mut new["metadata"], old);
            if resource.status {
                match old.get("status") {
                    Some(status) => new["status"] = status.clone(),
                    None => {
                        if let Some(map) = new.as_object_mut() {
                            map.remove("status");
                        }
                    }
                }
            }
            new
        }
    };
    if let Some(map) = new.as_object_mut() {
        map.insert("apiVersion".to_owned(), json!(resource.api_version()));
        map.insert("kind".to_owned(), json!(resource.kind));
    }
    decode_typed_parts(&resource, &mut new)?;
    kinds::default(&resource, &mut new);
    kinds::finish(&resource, &mut new);
    // Fields are recorded before admission and the update strategy change the object.
    match applied_fields {
        Some(managed) => new["metadata"]["managedFields"] = managed,
        None => {
            let writer = Writer {
                manager: &manager(ctx, options),
                api_version: &resource.api_version(),
                time: now,
                subresource: target.sub.map(Subresource::as_str),
            };
            fields::record_update(Some(old), &mut new, &writer, shape(&resource, target.sub));
        }
    }
    if target.sub.is_none() {
        kinds::admit(&resource, &mut new, Some(old))?;
    }
    if resource.group == "apiextensions.k8s.io" {
        new["status"] = crate::crd::accepted_status(&new, now);
    }
    kinds::finish(&resource, &mut new);
    if old.at("/metadata/deletionTimestamp").is_some() {
        let old_fins: Vec<&Value> = old
            .at("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|f| f.iter().collect())
            .unwrap_or_default();
        let added = new
            .at("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| !old_fins.contains(&x)));
        if added {
            return Err(ApiError::invalid(
                &resource.group,
                &resource.kind,
                target.name(),
                vec![(
                    "metadata.finalizers".into(),
                    "Forbidden: no new finalizers can be added if the object is being deleted"
                        .into(),
                )],
            ));
        }
    }
    if resource.generation && target.sub.is_none() && spec_differs(&new, old) {
        let generation = old
            .at("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            + 1;
        new["metadata"]["generation"] = json!(generation);
    }
    kinds::validate(&resource, &new, Some(old))?;
    let k = key(&resource, target.namespace(), target.name());
    if same_ignoring_bookkeeping(old, &new) {
        return Ok(Written::Stored(k, old.clone()));
    }
    if options.dry_run {
        return Ok(Written::Unstored(new));
    }
    let stored = state.write(&resource, &k, new, now)?;
    Ok(Written::Stored(k, stored))
}

/// Whether `resource` is the core group's Node.
fn is_node(resource: &Resource) -> bool {
    resource.group.is_empty() && resource.plural == "nodes"
}

/// `old` with its metadata replaced by `meta` (when given; else `old`'s without `managedFields`,
/// which the write path records afresh) and its status by `status` (`None`: removed), in `old`'s
/// member order; only the members kept are copied.
fn with_members(old: &Value, meta: Option<Value>, status: Option<Value>) -> Value {
    let (mut meta, mut status) = (meta, status);
    let mut map = serde_json::Map::new();
    for (key, value) in old.as_object().into_iter().flatten() {
        let member = match key.as_str() {
            "metadata" => meta.take().or_else(|| Some(without_managed_fields(value))),
            "status" => status.take(),
            _ => Some(value.clone()),
        };
        if let Some(member) = member {
            map.insert(key.clone(), member);
        }
    }
    for (key, member) in [("metadata", meta), ("status", status)] {
        if let Some(member) = member {
            map.insert(key.to_owned(), member);
        }
    }
    Value::Object(map)
}

/// A copy of `meta` without `managedFields`.
fn without_managed_fields(meta: &Value) -> Value {
    match meta.as_object() {
        Some(members) => Value::Object(
            members
                .iter()
                .filter(|(key, _)| *key != "managedFields")
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
        None => meta.clone(),
    }
}

/// The metadata a write may not change, taken from `old`. `managedFields` are dropped: the
/// write path records them afresh from `old`'s.
fn keep_system_metadata(meta: &mut Value, old: &Value) {
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "name",
        "namespace",
    ] {
        copy_field(meta, old, field);
    }
    if let Some(meta) = meta.as_object_mut() {
        meta.remove("managedFields");
    }
}

/// Sets `meta[field]` to `old`'s `metadata[field]`, or removes it when `old` has none.
fn copy_field(meta: &mut Value, old: &Value, field: &str) {
    match old.get("metadata").and_then(|m| m.get(field)) {
        Some(value) => meta[field] = value.clone(),
        None => {
            if let Some(map) = meta.as_object_mut() {
                map.remove(field);
            }
        }
    }
}

/// Whether `a` and `b` differ in anything but `metadata`, `status`, `apiVersion` and `kind`
/// (what bumps `metadata.generation`), compared in place.
fn spec_differs(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a != b;
    };
    let spec = |(key, _): &(&String, &Value)| {
        !matches!(key.as_str(), "metadata" | "status" | "apiVersion" | "kind")
    };
    a.iter().filter(spec).count() != b.iter().filter(spec).count()
        || a.iter()
            .filter(spec)
            .any(|(key, value)| b.get(key) != Some(value))
}

/// Whether `old` and `new` are equal but for `apiVersion`, `kind` and the metadata's
/// `managedFields` and `resourceVersion` (compared in place: this runs on every write).
fn same_ignoring_bookkeeping(old: &Value, new: &Value) -> bool {
    fn same_map(
        a: &serde_json::Map<String, Value>,
        b: &serde_json::Map<String, Value>,
        skip: &[&str],
        inner: &dyn Fn(&str, &Value, &Value) -> bool,
    ) -> bool {
        let counted = |m: &serde_json::Map<String, Value>| {
            m.keys().filter(|k| !skip.contains(&k.as_str())).count()
        };
        counted(a) == counted(b)
            && a.iter()
                .filter(|(k, _)| !skip.contains(&k.as_str()))
                .all(|(k, v)| b.get(k).is_some_and(|w| inner(k, v, w)))
    }
    match (old.as_object(), new.as_object()) {
        (Some(a), Some(b)) => same_map(a, b, &["apiVersion", "kind"], &|key, v, w| match (
            key,
            v.as_object(),
            w.as_object(),
        ) {
            ("metadata", Some(a), Some(b)) => {
                same_map(a, b, &["managedFields", "resourceVersion"], &|_, v, w| {
                    v == w
                })
            }
            _ => v == w,
        }),
        _ => old == new,
    }
}

fn patch(
    state: &mut State,
    ctx: &Context,
    target: &Target,
    kind: PatchType,
    body: &[u8],
    options: &WriteOptions,
    now: &str,
) -> Result<Reply, ApiError> {
    let resource = target.resource.clone();
    if target.sub == Some(Subresource::Scale) {
        let object = current(state, target)?;
        let scale = scale_of(&resource, &object);
        if kind == PatchType::Apply {
            return Err(ApiError::unsupported_media_type(
                "application/apply-patch+yaml",
            ));
        }
        let patched = patch::apply_patch(kind, &scale, body)?;
        return update_scale(state, ctx, target, patched, options, now);
    }
    let k = key(&resource, target.namespace(), target.name());
    let old = state.store.get(&k).cloned();
    if kind == PatchType::Apply {
        let text = std::str::from_utf8(body)
            .map_err(|_| ApiError::bad_request("apply patch is not valid UTF-8"))?;
        let applied: Value = serde_saphyr::from_str(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
        if !applied.is_object() {
            return Err(ApiError::bad_request("apply patch must be an object"));
        }
        if applied.get("apiVersion").is_none() || applied.get("kind").is_none() {
            return Err(ApiError::bad_request(
                "invalid object type: apiVersion and kind must be set",
            ));
        }
        check_type(&resource, &applied)?;
        check_strict(&resource, &applied, options)?;
        if let Some(name) = meta_str(&applied, "name")
            && name != target.name()
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({})",
                target.name()
            )));
        }
        let field_manager = manager(ctx, options);
        let writer = Writer {
            manager: &field_manager,
            api_version: &resource.api_version(),
            time: now,
            subresource: target.sub.map(Subresource::as_str),
        };
        let merged = apply::apply(
            old.as_deref(),
            &applied,
            &writer,
            options.force,
            shape(&resource, target.sub),
        )
        .map_err(ApiError::apply_conflict)?;
        return match old {
            None => {
                let mut body = merged;
                body["metadata"]["name"] = json!(target.name());
                let managed = body.at("/metadata/managedFields").cloned();
                let reply = create(
                    state,
                    ctx,
                    target,
                    body,
                    &WriteOptions {
                        field_manager: Some(field_manager.clone()),
                        ..options.clone()
                    },
                    now,
                )?;
                // create() recorded an Update entry; the object was applied, so restore Apply.
                let Some(managed) = managed else {
                    return Err(ApiError::internal(
                        "apply created an object without managedFields",
                    ));
                };
                if options.dry_run {
                    let Reply::Json(code, mut object) = reply else {
                        return Err(ApiError::internal("apply create returned no object"));
                    };
                    object["metadata"]["managedFields"] = managed;
                    return Ok(Reply::Json(code, object));
                }
                let k = key(&resource, target.namespace(), target.name());
                match state.store.get(&k).cloned() {
                    Some(stored) => {
                        let mut fixed = (*stored).clone();
                        fixed["metadata"]["managedFields"] = managed;
                        let stored = state.store.put(&k, fixed);
                        Ok(stored_reply(state, 201, &resource, &k, &stored))
                    }
                    None => Ok(reply),
                }
            }
            Some(old) => {
                let managed = merged
                    .at("/metadata/managedFields")
                    .cloned()
                    .unwrap_or(json!([]));
                write_over(
                    state,
                    ctx,
                    target,
                    &old,
                    merged,
                    options,
                    now,
                    Some(managed),
                )
                .map(|written| written.reply(state, &resource))
            }
        };
    }
    let Some(old) = old else {
        return Err(ApiError::not_found(
            &resource.group,
            &resource.plural,
            target.name(),
        ));
    };
    let patched = patch::apply_patch(kind, &old, body)?;
    check_strict(&resource, &patched, options)?;
    if !patched.is_object() {
        return Err(ApiError::bad_request(
            "the patch produced something that is not an object",
        ));
    }
    if let Some(name) = meta_str(&patched, "name")
        && name != target.name()
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            target.name()
        )));
    }
    let written = write_over(state, ctx, target, &old, patched, options, now, None)?;
    Ok(written.reply(state, &resource))
}

fn scale_of(resource: &Resource, object: &Value) -> Value {
    let spec = resource.scale.as_ref();
    let replicas = spec
        .and_then(|s| object.at(&s.spec_replicas))
        .cloned()
        .unwrap_or(json!(0));
    let status_replicas = spec
        .and_then(|s| object.at(&s.status_replicas))
        .cloned()
        .unwrap_or(json!(0));
    let selector = match spec.and_then(|s| s.label_selector.as_ref()) {
        Some(pointer) => object
            .at(pointer)
            .and_then(Value::as_str)
            .map(str::to_owned),
        None => object
            .at("/spec/selector/matchLabels")
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(",")
            }),
    };
    let mut status = json!({"replicas": status_replicas});
    if let Some(selector) = selector {
        status["selector"] = json!(selector);
    }
    let meta = &object["metadata"];
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"],
        },
        // `replicas` is `omitempty` in autoscaling/v1 ScaleSpec.
        "spec": if replicas == json!(0) { json!({}) } else { json!({"replicas": replicas}) },
        "status": status,
    })
}

fn update_scale(
    state: &mut State,
    ctx: &Context,
    target: &Target,
    scale: Value,
    options: &WriteOptions,
    now: &str,
) -> Result<Reply, ApiError> {
    let resource = target.resource.clone();
    let spec = resource
        .scale
        .clone()
        .ok_or_else(|| ApiError::path_not_found("scale"))?;
    let old = current(state, target)?;
    // An absent `replicas` is 0 (it is `omitempty`).
    let replicas = scale
        .at("/spec/replicas")
        .filter(|r| !r.is_null())
        .map_or(Some(0), Value::as_i64);
    let Some(replicas) = replicas.filter(|r| *r >= 0) else {
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            target.name(),
            vec![(
                "spec.replicas".into(),
                "Invalid value: must be greater than or equal to 0".into(),
            )],
        ));
    };
    let mut new = (*old).clone();
    if let Some(rv) = meta_str(&scale, "resourceVersion").filter(|rv| !rv.is_empty()) {
        new["metadata"]["resourceVersion"] = json!(rv);
    }
    set_pointer(&mut new, &spec.spec_replicas, json!(replicas));
    let main = Target {
        sub: None,
        ..target.clone()
    };
    let mut write_options = options.clone();
    write_options.field_manager = Some(manager(ctx, options));
    let stored = write_over(state, ctx, &main, &old, new, &write_options, now, None)?.object();
    Ok(Reply::Json(200, scale_of(&resource, &stored)))
}

fn set_pointer(object: &mut Value, pointer: &str, value: Value) {
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    let mut current = object;
    for (i, part) in parts.iter().enumerate() {
        if !current.is_object() {
            *current = json!({});
        }
        if i == parts.len() - 1 {
            current[*part] = value;
            return;
        }
        if current.get(*part).is_none() {
            current[*part] = json!({});
        }
        current = &mut current[*part];
    }
}

/// What a DELETE did.
struct Deleted {
    /// The object as last stored (or as it would be, for a dry run).
    object: Value,
    /// Whether the object went away at once (no finalizers, no grace period).
    gone: bool,
}

impl Deleted {
    /// The response body: resources whose storage returns the deleted object (pods, service
    /// accounts) and objects that stay (finalizers, graceful pod deletion, namespaces) answer
    /// the object; everything else deleted at once answers `Status` `Success` naming it, as
    /// kube-apiserver's generic registry does.
    fn answer(self, target: &Target) -> Value {
        let resource = &target.resource;
        let returns_object = resource.group.is_empty()
            && matches!(
                resource.plural.as_str(),
                "pods" | "serviceaccounts" | "namespaces"
            );
        if !self.gone || returns_object {
            return self.object;
        }
        let mut details = json!({"name": target.name(), "kind": resource.plural});
        if !resource.group.is_empty() {
            details["group"] = json!(resource.group);
        }
        if let Some(uid) = meta_str(&self.object, "uid") {
            details["uid"] = json!(uid);
        }
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
    }
}

fn delete(
    state: &mut State,
    target: &Target,
    options: &DeleteOptions,
    now: &str,
) -> Result<Deleted, ApiError> {
    let resource = target.resource.clone();
    let object = current(state, target)?;
    if let Some(uid) = &options.uid
        && meta_str(&object, "uid") != Some(uid.as_str())
    {
        return Err(ApiError::conflict(
            &resource.group,
            &resource.plural,
            target.name(),
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta_str(&object, "uid").unwrap_or_default()
            ),
        ));
    }
    if let Some(rv) = &options.resource_version
        && meta_str(&object, "resourceVersion") != Some(rv.as_str())
    {
        return Err(ApiError::conflict(
            &resource.group,
            &resource.plural,
            target.name(),
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta_str(&object, "resourceVersion").unwrap_or_default()
            ),
        ));
    }
    if options.dry_run {
        return Ok(Deleted {
            object: present(&resource, &object),
            gone: false,
        });
    }
    let k = key(&resource, target.namespace(), target.name());
    let result = match (resource.group.as_str(), resource.plural.as_str()) {
        ("", "namespaces") => {
            if matches!(target.name(), "default" | "kube-system" | "kube-public") {
                return Err(ApiError::forbidden(
                    "",
                    "delete",
                    "",
                    "namespaces",
                    "",
                    &format!("this namespace may not be deleted: {}", target.name()),
                ));
            }
            state.delete_namespace(target.name(), now)
        }
        ("", "pods") => state.delete_pod(
            &k,
            options.grace_period,
            options.propagation.as_deref(),
            now,
        ),
        _ => state.delete(&k, options.propagation.as_deref(), now),
    };
    let uid = meta_str(&object, "uid");
    let gone = state
        .store
        .get(&k)
        .is_none_or(|now_stored| meta_str(now_stored, "uid") != uid);
    let result = result.unwrap_or(object);
    Ok(Deleted {
        object: present(&resource, &result),
        gone,
    })
}

fn delete_collection(
    state: &mut State,
    target: &Target,
    list_options: &ListOptions,
    options: &DeleteOptions,
    now: &str,
) -> Result<Reply, ApiError> {
    let resource = target.resource.clone();
    let names: Vec<(String, String)> = state
        .store
        .range(
            &resource.group_resource(),
            target.namespace.as_deref(),
            None,
        )
        .filter(|(_, object)| {
            list_options.labels.matches(object) && list_options.fields.matches(object)
        })
        .map(|(key, _)| key.clone())
        .collect();
    let mut items = Vec::new();
    for (namespace, name) in names {
        let one = Target {
            namespace: if resource.namespaced {
                Some(namespace)
            } else {
                None
            },
            name: Some(name),
            ..target.clone()
        };
        match delete(state, &one, options, now) {
            Ok(deleted) => items.push(deleted.object),
            Err(error) if error.code == 404 || error.code == 403 => {}
            Err(error) => return Err(error),
        }
    }
    Ok(Reply::Json(
        200,
        json!({"apiVersion": resource.api_version(), "kind": format!("{}List", resource.kind), "metadata": {"resourceVersion": state.store.resource_version().to_string()}, "items": items}),
    ))
}

fn evict(state: &mut State, target: &Target, body: &Value, now: &str) -> Result<Reply, ApiError> {
    if let Some(name) = meta_str(body, "name")
        && name != target.name()
    {
        return Err(ApiError::bad_request(format!(
            "name in URL does not match name in Eviction object: {} vs {name}",
            target.name()
        )));
    }
    let pod = current(state, target)?;
    let done = || {
        Reply::Json(
            201,
            success_status(201, json!({"name": target.name(), "kind": "pods"})),
        )
    };
    if pod.at("/metadata/deletionTimestamp").is_some() {
        return Ok(done());
    }
    pdb::check_eviction(state, &pod)?;
    let grace = body
        .at("/deleteOptions/gracePeriodSeconds")
        .and_then(Value::as_i64);
    let dry_run = body
        .at("/deleteOptions/dryRun")
        .and_then(Value::as_array)
        .is_some_and(|d| d.iter().any(|v| v == "All"));
    if dry_run {
        return Ok(done());
    }
    let k = key(&target.resource, target.namespace(), target.name());
    state.delete_pod(&k, grace, None, now);
    Ok(done())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::registry::Registry;

    #[test]
    fn bookkeeping_is_ignored_and_everything_else_counts() {
        let old = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "resourceVersion": "3", "managedFields": [1]}, "spec": {"a": 1}});
        let same = json!({"metadata": {"resourceVersion": "9", "name": "n"}, "spec": {"a": 1}, "apiVersion": "v2"});
        assert!(same_ignoring_bookkeeping(&old, &same));
        for differs in [
            json!({"metadata": {"name": "m"}, "spec": {"a": 1}}),
            json!({"metadata": {"name": "n", "labels": {}}, "spec": {"a": 1}}),
            json!({"metadata": {"name": "n"}, "spec": {"a": 2}}),
            json!({"metadata": {"name": "n"}, "spec": {"a": 1}, "status": {}}),
            json!({"spec": {"a": 1}}),
        ] {
            assert!(!same_ignoring_bookkeeping(&old, &differs), "{differs}");
        }
    }

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
