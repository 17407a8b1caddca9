//! One scenario run, from bring-up to verdict. With the embedded API server on `sim` it runs in
//! virtual time (tokio's paused clock on a single thread), so a run of hours takes seconds and the
//! same seed gives the same timeline; on `qemu` (and with a `local` control plane, or external
//! components, on any backend) it runs in real time.
//!
//! 1. The cluster starts (`cluster::api`: the embedded server or a local control plane) with the
//!    scenario's objects (`cluster::setup`).
//! 2. The lab's machines are built powered off (`lab::sim` or `lab::images`); the components
//!    start under the `components::supervisor`; the machine provider (`lab::provider`) binds the orchestrator's Machines
//!    to lab machines and powers them on; their agents register the Nodes.
//! 3. Once the pool's nodes are Ready, the workloads are placed, the faults are armed and the
//!    steps run. Every watched change goes through the judge (invariants, expectations).
//! 4. After the steps, the run waits for pending expectations (up to their limits), keeps
//!    judging for the scenario's `settle` period, settles them, and tears everything down.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use inplace_api::version::KubeVersion;
use kube::Client;
use rackproof_clock::Clock;
use rackproof_qemu::Images;
use rackproof_std::LockExt;
use tracing::Instrument;

use crate::engine::cluster::api::ApiCluster;
use crate::engine::cluster::existing::Ownership;
use crate::engine::cluster::objects::{CATALOG, DEPENDENTS, NAMESPACE};
use crate::engine::components::outside::{Outside, OutsideError};
use crate::engine::components::supervisor::Supervisor;
use crate::engine::credentials::Credentials;
use crate::engine::failure::{LabFailure, StepsEnded};
use crate::engine::judge::Judge;
use crate::engine::judge::expectations::Expectations;
use crate::engine::judge::invariants::InvariantChecker;
use crate::engine::judge::observe::Observation;
use crate::engine::judge::timeline::{EntryKind, Timeline};
use crate::engine::judge::world::{DependentView, NodeView, PoolState, World};
use crate::engine::lab::Lab;
use crate::engine::lab::guest::GuestKind;
use crate::engine::lab::images::{self, ImageBuildError, ImageLab};
use crate::engine::lab::provider::Provider;
use crate::engine::lab::sim::{EPOCH, SimLab};
use crate::engine::logs::LineLogs;
use crate::engine::shared::Shared;
use crate::engine::{cluster::setup, faults, judge::observe, steps};
use crate::load::LoadedScenario;
use crate::scenario::{Backend, Cluster, Scenario};
use rackproof_lab::physical::InventoryFile;

mod inventory;
mod requirements;

pub use inventory::{RackInventoryError, rack_inventory};
use requirements::outside_commands;
pub use requirements::{on_virtual_time, pool_size, unsupported};

/// How long the pool's nodes may take to come up at the start.
const BRING_UP: Duration = Duration::from_secs(1800);
/// How often expectations with deadlines are re-evaluated while nothing changes.
const TICK: Duration = Duration::from_secs(1);

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every step, expectation and invariant held.
    Passed,
    /// The system under test misbehaved.
    Failed,
    /// The lab or the cluster failed before the system under test could be judged.
    LabFailed,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::LabFailed => "lab failed",
        }
    }
}

/// Everything a run produced.
#[derive(Debug)]
pub struct RunResult {
    pub verdict: Verdict,
    pub failures: Vec<String>,
    pub timeline: Timeline,
    /// Virtual duration of the run.
    pub elapsed: Duration,
    pub nodes: Vec<String>,
    pub max_unavailable: u32,
    /// Console lines per node, each prefixed with its time since the start.
    pub consoles: BTreeMap<String, Vec<String>>,
    /// Output lines per external component, each prefixed with its time since the start.
    pub component_logs: BTreeMap<String, Vec<String>>,
    /// Each expectation and how it ended.
    pub expectations: Vec<(String, String)>,
    /// The credentials the run made (tokens, BMC passwords): none may appear in its artifacts.
    pub credentials: Credentials,
}

/// What the tasks of a run act through.
pub struct Ctx {
    pub client: Client,
    pub shared: Shared,
    pub lab: Arc<Lab>,
    pub supervisor: Arc<Mutex<Supervisor>>,
    pub scenario: Arc<Scenario>,
    /// The door for `run` steps and external components (open when the scenario has any).
    pub outside: Option<Arc<Outside>>,
    /// One lane per node for power cuts: a cut holds its node's lane from arming until the
    /// power is back, so two `powerCut` faults on one node are two cuts, one after the other.
    pub power_cuts: faults::PowerCutLanes,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("scenario", &self.scenario.name)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    /// The supervisor, locked (a panic elsewhere while it was held does not stop the run).
    pub fn supervisor(&self) -> std::sync::MutexGuard<'_, Supervisor> {
        self.supervisor.locked()
    }

    /// Lets the supervisor match the components to the world now.
    pub fn reconcile(&self) {
        let elapsed = self.shared.elapsed();
        self.supervisor().reconcile(&self.shared, elapsed);
    }
}

