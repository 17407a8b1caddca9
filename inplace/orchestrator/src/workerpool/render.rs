//! What a WorkerPool's accepted spec becomes: its MachineDeployment spec and its OSC Secret.
//! Pure functions; [`super::write`] puts the results into the API.

use std::collections::BTreeMap;

use inplace_api::crd::{
    ClassSpec, MachineDeploymentSpec, MachineDeploymentStrategy, MachineSpec, MachineTemplateSpec,
    NodeTemplateSpec, TemplateMetadata, WorkerPoolSpec,
};
use inplace_api::hash::{PoolHash, machine_class_hash, pool_hash};
use inplace_api::keys::LABEL_WORKER_POOL;
use inplace_api::osc::secret::{OscSecretError, encode_secret, secret_name};
use inplace_api::osc::{
    InPlaceUpdates, InPlaceUpdatesStatus, OperatingSystemConfig, OsUpdate, OscSpec, OscStatus,
};
use inplace_api::pool::ResolvedPool;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::Config;

/// Machine template annotation: the pool's full [`machine_class_hash`]. Every in-place update
/// trigger changes it, hence the template hash, hence the MachineSet.
pub const ANNOTATION_MACHINE_CLASS_HASH: &str = "rackproof.dev/machine-class-hash";
/// Machine template annotation: `<namespace>/<name>` of the pool's OSC Secret, for the machine
/// provider to hand to the node agent (`rackproof-agent run --osc-secret ...`).
pub const ANNOTATION_OSC_SECRET: &str = "rackproof.dev/osc-secret";
/// Node template label: the machine type.
pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";

/// The rendered objects of one accepted spec.
#[derive(Debug, Clone)]
pub(crate) struct Rendered {
    /// The machine class hash of the spec (the pool's "current hash" once the nodes have it).
    pub(crate) class_hash: PoolHash,
    /// The MachineDeployment spec; `replicas` is the pool's minimum (the writer keeps a replica
    /// count the autoscaler set within minimum..maximum).
    pub(crate) deployment: MachineDeploymentSpec,
    /// The OSC Secret, named and namespaced.
    pub(crate) secret: Secret,
}

/// The OSC Secret name of a pool: `gardener-node-agent-<pool>-<pool hash, 16 hex>`. Callers that
/// know the pool spec and the control-plane version compute it with this; everyone else reads
/// `status.nodeAgentSecretName` of the pool.
pub fn osc_secret_name(pool: &str, resolved: &ResolvedPool) -> String {
    secret_name(pool, &pool_hash(resolved))
}

/// Renders `spec` (already accepted, `resolved` from it) of the pool `pool`.
pub(crate) fn render(
    pool: &str,
    spec: &WorkerPoolSpec,
    resolved: &ResolvedPool,
    config: &Config,
) -> Result<Rendered, OscSecretError> {
    let class_hash = machine_class_hash(resolved);
    let secret_name = osc_secret_name(pool, resolved);
    let pool_labels = BTreeMap::from([(LABEL_WORKER_POOL.to_owned(), pool.to_owned())]);
    let mcm = spec.machine_controller_manager.clone().unwrap_or_default();
    let in_place = resolved.strategy.is_in_place();
    let mut node_labels = pool_labels.clone();
    node_labels.insert(LABEL_INSTANCE_TYPE.to_owned(), spec.machine.type_.clone());
    let template = MachineTemplateSpec {
        metadata: TemplateMetadata {
            labels: pool_labels.clone(),
            annotations: BTreeMap::from([
                (
                    ANNOTATION_MACHINE_CLASS_HASH.to_owned(),
                    class_hash.as_str().to_owned(),
                ),
                (
                    ANNOTATION_OSC_SECRET.to_owned(),
                    format!("{}/{secret_name}", config.osc_namespace),
                ),
            ]),
        },
        spec: MachineSpec {
            class: Some(ClassSpec {
                api_group: String::new(),
                kind: "MachineClass".to_owned(),
                name: format!("{pool}-{}", class_hash.short()),
            }),
            node_template: Some(NodeTemplateSpec {
                metadata: TemplateMetadata {
                    labels: node_labels,
                    annotations: BTreeMap::new(),
                },
                spec: None,
            }),
            drain_timeout: mcm.machine_drain_timeout,
            health_timeout: mcm.machine_health_timeout,
            creation_timeout: mcm.machine_creation_timeout,
            in_place_update_timeout: mcm.machine_in_place_update_timeout,
            // In-place pools default to true (their machines are expected to be unavailable a while).
            disable_health_timeout: mcm.disable_health_timeout.or(in_place.then_some(true)),
            max_evict_retries: mcm.max_evict_retries,
            ..MachineSpec::default()
        },
    };
    let deployment = MachineDeploymentSpec {
        replicas: spec.minimum.max(0),
        selector: Some(LabelSelector {
            match_labels: Some(pool_labels),
            ..LabelSelector::default()
        }),
        template,
        strategy: MachineDeploymentStrategy::for_pool(
            resolved.strategy,
            spec.max_surge.clone(),
            spec.max_unavailable.clone(),
        ),
        ..MachineDeploymentSpec::default()
    };
    let (in_place_updates, status) = if in_place {
        let os_update = OsUpdate {
            command: config.os_update_command.clone(),
            args: vec![
                "os-update".to_owned(),
                "--version".to_owned(),
                spec.machine.image.version.clone(),
                "--image-server".to_owned(),
                config.image_server_url.clone(),
            ],
        };
        (
            Some(InPlaceUpdates::for_pool(
                spec,
                &resolved.inputs.kubelet_version,
            )),
            Some(OscStatus {
                in_place_updates: Some(InPlaceUpdatesStatus {
                    os_update: Some(os_update),
                }),
            }),
        )
    } else {
        (None, None)
    };
    let osc = OperatingSystemConfig::new(
        OscSpec {
            pool: pool.to_owned(),
            in_place_updates,
            files: Vec::new(),
        },
        status,
    );
    let secret = encode_secret(&osc, &secret_name, &config.osc_namespace)?;
    Ok(Rendered {
        class_hash,
        deployment,
        secret,
    })
}
