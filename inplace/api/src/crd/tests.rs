//! Tests of the CRD types: names, scopes, subresources, and reading the examples of GEP-31 and
//! the Gardener documentation.

use super::*;
use crate::keys::MachinePhase;
use crate::strategy::{OrchestrationType, UpdateStrategy};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResourceExt;

#[test]
fn crds_have_the_expected_names_scopes_and_subresources() {
    let crds = crds();
    let find = |name: &str| {
        crds.iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("crd {name} missing"))
    };
    let pool = find("workerpools.rackproof.dev");
    assert_eq!(pool.spec.scope, "Namespaced");
    assert!(
        pool.spec.versions[0]
            .subresources
            .as_ref()
            .unwrap()
            .status
            .is_some()
    );
    assert_eq!(find("imagecatalogs.rackproof.dev").spec.scope, "Cluster");
    for name in [
        "machinedeployments.machine.sapcloud.io",
        "machinesets.machine.sapcloud.io",
    ] {
        let crd = find(name);
        let sub = crd.spec.versions[0].subresources.as_ref().unwrap();
        let scale = sub
            .scale
            .as_ref()
            .unwrap_or_else(|| panic!("{name} needs a scale subresource"));
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(scale.status_replicas_path, ".status.replicas");
        assert!(sub.status.is_some());
    }
    let machine = find("machines.machine.sapcloud.io");
    assert_eq!(machine.spec.versions[0].name, "v1alpha1");
    assert!(
        machine.spec.versions[0]
            .subresources
            .as_ref()
            .unwrap()
            .status
            .is_some()
    );
}

#[test]
fn surge_and_unavailability_are_int_or_string_in_the_schema() {
    let json = serde_json::to_value(WorkerPool::crd()).unwrap();
    let props = &json["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(
        props["maxUnavailable"]["x-kubernetes-int-or-string"], true,
        "{props}"
    );
    assert_eq!(props["maxSurge"]["x-kubernetes-int-or-string"], true);
}

const MCM_DEPLOYMENT: &str = r#"
apiVersion: machine.sapcloud.io/v1alpha1
kind: MachineDeployment
metadata:
  name: pool-a
  namespace: shoot--lab
spec:
  replicas: 1
  selector:
    matchLabels:
      name: pool-a
  strategy:
    inPlaceUpdate:
      maxUnavailable: 1
      maxSurge: 0
      orchestrationType: Auto
    type: InPlaceUpdate
  template:
    metadata:
      labels:
        name: pool-a
    spec:
      class:
        kind: MachineClass
        name: pool-a-1f2e3
      nodeTemplate:
        metadata:
          labels:
            worker.gardener.cloud/pool: pool-a
      drainTimeout: 2h0m0s
      inPlaceUpdateTimeout: 10m0s
      disableHealthTimeout: true
status:
  replicas: 1
  updatedReplicas: 0
  readyReplicas: 1
  conditions:
  - type: Progressing
    status: "True"
    reason: NewMachineSetAvailable
"#;

#[test]
fn mcm_in_place_machine_deployment_reads_and_round_trips() {
    let md: MachineDeployment = serde_saphyr::from_str(MCM_DEPLOYMENT).unwrap();
    let strategy = &md.spec.strategy;
    assert_eq!(
        strategy.type_,
        Some(MachineDeploymentStrategyType::InPlaceUpdate)
    );
    let in_place = strategy.in_place_update.as_ref().unwrap();
    assert_eq!(in_place.max_unavailable, Some(IntOrString::Int(1)));
    assert_eq!(in_place.orchestration_type, Some(OrchestrationType::Auto));
    assert_eq!(
        strategy.update_strategy(),
        Some(UpdateStrategy::AutoInPlaceUpdate)
    );
    assert_eq!(
        md.spec.template.spec.in_place_update_timeout.as_deref(),
        Some("10m0s")
    );
    assert_eq!(
        md.status.as_ref().unwrap().conditions[0].status,
        CONDITION_TRUE
    );

    let json = serde_json::to_value(&md).unwrap();
    assert_eq!(json["spec"]["strategy"]["type"], "InPlaceUpdate");
    assert_eq!(
        json["spec"]["strategy"]["inPlaceUpdate"]["orchestrationType"],
        "Auto"
    );
    assert_eq!(json["spec"]["template"]["spec"]["drainTimeout"], "2h0m0s");
    let back: MachineDeployment = serde_json::from_value(json).unwrap();
    assert_eq!(back, md);
}

