//! Reading a Kubernetes API error: its HTTP status, and the two every controller handles
//! (409 Conflict: re-read and retry; 404 Not Found: the object is gone).

/// The HTTP status of an API error (`None` for transport and decoding errors).
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// A write lost a race (stale resourceVersion or an apply conflict).
pub fn is_conflict(error: &kube::Error) -> bool {
    status_code(error) == Some(409)
}

/// The object does not exist.
pub fn is_not_found(error: &kube::Error) -> bool {
    status_code(error) == Some(404)
}
