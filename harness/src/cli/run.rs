//! `rackproof run`: loads every scenario, refuses what cannot run before anything starts, then
//! runs them `--jobs` at a time and prints each verdict as its run ends.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::mpsc;

use rackproof_clock::{Clock, format_duration};
use rackproof_std::LockExt as _;

use super::exit;
use crate::engine::{self, RunError, RunResult, Verdict, artifacts};
use crate::load::{self, LoadedScenario};
use crate::scenario::{Backend, Cluster};

/// `rackproof run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Scenario files or directories.
    #[arg(default_value = "scenarios")]
    paths: Vec<PathBuf>,
    /// Run on this backend instead of the scenario's `lab.backend`.
    #[arg(long, value_parser = parse_backend)]
    backend: Option<Backend>,
    /// Run against this cluster instead of the scenario's `cluster`: `embedded` (Rackproof's own
    /// API server), `local` (etcd, kube-apiserver and kube-controller-manager on this machine) or
    /// `kubeconfig=PATH` (an existing cluster).
    #[arg(long, value_parser = parse_cluster)]
    cluster: Option<Cluster>,
    /// The rack's inventory for backend `physical`, instead of the scenario's `lab.inventory`.
    #[arg(long)]
    inventory: Option<PathBuf>,
    /// Where each run's artifacts go (`<dir>/<scenario>/<backend>/`, `<backend>-local/` on a
    /// local cluster).
    #[arg(long, default_value = "target/rackproof-runs")]
    artifacts: PathBuf,
    /// Print every timeline entry as it happens (the live progress of a run).
    #[arg(long, short)]
    verbose: bool,
    /// How many scenarios run at once. Default: one per CPU core when every run is on `sim`
    /// without `--verbose`; otherwise one (VM guests need the cores, a rack's nodes and an
    /// existing cluster are shared, and live lines of runs side by side would interleave).
    #[arg(long, short, value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
}

fn parse_backend(text: &str) -> Result<Backend, String> {
    [
        Backend::Sim,
        Backend::Qemu,
        Backend::Libvirt,
        Backend::Physical,
    ]
    .into_iter()
    .find(|b| b.as_str() == text)
    .ok_or_else(|| {
        format!("unknown backend {text:?}; expected one of sim, qemu, libvirt, physical")
    })
}

fn parse_cluster(text: &str) -> Result<Cluster, String> {
    match text {
        "embedded" => Ok(Cluster::Embedded),
        "local" => Ok(Cluster::Local),
        _ => match text.strip_prefix("kubeconfig=") {
            Some(path) if !path.is_empty() => std::path::absolute(path)
                .map(Cluster::Kubeconfig)
                .map_err(|e| format!("kubeconfig path {path:?}: {e}")),
            _ => Err(format!(
                "unknown cluster {text:?}; expected embedded, local or kubeconfig=PATH"
            )),
        },
    }
}

/// One scenario as this invocation runs it.
struct Planned {
    scenario: LoadedScenario,
    backend: Backend,
    /// `sim`, `sim-local`, `qemu`, …: the artifacts folder's name and the printed one.
    label: String,
    virtual_time: bool,
}

/// How one run ended.
struct Finished<'a> {
    planned: &'a Planned,
    result: Result<RunResult, RunError>,
    /// Wall-clock seconds.
    took: f64,
}

/// The tally of verdicts and the first error that stopped the invocation.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    lab_failed: usize,
    stopped: Option<ExitCode>,
}