#[test]
fn pool_strategy_maps_onto_deployment_strategy() {
    let one = Some(IntOrString::Int(1));
    let zero = Some(IntOrString::Int(0));
    for strategy in [
        UpdateStrategy::AutoRollingUpdate,
        UpdateStrategy::AutoInPlaceUpdate,
        UpdateStrategy::ManualInPlaceUpdate,
    ] {
        let md = MachineDeploymentStrategy::for_pool(strategy, zero.clone(), one.clone());
        assert_eq!(md.update_strategy(), Some(strategy));
    }
    let manual = MachineDeploymentStrategy::for_pool(
        UpdateStrategy::ManualInPlaceUpdate,
        zero.clone(),
        one.clone(),
    );
    assert_eq!(
        manual.type_,
        Some(MachineDeploymentStrategyType::InPlaceUpdate)
    );
    assert_eq!(
        manual.in_place_update.unwrap().orchestration_type,
        Some(OrchestrationType::Manual)
    );
    let rolling = MachineDeploymentStrategy::for_pool(UpdateStrategy::AutoRollingUpdate, zero, one);
    assert_eq!(
        rolling.type_,
        Some(MachineDeploymentStrategyType::RollingUpdate)
    );
    assert!(rolling.in_place_update.is_none());
    assert_eq!(
        MachineDeploymentStrategy::default().update_strategy(),
        Some(UpdateStrategy::AutoRollingUpdate)
    );
}

#[test]
fn machine_reports_node_and_phase() {
    let machine: Machine = serde_json::from_value(serde_json::json!({
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": "pool-a-1f2e3-x1", "namespace": "shoot--lab", "labels": {"node": "node-1"}},
        "spec": {"class": {"kind": "MachineClass", "name": "pool-a-1f2e3"}, "providerID": "lab://rack1/node-1"},
        "status": {
            "currentStatus": {"phase": "InPlaceUpdating", "timeoutActive": true, "lastUpdateTime": "2025-01-01T00:00:00Z"},
            "lastOperation": {"description": "Node drain successful. Node is ready for update", "state": "Processing", "type": "InPlaceUpdate"}
        }
    }))
    .unwrap();
    assert_eq!(machine.node_name(), Some("node-1"));
    assert_eq!(machine.phase(), Some(&MachinePhase::InPlaceUpdating));
    let status = machine.status.as_ref().unwrap();
    assert_eq!(
        status.last_operation.type_,
        Some(crate::keys::MachineOperationType::InPlaceUpdate)
    );
    assert!(status.current_status.timeout_active);
}

#[test]
fn machine_set_conditions_use_mcm_json_name() {
    let status: MachineSetStatus = serde_json::from_value(serde_json::json!({
        "replicas": 2,
        "machineSetCondition": [{"type": "Frozen", "status": "True"}]
    }))
    .unwrap();
    assert_eq!(status.conditions[0].type_, "Frozen");
    assert!(
        serde_json::to_value(&status)
            .unwrap()
            .get("machineSetCondition")
            .is_some()
    );
}

const POOL: &str = r#"
minimum: 5
maximum: 5
maxSurge: 0
maxUnavailable: 2
updateStrategy: AutoInPlaceUpdate
machine:
  type: m5.large
  image:
    name: gardenlinux
    version: 1443.8.0
volume:
  type: ssd
  size: 50Gi
kubernetes:
  version: 1.27.3
  kubelet:
    evictionHard:
      memoryAvailable: 100Mi
      imageFSAvailable: 5%
    kubeReserved:
      cpu: 80m
      memory: 1Gi
