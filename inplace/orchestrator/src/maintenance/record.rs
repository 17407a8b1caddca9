//! What a maintenance did, as `status.lastMaintenance` and Events, worded as the reference shows
//! ("All maintenance operations successful. …", "(1/2) maintenance operations successful: …").

use inplace_api::crd::{LastMaintenance, MAINTENANCE_FAILED, MAINTENANCE_SUCCEEDED, WorkerPool};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::Pass;
use crate::error::{Error, kube};
use crate::events::Kind;

/// One maintenance operation and how it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Operation {
    /// The Event reason.
    pub(super) reason: &'static str,
    /// What was done, or what failed.
    pub(super) description: String,
    /// Why it failed; `None` when it succeeded.
    pub(super) failure: Option<String>,
}

impl Operation {
    pub(super) fn succeeded(reason: &'static str, description: String) -> Self {
        Self {
            reason,
            description,
            failure: None,
        }
    }

    pub(super) fn failed(reason: &'static str, description: String, failure: String) -> Self {
        Self {
            reason,
            description,
            failure: Some(failure),
        }
    }
}

/// The `lastMaintenance` of `operations` triggered at `now`.
pub(super) fn last_maintenance(operations: &[Operation], now: Timestamp) -> LastMaintenance {
    let failures: Vec<&str> = operations
        .iter()
        .filter_map(|o| o.failure.as_deref())
        .collect();
    let descriptions: Vec<&str> = operations.iter().map(|o| o.description.as_str()).collect();
    let (description, state) = if failures.is_empty() {
        let mut text = "All maintenance operations successful.".to_owned();
        if !descriptions.is_empty() {
            text.push(' ');
            text.push_str(&descriptions.join(", "));
        }
        (text, MAINTENANCE_SUCCEEDED)
    } else {
        let ok = operations.len() - failures.len();
        (
            format!(
                "({ok}/{}) maintenance operations successful: {}",
                operations.len(),
                descriptions.join(", ")
            ),
            MAINTENANCE_FAILED,
        )
    };
    LastMaintenance {
        description,
        state: state.to_owned(),
        failure_reason: (!failures.is_empty()).then(|| failures.join(", ")),
        triggered_time: Time(now),
    }
}

/// Writes `status.lastMaintenance` and one Event per operation.
pub(super) async fn write(
    pool: &WorkerPool,
    operations: &[Operation],
    pass: &Pass<'_>,
) -> Result<(), Error> {
    let namespace = pool.namespace().unwrap_or_default();
    let name = pool.name_any();
    let last = last_maintenance(operations, pass.now);
    let api: Api<WorkerPool> = Api::namespaced(pass.client.clone(), &namespace);
    let patch = json!({ "status": { "lastMaintenance": last } });
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(kube(format!(
            "record the last maintenance of workerpool {namespace}/{name}"
        )))?;
    tracing::info!(state = %last.state, description = %last.description, "maintenance recorded");
    for operation in operations {
        let kind = if operation.failure.is_some() {
            Kind::Warning
        } else {
            Kind::Normal
        };
        let mut message = operation.description.clone();
        if let Some(failure) = &operation.failure {
            message.push_str(&format!(": {failure}"));
        }
        if !message.ends_with('.') {
            message.push('.');
        }
        pass.recorder
            .publish(&pool.object_ref(&()), kind, operation.reason, &message)
            .await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn description_reads_as_the_reference_shows() {
        let now: Timestamp = "2023-07-28T09:07:27Z".parse().unwrap();
        let ok = Operation::succeeded(
            "KubernetesVersionMaintenance",
            "Control Plane: Updated Kubernetes version from 1.26.4 to 1.27.1. Reason: Kubernetes version expired - force update required".to_owned(),
        );
        let last = last_maintenance(std::slice::from_ref(&ok), now);
        assert_eq!(
            last.description,
            "All maintenance operations successful. Control Plane: Updated Kubernetes version from 1.26.4 to 1.27.1. Reason: Kubernetes version expired - force update required"
        );
        assert_eq!(last.state, "Succeeded");
        assert_eq!(last.failure_reason, None);
        let failed = Operation::failed(
            "MachineImageVersionMaintenance",
            "Worker pool x: 'gardenlinux' machine image version maintenance failed. Reason for update: machine image version expired".to_owned(),
            "Worker pool x: either the machine image 'gardenlinux' is reaching end of life and migration to another machine image is required or there is a misconfiguration in the image catalog".to_owned(),
        );
        let last = last_maintenance(&[ok, failed], now);
        assert_eq!(
            last.description,
            "(1/2) maintenance operations successful: Control Plane: Updated Kubernetes version from 1.26.4 to 1.27.1. Reason: Kubernetes version expired - force update required, Worker pool x: 'gardenlinux' machine image version maintenance failed. Reason for update: machine image version expired"
        );
        assert_eq!(last.state, "Failed");
        assert!(
            last.failure_reason
                .unwrap()
                .starts_with("Worker pool x: either")
        );
        assert_eq!(last.triggered_time.0, now);
    }
}
