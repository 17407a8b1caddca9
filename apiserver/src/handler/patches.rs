//! Patches (merge, JSON, strategic, apply) and the scale subresource.

use super::*;

pub(super) fn patch(
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

pub(super) fn scale_of(resource: &Resource, object: &Value) -> Value {
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

pub(super) fn update_scale(
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

pub(super) fn set_pointer(object: &mut Value, pointer: &str, value: Value) {
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
