//! Orchestrator: the in-place half of machine-controller-manager (MCM) for GEP-31 in-place node
//! updates — a MachineDeployment controller that rolls a new template out *in place*, a MachineSet
//! controller, and a Machine controller that walks each node through selection, drain, the node
//! agent's update and its result — and, in front of them, a WorkerPool controller ([`workerpool`],
//! in the role of gardenlet and the worker extension) that validates pool changes and renders each
//! pool into its MachineDeployment and its OperatingSystemConfig Secret. Beside them, run on its
//! own, the [`maintenance`] controller moves pool versions in each pool's daily maintenance window.
//!
//! # Running it
//!
//! ```text
//! inplace-orchestrator --kubeconfig ~/.kube/config --namespace shoot--dev--lab
//! ```
//!
//! or in-process: [`run`] with a [`kube::Client`], a [`Clock`] and a [`Config`]. [`run`] runs
//! every controller until its future is dropped. All state lives in API objects (labels,
//! conditions, phases, owner references, replicas), so a harness may abort the task at any moment
//! and call [`run`] again: the next pass continues from what the API says.
//!
//! # The contract (ARCHITECTURE.md, "The GEP-31 contract")
//!
//! Keys, reasons and phases come from [`inplace_api::keys`]. The flow of one rollout is documented
//! step by step in [`deployment`] (MachineDeployment: new set, protection, transfer, surplus,
//! selection, halt, completion), `step` (per node: `CandidateForUpdate → SelectedForUpdate →
//! DrainSuccessful → ReadyForUpdate → UpdateSuccessful | UpdateFailed`, timeouts), `drain`
//! (evictions, PDBs, forced deletion), `plan` (the `maxUnavailable` arithmetic) and [`machineset`].
//!
//! # The machine-provider contract
//!
//! The orchestrator creates Machine objects (`machine.sapcloud.io/v1alpha1`) but provisions
//! nothing. A *machine provider* (the lab, in the harness) does, following MCM's convention:
//!
//! 1. It watches Machines in [`Config::namespace`] that have no `node` label.
//! 2. It provisions (or picks) a machine, lets its Node register, and records the binding by
//!    setting the Machine label `node: <node name>` (MCM's `NodeLabelKey`; MCM has no
//!    `status.node`). It may set `spec.providerID`.
//! 3. The Machine stays `Pending` until then; once bound it is `Running` while the Node's `Ready`
//!    condition is `True`.
//! 4. When the orchestrator deletes a Machine (scale-down, surplus after `maxSurge`), it also
//!    deletes the Machine's Node object; the provider powers the machine off / releases it when
//!    its Machine disappears.
//!
//! # Choices where GEP-31 is vague (following MCM where MCM decided)
//!
//! - **Selection arithmetic** is MCM's, written as availability: select while
//!   `available ≥ replicas − maxUnavailable`, where nodes in progress, failed nodes and NotReady
//!   nodes are unavailable and Running surge machines count as available. With `maxSurge = 0`
//!   that is exactly "in progress + failed + NotReady ≤ maxUnavailable". Candidates go in node-name
//!   order (MCM takes them in lister order).
//! - **Failed nodes keep `selected-for-update`** (MCM does the same), so they stay counted
//!   unavailable. **The halt**: failed nodes ≥ `maxUnavailable` (at least one) selects nothing even
//!   when surge capacity exists; the MachineDeployment condition `InPlaceUpdateHalted` and Events
//!   `RolloutHalted` / `RolloutResumed` report it.
//! - **`selected-for-update` on a node that is no candidate** (e.g. one already updated) is
//!   ignored: it starts nothing and does not count the node unavailable (MCM's Manual mode
//!   likewise acts only on candidates). The label is left where the person put it.
//! - **Removing a failed mark** (the `update-result` label) resets the node to a plain candidate:
//!   `selected-for-update` and the reason annotation removed, condition back to
//!   `CandidateForUpdate`, node uncordoned, Machine `Running`. MCM leaves the node selected; the
//!   GEP says it "is a candidate again".
//! - **Update timeout**: like MCM, counted from the Machine entering `InPlaceUpdating` (right after
//!   the drain), from `spec.inPlaceUpdateTimeout` of the Machine (the template's
//!   `machineInPlaceUpdateTimeout`), else [`Config::default_in_place_update_timeout`] (MCM: 20m).
//!   Unlike MCM (which only sets the phase), the orchestrator then writes the failed mark on the
//!   node itself — `update-result=failed` and the reason `in-place update timed out after 10m: …`
//!   — so the mark survives restarts and the halt counts it, as the GEP asks.
//! - **Drain timeout**: counted from the `SelectedForUpdate` transition (as MCM), from the
//!   Machine's `spec.drainTimeout`, else [`Config::default_drain_timeout`]. Forced drain deletes
//!   with grace period 0; a drain that fails (an eviction error other than a budget's refusal)
//!   is forced at once, as GEP-31 asks. A pod whose eviction was refused `maxEvictRetries` times
//!   is deleted (MCM's drain), see `drain`.
//! - **Machine health** outside an update follows MCM's `machineCreationTimeout` and
//!   `machineHealthTimeout` (`health`): `Failed` with the reason, then replaced by its
//!   MachineSet; suspended while the Machine is under an in-place update.
//! - **Moving a Machine** uses the owner-reference update (MCM's choice), not the shallow delete.
//! - **Conditions** are written with read-modify-replace on `nodes/status` carrying the
//!   resourceVersion; 409 conflicts re-read and retry. Label and cordon changes are JSON merge
//!   patches. Events are core/v1 Events stamped with the [`Clock`].
//! - MCM's `PreferNoSchedule` taint on old nodes and the `critical-components-not-ready` taint after
//!   an update are not applied (nothing in the lab removes the latter).
//! - Rolling-update MachineDeployments are left alone (out of scope).
//! - **MCM settings are not part of the template hash** (`drainTimeout`, `inPlaceUpdateTimeout`,
//!   `maxEvictRetries`, …): as with MCM, changing them starts no rollout; they are copied from the
//!   MachineDeployment into its MachineSets and from there into the Machines (`settings`).
//! - **WorkerPool**: the last accepted spec lives in the pool annotation
//!   [`workerpool::ANNOTATION_ACCEPTED_SPEC`]; the control-plane version is the fixed setting
//!   [`Config::control_plane_version`]; the ImageCatalog is [`Config::catalog_name`]. See
//!   [`workerpool`] for the pass.

