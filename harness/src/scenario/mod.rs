//! The scenario file format (`scenarios/*.yaml`): what a person writes to describe a lab, a
//! pool, what happens to it and what must hold.
//!
//! Every type here is plain data with `deny_unknown_fields`, so a typo is an error with the
//! allowed names, never silently ignored. Enums are externally tagged (`- update: {os: 1.1.0}`)
//! and never `untagged`, so every error names the alternatives. Durations name their unit
//! (`10m`). Parts can be shared between scenarios with `!include` (see `load`).
//!
//! The JSON Schema published by `rackproof schema` is generated from these types.

mod duration;
mod expect;
mod fault;
mod located;
mod maintenance;
mod pool;
mod step;
mod step_forms;

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use duration::Span;
pub use expect::{
    Condition, CountCondition, DisabledInvariant, Eventually, Expectation, InvariantName,
    Invariants, LeaderCondition, MaintenanceCondition, NodeCondition, NodeState, NodesCondition,
    PoolCondition, PoolVersion, Timed,
};
pub use fault::{
    BmcFault, BmcQuirk, BootCount, BootFailure, Component, ConsoleMatch, Fault, FaultAction,
    ImageServerAnswer, ImageServerFault, Kill, NodeEvent, Partition, PowerAction, PowerCut,
    PowerCutPoint, PowerFault, Trigger,
};
pub use located::{Located, Position};
pub use maintenance::{
    AutoUpdate, Catalog, Classification, ClockSettings, ImageUpdateStrategy, Instant,
    KubernetesVersion, Maintenance, MaintenanceState, TimeWindow,
};
pub use pool::{IntOrPercent, Pool, Strategy};
pub use step::{MaintenanceOperation, PoolUpdate, Publish, RunCommand, Scale, Step, Wait};

/// A node's name as written in a scenario (remembers where, for errors).
pub type NodeName = Located<String>;

/// One scenario file.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    /// Name shown in reports and test names, and the run's folder under the artifacts folder:
    /// letters, digits, `-`, `_` and `.`, not starting with `.`. Defaults to the file name
    /// without `.yaml`.
    #[serde(default)]
    pub name: Option<Located<String>>,
    /// What this scenario proves, in a sentence or two.
    #[serde(default)]
    pub description: Option<String>,
    /// The backends this scenario is meant to run on; the test suite runs it on each.
    #[serde(default = "default_backends")]
    pub backends: Vec<Backend>,
    /// Seed for everything random in a simulated run (same seed, same timeline).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Upper bound for the whole run (virtual time on `sim`).
    #[serde(default = "default_timeout")]
    pub timeout: Span,
    /// How long the run keeps judging after the last step (virtual time on `sim`): `never`
    /// expectations and the invariants hold through it, so a move the system makes just after
    /// the last step is still seen. The default covers the components' next move: one
    /// orchestrator sync (10s) and one watchdog probe (`watchdog.probeInterval`, 10s), twice
    /// over for Events and watches to arrive. `0s` ends the run with the last step. Bounded by
    /// `timeout`.
    #[serde(default = "default_settle")]
    pub settle: Span,
    /// The run's clock: where virtual time starts, so maintenance windows fall at a time of day.
    #[serde(default)]
    pub clock: ClockSettings,
    /// The machines.
    pub lab: Lab,
    /// Where the Kubernetes API comes from when the command line does not say.
    #[serde(default)]
    pub cluster: Cluster,
    /// The clusters this scenario's `sim` runs are meant for (default `[embedded]`): the test
    /// suite runs it on `sim` against each, and `rackproof run --cluster NAME` runs on `sim` only
    /// the scenarios naming NAME. A `local` run is on the wall clock, so scenarios meant for it
    /// use short waits. A run on a real-time backend (qemu, libvirt, physical) suits every
    /// cluster; the test suite runs it against `local`.
    #[serde(default = "default_clusters")]
    pub clusters: Vec<ClusterKind>,
    /// Which implementation of each component runs.
    #[serde(default)]
    pub components: Components,
    /// OS image versions the image server offers, and how each boots.
    pub images: Vec<Image>,
    /// The image catalog's other fields: the image's `updateStrategy`, Kubernetes versions.
    #[serde(default)]
    pub catalog: Catalog,
    /// The worker pool under test. Give `pool` or `pools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<Located<Pool>>,
    /// Several worker pools, each with its own strategy, size, versions and timeouts, in one
    /// cluster under one orchestrator and one watchdog. The first `size` lab nodes are the first
    /// pool's, the next the second's, and so on; nodes left over are spares any pool's surge or
    /// replacement machines take. Give `pool` or `pools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pools: Option<Located<Vec<Located<Pool>>>>,
    /// Dependency-watchdog settings.
    #[serde(default)]
    pub watchdog: Watchdog,
    /// Pods placed on the pool's nodes before the steps start.
    #[serde(default)]
    pub workloads: Vec<Workload>,
    /// What happens, in order.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// Faults fired at a time or on an event, alongside the steps.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// What must be observed.
    #[serde(default)]
    pub expect: Vec<Expectation>,
    /// The safety invariants checked at every observed change (all on unless disabled here).
    #[serde(default)]
    pub invariants: Invariants,
}

