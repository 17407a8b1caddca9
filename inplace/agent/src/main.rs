//! `rackproof-agent`: the node agent binary (thin: flags → library).
//!
//! ```text
//! rackproof-agent run --node N --pool P --osc-secret kube-system/NAME [--kubelet heartbeat] [--once] ...
//! rackproof-agent kubelet --node N --pool P --kubelet-version V [--kubelet-version-file F] ...
//! rackproof-agent os-update --version V --image-server URL ...   # exit 0/1/2/3
//! rackproof-agent keygen --private slot.key --public slot.pub
//! rackproof-agent sign-slot --key slot.key --version V --dir DIR --linux vmlinuz [--initrd initrd.img] [--options "..."]
//! ```
//!
//! `kubelet` is the kubelet's part on lab nodes (the heartbeat), a process of its own beside
//! `run --kubelet heartbeat`, as the kubelet runs beside gardener-node-agent: killing one leaves
//! the other running. The two share the kubelet version through `--kubelet-version-file`.
//!
//! Exit codes of `run`: 0 after `--once` applied or found the OSC up to date, 1 on usage or setup
//! errors, 4 when `--once` ended with a failed update, 5 when it is still waiting or retrying.
//! Static build: `rustup target add x86_64-unknown-linux-musl && cargo build --release
//! --target x86_64-unknown-linux-musl -p inplace-agent` (no OpenSSL, no aws-lc: rustls with ring).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand, ValueEnum};
use inplace_agent::assess::EspAssessor;
use inplace_agent::assess::booted::{Efivars, FirstOf, KernelCmdline};
use inplace_agent::heartbeat::Heartbeat;
use inplace_agent::manifest::{BootSpec, SlotKeyPair, sign_directory};
use inplace_agent::osupdate::OsUpdateEnv;
use inplace_agent::osupdate::runner::SubprocessRunner;
use inplace_agent::platform::files::RootFiles;
use inplace_agent::platform::kubelet::{
    HeartbeatKubelet, Kubelet, SystemdKubelet, SystemdKubeletConfig,
};
use inplace_agent::platform::os_version::OsRelease;
use inplace_agent::platform::reboot::CommandReboot;
use inplace_agent::store::DirStore;
use inplace_agent::{Agent, AgentConfig, HeartbeatConfig, Outcome, Platform};
use rackproof_clock::Clock;

