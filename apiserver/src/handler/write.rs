//! Writes of whole objects: create and update, and what both keep of the stored object (system metadata, bookkeeping).

use super::*;

pub(super) fn create(
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
    allocate_service(state, &resource, &k, &mut object, None)?;
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
pub(super) fn prepare_create(
    state: &mut State,
    resource: &Resource,
    mut body: Value,
    now: &str,
) -> Value {
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

pub(super) fn check_namespace(
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

pub(super) fn update(
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
pub(super) enum Written {
    /// The object stored at this key (the write's, or the unchanged one for a no-op).
    Stored(Key, Arc<Value>),
    /// An object the store does not hold: a dry run's, or one the write deleted.
    Unstored(Value),
}

impl Written {
    /// The reply (see [`stored_reply`]).
    pub(super) fn reply(self, state: &State, resource: &Resource) -> Reply {
        match self {
            Written::Stored(k, object) => stored_reply(state, 200, resource, &k, &object),
            Written::Unstored(object) => Reply::Json(200, present(resource, &object)),
        }
    }

    /// The object as written.
    pub(super) fn object(self) -> Arc<Value> {
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
pub(super) fn write_over(
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
    let k = key(&resource, target.namespace(), target.name());
    if target.sub.is_none() {
        kinds::admit(&resource, &mut new, Some(old))?;
        allocate_service(state, &resource, &k, &mut new, Some(old))?;
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
    if same_ignoring_bookkeeping(old, &new) {
        return Ok(Written::Stored(k, old.clone()));
    }
    if options.dry_run {
        return Ok(Written::Unstored(new));
    }
    let stored = state.write(&resource, &k, new, now)?;
    Ok(Written::Stored(k, stored))
}

/// A Service's cluster IP and node ports, against every other Service (see
/// [`kinds::service::allocate`]).
fn allocate_service(
    state: &State,
    resource: &Resource,
    k: &crate::store::Key,
    object: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if !(resource.group.is_empty() && resource.kind == "Service") {
        return Ok(());
    }
    let others = state
        .store
        .range(&k.gr, None, None)
        .filter(|((namespace, name), _)| *namespace != k.namespace || *name != k.name)
        .map(|(_, service)| service.as_ref());
    kinds::service::allocate(object, old, others)
        .map_err(|causes| ApiError::invalid(&resource.group, &resource.kind, &k.name, causes))
}

/// Whether `resource` is the core group's Node.
pub(super) fn is_node(resource: &Resource) -> bool {
    resource.group.is_empty() && resource.plural == "nodes"
}

/// `old` with its metadata replaced by `meta` (when given; else `old`'s without `managedFields`,
/// which the write path records afresh) and its status by `status` (`None`: removed), in `old`'s
/// member order; only the members kept are copied.
pub(super) fn with_members(old: &Value, meta: Option<Value>, status: Option<Value>) -> Value {
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
pub(super) fn without_managed_fields(meta: &Value) -> Value {
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
pub(super) fn keep_system_metadata(meta: &mut Value, old: &Value) {
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
pub(super) fn copy_field(meta: &mut Value, old: &Value, field: &str) {
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
pub(super) fn spec_differs(a: &Value, b: &Value) -> bool {
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
pub(super) fn same_ignoring_bookkeeping(old: &Value, new: &Value) -> bool {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
}
