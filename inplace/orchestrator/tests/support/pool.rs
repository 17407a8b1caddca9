//! WorkerPool fixtures: an image catalog, pools, and readers for what the WorkerPool controller
//! renders.

use inplace_api::crd::{ImageCatalog, MachineDeployment, WorkerPool};
use inplace_api::keys::LABEL_WORKER_POOL;
use inplace_api::osc::OperatingSystemConfig;
use inplace_api::osc::secret::decode_secret;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::{Lab, NS};

/// Namespace of the OSC Secrets in these tests (the default of `Config::osc_namespace`).
pub(crate) const OSC_NS: &str = "kube-system";
pub(crate) const IMAGE_SERVER: &str = "http://127.0.0.1:18080/slots";

/// The catalog: gardenlinux 1630 → 1631 → 1632 in place, Kubernetes 1.29 to 1.31.
pub(crate) fn catalog() -> Value {
    json!({
        "apiVersion": "rackproof.dev/v1alpha1",
        "kind": "ImageCatalog",
        "metadata": { "name": "rackproof" },
        "spec": {
            "kubernetes": { "versions": [
                { "version": "1.29.0", "classification": "supported" },
                { "version": "1.30.4", "classification": "supported" },
                { "version": "1.31.1", "classification": "supported" }
            ] },
            "machineImages": [
                { "name": "gardenlinux", "versions": [
                    { "version": "1630.0.0", "inPlaceUpdates": { "supported": true, "minVersionForUpdate": "1443.8.0" } },
                    { "version": "1631.0.0", "inPlaceUpdates": { "supported": true, "minVersionForUpdate": "1630.0.0" } },
                    { "version": "1632.0.0", "inPlaceUpdates": { "supported": true, "minVersionForUpdate": "1630.0.0" } }
                ] },
                { "name": "suse-chost", "versions": [
                    { "version": "15.3.20220818", "inPlaceUpdates": { "supported": true, "minVersionForUpdate": "15.3.20220818" } }
                ] }
            ]
        }
    })
}

/// A pool of three nodes on gardenlinux 1630.0.0 and Kubernetes 1.29.0.
pub(crate) fn pool(name: &str, strategy: &str) -> Value {
    json!({
        "apiVersion": "rackproof.dev/v1alpha1",
        "kind": "WorkerPool",
        "metadata": { "name": name, "namespace": NS },
        "spec": {
            "minimum": 3,
            "maximum": 5,
            "maxSurge": 0,
            "maxUnavailable": 1,
            "updateStrategy": strategy,
            "machine": { "type": "rack-small", "image": { "name": "gardenlinux", "version": "1630.0.0" } },
            "kubernetes": { "version": "1.29.0" },
            "machineControllerManager": {
                "machineDrainTimeout": "2h",
                "machineInPlaceUpdateTimeout": "10m",
                "maxEvictRetries": 3
            }
        }
    })
}

impl Lab {
    pub(crate) async fn create_catalog(&self) {
        let catalog: ImageCatalog = serde_json::from_value(catalog()).expect("catalog fixture");
        Api::<ImageCatalog>::all(self.client.clone())
            .create(&PostParams::default(), &catalog)
            .await
            .expect("create imagecatalog");
    }

    pub(crate) async fn create_pool(&self, pool: Value) {
        let pool: WorkerPool = serde_json::from_value(pool).expect("pool fixture");
        Api::<WorkerPool>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &pool)
            .await
            .expect("create workerpool");
    }

    /// Merge-patches the pool (spec changes, annotations).
    pub(crate) async fn patch_pool(&self, name: &str, patch: Value) {
        Api::<WorkerPool>::namespaced(self.client.clone(), NS)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch workerpool");
    }

    pub(crate) async fn pool(&self, name: &str) -> WorkerPool {
        Api::<WorkerPool>::namespaced(self.client.clone(), NS)
            .get(name)
            .await
            .unwrap()
    }

    pub(crate) async fn pool_condition(&self, name: &str, type_: &str) -> Option<Condition> {
        self.pool(name)
            .await
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == type_)
    }

    pub(crate) async fn deployment_opt(&self, name: &str) -> Option<MachineDeployment> {
        Api::<MachineDeployment>::namespaced(self.client.clone(), NS)
            .get_opt(name)
            .await
            .unwrap()
    }

    /// The OSC Secrets of `pool`.
    pub(crate) async fn osc_secrets(&self, pool: &str) -> Vec<Secret> {
        let params = ListParams::default().labels(&format!("{LABEL_WORKER_POOL}={pool}"));
        Api::<Secret>::namespaced(self.client.clone(), OSC_NS)
            .list(&params)
            .await
            .unwrap()
            .items
    }

    /// The pool's only OSC Secret and its document.
    pub(crate) async fn osc(&self, pool: &str) -> (Secret, OperatingSystemConfig) {
        let secrets = self.osc_secrets(pool).await;
        assert_eq!(
            secrets.len(),
            1,
            "one OSC secret for {pool}: {:?}",
            secrets.iter().map(|s| s.name_any()).collect::<Vec<_>>()
        );
        let decoded = decode_secret(&secrets[0]).expect("the OSC secret decodes");
        (secrets[0].clone(), decoded.osc)
    }

    /// Waits until the pool's status reflects its current generation and it has a rendered
    /// MachineDeployment.
    pub(crate) async fn wait_pool_rendered(&self, name: &str) -> (WorkerPool, MachineDeployment) {
        self.wait_for(
            "the pool to be rendered",
            std::time::Duration::from_secs(120),
            || async {
                let pool = self.pool(name).await;
                let observed = pool.status.as_ref()?.observed_generation;
                if observed != pool.metadata.generation {
                    return None;
                }
                let md = self.deployment_opt(name).await?;
                (!self.osc_secrets(name).await.is_empty()).then_some((pool, md))
            },
        )
        .await
    }
}
