//! `inplace-orchestrator`: runs the WorkerPool and in-place rollout controllers against a kubeconfig's cluster.

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use inplace_api::version::KubeVersion;
use inplace_orchestrator::Config;
use rackproof_clock::{Clock, parse_duration};

/// MCM-style in-place rollout of MachineDeployments (GEP-31).
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Path to the kubeconfig (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<std::path::PathBuf>,
    /// Namespace of the MachineDeployments, MachineSets and Machines.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Longest time between two passes over every object.
    #[arg(long, default_value = "10s", value_parser = duration)]
    sync_period: Duration,
    /// Time between eviction rounds while a drain is blocked.
    #[arg(long, default_value = "20s", value_parser = duration)]
    eviction_retry_interval: Duration,
    /// Drain timeout for Machines that name none.
    #[arg(long, default_value = "2h", value_parser = duration)]
    drain_timeout: Duration,
    /// In-place update timeout for Machines that name none.
    #[arg(long, default_value = "20m", value_parser = duration)]
    in_place_update_timeout: Duration,
    /// Eviction refusals per pod before an Event, for Machines that name none.
    #[arg(long, default_value_t = 10)]
    max_evict_retries: u32,
    /// Image server URL handed to the OS-update command (`--image-server`).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    image_server_url: String,
    /// The OS-update command written into each in-place pool's OSC.
    #[arg(long, default_value = "/opt/rackproof/bin/rackproof-agent")]
    os_update_command: String,
    /// Name of the cluster-scoped ImageCatalog pools are validated against.
    #[arg(long, default_value = "rackproof")]
    catalog: String,
    /// The control plane's Kubernetes version (MAJOR.MINOR.PATCH).
    #[arg(long, default_value = "1.31.1", value_parser = kube_version)]
    control_plane_version: KubeVersion,
    /// Namespace of the pools' OSC Secrets.
    #[arg(long, default_value = "kube-system")]
    osc_namespace: String,
}

fn kube_version(text: &str) -> Result<KubeVersion, String> {
    KubeVersion::parse(text).map_err(|e| e.to_string())
}

fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let args = Args::parse();
    let config = match args.kubeconfig.as_deref() {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("failed to read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .with_context(|| format!("failed to load kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer().await.context("failed to find a kubeconfig")?,
    };
    let client = kube::Client::try_from(config).context("failed to build a kubernetes client")?;
    let config = Config {
        namespace: args.namespace,
        sync_period: args.sync_period,
        eviction_retry_interval: args.eviction_retry_interval,
        default_drain_timeout: args.drain_timeout,
        default_in_place_update_timeout: args.in_place_update_timeout,
        default_max_evict_retries: args.max_evict_retries,
        image_server_url: args.image_server_url,
        os_update_command: args.os_update_command,
        catalog_name: args.catalog,
        control_plane_version: args.control_plane_version,
        osc_namespace: args.osc_namespace,
    };
    inplace_orchestrator::run(client, Clock::wall(), config).await.context("orchestrator stopped")
}