pub(crate) fn run(args: &RunArgs) -> ExitCode {
    // Log lines (with their spans: run, step, component, …) on stderr, so stdout keeps the
    // verdicts; `RUST_LOG` chooses, warnings by default.
    inplace_api::standalone::init_logs("warn");
    let planned = match plan(args) {
        Ok(planned) => planned,
        Err(code) => return code,
    };
    let jobs = args
        .jobs
        .map_or_else(|| default_jobs(&planned, args.verbose), usize::from);
    let tally = run_all(&planned, jobs.min(planned.len()).max(1), args);
    println!(
        "{} scenarios: {} passed, {} failed, {} lab failures",
        planned.len(),
        tally.passed,
        tally.failed,
        tally.lab_failed
    );
    if let Some(code) = tally.stopped {
        code
    } else if tally.lab_failed > 0 {
        ExitCode::from(exit::LAB_FAILED)
    } else if tally.failed > 0 {
        ExitCode::from(exit::SCENARIO_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

/// Loads every scenario and checks that each can run where it is asked to, before any starts: a
/// mistake in the last file is reported now, not after the others ran.
fn plan(args: &RunArgs) -> Result<Vec<Planned>, ExitCode> {
    let files = load::discover(&args.paths).map_err(|e| {
        eprintln!("{e}");
        ExitCode::from(exit::USAGE)
    })?;
    let mut planned = Vec::new();
    for file in &files {
        let mut scenario = load::load(file).map_err(|e| {
            eprintln!("{e}\n");
            ExitCode::from(exit::USAGE)
        })?;
        let backend = args.backend.unwrap_or(scenario.scenario.lab.backend);
        if let Some(cluster) = &args.cluster {
            if let Some(kind) = cluster.kind()
                && !scenario.scenario.meant_for(backend, kind)
            {
                println!(
                    "○ {} skipped: not meant for cluster {} (its `clusters` do not name it)",
                    scenario.name,
                    kind.as_str()
                );
                continue;
            }
            scenario.scenario.cluster = cluster.clone();
        }
        if let (Some(jobs), Cluster::Kubeconfig(_)) = (args.jobs, &scenario.scenario.cluster)
            && jobs > 1
        {
            eprintln!(
                "error: --jobs {jobs}: scenario {} runs on an existing cluster (`kubeconfig`), where runs go one at a time: their node names would clash\n  = help: leave out --jobs, or give --jobs 1",
                scenario.name
            );
            return Err(ExitCode::from(exit::USAGE));
        }
        let problems = engine::run::unsupported(&scenario.scenario, backend);
        if !problems.is_empty() {
            let error = RunError::Unsupported {
                scenario: scenario.name.clone(),
                backend: backend.as_str(),
                problems,
            };
            eprintln!("error: {error}");
            return Err(ExitCode::from(exit::USAGE));
        }
        planned.push(Planned {
            label: artifacts::run_label(backend, &scenario.scenario.cluster),
            virtual_time: engine::run::on_virtual_time(&scenario.scenario, backend),
            scenario,
            backend,
        });
    }
    Ok(planned)
}

/// One run per core when all are simulated, quiet and on clusters of their own; else one at a
/// time.
fn default_jobs(planned: &[Planned], verbose: bool) -> usize {
    let shared = |p: &Planned| {
        p.backend != Backend::Sim || matches!(p.scenario.scenario.cluster, Cluster::Kubeconfig(_))
    };
    if verbose || planned.iter().any(shared) {
        1
    } else {
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    }
}

/// Runs `planned` on `jobs` threads, the wall-clock runs first (they wait more than they
/// compute, and the longest of them bounds the whole), and prints each as it ends. An
/// interruption or an error that is not a verdict stops new runs from starting.
fn run_all(planned: &[Planned], jobs: usize, args: &RunArgs) -> Tally {
    let mut order: Vec<&Planned> = planned.iter().collect();
    order.sort_by_key(|p| p.virtual_time);
    let queue = Mutex::new(VecDeque::from(order));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut tally = Tally::default();
    std::thread::scope(|scope| {
        let (sender, receiver) = mpsc::channel();
        for _ in 0..jobs {
            let sender = sender.clone();
            let (queue, stop) = (&queue, &stop);
            scope.spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let next = queue.locked().pop_front();
                    let Some(planned) = next else { break };
                    println!("▶ {} on {}", planned.scenario.name, planned.label);
                    if sender.send(run_one(planned, args)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        for finished in receiver {
            if let Some(code) = print_finished(&finished, &args.artifacts, &mut tally) {
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
                tally.stopped.get_or_insert(code);
            }
        }
    });
    tally
}

fn run_one<'a>(planned: &'a Planned, args: &RunArgs) -> Finished<'a> {
    let wall = Clock::wall();
    let started = wall.instant();
    let tools_dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_owned));
    let options = engine::RunOptions {
        live: args.verbose,
        tools_dir,
        inventory: args.inventory.clone(),
        run_id: None,
    };
    let result = engine::run_scenario_with(&planned.scenario, planned.backend, options);
    Finished {
        planned,
        result,
        took: wall.since(started).as_secs_f64(),
    }
}

/// Prints a run's verdict, failures and report (written here), and counts it; an error that is
/// not a verdict answers the exit code that stops the invocation.
fn print_finished(finished: &Finished<'_>, root: &Path, tally: &mut Tally) -> Option<ExitCode> {
    let Finished {
        planned,
        result,
        took,
    } = finished;
    let (name, label) = (&planned.scenario.name, &planned.label);
    let result = match result {
        Ok(result) => result,
        Err(e @ RunError::Interrupted { signal, .. }) => {
            eprintln!("error: {e}");
            return Some(ExitCode::from(if *signal == engine::SIGTERM {
                exit::TERMINATED
            } else {
                exit::INTERRUPTED
            }));
        }
        Err(e) => {
            eprintln!("error: {e}");
            return Some(ExitCode::from(exit::USAGE));
        }
    };
    let report = artifacts::run_dir(root, name, label)
        .and_then(|dir| artifacts::write_all(&dir, name, label, result));
    match result.verdict {
        Verdict::Passed => tally.passed += 1,
        Verdict::Failed => tally.failed += 1,
        Verdict::LabFailed => tally.lab_failed += 1,
    }
    let mut out = std::io::stdout().lock();
    use std::io::Write as _;
    let verdict = result.verdict.as_str();
    let _ = if planned.virtual_time {
        let elapsed = format_duration(result.elapsed);
        writeln!(
            out,
            "■ {name} on {label}: {verdict} after {elapsed} of virtual time in {took:.1}s"
        )
    } else {
        writeln!(
            out,
            "■ {name} on {label}: {verdict} in {took:.1}s (real time)"
        )
    };
    for failure in &result.failures {
        let _ = writeln!(out, "  ✗ {failure}");
    }
    match report {
        Ok(path) => {
            let _ = writeln!(out, "  report: {}", path.display());
        }
        Err(e) => {
            drop(out);
            super::print_error(&e);
            tally.lab_failed += 1;
        }
    }
    None
}
