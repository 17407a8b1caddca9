//! The Kubernetes objects a scenario starts from, built from its model: the image catalog, the
//! worker pool, and the watchdog's dependents. Pure functions, so what a scenario means for the
//! cluster can be read and tested without one.

use std::collections::BTreeMap;

use inplace_api::crd::{
    CatalogImage, Classification, ImageCatalog, ImageCatalogSpec, ImageUpdateStrategy,
    ImageVersionEntry, InPlaceUpdateSupport, KubernetesVersions, MachineControllerManagerSettings,
    MachineImage, Maintenance, MaintenanceAutoUpdate, MaintenanceTimeWindow, PoolKubernetes,
    PoolMachine, VersionEntry, WorkerPool, WorkerPoolSpec,
};
use inplace_api::strategy::UpdateStrategy;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use jiff::Timestamp;

use crate::scenario::{self, IntOrPercent, Scenario, Strategy};

/// Namespace of the pool, its machines and the control-plane components.
pub(crate) const NAMESPACE: &str = "rackproof";
/// The image name every scenario's versions belong to.
pub(crate) const IMAGE_NAME: &str = "rackproof-os";
/// The catalog's name.
pub(crate) const CATALOG: &str = "rackproof";
/// The watchdog's dependents, scaled to zero in an outage, in the order it scales them down.
pub(crate) const DEPENDENTS: [&str; 3] = [
    "machine-controller-manager",
    "kube-controller-manager",
    "cluster-autoscaler",
];
/// The machine type lab nodes are given.
pub(crate) const MACHINE_TYPE: &str = "lab";

fn int_or_percent(value: IntOrPercent) -> IntOrString {
    match value {
        IntOrPercent::Int(n) => IntOrString::Int(i32::try_from(n).unwrap_or(i32::MAX)),
        IntOrPercent::Percent(p) => IntOrString::String(format!("{p}%")),
    }
}

/// The pool's update strategy in the API's terms.
pub(crate) fn strategy(strategy: Strategy) -> UpdateStrategy {
    match strategy {
        Strategy::AutoRollingUpdate => UpdateStrategy::AutoRollingUpdate,
        Strategy::AutoInPlaceUpdate => UpdateStrategy::AutoInPlaceUpdate,
        Strategy::ManualInPlaceUpdate => UpdateStrategy::ManualInPlaceUpdate,
    }
}

/// The image catalog: every image version of the scenario, in-place updatable from the oldest on,
/// with the classification, expiration date and update strategy the scenario gives; the
/// Kubernetes versions the pool, the steps and `catalog.kubernetes` name.
pub(crate) fn image_catalog(scenario: &Scenario) -> ImageCatalog {
    let oldest = scenario
        .images
        .iter()
        .map(|i| i.version.value.as_str())
        .min_by(|a, b| version_order(a, b))
        .map(str::to_owned);
    let versions = scenario
        .images
        .iter()
        .map(|image| ImageVersionEntry {
            version: image.version.value.clone(),
            classification: image.classification.map(classification),
            expiration_date: image.expiration_date.map(|i| Time(i.0)),
            in_place_updates: Some(InPlaceUpdateSupport {
                supported: true,
                min_version_for_update: oldest.clone(),
            }),
        })
        .collect();
    let mut kubernetes: Vec<String> = scenario
        .pools()
        .iter()
        .map(|p| p.kubernetes.value.clone())
        .collect();
    for step in &scenario.steps {
        if let crate::scenario::Step::Update(update) = step {
            kubernetes.extend(update.kubernetes.iter().map(|v| v.value.clone()));
            kubernetes.extend(update.control_plane.iter().map(|v| v.value.clone()));
        }
    }
    for pool in scenario.pools() {
        kubernetes.extend(pool.control_plane.iter().map(|v| v.value.clone()));
    }
    let listed = &scenario.catalog.kubernetes;
    kubernetes.extend(listed.iter().map(|v| v.version.value.clone()));
    kubernetes.sort_by(|a, b| version_order(a, b));
    kubernetes.dedup();
    let spec = ImageCatalogSpec {
        kubernetes: KubernetesVersions {
            versions: kubernetes
                .into_iter()
                .map(|version| {
                    let entry = listed.iter().find(|v| v.version.value == version);
                    VersionEntry {
                        version,
                        classification: entry.and_then(|e| e.classification).map(classification),
                        expiration_date: entry.and_then(|e| e.expiration_date).map(|i| Time(i.0)),
                    }
                })
                .collect(),
        },
        machine_images: vec![CatalogImage {
            name: IMAGE_NAME.to_owned(),
            update_strategy: scenario.catalog.update_strategy.map(|s| match s {
                scenario::ImageUpdateStrategy::Patch => ImageUpdateStrategy::Patch,
                scenario::ImageUpdateStrategy::Minor => ImageUpdateStrategy::Minor,
                scenario::ImageUpdateStrategy::Major => ImageUpdateStrategy::Major,
            }),
            versions,
        }],
    };
    ImageCatalog::new(CATALOG, spec)
}

/// A classification in the API's terms.
fn classification(value: scenario::Classification) -> Classification {
    match value {
        scenario::Classification::Preview => Classification::Preview,
        scenario::Classification::Supported => Classification::Supported,
        scenario::Classification::Deprecated => Classification::Deprecated,
    }
}

/// The pool's maintenance settings in the API's terms, for a run that starts at `start`.
fn maintenance(value: &scenario::Maintenance, start: Timestamp) -> Maintenance {
    Maintenance {
        time_window: value
            .time_window
            .resolve(start)
            .map(|(begin, end)| MaintenanceTimeWindow { begin, end }),
        auto_update: Some(MaintenanceAutoUpdate {
            kubernetes_version: value.auto_update.kubernetes_version,
            machine_image_version: value.auto_update.machine_image_version,
        }),
        confine_spec_update_rollout: Some(value.confine_spec_update_rollout),
    }
}

