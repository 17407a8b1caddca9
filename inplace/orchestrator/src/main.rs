//! `inplace-orchestrator`: runs the WorkerPool and in-place rollout controllers against a
//! kubeconfig's cluster (the same program as `rackproof orchestrator`).

use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    inplace_orchestrator::cli::run(inplace_orchestrator::cli::Args::parse()).await
}