machineControllerManager:
  machineDrainTimeout: 2h
  machineInPlaceUpdateTimeout: 10m
  maxEvictRetries: 10
  disableHealthTimeout: true
credentialsRotation:
  certificateAuthorities:
    lastInitiationTime: "2024-01-01T12:30:00Z"
"#;

#[test]
fn gep_worker_example_reads_as_a_pool_spec() {
    let spec: WorkerPoolSpec = serde_saphyr::from_str(POOL).unwrap();
    assert_eq!(spec.strategy(), UpdateStrategy::AutoInPlaceUpdate);
    assert_eq!(spec.max_unavailable, Some(IntOrString::Int(2)));
    assert_eq!(spec.kubernetes_version(), Some("1.27.3"));
    let eviction = spec.kubelet().unwrap().eviction_hard.as_ref().unwrap();
    assert_eq!(eviction.image_fs_available.as_deref(), Some("5%"));
    assert!(
        spec.credentials_rotation
            .as_ref()
            .unwrap()
            .ca_initiated()
            .is_some()
    );
    assert!(!spec.node_local_dns_enabled());
}

#[test]
fn unknown_pool_fields_are_refused() {
    let err =
        serde_saphyr::from_str::<WorkerPoolSpec>(&format!("{POOL}\nmaxSurgee: 1\n")).unwrap_err();
    assert!(err.to_string().contains("maxSurgee"), "{err}");
}

#[test]
fn strategy_defaults_to_rolling_update() {
    let spec: WorkerPoolSpec =
        serde_saphyr::from_str(&POOL.replace("updateStrategy: AutoInPlaceUpdate\n", "")).unwrap();
    assert_eq!(spec.strategy(), UpdateStrategy::AutoRollingUpdate);
}

#[test]
fn pending_worker_updates_mark_an_update_in_progress() {
    let mut status = WorkerPoolStatus::default();
    assert!(!status.update_in_progress());
    status.in_place_updates = Some(InPlaceUpdatesStatus {
        pending_worker_updates: Some(PendingWorkerUpdates {
            auto_in_place_update: vec![],
            manual_in_place_update: vec!["pool-a".to_owned()],
        }),
    });
    assert!(status.update_in_progress());
}

const GEP_CATALOG: &str = r#"
kubernetes:
  versions:
  - version: 1.31.1
  - classification: deprecated
    expirationDate: "2022-11-30T23:59:59Z"
    version: 1.24.5
machineImages:
- name: gardenlinux
  versions:
  - version: 1443.8.0
    expirationDate: "2025-02-28T23:59:59Z"
    inPlaceUpdates:
      supported: true
      minVersionForUpdate: 1312.3.0
  - version: 1443.7.0
  - version: 1632.0.0
    classification: supported
    inPlaceUpdates:
      supported: true
      minVersionForUpdate: 1630.0.0
"#;

#[test]
fn catalog_lookups_compare_versions_numerically() {
    let catalog: ImageCatalogSpec = serde_saphyr::from_str(GEP_CATALOG).unwrap();
    let v = |s| crate::version::ImageVersion::parse(s).unwrap();
    let entry = catalog.image_version("gardenlinux", &v("1632.0")).unwrap();
    assert_eq!(entry.classification, Some(Classification::Supported));
    assert_eq!(
        entry
            .in_place_updates
            .as_ref()
            .unwrap()
            .min_version_for_update
            .as_deref(),
        Some("1630.0.0")
    );
    assert!(
        catalog
            .image_version("gardenlinux", &v("1443.7.0"))
            .unwrap()
            .in_place_updates
            .is_none()
    );
    assert!(
        catalog
            .image_version("suse-chost", &v("1632.0.0"))
            .is_none()
    );
    let k = crate::version::KubeVersion::parse("1.24.5").unwrap();
    assert_eq!(
        catalog.kubernetes_version(&k).unwrap().classification,
        Some(Classification::Deprecated)
    );
}