fn initial_world(scenario: &Scenario) -> World {
    let dependents: BTreeMap<String, i32> =
        DEPENDENTS.iter().map(|d| ((*d).to_owned(), 1)).collect();
    World {
        nodes: scenario
            .lab
            .node_names()
            .into_iter()
            .map(|n| (n, NodeView::default()))
            .collect(),
        pools: scenario
            .pools()
            .iter()
            .map(|pool| {
                let size = pool_size(scenario, pool);
                let state = PoolState {
                    target_os: pool.os.value.clone(),
                    target_kubernetes: pool.kubernetes.value.clone(),
                    max_unavailable: pool.max_unavailable.resolve(size, true),
                    size,
                    manual: *pool.strategy == crate::scenario::Strategy::ManualInPlaceUpdate,
                    ..PoolState::default()
                };
                (pool.name.clone(), state)
            })
            .collect(),
        dependents: dependents
            .iter()
            .map(|(n, r)| (n.clone(), DependentView { replicas: *r }))
            .collect(),
        dependents_at_start: dependents,
        outage: Default::default(),
        powered_off: Default::default(),
        kubelet_stopped: Default::default(),
        lease_expiry: Default::default(),
        leaders: Default::default(),
        now: None,
    }
}

/// Runs `loaded` on `backend` (`inventory`: the rack of backend `physical`). `sim` must be called
/// on a current-thread runtime with the clock paused (see [`super::run_scenario`]). Everything
/// the run logs is in its `run{scenario, backend, cluster}` span.
pub async fn run(
    loaded: &LoadedScenario,
    backend: Backend,
    options: super::RunOptions,
    inventory: Option<InventoryFile>,
) -> RunResult {
    let span = tracing::info_span!(
        "run",
        scenario = %loaded.name,
        backend = %backend.as_str(),
        cluster = %cluster_name(&loaded.scenario.cluster),
    );
    run_in_span(loaded, backend, options, inventory)
        .instrument(span)
        .await
}

/// How a run's span names its cluster: as the scenario file spells it.
fn cluster_name(cluster: &Cluster) -> &'static str {
    match cluster {
        Cluster::Embedded => "embedded",
        Cluster::Local => "local",
        Cluster::Kind => "kind",
        Cluster::Kubeconfig(_) => "kubeconfig",
    }
}

