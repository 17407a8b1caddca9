//! The dependency watchdog as a standalone program, with its settings as flags (or `RACKPROOF_*`
//! variables, which is how a Rackproof run hands them to it): `inplace-watchdog` and
//! `rackproof watchdog` both run [`run`].

use std::time::Duration;

use anyhow::Context as _;
use inplace_api::leader::LeaderElectArgs;
use rackproof_clock::{Clock, parse_duration};

use crate::Config;

/// Dependency watchdog: scales dependents to zero when most node leases expire, ignoring nodes
/// under in-place update; scales them back when the leases recover.
#[derive(Debug, clap::Parser)]
#[command(version)]
pub struct Args {
    /// Path to the kubeconfig (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Namespace of the dependents and the status ConfigMap.
    #[arg(long, env = "RACKPROOF_NAMESPACE", default_value = "kube-system")]
    pub namespace: String,
    /// Namespace of the Machine objects (default: --namespace).
    #[arg(long)]
    pub machine_namespace: Option<String>,
    /// Dependent Deployments in scale-down order (repeat or comma-separate).
    #[arg(long, env = "RACKPROOF_DEPENDENTS", value_delimiter = ',', default_values_t = Config::default().dependents)]
    pub dependent: Vec<String>,
    /// Time between probes.
    #[arg(long, env = "RACKPROOF_PROBE_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub probe_interval: Duration,
    /// kube-controller-manager's node monitor grace period.
    #[arg(long, env = "RACKPROOF_KCM_NODE_MONITOR_GRACE", default_value = "40s", value_parser = parse_duration)]
    pub kcm_node_monitor_grace: Duration,
    /// Expired fraction of candidate leases that triggers the scale-down.
    #[arg(
        long,
        env = "RACKPROOF_NODE_LEASE_FAILURE_FRACTION",
        default_value_t = 0.6
    )]
    pub node_lease_failure_fraction: f64,
    /// Node condition types that make a node unhealthy when True.
    #[arg(long, value_delimiter = ',', default_values_t = Config::default().unhealthy_conditions)]
    pub unhealthy_condition: Vec<String>,
    /// InPlaceUpdate condition reasons that take a node out of the probe.
    #[arg(long, value_delimiter = ',', default_values_t = Config::default().in_place_reasons)]
    pub in_place_reason: Vec<String>,
    /// Leader election (`--leader-elect` and the rest); the Lease defaults to
    /// `dependency-watchdog-prober` in `--namespace`.
    #[command(flatten)]
    pub leader_election: LeaderElectArgs,
}

/// Logs to stderr (filtered by `RUST_LOG`, default `info`) and probes until the future is
/// dropped; returns only for a missing cluster or an unusable setting.
pub async fn run(args: Args) -> anyhow::Result<()> {
    inplace_api::standalone::init_logs("info");
    let client = inplace_api::standalone::client(args.kubeconfig.as_deref()).await?;
    let leader_election = args
        .leader_election
        .election(crate::LEADER_LEASE_NAME, &args.namespace);
    let config = Config {
        leader_election,
        machine_namespace: args
            .machine_namespace
            .unwrap_or_else(|| args.namespace.clone()),
        namespace: args.namespace,
        dependents: args.dependent,
        probe_interval: args.probe_interval,
        kcm_node_monitor_grace: args.kcm_node_monitor_grace,
        node_lease_failure_fraction: args.node_lease_failure_fraction,
        unhealthy_conditions: args.unhealthy_condition,
        in_place_reasons: args.in_place_reason,
        ..Config::default()
    };
    tracing::info!(namespace = %config.namespace, dependents = %config.dependents.join(","), probe_interval = ?config.probe_interval, "dependency watchdog started");
    crate::run(client, Clock::wall(), config)
        .await
        .context("dependency watchdog stopped")
}
