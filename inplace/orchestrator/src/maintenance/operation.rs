//! The `maintenance.gardener.cloud/operation` annotation: operations a person asked to run in
//! the next window. Each is carried out there and the annotation removed:
//!
//! - `force-in-place-update` is handed on to `gardener.cloud/operation`, where the WorkerPool
//!   controller reads it (and the maintenance's own version changes may use it);
//! - `rotate-credentials-start`, `rotate-ca-start`, `rotate-serviceaccount-key-start` set the
//!   rotation's `lastInitiationTime` in the spec to the window's time, which reaches the nodes as
//!   an in-place (or rolling) update;
//! - anything else is a failed operation, and is removed too, so it does not fail every day.

use inplace_api::crd::{Annotations, CredentialsRotation, RotationTimes, WorkerPoolSpec};
use inplace_api::keys::{
    ANNOTATION_MAINTENANCE_OPERATION, ANNOTATION_OPERATION, OPERATION_FORCE_IN_PLACE_UPDATE,
    OPERATION_ROTATE_CA_START, OPERATION_ROTATE_CREDENTIALS_START,
    OPERATION_ROTATE_SERVICE_ACCOUNT_KEY_START, has_operation,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The operations asked for, in the order written.
pub(super) fn requested(annotations: &Annotations) -> Vec<String> {
    annotations
        .get(ANNOTATION_MAINTENANCE_OPERATION)
        .map(|value| {
            value
                .split(';')
                .map(str::trim)
                .filter(|op| !op.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The annotations after the window: the maintenance operation removed, `force-in-place-update`
/// added to `gardener.cloud/operation` when asked for.
pub(super) fn annotations_after(annotations: &Annotations, requested: &[String]) -> Annotations {
    let mut after = annotations.clone();
    after.remove(ANNOTATION_MAINTENANCE_OPERATION);
    if requested
        .iter()
        .any(|op| op == OPERATION_FORCE_IN_PLACE_UPDATE)
    {
        let existing = after.get(ANNOTATION_OPERATION).cloned();
        match existing {
            Some(value) if has_operation(&value, OPERATION_FORCE_IN_PLACE_UPDATE) => {}
            Some(value) if !value.trim().is_empty() => {
                after.insert(
                    ANNOTATION_OPERATION.to_owned(),
                    format!("{value};{OPERATION_FORCE_IN_PLACE_UPDATE}"),
                );
            }
            _ => {
                after.insert(
                    ANNOTATION_OPERATION.to_owned(),
                    OPERATION_FORCE_IN_PLACE_UPDATE.to_owned(),
                );
            }
        }
    }
    after
}

/// What an operation does to the spec.
#[derive(Debug)]
pub(super) enum Effect {
    /// Handed on as an annotation; the spec stays.
    Annotation,
    /// The spec with the rotation initiated.
    Spec(Box<WorkerPoolSpec>),
    /// Not an operation this controller knows.
    Unknown,
}

/// The effect of `operation` on `spec` at `now`.
pub(super) fn apply(operation: &str, spec: &WorkerPoolSpec, now: Timestamp) -> Effect {
    let (ca, sa) = match operation {
        OPERATION_FORCE_IN_PLACE_UPDATE => return Effect::Annotation,
        OPERATION_ROTATE_CREDENTIALS_START => (true, true),
        OPERATION_ROTATE_CA_START => (true, false),
        OPERATION_ROTATE_SERVICE_ACCOUNT_KEY_START => (false, true),
        _ => return Effect::Unknown,
    };
    let mut spec = spec.clone();
    let rotation = spec
        .credentials_rotation
        .get_or_insert_with(CredentialsRotation::default);
    let started = || {
        Some(RotationTimes {
            last_initiation_time: Some(Time(now)),
        })
    };
    if ca {
        rotation.certificate_authorities = started();
    }
    if sa {
        rotation.service_account_key = started();
    }
    Effect::Spec(Box::new(spec))
}

/// The operations this controller knows, for messages.
pub(super) const KNOWN: [&str; 4] = [
    OPERATION_FORCE_IN_PLACE_UPDATE,
    OPERATION_ROTATE_CREDENTIALS_START,
    OPERATION_ROTATE_CA_START,
    OPERATION_ROTATE_SERVICE_ACCOUNT_KEY_START,
];
