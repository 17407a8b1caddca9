//! The orchestrator's error type and status-code helpers.

/// Why a reconcile failed. Every variant names what was being done, and to which object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("failed to {action}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    /// An object kept changing under us (409 conflicts every attempt).
    #[error("failed to {action}: the object kept changing (409 conflict on every attempt)")]
    Contended { action: String },
    /// An object's content is unusable (bad duration, missing field).
    #[error("invalid {object}: {why}")]
    Invalid { object: String, why: String },
    /// The configuration is unusable.
    #[error("invalid orchestrator configuration: {0}")]
    Config(String),
}

pub(crate) use inplace_api::api_error::{is_conflict, is_not_found, status_code};

/// Wraps a kube error with what was being done.
pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}
