//! A worker pool resolved for decisions: versions and quantities parsed, defaults applied, the
//! kubelet version inherited from the control plane when the pool names none. [`ResolvedPool`]
//! is the input of [`crate::classify`] and [`crate::hash`]; [`UpdateInputs`] is the part an
//! in-place update carries to the node, and can also be read back from an OperatingSystemConfig.

use jiff::Timestamp;

use crate::crd::{DEFAULT_CRI, EvictionHard, KubeletConfig, Reserved, WorkerPoolSpec};
use crate::osc::InPlaceUpdates;
use crate::quantity::Quantity;
use crate::strategy::UpdateStrategy;
use crate::validate::{Rule, Violation, Violations};
use crate::version::{ImageVersion, KubeVersion};

/// JSON paths of the pool fields, as used in violations and classifications.
pub mod field {
    /// `spec.machine.type`
    pub const MACHINE_TYPE: &str = "spec.machine.type";
    /// `spec.machine.image.name`
    pub const IMAGE_NAME: &str = "spec.machine.image.name";
    /// `spec.machine.image.version`
    pub const IMAGE_VERSION: &str = "spec.machine.image.version";
    /// `spec.volume.type`
    pub const VOLUME_TYPE: &str = "spec.volume.type";
    /// `spec.volume.size`
    pub const VOLUME_SIZE: &str = "spec.volume.size";
    /// `spec.cri.name`
    pub const CRI_NAME: &str = "spec.cri.name";
    /// `spec.systemComponents.nodeLocalDNS.enabled`
    pub const NODE_LOCAL_DNS: &str = "spec.systemComponents.nodeLocalDNS.enabled";
    /// `spec.kubernetes.version`
    pub const KUBERNETES_VERSION: &str = "spec.kubernetes.version";
    /// `spec.kubernetes.kubelet.kubeReserved`
    pub const KUBE_RESERVED: &str = "spec.kubernetes.kubelet.kubeReserved";
    /// `spec.kubernetes.kubelet.systemReserved`
    pub const SYSTEM_RESERVED: &str = "spec.kubernetes.kubelet.systemReserved";
    /// `spec.kubernetes.kubelet.evictionHard`
    pub const EVICTION_HARD: &str = "spec.kubernetes.kubelet.evictionHard";
    /// `spec.kubernetes.kubelet.cpuManagerPolicy`
    pub const CPU_MANAGER_POLICY: &str = "spec.kubernetes.kubelet.cpuManagerPolicy";
    /// `spec.credentialsRotation.certificateAuthorities.lastInitiationTime`
    pub const CA_ROTATION: &str =
        "spec.credentialsRotation.certificateAuthorities.lastInitiationTime";
    /// `spec.credentialsRotation.serviceAccountKey.lastInitiationTime`
    pub const SA_KEY_ROTATION: &str =
        "spec.credentialsRotation.serviceAccountKey.lastInitiationTime";
    /// `spec.updateStrategy`
    pub const UPDATE_STRATEGY: &str = "spec.updateStrategy";
    /// `spec.minimum`
    pub const MINIMUM: &str = "spec.minimum";
    /// `spec.maxSurge`
    pub const MAX_SURGE: &str = "spec.maxSurge";
    /// `spec.maxUnavailable`
    pub const MAX_UNAVAILABLE: &str = "spec.maxUnavailable";
    /// `spec.machineControllerManager`
    pub const MCM: &str = "spec.machineControllerManager";
    /// `metadata.annotations[gardener.cloud/operation]`
    pub const OPERATION_ANNOTATION: &str = "metadata.annotations[gardener.cloud/operation]";
}

/// A pool with everything parsed and defaulted.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedPool {
    /// Update strategy (default applied).
    pub strategy: UpdateStrategy,
    /// Machine type.
    pub machine_type: String,
    /// Machine image name.
    pub image_name: String,
    /// Volume type.
    pub volume_type: Option<String>,
    /// Volume size.
    pub volume_size: Option<Quantity>,
    /// CRI name ([`DEFAULT_CRI`] when absent).
    pub cri: String,
    /// Whether node-local DNS is enabled.
    pub node_local_dns: bool,
    /// What an in-place update carries to the node.
    pub inputs: UpdateInputs,
}

