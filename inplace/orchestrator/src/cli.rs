//! The orchestrator as a standalone program, with its settings as flags (or `RACKPROOF_*`
//! variables, which is how a Rackproof run hands them to it): `inplace-orchestrator` and
//! `rackproof orchestrator` both run [`run`].

use std::time::Duration;

use anyhow::Context as _;
use inplace_api::leader::LeaderElectArgs;
use inplace_api::version::KubeVersion;
use rackproof_clock::{Clock, parse_duration};

use crate::Config;

/// MCM-style in-place rollout of MachineDeployments (GEP-31): the WorkerPool and in-place
/// rollout controllers against a kubeconfig's cluster, until stopped.
#[derive(Debug, clap::Parser)]
#[command(version)]
pub struct Args {
    /// Path to the kubeconfig (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Namespace of the MachineDeployments, MachineSets and Machines.
    #[arg(long, env = "RACKPROOF_NAMESPACE", default_value = "default")]
    pub namespace: String,
    /// Longest time between two passes over every object.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub sync_period: Duration,
    /// Time between eviction rounds while a drain is blocked.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    pub eviction_retry_interval: Duration,
    /// Drain timeout for Machines that name none.
    #[arg(long, default_value = "2h", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// In-place update timeout for Machines that name none.
    #[arg(long, default_value = "20m", value_parser = parse_duration)]
    pub in_place_update_timeout: Duration,
    /// Eviction refusals per pod before the pod is deleted, for Machines that name none.
    #[arg(long, default_value_t = 10)]
    pub max_evict_retries: u32,
    /// How long a Machine may stay Pending before it is Failed, for Machines that name none.
    #[arg(long, default_value = "20m", value_parser = parse_duration)]
    pub machine_creation_timeout: Duration,
    /// How long a Machine may stay Unknown (outside an update) before it is Failed, for Machines
    /// that name none.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub machine_health_timeout: Duration,
    /// How long a node's Lease may go unrenewed before its `Ready=True` is not believed
    /// (kube-controller-manager's `--node-monitor-grace-period`).
    #[arg(long, default_value = "40s", value_parser = parse_duration)]
    pub node_monitor_grace_period: Duration,
    /// Image server URL handed to the OS-update command (`--image-server`).
    #[arg(
        long,
        env = "RACKPROOF_IMAGE_SERVER_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub image_server_url: String,
    /// The OS-update command written into each in-place pool's OSC.
    #[arg(long, default_value = "/opt/rackproof/bin/rackproof-agent")]
    pub os_update_command: String,
    /// Name of the cluster-scoped ImageCatalog pools are validated against.
    #[arg(long, env = "RACKPROOF_CATALOG", default_value = "rackproof")]
    pub catalog: String,
    /// The control plane's Kubernetes version (MAJOR.MINOR.PATCH).
    #[arg(long, env = "RACKPROOF_CONTROL_PLANE_VERSION", default_value = "1.31.1", value_parser = kube_version)]
    pub control_plane_version: KubeVersion,
    /// Namespace of the pools' OSC Secrets.
    #[arg(long, env = "RACKPROOF_OSC_NAMESPACE", default_value = "kube-system")]
    pub osc_namespace: String,
    /// Leader election (`--leader-elect` and the rest); the Lease defaults to
    /// `machine-controller-manager` in `--namespace`.
    #[command(flatten)]
    pub leader_election: LeaderElectArgs,
}

fn kube_version(text: &str) -> Result<KubeVersion, String> {
    KubeVersion::parse(text).map_err(|e| e.to_string())
}

/// Logs to stderr (filtered by `RUST_LOG`, default `info`) and runs the controllers until the
/// future is dropped; returns only for a missing cluster or an unusable setting.
pub async fn run(args: Args) -> anyhow::Result<()> {
    inplace_api::standalone::init_logs("info");
    let client = inplace_api::standalone::client(args.kubeconfig.as_deref()).await?;
    let leader_election = args
        .leader_election
        .election(crate::LEADER_LEASE_NAME, &args.namespace);
    let config = Config {
        leader_election,
        namespace: args.namespace,
        sync_period: args.sync_period,
        eviction_retry_interval: args.eviction_retry_interval,
        default_drain_timeout: args.drain_timeout,
        default_in_place_update_timeout: args.in_place_update_timeout,
        default_max_evict_retries: args.max_evict_retries,
        default_machine_creation_timeout: args.machine_creation_timeout,
        default_machine_health_timeout: args.machine_health_timeout,
        node_monitor_grace_period: args.node_monitor_grace_period,
        image_server_url: args.image_server_url,
        os_update_command: args.os_update_command,
        catalog_name: args.catalog,
        control_plane_version: args.control_plane_version,
        osc_namespace: args.osc_namespace,
    };
    tracing::info!(namespace = %config.namespace, leader_election = ?config.leader_election.as_ref().map(|e| (&e.lease_namespace, &e.lease_name, &e.identity)), control_plane = %config.control_plane_version, image_server = %config.image_server_url, "orchestrator started");
    crate::run(client, Clock::wall(), config)
        .await
        .context("orchestrator stopped")
}