fn default_clusters() -> Vec<ClusterKind> {
    vec![ClusterKind::Embedded]
}

fn default_backends() -> Vec<Backend> {
    vec![Backend::Sim]
}

fn default_seed() -> u64 {
    1
}

fn default_settle() -> Span {
    Span(std::time::Duration::from_secs(30))
}

fn default_timeout() -> Span {
    Span(std::time::Duration::from_secs(24 * 3600))
}

/// Where the nodes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Backend {
    /// In-process machines in virtual time.
    Sim,
    /// QEMU guests booting the node images.
    Qemu,
    /// libvirt domains.
    Libvirt,
    /// Rack servers from an inventory file.
    Physical,
}

impl Backend {
    /// The name used in scenario files and test names.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sim => "sim",
            Self::Qemu => "qemu",
            Self::Libvirt => "libvirt",
            Self::Physical => "physical",
        }
    }
}

/// The machines of a scenario.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Lab {
    /// Backend; `rackproof run --backend` overrides it.
    #[serde(default = "default_backend")]
    pub backend: Backend,
    /// How many nodes, named `node-1` … `node-N`. Give either `nodes` or `names`.
    #[serde(default)]
    pub nodes: Option<u32>,
    /// The nodes' names. Give either `nodes` or `names`.
    #[serde(default)]
    pub names: Option<Vec<NodeName>>,
    /// How the harness reaches each node's power and boot controls.
    #[serde(default)]
    pub bmc: BmcKind,
    /// Inventory file of rack nodes (backend `physical`), relative to the scenario file.
    #[serde(default)]
    pub inventory: Option<PathBuf>,
    /// How long the simulated machines' boot stages take (backend `sim`); stages left out keep
    /// the simulation's defaults.
    #[serde(default)]
    pub boot_timing: Option<BootTiming>,
}

/// How long a simulated machine's boot stages take. Physical servers spend minutes in POST and
/// firmware; the simulation's defaults (firmware 5s, loader 1s, kernel 4s) are a VM's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BootTiming {
    /// Power-on self-test and firmware, from power-on to the boot loader (default 5s).
    #[serde(default)]
    pub firmware: Option<Span>,
    /// The boot loader, until the kernel starts (default 1s).
    #[serde(default)]
    pub loader: Option<Span>,
    /// The kernel and early userspace, until the OS is up (default 4s).
    #[serde(default)]
    pub kernel: Option<Span>,
}

impl BootTiming {
    /// The stages as the scenario names them, with their values (for validation and reports).
    pub fn stages(&self) -> [(&'static str, Option<Span>); 3] {
        [
            ("firmware", self.firmware),
            ("loader", self.loader),
            ("kernel", self.kernel),
        ]
    }
}

fn default_backend() -> Backend {
    Backend::Sim
}

impl Lab {
    /// The node names, from `names` or generated from `nodes`.
    pub fn node_names(&self) -> Vec<String> {
        match (&self.names, self.nodes) {
            (Some(names), _) => names.iter().map(|n| n.value.clone()).collect(),
            (None, Some(count)) => (1..=count).map(|i| format!("node-{i}")).collect(),
            (None, None) => Vec::new(),
        }
    }
}

/// The BMC in front of each node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BmcKind {
    /// Redfish (an emulator in front of emulated nodes; the rack's BMC on physical ones).
    #[default]
    Redfish,
    /// IPMI over LAN (lanplus).
    Ipmi,
}