/// The inputs an in-place update may change on a node: OS version, kubelet version and
/// configuration, credentials rotation times.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateInputs {
    /// Machine image (OS) version.
    pub os_version: ImageVersion,
    /// Kubelet version (the pool's, else the control plane's).
    pub kubelet_version: KubeVersion,
    /// Sum of kubeReserved and systemReserved, per resource; `None` when neither is set.
    pub reserved_sum: Option<ReservedSum>,
    /// Hard eviction thresholds.
    pub eviction_hard: Option<EvictionHard>,
    /// CPU manager policy.
    pub cpu_manager_policy: Option<String>,
    /// When the CA rotation was last initiated.
    pub ca_rotation: Option<Timestamp>,
    /// When the ServiceAccount key rotation was last initiated.
    pub sa_key_rotation: Option<Timestamp>,
}

/// Per-resource sum of kubeReserved and systemReserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReservedSum {
    /// CPU.
    pub cpu: Option<Quantity>,
    /// Memory.
    pub memory: Option<Quantity>,
    /// Ephemeral storage.
    pub ephemeral_storage: Option<Quantity>,
    /// PIDs.
    pub pid: Option<Quantity>,
}

impl ResolvedPool {
    /// Resolves a pool spec; `control_plane_version` is inherited when the pool names no version.
    /// Every malformed field is reported, with rule [`Rule::Malformed`].
    pub fn resolve(
        spec: &WorkerPoolSpec,
        control_plane_version: &KubeVersion,
    ) -> Result<Self, Violations> {
        let mut errors = Vec::new();
        let os_version = parse(
            &mut errors,
            field::IMAGE_VERSION,
            ImageVersion::parse(&spec.machine.image.version),
        );
        let kubelet_version = match spec.kubernetes_version() {
            Some(text) => parse(
                &mut errors,
                field::KUBERNETES_VERSION,
                KubeVersion::parse(text),
            ),
            None => Some(*control_plane_version),
        };
        let volume_size = match &spec.volume {
            Some(volume) => parse(
                &mut errors,
                field::VOLUME_SIZE,
                Quantity::parse(&volume.size),
            )
            .map(Some),
            None => Some(None),
        };
        let reserved_sum = reserved_sum(&mut errors, spec.kubelet());
        let rotation = spec.credentials_rotation.clone().unwrap_or_default();
        match (os_version, kubelet_version, volume_size, reserved_sum) {
            (Some(os_version), Some(kubelet_version), Some(volume_size), Some(reserved_sum))
                if errors.is_empty() =>
            {
                Ok(Self {
                    strategy: spec.strategy(),
                    machine_type: spec.machine.type_.clone(),
                    image_name: spec.machine.image.name.clone(),
                    volume_type: spec.volume.as_ref().and_then(|v| v.type_.clone()),
                    volume_size,
                    cri: spec
                        .cri
                        .as_ref()
                        .map_or_else(|| DEFAULT_CRI.to_owned(), |c| c.name.clone()),
                    node_local_dns: spec.node_local_dns_enabled(),
                    inputs: UpdateInputs {
                        os_version,
                        kubelet_version,
                        reserved_sum,
                        eviction_hard: spec.kubelet().and_then(|k| k.eviction_hard.clone()),
                        cpu_manager_policy: spec
                            .kubelet()
                            .and_then(|k| k.cpu_manager_policy.clone()),
                        ca_rotation: rotation.ca_initiated(),
                        sa_key_rotation: rotation.service_account_key_initiated(),
                    },
                })
            }
            _ => Err(Violations(errors)),
        }
    }
}