mod cache;
pub mod cli;
pub mod deployment;
mod drain;
mod error;
mod events;
mod health;
mod leases;
mod machine;
pub mod machineset;
pub mod maintenance;
mod nodeops;
mod plan;
mod runner;
mod settings;
mod step;
pub mod workerpool;
mod write;

use std::sync::Arc;
use std::time::Duration;

use inplace_api::crd::{Machine, MachineDeployment, MachineSet, WorkerPool};
use inplace_api::leader::Elector;
pub use inplace_api::leader::LeaderElection;
use inplace_api::version::KubeVersion;
use jiff::Timestamp;
use kube::{Api, Client, Resource, ResourceExt};
use rackproof_clock::Clock;
use rackproof_std::LockExt;
use tokio::sync::Mutex;

use cache::{Cached, Caches};
pub use drain::POD_DELETION_POLL;
pub use error::Error;
use events::{Kind, Recorder};

/// What the orchestrator watches and how often it looks again.
#[derive(Debug, Clone)]
pub struct Config {
    /// Namespace of the MachineDeployments, MachineSets and Machines.
    pub namespace: String,
    /// Longest time between two passes over every object; deadlines (drain, update timeout) are
    /// acted on within one period (the loop also wakes exactly at the earliest deadline).
    pub sync_period: Duration,
    /// Time between eviction rounds while a drain is blocked (MCM: 20 s).
    pub eviction_retry_interval: Duration,
    /// Drain timeout when the Machine names none (MCM: 2 h).
    pub default_drain_timeout: Duration,
    /// In-place update timeout when the Machine names none (MCM: 20 min).
    pub default_in_place_update_timeout: Duration,
    /// Eviction refusals per pod before the pod is deleted, when the Machine names none (MCM: 10).
    pub default_max_evict_retries: u32,
    /// How long a Machine may stay `Pending` (its node not joined) before it is `Failed`, when
    /// the Machine names none (MCM's `machineCreationTimeout`: 20 min; see `health`).
    pub default_machine_creation_timeout: Duration,
    /// How long a Machine may stay `Unknown` (its node not Ready) outside an in-place update
    /// before it is `Failed`, when the Machine names none and does not disable it (MCM's
    /// `machineHealthTimeout`: 10 min; see `health`).
    pub default_machine_health_timeout: Duration,
    /// How long a node's Lease (`kube-node-lease`) may go unrenewed before the orchestrator stops
    /// believing the node's `Ready=True`: such a node is neither counted available nor selected
    /// (kube-controller-manager's `--node-monitor-grace-period`, 40 s; see `leases`).
    pub node_monitor_grace_period: Duration,
    /// WorkerPool controller: the image server the OS-update command downloads from, passed as
    /// `--image-server` in the OSC's `status.inPlaceUpdates.osUpdate.args`.
    pub image_server_url: String,
    /// WorkerPool controller: the OS-update command (`status.inPlaceUpdates.osUpdate.command`);
    /// its arguments are `os-update --version <image version> --image-server <image_server_url>`.
    pub os_update_command: String,
    /// WorkerPool controller: name of the cluster-scoped ImageCatalog pools are validated against.
    pub catalog_name: String,
    /// WorkerPool controller: the control plane's Kubernetes version (inherited by pools that name
    /// none, and the bound for pool versions). A fixed setting: restart with a new value after a
    /// control-plane upgrade.
    pub control_plane_version: KubeVersion,
    /// WorkerPool controller: namespace of the pools' OSC Secrets (Gardener: the shoot's `kube-system`).
    pub osc_namespace: String,
    /// Hold this Lease before acting (MCM's `--leader-elect`); `None` acts at once, which is
    /// right for exactly one instance. Several instances each need an election on the same
    /// Lease with their own `identity`: only the holder acts, and it stops acting the moment it
    /// loses the Lease ([`inplace_api::leader`], docs/protocols.md "Leader election").
    pub leader_election: Option<LeaderElection>,
}

