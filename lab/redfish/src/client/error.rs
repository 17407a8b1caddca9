//! What can go wrong talking to a BMC. Messages name the BMC (`host:port`) and the resource,
//! never credentials or session tokens.

use std::time::Duration;

use rackproof_driver::DriverError;

/// TLS configuration problems.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("invalid custom CA: {reason}")]
    BadCa { reason: String },
    #[error("cannot build the TLS configuration")]
    Rustls(#[source] rustls::Error),
}

/// A failed Redfish operation.
#[derive(Debug, thiserror::Error)]
pub enum RedfishError {
    #[error("invalid BMC URL {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("cannot set up TLS for BMC {host}")]
    Tls {
        host: String,
        #[source]
        source: TlsSetupError,
    },
    #[error("cannot build the HTTP client for BMC {host}")]
    Client {
        host: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("cannot reach BMC {host} for {method} {path} (after {attempts} attempts)")]
    Transport {
        host: String,
        method: String,
        path: String,
        attempts: u32,
        #[source]
        source: reqwest::Error,
    },
    #[error(
        "BMC {host} answered {method} {path} with {status}{}",
        detail_suffix(detail)
    )]
    Status {
        host: String,
        method: String,
        path: String,
        status: u16,
        detail: String,
    },
    #[error("BMC {host} rejected the credentials of user {user:?} ({method} {path})")]
    Unauthorized {
        host: String,
        user: String,
        method: String,
        path: String,
    },
    #[error(
        "BMC {host} named {path:?}, which is not on the BMC: only paths on the BMC's own scheme, \
         host and port are followed, so credentials never go elsewhere; check the BMC's service \
         root (/redfish/v1/) and its firmware"
    )]
    NotOnTheBmc { host: String, path: String },
    #[error("BMC {host} sent an unusable answer to {path}: {reason}")]
    BadResponse {
        host: String,
        path: String,
        reason: String,
    },
    #[error("BMC {host} has no system {wanted:?}; it has: {}", available.join(", "))]
    NoSuchSystem {
        host: String,
        wanted: String,
        available: Vec<String>,
    },
    #[error("BMC {host} does not allow {what} {value} on {system}; allowable values: {}", allowed.join(", "))]
    NotAllowed {
        host: String,
        system: String,
        what: &'static str,
        value: String,
        allowed: Vec<String>,
    },
    #[error("BMC {host}: {what} on {system} did not happen within {}", rackproof_clock::format_duration(*after))]
    Timeout {
        host: String,
        system: String,
        what: String,
        after: Duration,
    },
    #[error(
        "BMC {host}: task {monitor} ended in state {state}{}",
        detail_suffix(detail)
    )]
    TaskFailed {
        host: String,
        monitor: String,
        state: String,
        detail: String,
    },
    #[error("BMC {host} accepted the boot override for {system} but did not apply it")]
    NotApplied { host: String, system: String },
}

fn detail_suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(" ({detail})")
    }
}

impl RedfishError {
    /// The HTTP status of a BMC answer, if this error is one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            Self::Unauthorized { .. } => Some(401),
            _ => None,
        }
    }

    /// Converts into the driver error the traits return; `operation` says what was attempted
    /// (e.g. "reset ForceOff").
    pub(crate) fn into_driver_error(self, target: &str, operation: &str) -> DriverError {
        match self {
            Self::NotAllowed {
                ref value,
                ref allowed,
                ref system,
                ..
            } => DriverError::Unsupported {
                action: format!("{operation} ({value})"),
                target: format!(
                    "{target} {system} (allowable values: {})",
                    allowed.join(", ")
                ),
            },
            Self::Timeout { what, after, .. } => DriverError::Timeout {
                target: target.to_owned(),
                what,
                after,
            },
            Self::Status {
                status: 409,
                ref detail,
                ..
            } => DriverError::Refused {
                action: operation.to_owned(),
                target: target.to_owned(),
                reason: detail.clone(),
            },
            other => DriverError::Failed {
                target: target.to_owned(),
                message: operation.to_owned(),
                source: Some(Box::new(other)),
            },
        }
    }
}