impl UpdateInputs {
    /// Reads the inputs back from an OperatingSystemConfig's `spec.inPlaceUpdates` (what the agent
    /// compares between the last-applied and the new OSC). Field paths in errors are OSC paths.
    pub fn from_osc(in_place: &InPlaceUpdates) -> Result<Self, Violations> {
        let mut errors = Vec::new();
        let os_version = parse(
            &mut errors,
            "spec.inPlaceUpdates.operatingSystemVersion",
            ImageVersion::parse(&in_place.operating_system_version),
        );
        let kubelet_version = parse(
            &mut errors,
            "spec.inPlaceUpdates.kubelet.version",
            KubeVersion::parse(&in_place.kubelet.version),
        );
        let kubelet = KubeletConfig {
            kube_reserved: in_place.kubelet.kube_reserved.clone(),
            system_reserved: in_place.kubelet.system_reserved.clone(),
            eviction_hard: None,
            cpu_manager_policy: None,
        };
        let reserved_sum = reserved_sum(&mut errors, Some(&kubelet));
        let rotation = in_place.credentials_rotation.clone().unwrap_or_default();
        match (os_version, kubelet_version, reserved_sum) {
            (Some(os_version), Some(kubelet_version), Some(reserved_sum)) if errors.is_empty() => {
                Ok(Self {
                    os_version,
                    kubelet_version,
                    reserved_sum,
                    eviction_hard: in_place.kubelet.eviction_hard.clone(),
                    cpu_manager_policy: in_place.kubelet.cpu_manager_policy.clone(),
                    ca_rotation: rotation.ca_initiated(),
                    sa_key_rotation: rotation.service_account_key_initiated(),
                })
            }
            _ => Err(Violations(errors)),
        }
    }
}

fn parse<T, E: std::fmt::Display>(
    errors: &mut Vec<Violation>,
    field: &str,
    result: Result<T, E>,
) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(err) => {
            errors.push(Violation::new(
                Rule::Malformed,
                field,
                err.to_string(),
                "write a valid value",
            ));
            None
        }
    }
}

/// Sums kubeReserved and systemReserved per resource, as Gardener does: a resource set in
/// neither stays unset; `None` overall when neither block is set.
fn reserved_sum(
    errors: &mut Vec<Violation>,
    kubelet: Option<&KubeletConfig>,
) -> Option<Option<ReservedSum>> {
    let Some(kubelet) = kubelet else {
        return Some(None);
    };
    if kubelet.kube_reserved.is_none() && kubelet.system_reserved.is_none() {
        return Some(None);
    }
    let before = errors.len();
    let blocks = [
        (field::KUBE_RESERVED, &kubelet.kube_reserved),
        (field::SYSTEM_RESERVED, &kubelet.system_reserved),
    ];
    let mut sum = ReservedSum::default();
    for (path, block) in blocks {
        let Some(block) = block else { continue };
        let Reserved {
            cpu,
            memory,
            ephemeral_storage,
            pid,
        } = block;
        for (name, value, total) in [
            ("cpu", cpu, &mut sum.cpu),
            ("memory", memory, &mut sum.memory),
            (
                "ephemeralStorage",
                ephemeral_storage,
                &mut sum.ephemeral_storage,
            ),
            ("pid", pid, &mut sum.pid),
        ] {
            let Some(value) = value else { continue };
            let path = format!("{path}.{name}");
            match Quantity::parse(&value.0) {
                Ok(q) if q.is_negative() => errors.push(Violation::new(
                    Rule::Malformed,
                    &path,
                    format!("reservation {:?} is negative", value.0),
                    "reserve zero or more",
                )),
                Ok(q) => match total.unwrap_or(Quantity::ZERO).checked_add(q) {
                    Some(added) => *total = Some(added),
                    None => errors.push(Violation::new(
                        Rule::Malformed,
                        &path,
                        "the reservations overflow",
                        "reserve less",
                    )),
                },
                Err(err) => errors.push(Violation::new(
                    Rule::Malformed,
                    &path,
                    err.to_string(),
                    "write a quantity like 80m or 1Gi",
                )),
            }
        }
    }
    (errors.len() == before).then_some(Some(sum))
}