/// The Lease the orchestrator's instances compete for unless told otherwise (MCM's lock name).
pub const LEADER_LEASE_NAME: &str = "machine-controller-manager";

impl Default for Config {
    fn default() -> Self {
        Self {
            namespace: "default".to_owned(),
            sync_period: Duration::from_secs(10),
            eviction_retry_interval: Duration::from_secs(20),
            default_drain_timeout: Duration::from_secs(2 * 3600),
            default_in_place_update_timeout: Duration::from_secs(20 * 60),
            default_max_evict_retries: 10,
            default_machine_creation_timeout: Duration::from_secs(20 * 60),
            default_machine_health_timeout: Duration::from_secs(10 * 60),
            node_monitor_grace_period: Duration::from_secs(40),
            image_server_url: "http://127.0.0.1:8080".to_owned(),
            os_update_command: "/opt/rackproof/bin/rackproof-agent".to_owned(),
            catalog_name: "rackproof".to_owned(),
            control_plane_version: KubeVersion {
                major: 1,
                minor: 31,
                patch: 1,
            },
            osc_namespace: "kube-system".to_owned(),
            leader_election: None,
        }
    }
}

/// Runs every controller until the future is dropped. Returns only for an unusable [`Config`].
///
/// With [`Config::leader_election`], the controllers run only while this instance holds the
/// Lease, each term with fresh caches; before that, and after the Lease is lost, the orchestrator
/// waits (and logs the holder) and writes nothing but its bid for the Lease.
pub async fn run(client: Client, clock: Clock, config: Config) -> Result<(), Error> {
    if config.sync_period.is_zero() {
        return Err(Error::Config(
            "the sync period must be longer than zero".to_owned(),
        ));
    }
    if !(config.image_server_url.starts_with("http://")
        || config.image_server_url.starts_with("https://"))
    {
        return Err(Error::Config(format!(
            "the image server URL {:?} is not an http(s) URL",
            config.image_server_url
        )));
    }
    if !config.os_update_command.starts_with('/') {
        return Err(Error::Config(format!(
            "the OS-update command {:?} is not an absolute path",
            config.os_update_command
        )));
    }
    for (what, value) in [
        ("image catalog name", &config.catalog_name),
        ("OSC namespace", &config.osc_namespace),
        ("namespace", &config.namespace),
    ] {
        if value.is_empty() {
            return Err(Error::Config(format!("the {what} is empty")));
        }
    }
    match config.leader_election.clone() {
        None => runner::run(Context::new(client, clock, config)).await,
        Some(election) => {
            let elector = Elector::new(
                client.clone(),
                clock.clone(),
                election,
                "inplace-orchestrator",
            )
            .map_err(|e| Error::Config(e.to_string()))?;
            elector
                .run(|| runner::run(Context::new(client.clone(), clock.clone(), config.clone())))
                .await;
        }
    }
    Ok(())
}

