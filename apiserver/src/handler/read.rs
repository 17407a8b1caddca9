//! Reads: get and list (with continue tokens).

use super::*;

pub(super) fn get(state: &State, target: &Target) -> Result<Reply, ApiError> {
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
pub(super) fn list(
    state: &State,
    target: &Target,
    options: &ListOptions,
) -> Result<Reply, ApiError> {
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

pub(super) fn encode_continue(rv: u64, last: &(String, String)) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": [last.0, last.1]});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

pub(super) fn decode_continue(token: &str) -> Result<(u64, Option<(String, String)>), ApiError> {
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
