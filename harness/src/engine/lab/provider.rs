//! The machine provider (the part of machine-controller-manager a cloud provider plays): hands lab
//! machines to the orchestrator's Machine objects, for every backend. The contract is in
//! `inplace_orchestrator`'s docs: bind a Machine by labelling it `node: NAME`; a new machine gets
//! a freshly imaged disk with the pool's current OS and is powered on; a machine whose Machine
//! goes away is powered off and free again. With several pools, a Machine takes a free machine
//! of its own pool (the `worker.gardener.cloud/pool` label it carries), else a spare, and the
//! machine gets the identity of a node of that pool.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use inplace_api::crd::Machine;
use inplace_api::unmanaged::{self, Unmanaged};
use inplace_orchestrator::workerpool::ANNOTATION_OSC_SECRET;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use rackproof_std::LockExt;
use serde_json::json;
use tracing::Instrument;

use crate::engine::cluster::objects::NAMESPACE;
use crate::engine::judge::timeline::EntryKind;
use crate::engine::lab::{Lab, LabError};
use crate::engine::shared::Shared;

/// Where a pool's OperatingSystemConfig Secret lives (the Machine's annotation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OscLocation {
    pub namespace: String,
    pub name: String,
}

/// Why a lab machine could not be provisioned for a Machine.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProvisionError {
    /// The pool's OSC Secret could not be read. kube's error is in the message, not a source:
    /// its own message already repeats its source.
    #[error("failed to read the OSC secret {}/{}: {error}", osc.namespace, osc.name)]
    ReadOsc {
        osc: OscLocation,
        error: kube::Error,
    },
    /// The OSC Secret does not hold an OSC.
    #[error(transparent)]
    DecodeOsc(#[from] inplace_api::osc::secret::OscSecretError),
    /// The OSC names no OS version to install.
    #[error(
        "the OSC in {}/{} names no operating system version",
        osc.namespace,
        osc.name
    )]
    NoVersion { osc: OscLocation },
    /// The lab could not give the machine its disk and identity.
    #[error(transparent)]
    Lab(#[from] LabError),
}

#[derive(Debug, Default)]
struct Bindings {
    /// Machine object name → lab node.
    by_machine: BTreeMap<String, String>,
    free: BTreeSet<String>,
    /// The pool each lab node is kept for (with several pools; a node not listed is a spare
    /// any pool may take).
    owners: BTreeMap<String, String>,
}

impl Bindings {
    /// Takes a free lab node for a Machine of `pool`: one kept for the pool, else a spare.
    fn take(&mut self, pool: &str) -> Option<String> {
        let node = self
            .free
            .iter()
            .find(|n| self.owners.get(*n).is_some_and(|p| p == pool))
            .or_else(|| self.free.iter().find(|n| !self.owners.contains_key(*n)))?
            .clone();
        self.free.remove(&node);
        Some(node)
    }
}

/// Binds Machines to the lab's machines.
pub(crate) struct Provider {
    lab: Arc<Lab>,
    /// The admin client (reads the OSC Secret).
    client: Client,
    /// The pool of a Machine that carries no pool label.
    default_pool: String,
    bindings: Mutex<Bindings>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("lab", &self.lab)
            .field("bindings", &self.bindings)
            .finish_non_exhaustive()
    }
}

impl Provider {
    /// A provider of `lab`'s machines; `owners` keeps lab nodes for pools (empty: any Machine
    /// takes any free machine), `default_pool` names the pool of a Machine without a pool label.
    pub(crate) fn new(
        lab: Arc<Lab>,
        client: Client,
        owners: BTreeMap<String, String>,
        default_pool: String,
    ) -> Arc<Self> {
        let free = lab.node_names().into_iter().collect();
        Arc::new(Self {
            lab,
            client,
            default_pool,
            bindings: Mutex::new(Bindings {
                by_machine: BTreeMap::new(),
                free,
                owners,
            }),
        })
    }

