//! The options a request carries: dry run, list options (selectors, limits, watch), delete
//! options from the query or the body, and JSON bodies with their media type checked.

use serde_json::Value;

use crate::error::ApiError;
use crate::pointer::At;
use crate::registry::Resource;
use crate::selector::{FieldSelector, LabelSelector};

use super::query::Query;
use super::{DeleteOptions, ListOptions};

pub(super) fn dry_run(query: &Query) -> Result<bool, ApiError> {
    match query.get("dryRun") {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "Invalid value: {other:?}: supported values: \"All\""
        ))),
    }
}

pub(super) fn list_options(query: &Query, resource: &Resource) -> Result<ListOptions, ApiError> {
    let labels = LabelSelector::parse(query.get("labelSelector").unwrap_or_default())?;
    let fields = FieldSelector::parse(
        query.get("fieldSelector").unwrap_or_default(),
        &resource.selectable_fields(),
    )?;
    let limit: Option<i64> = query.number("limit")?;
    let limit = match limit {
        Some(n) if n > 0 => Some(n as usize),
        _ => None,
    };
    Ok(ListOptions {
        labels,
        fields,
        limit,
        continue_token: query
            .get("continue")
            .filter(|c| !c.is_empty())
            .map(str::to_owned),
        resource_version: query.get("resourceVersion").map(str::to_owned),
        timeout_seconds: query.number("timeoutSeconds")?,
        bookmarks: query.flag("allowWatchBookmarks")?,
        send_initial_events: query.flag("sendInitialEvents")?,
    })
}

pub(super) fn check_json_media(content_type: &str) -> Result<(), ApiError> {
    let media = content_type.split(';').next().unwrap_or_default().trim();
    match media {
        "" | "application/json" | "*/*" => Ok(()),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// Decodes an object body: protobuf (as kubectl sends the objects it builds) or JSON.
pub(crate) fn object_body(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if crate::protobuf::is_protobuf(content_type) {
        crate::protobuf::decode(body)
    } else {
        json_body(body, content_type)
    }
}

/// Decodes a JSON object body.
fn json_body(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    check_json_media(content_type)?;
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("the body of the request could not be decoded: {e}"))
    })?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    Ok(value)
}

pub(super) fn delete_options(query: &Query, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let mut options = DeleteOptions {
        grace_period: query.number("gracePeriodSeconds")?,
        propagation: query.get("propagationPolicy").map(str::to_owned),
        uid: None,
        resource_version: None,
        dry_run: dry_run(query)?,
    };
    if query.flag("orphanDependents")? {
        options.propagation = Some("Orphan".to_owned());
    }
    if !body.iter().all(u8::is_ascii_whitespace) {
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded as DeleteOptions: {e}"
            ))
        })?;
        if let Some(grace) = value.get("gracePeriodSeconds").filter(|v| !v.is_null()) {
            options.grace_period =
                Some(grace.as_i64().ok_or_else(|| {
                    ApiError::bad_request("gracePeriodSeconds must be an integer")
                })?);
        }
        if let Some(policy) = value.get("propagationPolicy").and_then(Value::as_str) {
            options.propagation = Some(policy.to_owned());
        }
        if value.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
            options.propagation = Some("Orphan".to_owned());
        }
        options.uid = value
            .at("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_owned);
        options.resource_version = value
            .at("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if value
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|v| v == "All"))
        {
            options.dry_run = true;
        }
    }
    if let Some(policy) = &options.propagation
        && !matches!(policy.as_str(), "Foreground" | "Background" | "Orphan")
    {
        return Err(ApiError::bad_request(format!(
            "propagationPolicy: Unsupported value: {policy:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
        )));
    }
    Ok(options)
}
