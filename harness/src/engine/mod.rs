//! The scenario engine: brings up the lab and the cluster, starts the components, runs steps and
//! faults, watches everything into one timeline, and judges expectations and invariants.
//!
//! [`run_scenario`] is the entry point; [`run`] has the sequence of one simulated run.

pub mod artifacts;
pub(crate) mod cluster;
pub(crate) mod components;
pub mod credentials;
pub(crate) mod failure;
pub(crate) mod faults;
pub(crate) mod judge;
pub(crate) mod lab;
pub(crate) mod logs;
pub mod run;
pub(crate) mod shared;
pub(crate) mod steps;

use rackproof_std::error_chain;

use crate::load::LoadedScenario;
use crate::scenario::Backend;
pub use judge::timeline;
pub use lab::sim::boot_timing;
pub use run::{RunResult, Verdict};

/// Why a scenario could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The scenario asks for something the chosen backend cannot do.
    #[error("scenario {scenario} cannot run on backend {backend}:\n  - {}", problems.join("\n  - "))]
    Unsupported {
        scenario: String,
        backend: &'static str,
        problems: Vec<String>,
    },
    /// The async runtime could not start.
    #[error("failed to start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The rack's inventory is missing, unreadable, or lacks a node the scenario names.
    #[error("scenario {scenario} cannot run on backend physical: {problem}")]
    Inventory { scenario: String, problem: String },
    /// Ctrl-C or SIGTERM arrived (`signal` is [`CTRL_C`] or [`SIGTERM`]); the lab was torn
    /// down and every `run` step's and external component's process group killed.
    #[error("scenario {scenario} interrupted by {signal}; the lab was torn down")]
    Interrupted {
        scenario: String,
        signal: &'static str,
    },
}

/// [`RunError::Interrupted`]'s `signal` for SIGINT.
pub const CTRL_C: &str = "Ctrl-C";
/// [`RunError::Interrupted`]'s `signal` for SIGTERM.
pub const SIGTERM: &str = "SIGTERM";

/// How to run a scenario.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Print each timeline entry as it happens.
    pub live: bool,
    /// A directory searched first for the programs of `run` steps and external components: the
    /// `rackproof` binary's own, so a scenario can run `rackproof orchestrator`.
    pub tools_dir: Option<std::path::PathBuf>,
    /// The rack's inventory for backend `physical`, instead of the scenario's `lab.inventory`.
    pub inventory: Option<std::path::PathBuf>,
    /// The run's id, which labels what it makes on an existing cluster (default: a new one).
    pub run_id: Option<String>,
}

/// A new run id: 12 hex digits, unique enough among the runs one cluster sees.
pub(crate) fn new_run_id() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(12);
    id
}

/// Runs one scenario on `backend` to its verdict with the default [`RunOptions`].
pub fn run_scenario(loaded: &LoadedScenario, backend: Backend) -> Result<RunResult, RunError> {
    run_scenario_with(loaded, backend, RunOptions::default())
}

/// Runs one scenario on `backend` to its verdict, on a runtime of its own: a paused,
/// single-threaded one for `sim` (virtual time; see [`run::on_virtual_time`]), a real-time one
/// otherwise. Ctrl-C or SIGTERM
/// stops the run: dropping it kills the guests and removes their files.
pub fn run_scenario_with(
    loaded: &LoadedScenario,
    backend: Backend,
    mut options: RunOptions,
) -> Result<RunResult, RunError> {
    let problems = run::unsupported(&loaded.scenario, backend);
    if !problems.is_empty() {
        return Err(RunError::Unsupported {
            scenario: loaded.name.clone(),
            backend: backend.as_str(),
            problems,
        });
    }
    let inventory = match backend {
        Backend::Physical => {
            let inventory =
                run::rack_inventory(loaded, options.inventory.as_deref()).map_err(|problem| {
                    RunError::Inventory {
                        scenario: loaded.name.clone(),
                        problem: error_chain(&problem),
                    }
                })?;
            Some(inventory)
        }
        _ => None,
    };
    // What runs killed outright left behind: QEMU, etcd, kube-apiserver, `run` steps and outside
    // components first, then their directories (kubeconfigs, certificates, node disks).
    let dir = rackproof_reap::default_dir();
    let swept = rackproof_reap::sweep(&dir);
    if swept.records > 0 {
        tracing::info!(records = swept.records, killed = swept.killed, dir = %dir.display(), "swept the children of runs that were killed");
    }
    let temp = std::env::temp_dir();
    let dirs = rackproof_reap::sweep_dirs(&temp, "rackproof-");
    if dirs > 0 {
        tracing::info!(count = dirs, dir = %temp.display(), "removed the directories of runs that were killed");
    }
    let runtime = match backend {
        Backend::Sim => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(run::on_virtual_time(&loaded.scenario, backend))
            .build(),
        _ => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    }
    .map_err(RunError::Runtime)?;
    let run_id = options.run_id.get_or_insert_with(new_run_id).clone();
    let interrupted = |signal| RunError::Interrupted {
        scenario: loaded.name.clone(),
        signal,
    };
    let result = runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(RunError::Runtime)?;
        tokio::select! {
            result = run::run(loaded, backend, options, inventory) => Ok(result),
            _ = tokio::signal::ctrl_c() => Err(interrupted(CTRL_C)),
            _ = term.recv() => Err(interrupted(SIGTERM)),
        }
    });
    // Shutting the runtime down drops every task still holding the lab: QEMU is killed on drop.
    // A blocking image build is not waited for (it finishes on its own, under its lock).
    runtime.shutdown_timeout(std::time::Duration::from_secs(10));
    if let (Err(RunError::Interrupted { .. }), crate::scenario::Cluster::Kubeconfig(path)) =
        (&result, &loaded.scenario.cluster)
    {
        remove_interrupted_run(path, &run_id);
    }
    result
}

/// Removes what an interrupted run made on the existing cluster at kubeconfig `path`, once its
/// tasks are gone (nothing makes more meanwhile).
fn remove_interrupted_run(path: &std::path::Path, run_id: &str) {
    let owner = cluster::existing::Ownership::new(run_id);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::warn!(error = %e, run = run_id, "no runtime to remove the interrupted run's objects; the next run sweeps them");
            return;
        }
    };
    if let Err(e) = runtime.block_on(cluster::existing::sweep::remove_through(path, &owner)) {
        tracing::warn!(error = %error_chain(&e), run = run_id, "removing the interrupted run's objects failed; the next run sweeps them");
    }
}
