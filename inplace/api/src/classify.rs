//! What a pool change does to the nodes.
//!
//! | change | in-place pool | rolling pool |
//! |---|---|---|
//! | nothing node-relevant (strategy Auto ↔ Manual, `maxSurge`, `maxUnavailable`, timeouts, min/max; kube/system-reserved moved around with an unchanged sum) | [`UpdateClass::None`] | `None` |
//! | Kubernetes patch version only | [`UpdateClass::InPlaceWithoutDrain`]: the kubelet restarts with the new binary | the same |
//! | OS (image) version, kubelet minor version, kubelet config (reserved sum, `evictionHard`, `cpuManagerPolicy`), CA rotation, ServiceAccount key rotation | [`UpdateClass::InPlaceWithDrain`] with the list of [`InPlaceChange`]s | [`UpdateClass::NeedsReplacement`] |
//! | machine type, image name, volume type/size, CRI, node-local DNS | [`UpdateClass::NeedsReplacement`] (validation refuses these for in-place pools) | `NeedsReplacement` |
//!
//! Heavier classes win: one replacement field makes the whole change a replacement.

use crate::pool::{ReservedSum, ResolvedPool, UpdateInputs, field};
use crate::version::KubeVersion;

/// What a change does to the nodes.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateClass {
    /// Nothing reaches the nodes.
    None,
    /// Applied in place without drain; every change has [`InPlaceChange::needs_drain`] false.
    InPlaceWithoutDrain {
        /// The changes.
        changes: Vec<InPlaceChange>,
    },
    /// Applied in place after a drain.
    InPlaceWithDrain {
        /// The changes (may include a patch version change riding along).
        changes: Vec<InPlaceChange>,
    },
    /// The machines must be replaced.
    NeedsReplacement {
        /// JSON paths of the fields that force replacement.
        fields: Vec<&'static str>,
    },
}

impl UpdateClass {
    /// Whether anything reaches the nodes.
    pub fn is_update(&self) -> bool {
        !matches!(self, Self::None)
    }

    /// JSON paths of the fields behind the classification.
    pub fn fields(&self) -> Vec<&'static str> {
        match self {
            Self::None => Vec::new(),
            Self::InPlaceWithoutDrain { changes } | Self::InPlaceWithDrain { changes } => {
                changes.iter().map(InPlaceChange::field).collect()
            }
            Self::NeedsReplacement { fields } => fields.clone(),
        }
    }
}

/// One change an in-place update carries to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InPlaceChange {
    /// The machine image (OS) version; the agent runs the OS-update command and reboots.
    OperatingSystemVersion {
        /// Old version.
        from: String,
        /// New version.
        to: String,
    },
    /// The kubelet minor version.
    KubeletMinorVersion {
        /// Old version.
        from: KubeVersion,
        /// New version.
        to: KubeVersion,
    },
    /// The kubelet patch version (no drain).
    KubeletPatchVersion {
        /// Old version.
        from: KubeVersion,
        /// New version.
        to: KubeVersion,
    },
    /// Kubelet configuration.
    KubeletConfig {
        /// Which parts changed.
        parts: Vec<KubeletConfigPart>,
    },
    /// A CA rotation was initiated: the kubelet must bootstrap again.
    CertificateAuthoritiesRotation,
    /// A ServiceAccount signing key rotation was initiated.
    ServiceAccountKeyRotation,
}

/// A part of the kubelet configuration that triggers an in-place update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeletConfigPart {
    /// The sum of kubeReserved and systemReserved.
    Reservations,
    /// Hard eviction thresholds.
    EvictionHard,
    /// CPU manager policy.
    CpuManagerPolicy,
}

impl InPlaceChange {
    /// Whether the node must be drained first.
    pub fn needs_drain(&self) -> bool {
        !matches!(self, Self::KubeletPatchVersion { .. })
    }

