//! Custom resources: our own `WorkerPool` and `ImageCatalog` (`rackproof.dev/v1alpha1`) and the
//! `machine.sapcloud.io/v1alpha1` subset of MCM (`MachineDeployment`, `MachineSet`, `Machine`)
//! with MCM's JSON field names, so a real MCM and Rackproof's orchestrator read the same objects.
//!
//! [`crds`] returns the CustomResourceDefinitions for the API server and the harness to install.

mod catalog;
mod kubelet;
mod machine;
mod machine_shared;
mod machinedeployment;
mod machineset;
mod workerpool;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use catalog::{
    CatalogImage, Classification, ImageCatalog, ImageCatalogSpec, ImageUpdateStrategy,
    ImageVersionEntry, InPlaceUpdateSupport, KubernetesVersions, VersionEntry, is_expired,
};
pub use kubelet::{EvictionHard, KubeletConfig, Reserved};
pub use machine::{CurrentStatus, Machine, MachineSpec, MachineStatus};
pub use machine_shared::{
    CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN, ClassSpec, LastOperation, MachineSummary,
    MachineTemplateSpec, NodeTemplateSpec, TemplateMetadata,
};
pub use machinedeployment::{
    InPlaceUpdateMachineDeployment, MachineDeployment, MachineDeploymentCondition,
    MachineDeploymentSpec, MachineDeploymentStatus, MachineDeploymentStrategy,
    MachineDeploymentStrategyType, RollingUpdateMachineDeployment,
};
pub use machineset::{MachineSet, MachineSetCondition, MachineSetSpec, MachineSetStatus};
pub use workerpool::{
    Annotations, CredentialsRotation, Cri, DEFAULT_CRI, DEFAULT_MACHINE_DRAIN_TIMEOUT,
    DEFAULT_MACHINE_HEALTH_TIMEOUT, DEFAULT_MAX_EVICT_RETRIES, InPlaceUpdatesStatus,
    LastMaintenance, MAINTENANCE_FAILED, MAINTENANCE_SUCCEEDED, MachineControllerManagerSettings,
    MachineImage, Maintenance, MaintenanceAutoUpdate, MaintenanceTimeWindow, NodeLocalDns,
    PendingWorkerUpdates, PoolKubernetes, PoolMachine, RotationTimes, SystemComponents, Volume,
    WorkerPool, WorkerPoolSpec, WorkerPoolStatus,
};

/// Every CustomResourceDefinition of this crate.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        WorkerPool::crd(),
        ImageCatalog::crd(),
        MachineDeployment::crd(),
        MachineSet::crd(),
        Machine::crd(),
    ]
}

#[cfg(test)]
mod tests;