/// Shared by every reconcile.
pub(crate) struct Context {
    pub(crate) client: Client,
    pub(crate) clock: Clock,
    pub(crate) config: Config,
    recorder: Recorder,
    pub(crate) refusals: Arc<Mutex<drain::Refusals>>,
    /// The Eviction API version the server reads, asked at the first drain.
    pub(crate) eviction: tokio::sync::OnceCell<&'static str>,
    /// What the watches delivered of the MachineSets, Machines and Nodes (see `cache`).
    pub(crate) caches: Caches,
    /// The node Leases, for availability (see `leases`).
    pub(crate) leases: leases::Leases,
    /// Per MachineSet uid: whether its deployment's rollout is halted (and why), as the last
    /// MachineDeployment pass that got as far as the selection found. The Machine controller
    /// holds a selected node back while it is (see `step`).
    pub(crate) halts: std::sync::Mutex<std::collections::HashMap<String, Option<String>>>,
}

impl Context {
    fn new(client: Client, clock: Clock, config: Config) -> Self {
        let recorder = Recorder::new(client.clone(), clock.clone(), "inplace-orchestrator");
        Self {
            client,
            clock,
            config,
            recorder,
            refusals: Arc::new(Mutex::new(Default::default())),
            eviction: tokio::sync::OnceCell::new(),
            caches: Caches::default(),
            leases: leases::Leases::default(),
            halts: Default::default(),
        }
    }

    /// Records that the object `namespace`/`name` of kind `K` was deleted: reads of its kind
    /// wait until it is gone or terminating.
    pub(crate) fn deleting<K: Cached>(&self, namespace: &str, name: &str) {
        K::cache(&self.caches).deleting(namespace, name);
    }

    /// Every object of kind `K` in `api`'s scope, at least as recent as this orchestrator's
    /// own last write to it (see `cache`).
    pub(crate) async fn read<K: Cached>(&self, api: &Api<K>) -> Result<Vec<Arc<K>>, kube::Error> {
        K::cache(&self.caches).read(&self.clock, api).await
    }

    /// Records whether the rollout of the deployment that owns the MachineSets `sets` (uids) is
    /// halted, and why.
    pub(crate) fn set_halt(&self, sets: impl IntoIterator<Item = String>, why: Option<&str>) {
        let mut halts = self.halts.locked();
        for set in sets {
            halts.insert(set, why.map(str::to_owned));
        }
    }

    /// Whether the rollout of the MachineSet `set` (uid) is halted: `Some(None)` when it is not,
    /// `Some(Some(why))` when it is, `None` while no pass has found out yet.
    pub(crate) fn halt(&self, set: &str) -> Option<Option<String>> {
        let halts = self.halts.locked();
        halts.get(set).cloned()
    }

    /// A duration from an object field (`90s`, `10m`), or the default when absent.
    pub(crate) fn duration(
        &self,
        text: Option<&str>,
        default: Duration,
        machine: &Machine,
    ) -> Result<Duration, Error> {
        match text {
            None => Ok(default),
            Some(text) => rackproof_clock::parse_duration(text).map_err(|e| Error::Invalid {
                object: format!("machine {}", machine.name_any()),
                why: e.to_string(),
            }),
        }
    }

    pub(crate) async fn event_machine(
        &self,
        machine: &Machine,
        kind: Kind,
        reason: &str,
        message: &str,
    ) {
        self.recorder
            .publish(&machine.object_ref(&()), kind, reason, message)
            .await;
    }

    pub(crate) async fn event_set(
        &self,
        set: &MachineSet,
        kind: Kind,
        reason: &str,
        message: &str,
    ) {
        self.recorder
            .publish(&set.object_ref(&()), kind, reason, message)
            .await;
    }

    pub(crate) async fn event_pool(
        &self,
        pool: &WorkerPool,
        kind: Kind,
        reason: &str,
        message: &str,
    ) {
        self.recorder
            .publish(&pool.object_ref(&()), kind, reason, message)
            .await;
    }

    pub(crate) async fn event_deployment(
        &self,
        md: &MachineDeployment,
        kind: Kind,
        reason: &str,
        message: &str,
    ) {
        self.recorder
            .publish(&md.object_ref(&()), kind, reason, message)
            .await;
    }
}

/// When to look at an object again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Action {
    pub(crate) after: Duration,
}

impl Action {
    pub(crate) fn idle(ctx: &Context) -> Self {
        Self {
            after: ctx.config.sync_period,
        }
    }

    /// Something changed: look again right away.
    pub(crate) fn soon() -> Self {
        Self {
            after: Duration::from_millis(100),
        }
    }

    pub(crate) fn after(after: Duration) -> Self {
        Self { after }
    }

    /// The earlier of two.
    pub(crate) fn min(self, other: Self) -> Self {
        Self {
            after: self.after.min(other.after),
        }
    }

    pub(crate) fn at(ctx: &Context, deadline: Timestamp) -> Self {
        Self {
            after: ctx.clock.until(deadline).max(Duration::from_millis(1)),
        }
    }
}
