//! Computing the plan: what differs between the last-applied OSC and the target one.
//!
//! The comparison of in-place inputs is `inplace_api::classify::in_place_changes` (OS version,
//! kubelet minor/patch version, kubelet configuration, CA and ServiceAccount key rotation); a
//! kubelet patch version alone needs no drain. kubeReserved and systemReserved moved between each
//! other with an unchanged sum are no in-place change (the pool does not roll for them), but the
//! kubelet must still run the new values: the kubelet is applied again, like a patch version,
//! without a drain. Files are compared by path, content and mode.
//!
//! Without a last-applied OSC (first start on a freshly provisioned node) the baseline is the
//! machine as it is: the running OS version, the kubelet's version if it knows one (else the
//! target's), the target's kubelet configuration and rotation times (no rotation on first
//! start), and no files (all are written).

use inplace_api::classify::{InPlaceChange, in_place_changes};
use inplace_api::osc::{InPlaceUpdates, OperatingSystemConfig, OscKubelet};
use inplace_api::pool::UpdateInputs;

use crate::state::{Done, OsProgress, Plan};

/// The target OSC cannot be planned for.
#[derive(Debug, thiserror::Error)]
#[error("invalid operating system config {checksum}: {problem}")]
pub struct PlanError {
    /// The OSC checksum.
    pub checksum: String,
    /// What is wrong.
    pub problem: String,
}

/// What the machine runs, for the baseline without a last-applied OSC.
#[derive(Debug, Clone)]
pub struct Machine {
    /// The running OS version.
    pub os_version: String,
    /// The kubelet version, if known.
    pub kubelet_version: Option<String>,
}

/// The plan from `applied` (or `machine`) to `target`.
pub fn plan(
    applied: Option<&OperatingSystemConfig>,
    machine: &Machine,
    target: &OperatingSystemConfig,
    checksum: &str,
) -> Result<Plan, PlanError> {
    let invalid = |problem: String| PlanError {
        checksum: checksum.to_owned(),
        problem,
    };
    let mut plan = Plan {
        checksum: checksum.to_owned(),
        osc: target.clone(),
        changes: Vec::new(),
        files: Vec::new(),
        kubelet_version: None,
        kubelet_needs_drain: false,
        ca_rotation: false,
        sa_rotation: false,
        os_version: None,
        done: Done::default(),
        os: OsProgress::default(),
        failure: None,
        failure_reported: false,
    };
    for file in &target.spec.files {
        file.bytes().map_err(|e| invalid(e.to_string()))?;
        let unchanged = applied.is_some_and(|old| old.spec.files.iter().any(|f| f == file));
        if !unchanged {
            plan.files.push(file.path.clone());
            plan.changes.push(format!("file {}", file.path));
        }
    }
    let Some(new) = &target.spec.in_place_updates else {
        return Ok(plan);
    };
    let new_inputs = UpdateInputs::from_osc(new).map_err(|e| invalid(e.to_string()))?;
    let old = match applied.and_then(|a| a.spec.in_place_updates.clone()) {
        Some(old) => old,
        None => {
            let mut baseline: InPlaceUpdates = new.clone();
            baseline.operating_system_version = machine.os_version.clone();
            if let Some(version) = &machine.kubelet_version {
                baseline.kubelet.version = version.clone();
            }
            baseline
        }
    };
    let old_inputs = UpdateInputs::from_osc(&old).map_err(|e| invalid(format!("baseline: {e}")))?;
    for change in in_place_changes(&old_inputs, &new_inputs) {
        match &change {
            InPlaceChange::OperatingSystemVersion { from, to } => {
                plan.os_version = Some(new.operating_system_version.clone());
                plan.changes.push(format!("OS version {from} → {to}"));
            }
            InPlaceChange::KubeletMinorVersion { from, to } => {
                plan.kubelet_version = Some(new.kubelet.version.clone());
                plan.kubelet_needs_drain = true;
                plan.changes
                    .push(format!("kubelet minor version {from} → {to}"));
            }
            InPlaceChange::KubeletPatchVersion { from, to } => {
                plan.kubelet_version = Some(new.kubelet.version.clone());
                plan.changes
                    .push(format!("kubelet patch version {from} → {to}"));
            }
            InPlaceChange::KubeletConfig { parts } => {
                plan.kubelet_version = Some(new.kubelet.version.clone());
                plan.kubelet_needs_drain = true;
                plan.changes
                    .push(format!("kubelet configuration {parts:?}"));
            }
            InPlaceChange::CertificateAuthoritiesRotation => {
                plan.ca_rotation = true;
                plan.changes
                    .push("certificate authorities rotation".to_owned());
            }
            InPlaceChange::ServiceAccountKeyRotation => {
                plan.sa_rotation = true;
                plan.changes.push("service account key rotation".to_owned());
            }
        }
    }
    if plan.kubelet_version.is_none() && reservations_moved(&old.kubelet, &new.kubelet) {
        plan.kubelet_version = Some(new.kubelet.version.clone());
        plan.changes
            .push("kubelet reservations moved between kubeReserved and systemReserved".to_owned());
    }
    if plan.os_version.is_some() && target.os_update().is_none_or(|u| u.command.is_empty()) {
        return Err(invalid(
            "the OS version changes but status.inPlaceUpdates.osUpdate names no command".to_owned(),
        ));
    }
    Ok(plan)
}

/// Whether kubeReserved or systemReserved differ (what the sum comparison does not see).
fn reservations_moved(old: &OscKubelet, new: &OscKubelet) -> bool {
    old.kube_reserved != new.kube_reserved || old.system_reserved != new.system_reserved
}
