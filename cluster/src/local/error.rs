//! Errors of the `local` provider: what failed, with the path or process it concerns.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// The command that installs etcd and builds kube-apiserver and kube-controller-manager.
pub const INSTALL_COMMAND: &str = "ci/install-local-control-plane";

/// Starting, using or stopping a [`LocalControlPlane`](super::LocalControlPlane) failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The etcd binary is missing.
    #[error(
        "etcd not found ({looked}); install it with `{INSTALL_COMMAND}` (Debian package etcd-server)"
    )]
    EtcdNotFound {
        /// Where it was looked for.
        looked: String,
    },

    /// The kube-apiserver binary is missing.
    #[error("kube-apiserver not found at {} ({from}); build it with `{INSTALL_COMMAND}`", path.display())]
    KubeApiserverNotFound {
        /// The path that was tried.
        path: PathBuf,
        /// Which setting named the path.
        from: String,
    },

    /// The kube-controller-manager binary is missing.
    #[error("kube-controller-manager not found at {} ({from}); build it with `{INSTALL_COMMAND}`", path.display())]
    KubeControllerManagerNotFound {
        /// The path that was tried.
        path: PathBuf,
        /// Which setting named the path.
        from: String,
    },

    /// No directory for the cache path could be derived.
    #[error(
        "{program} not found: neither {variable}, RACKPROOF_CACHE nor HOME is set; \
         build it with `{INSTALL_COMMAND}`"
    )]
    NoCacheDir {
        /// `kube-apiserver` or `kube-controller-manager`.
        program: &'static str,
        /// The environment variable that would name the binary.
        variable: &'static str,
    },

    /// An option of the control plane has a value it cannot run with.
    #[error("invalid option {option}: {reason}")]
    InvalidOption {
        /// The option's field name.
        option: &'static str,
        /// What is wrong with its value.
        reason: String,
    },

    /// The control plane was started without a controller manager, so it cannot start or stop one.
    #[error(
        "the control plane has no kube-controller-manager: start it with \
         `LocalOptions::with_controller_manager`"
    )]
    NoControllerManager,

    /// kube-controller-manager did not answer `/healthz` with `ok` in time.
    #[error(
        "kube-controller-manager at {url} not healthy after {after:?} ({last_answer}); its log: {}",
        log.display()
    )]
    ControllerManagerNotHealthy {
        /// How long it was given.
        after: Duration,
        /// Its HTTPS URL.
        url: String,
        /// The last answer of `/healthz`.
        last_answer: String,
        /// Its log file.
        log: PathBuf,
    },

    /// No client for kube-controller-manager's `/healthz` could be built.
    #[error("failed to build a client for kube-controller-manager at {url}")]
    HealthzClient {
        /// Its HTTPS URL.
        url: String,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A file or directory of the control plane could not be written or created.
    #[error("failed to write {}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// Generating certificates or keys failed.
    #[error("failed to generate {what}")]
    Certificate {
        /// The certificate or key.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: rcgen::Error,
    },

    /// No free loopback port could be found.
    #[error("failed to find a free port on 127.0.0.1")]
    FreePort(#[source] std::io::Error),

    /// A process could not be started.
    #[error("failed to start {program} ({})", binary.display())]
    Spawn {
        /// `etcd`, `kube-apiserver` or `kube-controller-manager`.
        program: &'static str,
        /// Its binary.
        binary: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A process exited while the control plane was starting.
    #[error("{program} exited during startup ({status}); its log: {}", log.display())]
    Exited {
        /// `etcd`, `kube-apiserver` or `kube-controller-manager`.
        program: &'static str,
        /// How it ended.
        status: ExitStatus,
        /// Its log file (kept).
        log: PathBuf,
    },

    /// The control plane did not become ready in time.
    #[error("control plane not ready after {after:?} ({waiting_for}); logs kept in {}", dir.display())]
    NotReady {
        /// How long it was given.
        after: Duration,
        /// What it was still waiting for, with the last answer seen.
        waiting_for: String,
        /// The directory with the processes' logs.
        dir: PathBuf,
    },

    /// A kubeconfig was asked for a user that the control plane does not know.
    #[error("unknown user {user:?}: the control plane was started with nodes {nodes:?}")]
    UnknownUser {
        /// The user asked for.
        user: String,
        /// The nodes the control plane has tokens for.
        nodes: Vec<String>,
    },

    /// A node name that cannot be a Kubernetes node name (or a token file entry).
    #[error("invalid node name {0:?}: use lowercase letters, digits, '-' and '.'")]
    InvalidNodeName(String),

    /// A kube client could not be built from a generated kubeconfig.
    #[error("failed to build a client from kubeconfig {}", path.display())]
    Client {
        /// The kubeconfig.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// Stopping a process failed.
    #[error("failed to stop {program}")]
    Stop {
        /// `etcd`, `kube-apiserver` or `kube-controller-manager`.
        program: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