async fn run_in_span(
    loaded: &LoadedScenario,
    backend: Backend,
    options: super::RunOptions,
    inventory: Option<InventoryFile>,
) -> RunResult {
    let scenario = Arc::new(loaded.scenario.clone());
    let clock = if on_virtual_time(&scenario, backend) {
        let start = scenario
            .clock
            .start
            .map_or_else(|| EPOCH.parse().expect("the epoch is a timestamp"), |s| s.0);
        Clock::simulated(start)
    } else {
        Clock::wall()
    };
    let world = initial_world(&scenario);
    // The report draws the unavailable nodes of every pool against the pools' limits together.
    let (nodes, max_unavailable) = (
        world.nodes.keys().cloned().collect::<Vec<_>>(),
        world.pools.values().map(|p| p.max_unavailable).sum(),
    );
    let repo = images::workspace_root(&loaded.path);
    let images = match backend {
        Backend::Qemu | Backend::Libvirt | Backend::Physical => {
            ImageLab::images(&scenario, &repo).await.map(Some)
        }
        Backend::Sim => Ok(None),
    };
    let judge = Judge::new(
        world,
        Expectations::new(&scenario.expect),
        InvariantChecker::new(&scenario.invariants),
    );
    let shared = Shared::new(judge, clock.clone());
    let consoles = LineLogs::default();
    let component_logs = LineLogs::default();

    let mut tasks = Vec::new();
    let (stop_progress, progress_stopped) = tokio::sync::oneshot::channel();
    let progress = options
        .live
        .then(|| tokio::spawn(shared.clone().print_progress(progress_stopped)));
    let logs = RunLogs {
        consoles: consoles.clone(),
        components: component_logs.clone(),
    };
    let setting = Setting {
        scenario: &scenario,
        file: &loaded.path,
        backend,
        tools_dir: options.tools_dir.as_deref(),
        inventory: inventory.as_ref(),
        run_id: &options.run_id.clone().unwrap_or_else(super::new_run_id),
    };
    let (cluster, outcome) = match start_cluster(&setting, &clock).await {
        Ok(cluster) => {
            for note in cluster.notes() {
                shared.record(None, EntryKind::Lab, note);
            }
            let outcome = drive(
                &setting, images, &cluster, &clock, &shared, &logs, &mut tasks,
            )
            .await;
            (Some(cluster), outcome)
        }
        Err(failure) => (None, Err(failure)),
    };
    for task in &tasks {
        task.abort();
    }
    let mut credentials = shared.credentials();
    if let Some(cluster) = &cluster {
        credentials.extend(cluster.credentials());
        for (name, lines) in cluster.shut_down().await {
            component_logs.extend(&name, lines);
        }
    }
    let _ = stop_progress.send(());
    if let Some(progress) = progress {
        let _ = progress.await;
    }

    let elapsed = shared.elapsed();
    let mut judge = shared.judge();
    let (verdict, mut failures) = match outcome {
        Err(lab) => (Verdict::LabFailed, vec![rackproof_std::error_chain(&lab)]),
        Ok(ended) => {
            judge.finish(elapsed);
            let mut failures: Vec<String> = ended.failure().into_iter().collect();
            failures.extend(judge.failures());
            (
                if failures.is_empty() {
                    Verdict::Passed
                } else {
                    Verdict::Failed
                },
                failures,
            )
        }
    };
    failures.dedup();
    let expectations = judge
        .expectations
        .items
        .iter()
        .map(|item| {
            let verdict = match &item.verdict {
                crate::engine::judge::expectations::Verdict::Pending => "pending".to_owned(),
                crate::engine::judge::expectations::Verdict::Met { at } => {
                    format!("met at {}", rackproof_clock::format_duration(*at))
                }
                crate::engine::judge::expectations::Verdict::Broken { at, why } => {
                    format!("broken at {}: {why}", rackproof_clock::format_duration(*at))
                }
            };
            (item.description.clone(), verdict)
        })
        .collect();
    let mut timeline = std::mem::take(&mut judge.timeline);
    timeline.canonicalize();
    drop(judge);
    RunResult {
        verdict,
        failures,
        timeline,
        elapsed,
        nodes,
        max_unavailable,
        consoles: consoles.take(),
        component_logs: component_logs.take(),
        expectations,
        credentials,
    }
}

/// What a run is of: the scenario, its file, the backend, where `rackproof` lives, and the
/// rack's inventory (backend `physical`).
struct Setting<'a> {
    scenario: &'a Arc<Scenario>,
    file: &'a std::path::Path,
    backend: Backend,
    tools_dir: Option<&'a std::path::Path>,
    inventory: Option<&'a InventoryFile>,
    /// The run's id: its label on an existing cluster.
    run_id: &'a str,
}

/// The scenario's cluster: the embedded server on the run's clock, or a local control plane that
/// the lab's nodes reach where they reach this machine.
async fn start_cluster(setting: &Setting<'_>, clock: &Clock) -> Result<ApiCluster, LabFailure> {
    let scenario = setting.scenario;
    match scenario.cluster {
        Cluster::Local => {
            let loopback = std::net::IpAddr::from(std::net::Ipv4Addr::LOCALHOST);
            match (
                setting.backend,
                setting.inventory.and_then(|i| i.inventory.harness.as_ref()),
            ) {
                (Backend::Physical, Some(harness)) => {
                    ApiCluster::local(scenario, harness.listen, &[harness.address.as_str()]).await
                }
                (Backend::Qemu | Backend::Libvirt, _) => {
                    ApiCluster::local(scenario, loopback, &[rackproof_qemu::HOST_ALIAS]).await
                }
                _ => ApiCluster::local(scenario, loopback, &[]).await,
            }
        }
        Cluster::Kubeconfig(ref path) => {
            let owner = Ownership::new(setting.run_id);
            // Relative to the scenario file (`rackproof run --cluster` makes it absolute).
            let path = setting.file.parent().unwrap_or(Path::new(".")).join(path);
            ApiCluster::existing(&path, owner, &scenario.lab.node_names()).await
        }
        _ => Ok(ApiCluster::embedded(clock, scenario.seed)),
    }
    .map_err(LabFailure::ClusterStart)
}

/// Where a run's text output goes: node consoles and external components.
struct RunLogs {
    consoles: LineLogs,
    components: LineLogs,
}

