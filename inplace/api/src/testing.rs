//! Fixtures shared by the unit tests: an in-place pool, a catalog built from the examples of the
//! reference documents, the control-plane version and "now".

use crate::crd::{ImageCatalogSpec, WorkerPoolSpec};
use crate::pool::ResolvedPool;
use crate::version::KubeVersion;

pub(crate) const POOL: &str = r#"
minimum: 3
maximum: 3
maxSurge: 0
maxUnavailable: 1
updateStrategy: AutoInPlaceUpdate
machine:
  type: m5.large
  image: { name: gardenlinux, version: 1630.0.0 }
volume: { type: ssd, size: 50Gi }
cri: { name: containerd }
kubernetes:
  version: 1.30.4
  kubelet:
    kubeReserved: { cpu: 80m, memory: 1Gi }
    systemReserved: { cpu: 20m }
    evictionHard: { memoryAvailable: 100Mi, imageFSAvailable: 5% }
    cpuManagerPolicy: none
machineControllerManager:
  machineDrainTimeout: 2h
  machineInPlaceUpdateTimeout: 10m
  maxEvictRetries: 10
  disableHealthTimeout: true
credentialsRotation:
  certificateAuthorities: { lastInitiationTime: "2024-01-01T12:30:00Z" }
  serviceAccountKey: { lastInitiationTime: "2024-01-01T12:30:00Z" }
"#;

/// Versions from the reference documents (GEP-31's CloudProfile, the versioning page's example).
pub(crate) const CATALOG: &str = r#"
kubernetes:
  versions:
  - { version: 1.32.0, classification: preview }
  - { version: 1.31.1, classification: supported }
  - { version: 1.30.5, classification: supported }
  - { version: 1.30.4, classification: supported }
  - { version: 1.29.0, classification: supported }
  - { version: 1.28.0, classification: supported }
  - { version: 1.27.4, classification: supported }
  - { version: 1.27.0, classification: preview }
  - { version: 1.26.8, classification: supported }
  - { version: 1.25.0, classification: supported }
  - { version: 1.24.5, classification: deprecated, expirationDate: "2022-11-30T23:59:59Z" }
  - { version: 1.30.3, classification: deprecated, expirationDate: "2025-01-31T23:59:59Z" }
machineImages:
- name: gardenlinux
  versions:
  - version: 1312.3.0
  - version: 1443.7.0
  - version: 1443.8.0
    expirationDate: "2025-02-28T23:59:59Z"
    inPlaceUpdates: { supported: true, minVersionForUpdate: 1312.3.0 }
  - version: 1629.0.0
    inPlaceUpdates: { supported: false }
  - version: 1630.0.0
    inPlaceUpdates: { supported: true, minVersionForUpdate: 1443.8.0 }
  - version: 1631.0.0
    inPlaceUpdates: { supported: true, minVersionForUpdate: 1630.0.0 }
  - version: 1632.0.0
    inPlaceUpdates: { supported: true, minVersionForUpdate: 1630.0.0 }
  - version: 1633.0.0
    inPlaceUpdates: { supported: true }
  - version: 1634.0.0
    expirationDate: "2025-05-01T00:00:00Z"
    inPlaceUpdates: { supported: true, minVersionForUpdate: 1630.0.0 }
  - version: 1620.0.0
    inPlaceUpdates: { supported: true, minVersionForUpdate: 1443.8.0 }
- name: suse-chost
  versions:
  - version: 15.3.20220818
    inPlaceUpdates: { supported: true }
"#;

pub(crate) fn spec() -> WorkerPoolSpec {
    serde_saphyr::from_str(POOL).expect("fixture pool parses")
}

pub(crate) fn spec_with(change: impl FnOnce(&mut WorkerPoolSpec)) -> WorkerPoolSpec {
    let mut spec = spec();
    change(&mut spec);
    spec
}

pub(crate) fn catalog() -> ImageCatalogSpec {
    serde_saphyr::from_str(CATALOG).expect("fixture catalog parses")
}

pub(crate) fn control_plane() -> KubeVersion {
    KubeVersion::parse("1.31.1").unwrap()
}

pub(crate) fn now() -> jiff::Timestamp {
    "2025-06-01T00:00:00Z".parse().unwrap()
}

pub(crate) fn resolve(spec: &WorkerPoolSpec) -> ResolvedPool {
    ResolvedPool::resolve(spec, &control_plane()).expect("fixture resolves")
}

pub(crate) fn time(text: &str) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(text.parse().unwrap())
}

pub(crate) fn quantity(text: &str) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    k8s_openapi::apimachinery::pkg::api::resource::Quantity(text.to_owned())
}

/// A validation environment: the fixture catalog, control plane 1.31.1, "now" 2025-06-01.
pub(crate) struct Env {
    pub(crate) catalog: crate::crd::ImageCatalogSpec,
    pub(crate) annotations: crate::crd::Annotations,
    pub(crate) control_plane: KubeVersion,
    pub(crate) previous_control_plane: Option<KubeVersion>,
    pub(crate) in_progress: bool,
    pub(crate) now: jiff::Timestamp,
}

impl Env {
    pub(crate) fn new() -> Self {
        Self {
            catalog: catalog(),
            annotations: Default::default(),
            control_plane: control_plane(),
            previous_control_plane: None,
            in_progress: false,
            now: now(),
        }
    }

    pub(crate) fn ctx(&self) -> crate::validate::ValidationContext<'_> {
        crate::validate::ValidationContext {
            control_plane_version: self.control_plane,
            previous_control_plane_version: self.previous_control_plane,
            catalog: &self.catalog,
            annotations: &self.annotations,
            update_in_progress: self.in_progress,
            now: self.now,
        }
    }

    pub(crate) fn create(&self, spec: &WorkerPoolSpec) -> Result<(), crate::validate::Violations> {
        crate::validate::validate_pool(spec, &self.ctx())
    }

    pub(crate) fn update(
        &self,
        old: &WorkerPoolSpec,
        new: &WorkerPoolSpec,
    ) -> Result<(), crate::validate::Violations> {
        crate::validate::validate_pool_update(old, new, &self.ctx())
    }
}

/// Asserts that `result` failed with violations of `rule` only, and returns them.
#[track_caller]
pub(crate) fn only(
    result: Result<(), crate::validate::Violations>,
    rule: crate::validate::Rule,
) -> Vec<crate::validate::Violation> {
    let violations = result.expect_err("expected violations").0;
    assert!(
        violations.iter().all(|v| v.rule == rule),
        "expected only {rule:?}, got {violations:#?}"
    );
    violations
}

/// A rolling pool: the fixture without the in-place-only MCM settings.
pub(crate) fn rolling(spec: &mut WorkerPoolSpec) {
    spec.update_strategy = Some(crate::strategy::UpdateStrategy::AutoRollingUpdate);
    let mcm = spec.machine_controller_manager.as_mut().unwrap();
    mcm.machine_in_place_update_timeout = None;
    mcm.disable_health_timeout = None;
}

pub(crate) fn set_kubernetes(spec: &mut WorkerPoolSpec, version: Option<&str>) {
    spec.kubernetes.as_mut().unwrap().version = version.map(str::to_owned);
}