/// Where the Kubernetes API comes from.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Cluster {
    /// Rackproof's embedded API server (in-process on `sim`, HTTPS on loopback otherwise).
    #[default]
    Embedded,
    /// etcd plus kube-apiserver built from Debian's source package, on loopback.
    Local,
    /// A kind cluster: refused, since Rackproof does not create kind clusters; run on one through
    /// its `kubeconfig`.
    Kind,
    /// An existing cluster, from a kubeconfig file.
    Kubeconfig(PathBuf),
}

impl Scenario {
    /// The worker pools in file order: `pool` as the one pool, or `pools`. The loader refuses a
    /// scenario with neither or both, so a loaded scenario has at least one.
    pub fn pools(&self) -> &[Located<Pool>] {
        match (&self.pools, &self.pool) {
            (Some(pools), _) => &pools.value,
            (None, Some(pool)) => std::slice::from_ref(pool),
            (None, None) => &[],
        }
    }

    /// The first pool: the only one of a scenario written with `pool`, and the one whose OS the
    /// node images of the real-time backends carry (they run one pool only).
    pub fn first_pool(&self) -> &Pool {
        &self.pools()[0]
    }

    /// The pool named `name`.
    pub fn pool_named(&self, name: &str) -> Option<&Pool> {
        self.pools()
            .iter()
            .map(|p| &p.value)
            .find(|p| p.name == name)
    }

    /// Whether the scenario has several pools (then steps and conditions about a pool name it).
    pub fn several_pools(&self) -> bool {
        self.pools().len() > 1
    }

    /// Each pool's name and its nodes at the start, in file order: the first pool takes the
    /// first `size` lab nodes (every lab node by default), the next pool the next `size`, and
    /// so on. The lab nodes left over are spares.
    pub fn pool_members(&self) -> Vec<(String, Vec<String>)> {
        let mut names = self.lab.node_names().into_iter();
        self.pools()
            .iter()
            .map(|pool| {
                let size = pool.size.map_or(usize::MAX, |s| s as usize);
                (pool.name.clone(), names.by_ref().take(size).collect())
            })
            .collect()
    }

    /// The pool each member node starts in, by node (spares are not listed).
    pub fn node_pools(&self) -> std::collections::BTreeMap<String, String> {
        self.pool_members()
            .into_iter()
            .flat_map(|(pool, nodes)| nodes.into_iter().map(move |n| (n, pool.clone())))
            .collect()
    }

    /// The runs the test suite makes of this scenario, as (backend, cluster): on `sim`, one per
    /// cluster it lists; on a real-time backend (qemu, libvirt, physical), one against `local`
    /// (the run is on the wall clock anyway, and a real control plane is the better referee).
    pub fn runs(&self) -> Vec<(Backend, ClusterKind)> {
        let mut runs = Vec::new();
        for backend in &self.backends {
            if *backend == Backend::Sim {
                runs.extend(self.clusters.iter().map(|c| (*backend, *c)));
            } else {
                runs.push((*backend, ClusterKind::Local));
            }
        }
        runs
    }

    /// Whether a run on `backend` against a cluster of `kind` is one this scenario is meant for:
    /// on `sim`, when `clusters` lists the kind (a run against a real cluster is on the wall
    /// clock, and only scenarios with short waits suit it); on a real-time backend, always.
    pub fn meant_for(&self, backend: Backend, kind: ClusterKind) -> bool {
        backend != Backend::Sim || self.clusters.contains(&kind)
    }
}

impl Cluster {
    /// Its kind, as `clusters` lists it (`None`: a kind no scenario can be marked for yet).
    pub fn kind(&self) -> Option<ClusterKind> {
        match self {
            Self::Embedded => Some(ClusterKind::Embedded),
            Self::Local => Some(ClusterKind::Local),
            Self::Kind | Self::Kubeconfig(_) => None,
        }
    }
}

/// A cluster a scenario is meant for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum ClusterKind {
    /// Rackproof's embedded API server.
    Embedded,
    /// A local control plane: etcd, kube-apiserver and kube-controller-manager.
    Local,
}

impl ClusterKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::Local => "local",
        }
    }

    /// The cluster a run against this kind uses.
    pub fn cluster(self) -> Cluster {
        match self {
            Self::Embedded => Cluster::Embedded,
            Self::Local => Cluster::Local,
        }
    }
}