/// Brings up the lab, runs the steps and waits for the expectations: how the steps ended, or
/// the lab failure that stopped the run before the system under test could be judged.
async fn drive(
    setting: &Setting<'_>,
    images: Result<Option<Images>, ImageBuildError>,
    cluster: &ApiCluster,
    clock: &Clock,
    shared: &Shared,
    logs: &RunLogs,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Result<StepsEnded, LabFailure> {
    let (scenario, backend) = (setting.scenario, setting.backend);
    let client = &cluster.client();
    let labels = cluster.labels();
    setup::cluster(client, clock, scenario, &labels)
        .await
        .map_err(LabFailure::ClusterSetup)?;
    let (lab, image_server_url) = match (backend, images?) {
        (Backend::Qemu | Backend::Libvirt, Some(images)) => {
            let kind = if backend == Backend::Libvirt {
                GuestKind::Libvirt
            } else {
                GuestKind::Qemu
            };
            let lab = ImageLab::build(scenario, kind, images, cluster, clock).await?;
            let url = lab.image_server_url();
            (Lab::Images(Box::new(lab)), url)
        }
        (Backend::Physical, Some(images)) => {
            let inventory = setting.inventory.ok_or(LabFailure::NoInventory)?;
            let lab = ImageLab::build_rack(scenario, inventory, images, cluster, clock).await?;
            let url = lab.image_server_url();
            (Lab::Images(Box::new(lab)), url)
        }
        _ => (
            Lab::Sim(SimLab::build(scenario, cluster, clock, shared).await?),
            "http://images.lab/slots".to_owned(),
        ),
    };
    shared.keep_credentials(lab.credentials());
    let lab = Arc::new(lab);
    tasks.extend(lab.capture_consoles(&logs.consoles, shared));

    let control_plane = scenario
        .first_pool()
        .control_plane
        .as_ref()
        .map_or(scenario.first_pool().kubernetes.as_str(), |v| v.as_str());
    let orchestrator = inplace_orchestrator::Config {
        namespace: NAMESPACE.to_owned(),
        // On a shared cluster the OSC Secrets stay in the run's own namespace.
        osc_namespace: match cluster {
            ApiCluster::Existing(_) => NAMESPACE.to_owned(),
            _ => inplace_orchestrator::Config::default().osc_namespace,
        },
        image_server_url,
        catalog_name: CATALOG.to_owned(),
        control_plane_version: KubeVersion::parse(control_plane).map_err(|source| {
            LabFailure::ControlPlaneVersion {
                version: control_plane.to_owned(),
                source,
            }
        })?,
        ..inplace_orchestrator::Config::default()
    };
    let watchdog = inplace_watchdog::Config {
        namespace: NAMESPACE.to_owned(),
        machine_namespace: NAMESPACE.to_owned(),
        dependents: DEPENDENTS.iter().map(|d| (*d).to_owned()).collect(),
        probe_interval: scenario.watchdog.probe_interval.get(),
        kcm_node_monitor_grace: scenario.watchdog.kcm_node_monitor_grace_duration.get(),
        node_lease_failure_fraction: scenario.watchdog.node_lease_failure_fraction,
        ..inplace_watchdog::Config::default()
    };
    let outside = open_outside(setting, cluster, &orchestrator).await?;
    let supervisor = Supervisor::new(
        client.clone(),
        clock.clone(),
        scenario,
        orchestrator,
        watchdog,
        outside.clone(),
        logs.components.clone(),
        cluster.controller_manager(),
        cluster.runs_stand_ins(),
    );
    let supervisor = Arc::new(Mutex::new(supervisor));
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        shared: shared.clone(),
        lab: lab.clone(),
        supervisor: supervisor.clone(),
        scenario: scenario.clone(),
        outside,
        power_cuts: faults::PowerCutLanes::default(),
    });

    // Everything the judge sees, and the supervisor following the dependents' replicas.
    let observer = ctx.clone();
    tasks.push(tokio::spawn(
        async move {
            let mut stream = observe::observe(&observer.client).boxed();
            while let Some(observation) = stream.next().await {
                // A Lease renewal changes no node's state: it is only kept for the judge.
                if let Observation::Lease { node, expiry } = observation {
                    observer.shared.lease(node, expiry);
                    continue;
                }
                observer.shared.observe(observation);
                observer.reconcile();
            }
        }
        .in_current_span(),
    ));
    let ticker = ctx.clone();
    tasks.push(tokio::spawn(
        async move {
            let mut ticks = ticker.shared.clock().interval(TICK);
            loop {
                ticks.tick().await;
                ticker.shared.tick();
                ticker.reconcile();
            }
        }
        .in_current_span(),
    ));
    tasks.push(tokio::spawn(
        Provider::new(
            lab.clone(),
            client.clone(),
            if scenario.several_pools() {
                scenario.node_pools()
            } else {
                BTreeMap::new()
            },
            scenario.first_pool().name.clone(),
        )
        .run(shared.clone())
        .in_current_span(),
    ));
    ctx.reconcile();
    for (index, fault) in scenario.faults.iter().enumerate() {
        let (ctx, fault) = (ctx.clone(), fault.clone());
        tasks.push(tokio::spawn(
            async move { faults::arm(&ctx, index + 1, &fault).await }.in_current_span(),
        ));
    }

    let brought_up = shared
        .wait_until(BRING_UP, |judge| {
            let world = &judge.world;
            let ready = world
                .nodes
                .values()
                .filter(|v| v.registered && v.ready)
                .count();
            u32::try_from(ready).is_ok_and(|n| n >= world.pools_size())
        })
        .await;
    if !brought_up {
        let judge = shared.judge();
        let missing: Vec<String> = judge
            .world
            .nodes
            .iter()
            .filter(|(_, v)| !(v.registered && v.ready))
            .map(|(n, v)| {
                format!(
                    "{n} ({})",
                    if v.registered {
                        "NotReady"
                    } else {
                        "not registered"
                    }
                )
            })
            .collect();
        return Err(LabFailure::NodesNotUp {
            size: judge.world.pools_size(),
            within: rackproof_clock::format_duration(BRING_UP),
            not_up: missing,
        });
    }
    // The registered nodes by pool (a node of no pool the scenario names: under "").
    let mut members: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let up = {
        let judge = shared.judge();
        for (name, view) in judge.world.nodes.iter().filter(|(_, v)| v.registered) {
            let pool = judge.world.pool_name_of(view).unwrap_or_default();
            members
                .entry(pool.to_owned())
                .or_default()
                .push(name.clone());
        }
        judge.world.registered().count()
    };
    shared.record(
        None,
        EntryKind::Lab,
        format!("the pool's {up} nodes are up"),
    );
    setup::workloads(client, clock, scenario, &members, &labels)
        .await
        .map_err(|e| LabFailure::Workloads(e.into()))?;
    setup::wait_workloads_running(client, clock, BRING_UP).await?;

    let limit = scenario.timeout.get().saturating_sub(shared.elapsed());
    let ended = match clock.timeout(limit, steps::run(&ctx)).await {
        Ok(Ok(())) => StepsEnded::Done,
        Ok(Err(failure)) => StepsEnded::Failed(failure),
        Err(_) => StepsEnded::TimedOut {
            timeout: scenario.timeout.to_string(),
        },
    };
    if let Some(failure) = ended.failure() {
        shared.record(None, EntryKind::Step, failure);
    }
    let limit = scenario.timeout.get().saturating_sub(shared.elapsed());
    shared
        .wait_until(limit, |judge| !judge.expectations.waiting())
        .await;
    if matches!(ended, StepsEnded::Done) {
        settle(scenario, clock, shared).await;
    }
    supervisor.locked().stop_all();
    lab.tear_down().await;
    Ok(ended)
}

