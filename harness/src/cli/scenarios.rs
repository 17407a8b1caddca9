//! `rackproof validate | list | report`.

use std::path::PathBuf;
use std::process::ExitCode;

use std::time::Duration;

use rackproof_clock::format_duration;

use super::exit;
use crate::engine::artifacts;
use crate::load;

/// Scenario paths.
#[derive(Debug, clap::Args)]
pub(crate) struct PathsArgs {
    /// Scenario files or directories.
    #[arg(default_value = "scenarios")]
    pub(crate) paths: Vec<PathBuf>,
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
