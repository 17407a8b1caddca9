//! Redfish error responses: an HTTP status with an `error` object whose `@Message.ExtendedInfo`
//! names a message from DMTF's Base registry.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{Value, json};

use super::csdl;

/// The Base registry version our message ids cite.
const BASE: &str = "Base.1.16";

/// A Redfish error: status plus one Base registry message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RedfishFailure {
    pub(crate) status: StatusCode,
    /// The Base registry message key, e.g. `ActionParameterValueNotInList`.
    pub(crate) key: &'static str,
    pub(crate) message: String,
    pub(crate) args: Vec<String>,
    pub(crate) resolution: &'static str,
}

impl RedfishFailure {
    fn new(
        status: StatusCode,
        key: &'static str,
        message: String,
        args: Vec<String>,
        resolution: &'static str,
    ) -> Self {
        Self {
            status,
            key,
            message,
            args,
            resolution,
        }
    }

    pub(crate) fn value_not_in_list(value: &str, parameter: &str, action: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "ActionParameterValueNotInList",
            format!(
                "The value '{value}' for the parameter {parameter} in the action {action} is not in the list of acceptable values."
            ),
            vec![value.to_owned(), parameter.to_owned(), action.to_owned()],
            "Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed.",
        )
    }

    pub(crate) fn parameter_missing(action: &str, parameter: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "ActionParameterMissing",
            format!(
                "The action {action} requires the parameter {parameter} to be present in the request body."
            ),
            vec![action.to_owned(), parameter.to_owned()],
            "Supply the action with the required parameter in the request body when the request is resubmitted.",
        )
    }

    pub(crate) fn malformed_json() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "MalformedJSON",
            "The request body submitted was malformed JSON and could not be parsed by the receiving service.".to_owned(),
            Vec::new(),
            "Ensure that the request body is valid JSON and resubmit the request.",
        )
    }

    pub(crate) fn property_value_not_in_list(value: &str, property: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "PropertyValueNotInList",
            format!(
                "The value '{value}' for the property {property} is not in the list of acceptable values."
            ),
            vec![value.to_owned(), property.to_owned()],
            "Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed.",
        )
    }

    pub(crate) fn property_not_writable(property: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "PropertyNotWritable",
            format!(
                "The property {property} is a read-only property and cannot be assigned a value."
            ),
            vec![property.to_owned()],
            "Remove the property from the request body and resubmit the request if the operation failed.",
        )
    }

    pub(crate) fn precondition_failed() -> Self {
        Self::new(
            StatusCode::PRECONDITION_FAILED,
            "PreconditionFailed",
            "The ETag supplied did not match the current ETag of the resource.".to_owned(),
            Vec::new(),
            "Try the operation again using the appropriate ETag.",
        )
    }

    pub(crate) fn power_off_required(chassis: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "ChassisPowerStateOffRequired",
            format!(
                "The Chassis with Id '{chassis}' requires to be powered off to perform this request."
            ),
            vec![chassis.to_owned()],
            "Power off the specified Chassis and resubmit the request.",
        )
    }

    pub(crate) fn no_valid_session() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "NoValidSession",
            "There is no valid session established with the implementation.".to_owned(),
            Vec::new(),
            "Establish a session before attempting any operations.",
        )
    }

    pub(crate) fn not_found(uri: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "ResourceMissingAtURI",
            format!("The resource at the URI '{uri}' was not found."),
            vec![uri.to_owned()],
            "Place a valid resource at the URI or correct the URI and resubmit the request.",
        )
    }

    pub(crate) fn method_not_allowed(method: &str, uri: &str) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "OperationNotAllowed",
            format!("The HTTP method {method} is not allowed on the URI '{uri}'."),
            Vec::new(),
            "Use one of the methods in the Allow header and resubmit the request.",
        )
    }

    pub(crate) fn internal(detail: &str) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            format!(
                "The request failed due to an internal service error: {detail}. The service is still operational."
            ),
            Vec::new(),
            "Resubmit the request.  If the problem persists, consider resetting the service.",
        )
    }

    /// An injected fault's status: the Base message that best fits the status class.
    pub(crate) fn injected(status: StatusCode) -> Self {
        let (key, message, resolution) = match status.as_u16() {
            503 => (
                "ServiceTemporarilyUnavailable",
                "The service is temporarily unavailable.  Retry in 1 seconds.".to_owned(),
                "Wait for the indicated retry duration and retry the operation.",
            ),
            401 => ("NoValidSession", "There is no valid session established with the implementation.".to_owned(), "Establish a session before attempting any operations."),
            code if code >= 500 => (
                "InternalError",
                "The request failed due to an internal service error.  The service is still operational.".to_owned(),
                "Resubmit the request.  If the problem persists, consider resetting the service.",
            ),
            _ => ("GeneralError", "A general error has occurred.  See Resolution for information on how to resolve the error.".to_owned(), "None."),
        };
        let args = if key == "ServiceTemporarilyUnavailable" {
            vec!["1".to_owned()]
        } else {
            Vec::new()
        };
        Self::new(status, key, message, args, resolution)
    }

    /// The JSON body.
    pub(crate) fn body(&self) -> Value {
        let severity = if self.status.is_server_error() || self.status == StatusCode::UNAUTHORIZED {
            "Critical"
        } else {
            "Warning"
        };
        json!({
            "error": {
                "code": format!("{BASE}.GeneralError"),
                "message": "A general error has occurred.  See ExtendedInfo for more information.",
                "@Message.ExtendedInfo": [{
                    "@odata.type": csdl::MESSAGE.odata_type(),
                    "MessageId": format!("{BASE}.{}", self.key),
                    "Message": self.message,
                    "MessageArgs": self.args,
                    "MessageSeverity": severity,
                    "Resolution": self.resolution,
                }],
            }
        })
    }
}

impl IntoResponse for RedfishFailure {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Basic realm=\"Rackproof Redfish emulator\""),
            );
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}