#[test]
fn image_update_strategy_reads_and_defaults_to_major() {
    let yaml = r#"
machineImages:
- name: gardenlinux
  updateStrategy: patch
  versions: [{ version: 1632.0.0 }]
- name: suse-chost
  versions: [{ version: 15.3.20220818 }]
"#;
    let catalog: ImageCatalogSpec = serde_saphyr::from_str(yaml).unwrap();
    assert_eq!(
        catalog.machine_images[0].update_strategy(),
        ImageUpdateStrategy::Patch
    );
    assert_eq!(
        catalog.machine_images[1].update_strategy(),
        ImageUpdateStrategy::Major,
        "Gardener's default is major"
    );
    // Absent stays absent on the wire, so existing catalogs round-trip unchanged.
    let json = serde_json::to_value(&catalog).unwrap();
    assert_eq!(json["machineImages"][0]["updateStrategy"], "patch");
    assert!(json["machineImages"][1].get("updateStrategy").is_none());
    let bad = serde_saphyr::from_str::<ImageCatalogSpec>(
        "machineImages: [{ name: x, updateStrategy: sometimes, versions: [] }]",
    );
    assert!(bad.is_err(), "an unknown strategy is refused");
    let schema = serde_json::to_value(ImageCatalog::crd()).unwrap();
    let images = &schema["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"]["machineImages"]["items"]["properties"];
    assert_eq!(
        images["updateStrategy"]["enum"],
        serde_json::json!(["patch", "minor", "major"])
    );
}

#[test]
fn version_classification_defaults_to_supported() {
    let catalog: ImageCatalogSpec = serde_saphyr::from_str(GEP_CATALOG).unwrap();
    let v = |s| crate::version::ImageVersion::parse(s).unwrap();
    let unclassified = catalog
        .image_version("gardenlinux", &v("1443.7.0"))
        .unwrap();
    assert_eq!(unclassified.classification, None);
    assert_eq!(unclassified.classification(), Classification::Supported);
}

#[test]
fn expiration_date_itself_counts_as_expired() {
    let date = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2022-11-30T23:59:59Z".parse().unwrap(),
    );
    let before: jiff::Timestamp = "2022-11-30T23:59:58Z".parse().unwrap();
    assert!(!is_expired(Some(&date), before));
    assert!(is_expired(Some(&date), date.0));
    assert!(!is_expired(None, date.0));
}

#[test]
fn print_columns_are_all_declared() {
    let columns = |crd: CustomResourceDefinition| -> Vec<String> {
        crd.spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.name)
            .collect()
    };
    assert_eq!(
        columns(WorkerPool::crd()),
        ["Strategy", "Image", "Kubernetes"]
    );
    assert_eq!(
        columns(MachineDeployment::crd()),
        ["Ready", "Desired", "Up-to-date"]
    );
    assert_eq!(columns(Machine::crd()), ["Status", "Node"]);
}

#[test]
fn maintenance_settings_read_with_gardener_defaults() {
    let yaml = format!(
        "{}maintenance:\n  timeWindow: {{ begin: 220000+0100, end: 230000+0100 }}\n  autoUpdate: {{ machineImageVersion: false }}\n",
        crate::testing::POOL.trim_start()
    );
    let spec: WorkerPoolSpec = serde_saphyr::from_str(&yaml).unwrap();
    let maintenance = spec.maintenance.as_ref().unwrap();
    assert!(maintenance.window().unwrap().is_ok());
    assert!(maintenance.auto_update_kubernetes(), "true when absent");
    assert!(!maintenance.auto_update_machine_image());
    assert!(!maintenance.confine_spec_update_rollout());
    let status: WorkerPoolStatus = serde_json::from_value(serde_json::json!({
        "lastMaintenance": {
            "description": "All maintenance operations successful.",
            "state": "Succeeded",
            "triggeredTime": "2023-07-28T09:07:27Z"
        }
    }))
    .unwrap();
    assert_eq!(
        status.last_maintenance.unwrap().state,
        MAINTENANCE_SUCCEEDED
    );
}
