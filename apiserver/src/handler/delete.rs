//! Deletes: one object (with finalizers and preconditions), a collection, and eviction.

use super::*;

/// What a DELETE did.
pub(super) struct Deleted {
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
    pub(super) fn answer(self, target: &Target) -> Value {
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

pub(super) fn delete(
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

pub(super) fn delete_collection(
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

pub(super) fn evict(
    state: &mut State,
    target: &Target,
    body: &Value,
    now: &str,
) -> Result<Reply, ApiError> {
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