/// Orders versions by their dot-separated numeric parts (`1.10.0` after `1.9.0`).
fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    let parts = |v: &str| {
        v.split('.')
            .map(|p| p.parse::<u64>().unwrap_or(0))
            .collect::<Vec<_>>()
    };
    parts(a).cmp(&parts(b))
}

/// A worker pool as the scenario starts it, with `nodes` nodes, in a run that starts at `start`.
pub(crate) fn worker_pool(pool: &scenario::Pool, nodes: u32, start: Timestamp) -> WorkerPool {
    let count = i32::try_from(nodes).unwrap_or(i32::MAX);
    let spec = WorkerPoolSpec {
        minimum: count,
        maximum: count,
        max_surge: Some(int_or_percent(*pool.max_surge)),
        max_unavailable: Some(int_or_percent(*pool.max_unavailable)),
        update_strategy: Some(strategy(*pool.strategy)),
        machine: PoolMachine {
            type_: MACHINE_TYPE.to_owned(),
            image: MachineImage {
                name: IMAGE_NAME.to_owned(),
                version: pool.os.value.clone(),
            },
        },
        volume: None,
        cri: None,
        kubernetes: Some(PoolKubernetes {
            version: Some(pool.kubernetes.value.clone()),
            kubelet: None,
        }),
        system_components: None,
        machine_controller_manager: Some(MachineControllerManagerSettings {
            machine_drain_timeout: Some(pool.machine_drain_timeout.to_string()),
            machine_in_place_update_timeout: Some(pool.machine_in_place_update_timeout.to_string()),
            max_evict_retries: Some(i32::try_from(pool.max_evict_retries).unwrap_or(i32::MAX)),
            ..MachineControllerManagerSettings::default()
        }),
        credentials_rotation: None,
        maintenance: pool.maintenance.as_ref().map(|m| maintenance(m, start)),
    };
    let mut object = WorkerPool::new(&pool.name, spec);
    object.metadata.namespace = Some(NAMESPACE.to_owned());
    object
}

/// A dependent Deployment of the watchdog, with one replica.
pub(crate) fn dependent(name: &str) -> Deployment {
    let labels = BTreeMap::from([("app".to_owned(), name.to_owned())]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: name.to_owned(),
                        image: Some(format!("{name}:lab")),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(text: &str) -> Scenario {
        crate::load::load_str(std::path::Path::new("s.yaml"), text)
            .expect("the fixture loads")
            .scenario
    }

    const MAINTAINED: &str = r#"
lab: { nodes: 1 }
images:
  - { version: "1.0.0", classification: deprecated, expirationDate: "2026-03-02T21:30:00Z" }
  - { version: "1.1.0", classification: preview }
catalog:
  updateStrategy: patch
  kubernetes:
    - { version: "1.33.5", expirationDate: "2026-03-02T21:30:00Z" }
    - version: "1.35.0"
pool:
  strategy: AutoInPlaceUpdate
  os: "1.0.0"
  kubernetes: "1.33.5"
  controlPlane: "1.35.0"
  maintenance:
    timeWindow: { begin: "220000+0000", end: "230000+0000" }
    autoUpdate: { machineImageVersion: false }
    confineSpecUpdateRollout: true
"#;

    #[test]
    fn the_catalog_carries_classification_expiry_and_update_strategy() {
        let catalog = image_catalog(&scenario(MAINTAINED)).spec;
        let image = &catalog.machine_images[0];
        assert_eq!(image.update_strategy, Some(ImageUpdateStrategy::Patch));
        assert_eq!(
            image.versions[0].classification,
            Some(Classification::Deprecated)
        );
        assert_eq!(
            image.versions[0].expiration_date.as_ref().unwrap().0,
            "2026-03-02T21:30:00Z".parse().unwrap()
        );
        assert_eq!(
            image.versions[1].classification,
            Some(Classification::Preview)
        );
        let kubernetes: Vec<(&str, bool)> = catalog
            .kubernetes
            .versions
            .iter()
            .map(|v| (v.version.as_str(), v.expiration_date.is_some()))
            .collect();
        assert_eq!(kubernetes, [("1.33.5", true), ("1.35.0", false)]);
    }

    #[test]
    fn the_pool_carries_its_maintenance_settings() {
        let pool = worker_pool(scenario(MAINTAINED).first_pool(), 1, Timestamp::UNIX_EPOCH);
        let maintenance = pool.spec.maintenance.expect("maintenance settings");
        assert!(maintenance.window().unwrap().is_ok());
        assert!(!maintenance.auto_update_machine_image());
        assert!(maintenance.auto_update_kubernetes());
        assert!(maintenance.confine_spec_update_rollout());
    }

    #[test]
    fn a_window_written_relative_to_the_start_is_the_time_of_day_then() {
        let relative = MAINTAINED.replace(
            r#"timeWindow: { begin: "220000+0000", end: "230000+0000" }"#,
            "timeWindow: { opensAfter: 1m30s, lasts: 30m }",
        );
        assert_ne!(relative, MAINTAINED, "the fixture names its window");
        let start: Timestamp = "2026-11-27T23:50:00Z".parse().unwrap();
        let pool = worker_pool(scenario(&relative).first_pool(), 1, start);
        let window = pool.spec.maintenance.unwrap().time_window.unwrap();
        assert_eq!(
            (window.begin.as_str(), window.end.as_str()),
            ("235130+0000", "002130+0000")
        );
    }
}
