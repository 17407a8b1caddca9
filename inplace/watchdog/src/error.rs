//! The watchdog's errors and the status-code helpers it decides with.

/// Why a probe or a scaling step failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server did not answer the `/version` probe.
    #[error("failed to probe the API server")]
    ApiServer(#[source] kube::Error),
    /// Listing nodes or leases failed.
    #[error("failed to list {what}")]
    List {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    /// The Machine watch has not completed its first list.
    #[error(
        "the Machines in namespace {namespace} are not known: their watch has not completed its first list within {}{}",
        rackproof_clock::format_duration(*.waited),
        .last_error.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default()
    )]
    MachinesNotListed {
        namespace: String,
        waited: std::time::Duration,
        last_error: Option<String>,
    },
    /// Reading or updating a dependent Deployment failed.
    #[error("failed to scale dependent deployment {name}")]
    Dependent {
        name: String,
        #[source]
        source: kube::Error,
    },
    /// A dependent kept changing under us.
    #[error("failed to scale dependent deployment {name}: it kept changing (409 conflicts)")]
    Contended { name: String },
    /// The remembered replicas are not a number.
    #[error(
        "failed to restore dependent deployment {name}: replicas annotation {value:?} is not a number"
    )]
    BadAnnotation { name: String, value: String },
    /// Writing the status ConfigMap failed.
    #[error("failed to write the watchdog status configmap {name}")]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The configuration is unusable.
    #[error("invalid watchdog configuration: {0}")]
    Config(String),
}

pub(crate) use inplace_api::api_error::{is_conflict, is_not_found, status_code};

impl Error {
    /// Whether the API server asked us to slow down (429).
    pub(crate) fn is_throttled(&self) -> bool {
        let source = match self {
            Error::ApiServer(source)
            | Error::List { source, .. }
            | Error::Dependent { source, .. }
            | Error::Status { source, .. } => source,
            _ => return false,
        };
        status_code(source) == Some(429)
    }
}