    /// Watches Machines and binds each new one to a free lab machine; powers a machine off when
    /// its Machine goes away. Runs until dropped.
    pub(crate) async fn run(self: Arc<Self>, shared: Shared) {
        let api: Api<Machine> = Api::namespaced(self.client.clone(), NAMESPACE);
        let watched: Api<Unmanaged<Machine>> = Api::namespaced(self.client.clone(), NAMESPACE);
        let mut events = unmanaged::watcher(watched, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Apply(machine) | Event::InitApply(machine)) => {
                    if machine.metadata.deletion_timestamp.is_some() {
                        self.release(&machine.name_any(), &shared).await;
                    } else if machine.node_name().is_none() {
                        self.clone().bind(&api, &machine, &shared).await;
                    }
                }
                Ok(Event::Delete(machine)) => self.release(&machine.name_any(), &shared).await,
                Ok(Event::Init | Event::InitDone) => {}
                Err(e) => shared.record(
                    None,
                    EntryKind::Lab,
                    format!("machine provider: watch failed (retrying): {e}"),
                ),
            }
        }
    }

    async fn bind(self: Arc<Self>, api: &Api<Machine>, machine: &Machine, shared: &Shared) {
        let machine_name = machine.name_any();
        let Some(osc) = machine
            .annotations()
            .get(ANNOTATION_OSC_SECRET)
            .and_then(|v| v.split_once('/'))
        else {
            shared.record(None, EntryKind::Lab, format!("machine provider: Machine {machine_name} has no {ANNOTATION_OSC_SECRET} annotation; left unbound"));
            return;
        };
        let osc = OscLocation {
            namespace: osc.0.to_owned(),
            name: osc.1.to_owned(),
        };
        let pool = machine
            .labels()
            .get(inplace_api::keys::LABEL_WORKER_POOL)
            .cloned()
            .unwrap_or_else(|| self.default_pool.clone());
        let (node, new) = {
            let mut bindings = self.bindings.locked();
            if let Some(node) = bindings.by_machine.get(&machine_name) {
                (node.clone(), false)
            } else if let Some(node) = bindings.take(&pool) {
                bindings
                    .by_machine
                    .insert(machine_name.clone(), node.clone());
                (node, true)
            } else {
                drop(bindings);
                shared.record(
                    None,
                    EntryKind::Lab,
                    format!("machine provider: no free lab machine for Machine {machine_name}"),
                );
                return;
            }
        };
        if new {
            let provisioned = match self.pool_os_version(&osc).await {
                Ok(version) => self
                    .lab
                    .provision(&node, &pool, &osc, &version)
                    .await
                    .map_err(ProvisionError::from),
                Err(e) => Err(e),
            };
            if let Err(e) = provisioned {
                shared.record(
                    Some(&node),
                    EntryKind::Lab,
                    format!("provisioning failed: {}", rackproof_std::error_chain(&e)),
                );
                return;
            }
        }
        let patch =
            json!({ "metadata": { "labels": { inplace_api::keys::MACHINE_LABEL_NODE: node } } });
        if let Err(e) = api
            .patch(
                &machine_name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            shared.record(
                Some(&node),
                EntryKind::Lab,
                format!("machine provider: failed to bind Machine {machine_name}: {e}"),
            );
            return;
        }
        if new {
            shared.record(
                Some(&node),
                EntryKind::Lab,
                format!("provisioned for Machine {machine_name} of pool {pool}; powering on"),
            );
            let shared = shared.clone();
            let lab = self.lab.clone();
            tokio::spawn(
                async move { lab.power_on_and_wait(&node, &shared).await }.in_current_span(),
            );
        }
    }

    /// The OS version the pool's OSC asks for: what a new machine is provisioned with.
    async fn pool_os_version(&self, osc: &OscLocation) -> Result<String, ProvisionError> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &osc.namespace);
        let secret = secrets
            .get(&osc.name)
            .await
            .map_err(|error| ProvisionError::ReadOsc {
                osc: osc.clone(),
                error,
            })?;
        let decoded = inplace_api::osc::secret::decode_secret(&secret)?;
        decoded
            .osc
            .spec
            .in_place_updates
            .map(|u| u.operating_system_version)
            .ok_or_else(|| ProvisionError::NoVersion { osc: osc.clone() })
    }

    async fn release(&self, machine_name: &str, shared: &Shared) {
        let node = {
            let mut bindings = self.bindings.locked();
            let node = bindings.by_machine.remove(machine_name);
            if let Some(node) = &node {
                bindings.free.insert(node.clone());
            }
            node
        };
        let Some(node) = node else { return };
        shared.record(
            Some(&node),
            EntryKind::Lab,
            format!("Machine {machine_name} deleted; powering off"),
        );
        self.lab.decommission(&node, shared).await;
    }
}
