//! `SelfSubjectAccessReview` (`kubectl auth can-i`): the requesting user asks whether it may
//! perform a verb on a resource (or a non-resource path), and the server answers with the same
//! decision its authorizer would make for that request (`auth::authorize`), reason included.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::auth::{self, User};
use crate::error::ApiError;
use crate::pointer::At;
use crate::request::{Action, DeleteOptions, ListOptions, Subresource, Target, WriteOptions};
use crate::state::State;

/// Answers a review: the request body with `status` filled in.
pub(crate) fn review(state: &State, user: &User, mut body: Value) -> Result<Value, ApiError> {
    if body.get("kind").and_then(Value::as_str) != Some("SelfSubjectAccessReview") {
        return Err(ApiError::bad_request(
            "the body must be an authorization.k8s.io/v1 SelfSubjectAccessReview",
        ));
    }
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let decision = match (
        spec.get("resourceAttributes"),
        spec.get("nonResourceAttributes"),
    ) {
        (Some(attributes), None) => resource_decision(state, user, attributes),
        (None, Some(_)) => non_resource_decision(user),
        _ => {
            return Err(ApiError::invalid(
                "authorization.k8s.io",
                "SelfSubjectAccessReview",
                "",
                vec![(
                    "spec".to_owned(),
                    "Invalid value: exactly one of resourceAttributes and nonResourceAttributes must be set".to_owned(),
                )],
            ));
        }
    };
    let mut status = json!({"allowed": decision.is_ok()});
    if let Err(reason) = decision {
        status["reason"] = json!(reason);
    }
    body["status"] = status;
    if body.get("metadata").is_none() {
        body["metadata"] = json!({});
    }
    Ok(body)
}

/// Health, version, discovery and OpenAPI are open to every authenticated user; other paths
/// to administrators only (this server serves nothing else).
fn non_resource_decision(user: &User) -> Result<(), String> {
    if user.is_admin() {
        Ok(())
    } else {
        Err("non-resource paths other than discovery and health are for administrators".into())
    }
}

/// Allowed, or the reason the authorizer gives for a denial.
fn resource_decision(state: &State, user: &User, attributes: &Value) -> Result<(), String> {
    let text = |key: &str| attributes.at(&format!("/{key}")).and_then(Value::as_str);
    let verb = text("verb").unwrap_or_default();
    let group = text("group").unwrap_or_default();
    let plural = text("resource").unwrap_or_default();
    let Some(resource) = state.registry.any_version(group, plural) else {
        // Authorization does not depend on a resource existing; only administrators hold
        // permissions on resources this server does not serve.
        return decide(user.is_admin(), "no RBAC policy matched");
    };
    let sub = match text("subresource").unwrap_or_default() {
        "" => None,
        "status" => Some(Subresource::Status),
        "scale" => Some(Subresource::Scale),
        "eviction" => Some(Subresource::Eviction),
        _ => return decide(user.is_admin(), "no RBAC policy matched"),
    };
    let target = Target {
        resource: Arc::clone(&resource),
        namespace: text("namespace")
            .filter(|n| !n.is_empty() && resource.namespaced)
            .map(str::to_owned),
        name: text("name").filter(|n| !n.is_empty()).map(str::to_owned),
        sub,
    };
    let action = match verb {
        "get" => Action::Get(target),
        "list" => Action::List(target, ListOptions::default()),
        "watch" => Action::Watch(target, ListOptions::default()),
        "create" => Action::Create(target, Value::Null, WriteOptions::default()),
        "update" => Action::Update(target, Value::Null, WriteOptions::default()),
        "patch" => Action::Patch(
            target,
            crate::patch::PatchType::Merge,
            Bytes::new(),
            WriteOptions::default(),
        ),
        "delete" => Action::Delete(target, DeleteOptions::default()),
        "deletecollection" => {
            Action::DeleteCollection(target, ListOptions::default(), DeleteOptions::default())
        }
        // `*` and verbs this server has no requests for.
        _ => return decide(user.is_admin(), "no RBAC policy matched"),
    };
    auth::authorize(state, user, &action).map_err(|denied| denied.message)
}

fn decide(allowed: bool, reason: &str) -> Result<(), String> {
    if allowed {
        Ok(())
    } else {
        Err(reason.to_owned())
    }
}