/// Which implementation of each component runs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Components {
    #[serde(default)]
    pub orchestrator: Implementation,
    #[serde(default)]
    pub agent: Implementation,
    #[serde(default)]
    pub watchdog: Implementation,
    /// How many instances of the orchestrator and of the watchdog run at once (1 to 3, default
    /// 1). With more than one, every instance holds its component's Lease before it acts (leader
    /// election, as machine-controller-manager and dependency-watchdog run with several
    /// replicas); the timeline names them `orchestrator-1`, `orchestrator-2`, …, and a `kill` of
    /// the component kills the instance that leads.
    #[serde(default = "one_replica")]
    pub replicas: Located<u32>,
}

impl Default for Components {
    fn default() -> Self {
        Self {
            orchestrator: Implementation::default(),
            agent: Implementation::default(),
            watchdog: Implementation::default(),
            replicas: one_replica(),
        }
    }
}

fn one_replica() -> Located<u32> {
    Located::new(1)
}

/// One component's implementation.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Implementation {
    /// Rackproof's own.
    #[default]
    Builtin,
    /// Not run at all.
    Off,
    /// An external program that speaks the same API, started with this argument vector; it gets
    /// `KUBECONFIG` in its environment.
    Command(Vec<String>),
}

/// An OS image version on the image server.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Image {
    /// The version string (what `/etc/os-release` says once it runs).
    pub version: Located<String>,
    /// How the image behaves at boot.
    #[serde(default)]
    pub boot: BootBehaviour,
    /// Its classification in the catalog (`supported` when absent; `preview` is never a
    /// maintenance target).
    #[serde(default)]
    pub classification: Option<Classification>,
    /// From this instant on the version is expired (a pool on it is forced off in its window).
    #[serde(default)]
    pub expiration_date: Option<Instant>,
}

/// How an image behaves when a node boots it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BootBehaviour {
    /// Boots and runs the agent.
    #[default]
    Ok,
    /// The kernel panics early; the machine resets (boot counting falls back).
    Panics,
    /// Hangs during boot; no reset, no fallback (a total failure).
    Hangs,
    /// Boots, but the agent never reports.
    NeverReports,
    /// Boots, but reports this older version (a silent rollback).
    BootsVersion(String),
}

/// Dependency-watchdog settings (defaults as dependency-watchdog's).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Watchdog {
    /// Fraction of candidate leases that must be expired to scale the dependents down: more
    /// than 0, at most 1.
    #[serde(default = "default_fraction", deserialize_with = "fraction")]
    pub node_lease_failure_fraction: f64,
    /// kube-controller-manager's node-monitor grace period; a lease is expired 0.75 × this after
    /// its renew time.
    #[serde(default = "default_grace")]
    pub kcm_node_monitor_grace_duration: Span,
    /// How often the watchdog probes.
    #[serde(default = "default_probe_interval")]
    pub probe_interval: Span,
}

impl Default for Watchdog {
    fn default() -> Self {
        Self {
            node_lease_failure_fraction: default_fraction(),
            kcm_node_monitor_grace_duration: default_grace(),
            probe_interval: default_probe_interval(),
        }
    }
}

fn default_fraction() -> f64 {
    0.6
}

/// A fraction in (0, 1], refused where it is written otherwise (YAML's `.nan` and `.inf` too).
fn fraction<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    let value = f64::deserialize(deserializer)?;
    if value > 0.0 && value <= 1.0 {
        Ok(value)
    } else {
        Err(serde::de::Error::custom(format!(
            "{value} is not a fraction: give a number between 0 and 1 (more than 0), e.g. 0.6"
        )))
    }
}

fn default_grace() -> Span {
    Span(std::time::Duration::from_secs(40))
}

fn default_probe_interval() -> Span {
    Span(std::time::Duration::from_secs(10))
}

/// Pods placed on the pool's nodes.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Workload {
    /// Ordinary pods, `perNode` on each node at the start, controlled by a ReplicaSet that
    /// replaces an evicted pod on another node, optionally guarded by a PodDisruptionBudget.
    Pods(PodsWorkload),
    /// One DaemonSet pod per node (left to the agent by the drain).
    DaemonSet(NamedWorkload),
    /// A pod with an emptyDir volume on every node (deleted by the drain with local data).
    LocalStorage(NamedWorkload),
}

/// Ordinary pods.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodsWorkload {
    pub name: String,
    #[serde(default = "default_per_node")]
    pub per_node: u32,
    /// A PodDisruptionBudget over these pods allowing this many to be disrupted at once
    /// (0 blocks every eviction).
    #[serde(default)]
    pub pdb_max_unavailable: Option<u32>,
}

fn default_per_node() -> u32 {
    1
}

/// A workload known by its name.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamedWorkload {
    pub name: String,
}