    /// JSON path of the pool field behind the change.
    pub fn field(&self) -> &'static str {
        match self {
            Self::OperatingSystemVersion { .. } => field::IMAGE_VERSION,
            Self::KubeletMinorVersion { .. } | Self::KubeletPatchVersion { .. } => {
                field::KUBERNETES_VERSION
            }
            Self::KubeletConfig { parts } => match parts.first() {
                Some(KubeletConfigPart::EvictionHard) => field::EVICTION_HARD,
                Some(KubeletConfigPart::CpuManagerPolicy) => field::CPU_MANAGER_POLICY,
                Some(KubeletConfigPart::Reservations) | None => field::KUBE_RESERVED,
            },
            Self::CertificateAuthoritiesRotation => field::CA_ROTATION,
            Self::ServiceAccountKeyRotation => field::SA_KEY_ROTATION,
        }
    }
}

/// Classifies the change from `old` to `new` under `new`'s strategy.
pub fn classify(old: &ResolvedPool, new: &ResolvedPool) -> UpdateClass {
    let mut replace = replacement_fields(old, new);
    let changes = in_place_changes(&old.inputs, &new.inputs);
    if !new.strategy.is_in_place() {
        replace.extend(
            changes
                .iter()
                .filter(|c| c.needs_drain())
                .map(InPlaceChange::field),
        );
    }
    if !replace.is_empty() {
        replace.dedup();
        return UpdateClass::NeedsReplacement { fields: replace };
    }
    if changes.is_empty() {
        UpdateClass::None
    } else if changes.iter().any(InPlaceChange::needs_drain) {
        UpdateClass::InPlaceWithDrain { changes }
    } else {
        UpdateClass::InPlaceWithoutDrain { changes }
    }
}

/// Fields that differ and can only change by replacing machines.
pub(crate) fn replacement_fields(old: &ResolvedPool, new: &ResolvedPool) -> Vec<&'static str> {
    [
        (old.image_name != new.image_name, field::IMAGE_NAME),
        (old.machine_type != new.machine_type, field::MACHINE_TYPE),
        (old.volume_type != new.volume_type, field::VOLUME_TYPE),
        (old.volume_size != new.volume_size, field::VOLUME_SIZE),
        (old.cri != new.cri, field::CRI_NAME),
        (
            old.node_local_dns != new.node_local_dns,
            field::NODE_LOCAL_DNS,
        ),
    ]
    .into_iter()
    .filter_map(|(changed, path)| changed.then_some(path))
    .collect()
}

/// The in-place changes between two sets of update inputs, listed as OS version, kubelet version,
/// kubelet config, CA rotation, ServiceAccount key rotation. The agent uses it to compare the
/// last-applied OSC with a new one (both read with [`UpdateInputs::from_osc`]).
pub fn in_place_changes(old: &UpdateInputs, new: &UpdateInputs) -> Vec<InPlaceChange> {
    let mut changes = Vec::new();
    if old.os_version != new.os_version {
        changes.push(InPlaceChange::OperatingSystemVersion {
            from: old.os_version.to_string(),
            to: new.os_version.to_string(),
        });
    }
    let (from, to) = (old.kubelet_version, new.kubelet_version);
    if !from.same_minor(&to) {
        changes.push(InPlaceChange::KubeletMinorVersion { from, to });
    } else if from.patch != to.patch {
        changes.push(InPlaceChange::KubeletPatchVersion { from, to });
    }
    let parts: Vec<KubeletConfigPart> = [
        (
            reservations_differ(old.reserved_sum, new.reserved_sum),
            KubeletConfigPart::Reservations,
        ),
        (
            old.eviction_hard != new.eviction_hard,
            KubeletConfigPart::EvictionHard,
        ),
        (
            old.cpu_manager_policy != new.cpu_manager_policy,
            KubeletConfigPart::CpuManagerPolicy,
        ),
    ]
    .into_iter()
    .filter_map(|(changed, part)| changed.then_some(part))
    .collect();
    if !parts.is_empty() {
        changes.push(InPlaceChange::KubeletConfig { parts });
    }
    if old.ca_rotation != new.ca_rotation {
        changes.push(InPlaceChange::CertificateAuthoritiesRotation);
    }
    if old.sa_key_rotation != new.sa_key_rotation {
        changes.push(InPlaceChange::ServiceAccountKeyRotation);
    }
    changes
}

fn reservations_differ(old: Option<ReservedSum>, new: Option<ReservedSum>) -> bool {
    old.unwrap_or_default() != new.unwrap_or_default()
}

#[cfg(test)]
mod tests;