/// Keeps the run going for the scenario's settle period after the last step (within its
/// timeout): the observers, the ticker and the components keep running, so `never` expectations
/// and the invariants judge what the system does next.
async fn settle(scenario: &Scenario, clock: &Clock, shared: &Shared) {
    let settle = scenario
        .settle
        .get()
        .min(scenario.timeout.get().saturating_sub(shared.elapsed()));
    if settle.is_zero() {
        return;
    }
    shared.record(
        None,
        EntryKind::Step,
        format!(
            "the steps are done; judging for {} more",
            rackproof_clock::format_duration(settle)
        ),
    );
    clock.sleep(settle).await;
}

/// Opens the outside door when the scenario runs commands, after checking each one's program can
/// be found.
async fn open_outside(
    setting: &Setting<'_>,
    cluster: &ApiCluster,
    orchestrator: &inplace_orchestrator::Config,
) -> Result<Option<Arc<Outside>>, OutsideError> {
    let commands = outside_commands(setting.scenario);
    if commands.is_empty() {
        return Ok(None);
    }
    let vars = [
        ("NAMESPACE", NAMESPACE),
        ("POOL", setting.scenario.first_pool().name.as_str()),
        ("IMAGE_SERVER_URL", orchestrator.image_server_url.as_str()),
        ("CATALOG", CATALOG),
        ("OSC_NAMESPACE", orchestrator.osc_namespace.as_str()),
    ];
    let outside = Outside::open(cluster, setting.file, setting.tools_dir, &vars).await?;
    for argv in commands {
        outside.check(argv)?;
    }
    Ok(Some(Arc::new(outside)))
}
