//! `rackproof run | validate | list`.

use std::path::PathBuf;
use std::process::ExitCode;

use super::exit;
use crate::load;

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
}

pub(crate) fn run(args: &RunArgs) -> ExitCode {
    let shown: Vec<String> = args.paths.iter().map(|p| p.display().to_string()).collect();
    println!(
        "rackproof: scenario runs are not yet available in this build (asked to run {}); \
         `rackproof validate` checks scenario files",
        shown.join(", ")
    );
    ExitCode::SUCCESS
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
    println!("{} scenarios, {} valid, {} invalid", files.len(), files.len() - failed, failed);
    if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(exit::USAGE) }
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
                let backends: Vec<&str> = loaded.scenario.backends.iter().map(|b| b.as_str()).collect();
                println!("{:<40} {}", loaded.name, backends.join(","));
            }
            Err(e) => {
                eprintln!("{e}\n");
                status = ExitCode::from(exit::USAGE);
            }
        }
    }
    status
}
