//! API errors and their `metav1.Status` form: one type that every layer returns and the
//! transport renders with the HTTP code and `reason` kube-apiserver uses.

use serde_json::{Value, json};

/// An error answered to a client as a `metav1.Status` object.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `metav1.StatusReason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// Human-readable message, as kube-apiserver words it where it matters.
    pub message: String,
    /// `details` of the Status (kind, name, group, causes), if any.
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// Sets `details`, leaving out an empty `name` or `group` as kube-apiserver does (both are
    /// `omitempty` in `metav1.StatusDetails`).
    pub(crate) fn with_details(mut self, mut details: Value) -> Self {
        if let Some(map) = details.as_object_mut() {
            map.retain(|key, value| !(matches!(key.as_str(), "name" | "group") && value == ""));
        }
        self.details = Some(details);
        self
    }

    pub(crate) fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(json!({"name": name, "group": group, "kind": resource}))
    }

    pub(crate) fn path_not_found(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource (path {path})"),
        )
    }

    pub(crate) fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(json!({"name": name, "group": group, "kind": resource}))
    }

    pub(crate) fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, resource)
            ),
        )
        .with_details(json!({"name": name, "group": group, "kind": resource}))
    }

    /// 409 for a server-side apply conflict: like kube-apiserver, `details` carry only the
    /// causes (`reason: FieldManagerConflict`), no name, group or kind.
    pub(crate) fn apply_conflict(causes: Vec<(String, String)>) -> Self {
        let lines: Vec<String> = causes.iter().map(|(_, message)| message.clone()).collect();
        let message = if lines.len() == 1 {
            format!("Apply failed with 1 conflict: {}", lines[0])
        } else {
            format!(
                "Apply failed with {} conflicts: {}",
                lines.len(),
                lines.join("\n")
            )
        };
        let causes: Vec<Value> = causes
            .into_iter()
            .map(|(field, message)| json!({"reason": "FieldManagerConflict", "message": message, "field": field}))
            .collect();
        Self::new(409, "Conflict", message).with_details(json!({"causes": causes}))
    }

    /// 422 Invalid. Each cause is `(field, message)`; the message starts with the error type
    /// as `field.Error` prints it (`Required value`, `Unsupported value: ...`), which gives the
    /// cause's `reason` (see [`cause_reason`]).
    pub(crate) fn invalid(
        group: &str,
        kind: &str,
        name: &str,
        causes: Vec<(String, String)>,
    ) -> Self {
        let text: Vec<String> = causes
            .iter()
            .map(|(field, msg)| format!("{field}: {msg}"))
            .collect();
        let message = format!(
            "{kind}.{} \"{name}\" is invalid: {}",
            if group.is_empty() { "" } else { group },
            text.join(", ")
        );
        let message = message.replace(". \"", " \"");
        let causes: Vec<Value> = causes
            .into_iter()
            .map(|(field, msg)| json!({"reason": cause_reason(&msg), "message": msg, "field": field}))
            .collect();
        Self::new(422, "Invalid", message)
            .with_details(json!({"name": name, "group": group, "kind": kind, "causes": causes}))
    }

    pub(crate) fn invalid_patch(why: &str) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("the server rejected our request due to an error in our request: {why}"),
        )
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub(crate) fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", message)
    }

    /// 403 from an admission plugin: `pods "x" is forbidden: <why>`.
    pub(crate) fn forbidden_by_admission(
        group: &str,
        resource: &str,
        name: &str,
        why: &str,
    ) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!(
                "{} \"{name}\" is forbidden: {why}",
                qualified(group, resource)
            ),
        )
        .with_details(json!({"name": name, "group": group, "kind": resource}))
    }

    /// 403 for a non-resource path (`/metrics`), worded as kube-apiserver's RBAC denial.
    pub(crate) fn forbidden_path(user: &str, verb: &str, path: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\""),
        )
    }

    pub(crate) fn forbidden(
        user: &str,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: &str,
        why: &str,
    ) -> Self {
        let scope = if namespace.is_empty() {
            "at the cluster scope".to_owned()
        } else {
            format!("in the namespace \"{namespace}\"")
        };
        Self::new(
            403,
            "Forbidden",
            format!(
                "{resource}{} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{group}\" {scope}: {why}",
                if group.is_empty() { String::new() } else { format!(".{group}") },
            ),
        )
        .with_details(json!({"group": group, "kind": resource}))
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub(crate) fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub(crate) fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("request is too large: limit is {limit} bytes"),
        )
    }

    pub(crate) fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml; got {content_type:?}"
            ),
        )
    }

    pub(crate) fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `metav1.Status` object for this error.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

/// `resource.group` as kube-apiserver prints it in messages (`pods`, `deployments.apps`).
pub(crate) fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    }
}

/// The `metav1.CauseType` of a field error, from the words its message starts with (the
/// `field.ErrorType` strings of k8s.io/apimachinery).
pub(crate) fn cause_reason(message: &str) -> &'static str {
    const TYPES: &[(&str, &str)] = &[
        ("Required value", "FieldValueRequired"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Forbidden", "FieldValueForbidden"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Not found", "FieldValueNotFound"),
        ("Internal error", "InternalError"),
    ];
    TYPES
        .iter()
        .find(|(prefix, _)| message.starts_with(prefix))
        .map_or("FieldValueInvalid", |(_, reason)| reason)
}

/// A successful `metav1.Status`.
pub(crate) fn success_status(code: u16, details: Value) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code, "details": details})
}
