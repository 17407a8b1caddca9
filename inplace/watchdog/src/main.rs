//! `inplace-watchdog`: runs the dependency watchdog against a kubeconfig's cluster.

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use inplace_watchdog::Config;
use rackproof_clock::{Clock, parse_duration};

/// Dependency watchdog: scales dependents to zero when most node leases expire, ignoring nodes
/// under in-place update.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Path to the kubeconfig (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<std::path::PathBuf>,
    /// Namespace of the dependents and the status ConfigMap.
    #[arg(long, default_value = "kube-system")]
    namespace: String,
    /// Namespace of the Machine objects (default: --namespace).
    #[arg(long)]
    machine_namespace: Option<String>,
    /// Dependent Deployments in scale-down order (repeat or comma-separate).
    #[arg(long, value_delimiter = ',', default_values_t = Config::default().dependents)]
    dependent: Vec<String>,
    /// Time between probes.
    #[arg(long, default_value = "10s", value_parser = duration)]
    probe_interval: Duration,
    /// kube-controller-manager's node monitor grace period.
    #[arg(long, default_value = "40s", value_parser = duration)]
    kcm_node_monitor_grace: Duration,
    /// Expired fraction of candidate leases that triggers the scale-down.
    #[arg(long, default_value_t = 0.6)]
    node_lease_failure_fraction: f64,
    /// Node condition types that make a node unhealthy when True.
    #[arg(long, value_delimiter = ',', default_values_t = Config::default().unhealthy_conditions)]
    unhealthy_condition: Vec<String>,
    /// InPlaceUpdate condition reasons that take a node out of the probe.
    #[arg(long, value_delimiter = ',', default_values_t = Config::default().in_place_reasons)]
    in_place_reason: Vec<String>,
}

fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let args = Args::parse();
    let client = client(args.kubeconfig.as_deref()).await?;
    let config = Config {
        machine_namespace: args.machine_namespace.unwrap_or_else(|| args.namespace.clone()),
        namespace: args.namespace,
        dependents: args.dependent,
        probe_interval: args.probe_interval,
        kcm_node_monitor_grace: args.kcm_node_monitor_grace,
        node_lease_failure_fraction: args.node_lease_failure_fraction,
        unhealthy_conditions: args.unhealthy_condition,
        in_place_reasons: args.in_place_reason,
        ..Config::default()
    };
    inplace_watchdog::run(client, Clock::wall(), config).await.context("dependency watchdog stopped")
}

async fn client(path: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let config = match path {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("failed to read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .with_context(|| format!("failed to load kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer().await.context("failed to find a kubeconfig")?,
    };
    kube::Client::try_from(config).context("failed to build a kubernetes client")
}
