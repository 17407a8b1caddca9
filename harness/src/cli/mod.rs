//! The `rackproof` command line: parsing (clap) and the commands that are thin wrappers over the
//! libraries. `main.rs` only calls [`run`].

mod apiserver;
mod lab;
mod run;
mod scenarios;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit codes. Documented in the README.
pub mod exit {
    /// Everything held.
    pub const OK: u8 = 0;
    /// The system under test misbehaved (a scenario failed).
    pub const SCENARIO_FAILED: u8 = 1;
    /// A scenario or inventory file is invalid, or the command line is wrong.
    pub const USAGE: u8 = 2;
    /// The lab or infrastructure failed (BMC unreachable, node reserved, image missing).
    pub const LAB_FAILED: u8 = 3;
    /// Ctrl-C (SIGINT) stopped the run (the shell's 128 + SIGINT).
    pub const INTERRUPTED: u8 = 130;
    /// SIGTERM stopped the run (the shell's 128 + SIGTERM).
    pub const TERMINATED: u8 = 143;
}

/// Proves in-place node updates on bare metal before they reach a production rack.
#[derive(Debug, Parser)]
#[command(name = "rackproof", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run scenarios (files, or directories of `*.yaml`).
    Run(run::RunArgs),
    /// Check scenario files without running them.
    Validate(scenarios::PathsArgs),
    /// List scenarios with the runs the test suite makes of each (`sim`, `sim-local`, `qemu-local`, …).
    List(scenarios::PathsArgs),
    /// Print the JSON Schema of scenario files.
    Schema,
    /// Summarize a run folder written by `run` and write its report.html again.
    Report(scenarios::ReportArgs),
    /// Serve the embedded Kubernetes API server over HTTPS on 127.0.0.1 until Ctrl-C.
    Apiserver(apiserver::ApiserverArgs),
    /// Drive lab nodes: power, consoles, BMC emulators.
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// Run the orchestrator (WorkerPool and in-place rollout controllers) against a cluster.
    Orchestrator(inplace_orchestrator::cli::Args),
    /// Run the dependency watchdog against a cluster.
    Watchdog(inplace_watchdog::cli::Args),
}

/// Runs the command line.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Validate(args) => scenarios::validate(&args.paths),
        Command::List(args) => scenarios::list(&args.paths),
        Command::Schema => {
            println!("{}", crate::schema::scenario_schema());
            ExitCode::SUCCESS
        }
        Command::Report(args) => scenarios::report(&args),
        Command::Apiserver(args) => with_runtime(apiserver::serve(args)),
        Command::Lab(command) => with_runtime(lab::run(command)),
        Command::Orchestrator(args) => {
            with_runtime(component(inplace_orchestrator::cli::run(args)))
        }
        Command::Watchdog(args) => with_runtime(component(inplace_watchdog::cli::run(args))),
    }
}

fn with_runtime(future: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(future),
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            ExitCode::from(exit::LAB_FAILED)
        }
    }
}

/// Runs a component until it stops; it stops only on an error, printed with its causes.
async fn component(run: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    match run.await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            print_error(e.as_ref());
            ExitCode::from(exit::LAB_FAILED)
        }
    }
}

/// Prints an error with its whole source chain on one line each.
pub(crate) fn print_error(error: &(dyn std::error::Error + 'static)) {
    eprintln!("error: {error}");
    let mut source = error.source();
    while let Some(cause) = source {
        eprintln!("  caused by: {cause}");
        source = cause.source();
    }
}
