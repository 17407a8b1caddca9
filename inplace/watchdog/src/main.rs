//! `inplace-watchdog`: runs the dependency watchdog against a kubeconfig's cluster (the same
//! program as `rackproof watchdog`).

use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    inplace_watchdog::cli::run(inplace_watchdog::cli::Args::parse()).await
}