#[derive(Debug, Parser)]
#[command(
    name = "rackproof-agent",
    version,
    about = "Rackproof node agent (GEP-31 in-place updates)"
)]
struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "RACKPROOF_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent.
    Run(Box<RunArgs>),
    /// Run the kubelet's part on a lab node without a kubelet: the node's heartbeat (registration,
    /// status, Lease) and its pods.
    Kubelet(Box<KubeletArgs>),
    /// Install the boot slot for an OS version (the OSC's osUpdate command).
    #[command(name = "os-update", disable_help_flag = true)]
    OsUpdate {
        /// Arguments as `rackproof-agent os-update --help` lists them.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Generate an ed25519 slot-signing key pair (PEM).
    Keygen {
        /// Where to write the private key (PKCS#8 PEM, mode 0600).
        #[arg(long)]
        private: PathBuf,
        /// Where to write the public key (SPKI PEM).
        #[arg(long)]
        public: PathBuf,
    },
    /// Write a signed manifest.json for the slot files in a directory.
    SignSlot {
        /// The private key (PKCS#8 PEM).
        #[arg(long)]
        key: PathBuf,
        /// The OS version of the slot.
        #[arg(long)]
        version: String,
        /// The directory with the slot files.
        #[arg(long)]
        dir: PathBuf,
        /// The kernel file name.
        #[arg(long)]
        linux: String,
        /// The initrd file name.
        #[arg(long)]
        initrd: Option<String>,
        /// The kernel command line.
        #[arg(long, default_value = "")]
        options: String,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum KubeletKind {
    /// A systemd-managed kubelet.
    Systemd,
    /// No kubelet: `rackproof-agent kubelet` plays its part (lab nodes).
    Heartbeat,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The Node name.
    #[arg(long, env = "RACKPROOF_NODE")]
    node: String,
    /// The worker pool.
    #[arg(long, env = "RACKPROOF_POOL")]
    pool: String,
    /// The pool's OSC Secret as NAMESPACE/NAME.
    #[arg(long, env = "RACKPROOF_OSC_SECRET")]
    osc_secret: String,
    /// One pass, then exit.
    #[arg(long)]
    once: bool,
    /// Persistent state directory.
    #[arg(long, default_value = "/var/lib/rackproof-agent")]
    state_dir: PathBuf,
    /// Root under which OSC files are written.
    #[arg(long, default_value = "/")]
    root: PathBuf,
    /// The mounted ESP.
    #[arg(long, default_value = "/efi")]
    esp: PathBuf,
    /// efivarfs.
    #[arg(long, default_value = "/sys/firmware/efi/efivars")]
    efivars: PathBuf,
    /// Kernel command line.
    #[arg(long, default_value = "/proc/cmdline")]
    cmdline: PathBuf,
    /// os-release file.
    #[arg(long, default_value = "/etc/os-release")]
    os_release: PathBuf,
    /// Boot entry name prefix (as given to os-update).
    #[arg(long, default_value = "rackproof")]
    entry_prefix: String,
    /// The kubelet backend.
    #[arg(long, value_enum, default_value_t = KubeletKind::Systemd)]
    kubelet: KubeletKind,
    /// With `--kubelet heartbeat`: the kubelet version the node runs until the OSC installs
    /// another.
    #[arg(long, env = "RACKPROOF_KUBELET_VERSION")]
    kubelet_version: Option<String>,
    /// With `--kubelet heartbeat`: where the applied kubelet version is written for
    /// `rackproof-agent kubelet` (the same file given to it).
    #[arg(long)]
    kubelet_version_file: Option<PathBuf>,
    /// The reboot command.
    #[arg(long, default_value = "systemctl reboot", value_delimiter = ' ')]
    reboot_command: Vec<String>,
    /// Retry interval after a failed reconcile pass or watch (`5s`).
    #[arg(long, default_value = "5s", value_parser = duration)]
    poll_interval: Duration,
    /// Reconcile at least this often even when the Node and the OSC Secret did not change.
    #[arg(long, default_value = "1m", value_parser = duration)]
    resync_interval: Duration,
    /// Limit per OS-update run.
    #[arg(long, default_value = "10m", value_parser = duration)]
    os_update_timeout: Duration,
    /// OS-update runs before a retriable failure turns non-retriable.
    #[arg(long, default_value_t = 5)]
    os_update_max_attempts: u32,
}

#[derive(Debug, clap::Args)]
struct KubeletArgs {
    /// The Node name.
    #[arg(long, env = "RACKPROOF_NODE")]
    node: String,
    /// The worker pool (labels the Node when it is registered).
    #[arg(long, env = "RACKPROOF_POOL")]
    pool: String,
    /// The kubelet version the node reports until the agent applies another.
    #[arg(long, env = "RACKPROOF_KUBELET_VERSION")]
    kubelet_version: Option<String>,
    /// Where the agent writes the kubelet version it applies (`run --kubelet-version-file`).
    #[arg(long)]
    kubelet_version_file: Option<PathBuf>,
    /// os-release file (the running OS version the node reports).
    #[arg(long, default_value = "/etc/os-release")]
    os_release: PathBuf,
    /// Extra Node labels when the node is registered (KEY=VALUE).
    #[arg(long = "node-label")]
    node_labels: Vec<String>,
    /// Lease renew interval.
    #[arg(long, default_value = "10s", value_parser = duration)]
    lease_renew: Duration,
    /// Lease duration.
    #[arg(long, default_value = "40s", value_parser = duration)]
    lease_duration: Duration,
    /// Report an unchanged node status this often (kubelet's nodeStatusReportFrequency).
    #[arg(long, default_value = "5m", value_parser = duration)]
    status_report_interval: Duration,
    /// Retry interval after a failed watch.
    #[arg(long, default_value = "5s", value_parser = duration)]
    poll_interval: Duration,
}

fn duration(text: &str) -> Result<Duration, String> {
    rackproof_clock::parse_duration(text).map_err(|e| e.to_string())
}

fn init_logs(format: LogFormat) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logs(cli.log_format);
    match cli.command {
        Command::OsUpdate { args } => {
            let exit = inplace_agent::osupdate::run(
                &args,
                &OsUpdateEnv::default(),
                &mut std::io::stderr(),
            )
            .await;
            std::process::exit(exit.code());
        }
        Command::Keygen { private, public } => {
            let pair = SlotKeyPair::generate();
            inplace_agent::store::write_atomic(
                &private,
                pair.private_pem().as_bytes(),
                Some(0o600),
            )?;
            inplace_agent::store::write_atomic(&public, pair.public_pem().as_bytes(), Some(0o644))?;
            Ok(())
        }
        Command::SignSlot {
            key,
            version,
            dir,
            linux,
            initrd,
            options,
        } => {
            let pem = std::fs::read_to_string(&key)
                .with_context(|| format!("failed to read {}", key.display()))?;
            let pair = SlotKeyPair::from_pem(&pem)?;
            let manifest = sign_directory(
                &dir,
                &version,
                BootSpec {
                    linux,
                    initrd,
                    options,
                },
                &pair,
            )?;
            println!(
                "{}",
                String::from_utf8_lossy(&manifest.to_json()).trim_end()
            );
            Ok(())
        }
        Command::Run(args) => run(*args).await,
        Command::Kubelet(args) => kubelet(*args).await,
    }
}

/// The kubelet version `rackproof-agent kubelet` and `run --kubelet heartbeat` start from: the
/// given one, and the file's once the agent applied another.
fn heartbeat_kubelet(
    client: kube::Client,
    node: &str,
    version: Option<&String>,
    file: Option<&PathBuf>,
) -> HeartbeatKubelet {
    let kubelet = HeartbeatKubelet::new(client, node, version.filter(|v| !v.is_empty()).cloned());
    match file {
        Some(file) => kubelet.with_version_file(file.clone()),
        None => kubelet,
    }
}

async fn kubelet(args: KubeletArgs) -> anyhow::Result<()> {
    let clock = Clock::wall();
    let client = kube::Client::try_default()
        .await
        .context("failed to build the Kubernetes client")?;
    let labels =
        inplace_agent::heartbeat::parse_labels(&args.node_labels).map_err(anyhow::Error::msg)?;
    let config = HeartbeatConfig {
        renew_interval: args.lease_renew,
        lease_duration: args.lease_duration,
        status_report_interval: args.status_report_interval,
        labels,
        retry: args.poll_interval,
        ..HeartbeatConfig::default()
    };
    let kubelet = heartbeat_kubelet(
        client.clone(),
        &args.node,
        args.kubelet_version.as_ref(),
        args.kubelet_version_file.as_ref(),
    );
    let os = OsRelease::new(&args.os_release);
    let heartbeat = Heartbeat::new(client, &args.node, &args.pool, config, clock);
    tracing::info!(node = %args.node, "kubelet heartbeat started");
    heartbeat.run(&os, &kubelet).await;
    Ok(())
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let Some((namespace, secret)) = args.osc_secret.split_once('/') else {
        bail!("--osc-secret {:?} is not NAMESPACE/NAME", args.osc_secret);
    };
    let clock = Clock::wall();
    let client = kube::Client::try_default()
        .await
        .context("failed to build the Kubernetes client")?;
    let mut config = AgentConfig::new(&args.node, &args.pool, namespace, secret);
    config.poll_interval = args.poll_interval;
    config.resync_interval = args.resync_interval;
    config.os_update_timeout = args.os_update_timeout;
    config.os_update_max_attempts = args.os_update_max_attempts;
    let files = Arc::new(RootFiles::new(&args.root));
    let kubelet: Arc<dyn Kubelet> = match args.kubelet {
        KubeletKind::Systemd => Arc::new(SystemdKubelet::new(
            SystemdKubeletConfig::default(),
            files.clone(),
        )),
        KubeletKind::Heartbeat => Arc::new(heartbeat_kubelet(
            client.clone(),
            &args.node,
            args.kubelet_version.as_ref(),
            args.kubelet_version_file.as_ref(),
        )),
    };
    let esp = Arc::new(inplace_boot::DirEsp::new(&args.esp).context("failed to open the ESP")?);
    let booted = Arc::new(FirstOf::new(
        Efivars::new(&args.efivars),
        KernelCmdline::new(&args.cmdline),
    ));
    let platform = Platform {
        store: Arc::new(DirStore::open(&args.state_dir)?),
        files,
        kubelet,
        reboot: Arc::new(CommandReboot::new(
            args.reboot_command.clone(),
            Duration::from_secs(300),
            clock.clone(),
        )),
        os_version: Arc::new(OsRelease::new(&args.os_release)),
        boot: Arc::new(EspAssessor::new(esp, booted, &args.entry_prefix)),
        os_update: Arc::new(SubprocessRunner::new(clock.clone())),
    };
    let agent = Agent::new(config, platform, client, clock);
    if !args.once {
        agent.run().await;
        return Ok(());
    }
    let outcome = agent.run_once().await?;
    println!("{outcome:?}");
    match outcome {
        Outcome::UpToDate | Outcome::Applied => Ok(()),
        Outcome::Failed(_) => std::process::exit(4),
        Outcome::Waiting(_) | Outcome::Retrying(_) => std::process::exit(5),
    }
}
