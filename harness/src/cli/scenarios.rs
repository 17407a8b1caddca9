//! `rackproof run | validate | list`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use std::time::Duration;

use rackproof_clock::{Clock, format_duration};

use super::exit;
use crate::engine::{self, Verdict, artifacts};
use crate::load;
use crate::scenario::{Backend, Cluster};

/// Scenario paths.
#[derive(Debug, clap::Args)]
pub(crate) struct PathsArgs {
    /// Scenario files or directories.
    #[arg(default_value = "scenarios")]
    pub(crate) paths: Vec<PathBuf>,
}

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
    /// API server) or `local` (etcd, kube-apiserver and kube-controller-manager on this machine).
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

pub(crate) fn run(args: &RunArgs) -> ExitCode {
    // Log lines (with their spans: run, step, component, …) on stderr, so stdout keeps the
    // verdicts; `RUST_LOG` chooses, warnings by default.
    inplace_api::standalone::init_logs("warn");
    let files = match discover(&args.paths) {
        Ok(files) => files,
        Err(code) => return code,
    };
    let mut loaded = Vec::new();
    for file in &files {
        match load::load(file) {
            Ok(mut scenario) => {
                if let Some(cluster) = &args.cluster {
                    if let Some(kind) = cluster.kind()
                        && !scenario.scenario.clusters.contains(&kind)
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
                loaded.push(scenario);
            }
            Err(e) => {
                eprintln!("{e}\n");
                return ExitCode::from(exit::USAGE);
            }
        }
    }
    let (mut passed, mut failed, mut lab_failed) = (0, 0, 0);
    let wall = Clock::wall();
    for scenario in &loaded {
        let backend = args.backend.unwrap_or(scenario.scenario.lab.backend);
        let label = artifacts::run_label(backend, &scenario.scenario.cluster);
        println!("▶ {} on {label}", scenario.name);
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
        let result = match engine::run_scenario_with(scenario, backend, options) {
            Ok(result) => result,
            Err(e @ engine::RunError::Interrupted { signal, .. }) => {
                eprintln!("error: {e}");
                return ExitCode::from(if signal == engine::SIGTERM {
                    exit::TERMINATED
                } else {
                    exit::INTERRUPTED
                });
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(exit::USAGE);
            }
        };
        let took = wall.since(started);
        let report = artifacts::run_dir(&args.artifacts, &scenario.name, &label)
            .and_then(|dir| artifacts::write_all(&dir, &scenario.name, &label, &result));
        match result.verdict {
            Verdict::Passed => passed += 1,
            Verdict::Failed => failed += 1,
            Verdict::LabFailed => lab_failed += 1,
        }
        println!(
            "  {} after {} of {} time in {:.1}s",
            result.verdict.as_str(),
            format_duration(result.elapsed),
            if engine::run::on_virtual_time(&scenario.scenario, backend) {
                "virtual"
            } else {
                "real"
            },
            took.as_secs_f64()
        );
        for failure in &result.failures {
            println!("  ✗ {failure}");
        }
        match report {
            Ok(path) => println!("  report: {}", path.display()),
            Err(e) => {
                super::print_error(&e);
                lab_failed += 1;
            }
        }
    }
    println!(
        "{} scenarios: {passed} passed, {failed} failed, {lab_failed} lab failures",
        loaded.len()
    );
    if lab_failed > 0 {
        ExitCode::from(exit::LAB_FAILED)
    } else if failed > 0 {
        ExitCode::from(exit::SCENARIO_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ExitCode> {
    load::discover(paths).map_err(|e| {
        eprintln!("{e}");
        ExitCode::from(exit::USAGE)
    })
}

pub(crate) fn validate(paths: &[PathBuf]) -> ExitCode {
    let files = match discover(paths) {
        Ok(files) => files,
        Err(code) => return code,
    };
    let mut failed = 0;
    for file in &files {
        match load::load(file) {
            Ok(loaded) => println!("ok      {} ({})", loaded.name, file.display()),
            Err(e) => {
                failed += 1;
                eprintln!("{e}\n");
            }
        }
    }
    println!(
        "{} scenarios, {} valid, {} invalid",
        files.len(),
        files.len() - failed,
        failed
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::USAGE)
    }
}

pub(crate) fn list(paths: &[PathBuf]) -> ExitCode {
    let files = match discover(paths) {
        Ok(files) => files,
        Err(code) => return code,
    };
    let mut status = ExitCode::SUCCESS;
    for file in &files {
        match load::load(file) {
            Ok(loaded) => {
                let runs: Vec<String> = loaded
                    .scenario
                    .runs()
                    .into_iter()
                    .map(|(backend, cluster)| artifacts::run_label(backend, &cluster.cluster()))
                    .collect();
                println!("{:<40} {}", loaded.name, runs.join(","));
            }
            Err(e) => {
                eprintln!("{e}\n");
                status = ExitCode::from(exit::USAGE);
            }
        }
    }
    status
}

/// `rackproof report`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// Run folders (`<artifacts>/<scenario>/<backend>/`).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
}

pub(crate) fn report(args: &ReportArgs) -> ExitCode {
    let mut status = ExitCode::SUCCESS;
    for dir in &args.dirs {
        match artifacts::rerender(dir) {
            Ok((summary, path)) => {
                println!(
                    "{} on {}: {} after {}",
                    summary.scenario,
                    summary.backend,
                    summary.verdict,
                    format_duration(Duration::from_millis(summary.elapsed_ms))
                );
                for expectation in &summary.expectations {
                    println!("  {}: {}", expectation.expectation, expectation.outcome);
                }
                for failure in &summary.failures {
                    println!("  ✗ {failure}");
                }
                println!("  report: {}", path.display());
            }
            Err(e) => {
                super::print_error(&e);
                status = ExitCode::from(exit::USAGE);
            }
        }
    }
    status
}
