//! The kubelet: a systemd unit with a health endpoint on real nodes; the agent's own heartbeat on
//! lab nodes that run no kubelet.
//!
//! Three operations matter to an in-place update (GEP-31 "Gardener Node Agent"):
//!
//! 1. [`Kubelet::apply`]: run `version` with the given configuration and restart the kubelet.
//! 2. [`Kubelet::rebootstrap`]: after a CA rotation, turn the current kubeconfig into the
//!    bootstrap kubeconfig, remove the client certificates (`--cert-dir`) and restart, so the
//!    kubelet requests new certificates signed by the new CA through a CSR.
//! 3. [`Kubelet::healthy`]: one health probe; the agent polls it until a timeout.
//!
//! [`SystemdKubelet`] writes the version into an environment drop-in (`KUBELET_VERSION=`, which
//! the node image's unit uses to pick `/opt/bin/kubelet-$KUBELET_VERSION`), the configuration to
//! its file, and restarts the unit with `systemctl`; health is `GET /healthz` on the kubelet's
//! healthz port. [`HeartbeatKubelet`] keeps the version the heartbeat reports in
//! `nodeInfo.kubeletVersion`; it is healthy once the Node in the API server shows that version and
//! `Ready=True`, i.e. once the heartbeat "restarted" with it. The agent and the heartbeat each
//! hold one: in memory when they share a process's memory (a simulated node, whose memory plays
//! its disk), else through a version file both read ([`HeartbeatKubelet::with_version_file`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;

use crate::platform::files::{FileError, FileSink};

/// A failed kubelet operation.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    /// A systemctl (or other) command failed to run or exited non-zero.
    #[error("failed to run {command:?}: {detail}")]
    Command {
        /// The command line.
        command: Vec<String>,
        /// Exit status or spawn error.
        detail: String,
    },
    /// Writing a kubelet file failed.
    #[error("failed to write kubelet file")]
    File(#[source] FileError),
    /// A file operation during rebootstrap failed.
    #[error("failed to {action} {path} for the kubelet rebootstrap")]
    Io {
        /// What was attempted.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The kubelet of this node.
#[async_trait::async_trait]
pub trait Kubelet: Send + Sync + std::fmt::Debug {
    /// Runs kubelet `version` with `config` (the kubelet configuration document, if the OSC has
    /// one) and restarts it.
    async fn apply(&self, version: &str, config: Option<&str>) -> Result<(), KubeletError>;
    /// Re-bootstraps the kubelet's client credentials and restarts it.
    async fn rebootstrap(&self) -> Result<(), KubeletError>;
    /// One health probe.
    async fn healthy(&self) -> bool;
    /// The kubelet version running (or last applied), if known.
    fn version(&self) -> Option<String>;
}

/// Paths and commands of a systemd-managed kubelet.
#[derive(Debug, Clone)]
pub struct SystemdKubeletConfig {
    /// The unit, `kubelet.service`.
    pub unit: String,
    /// The `systemctl` program.
    pub systemctl: String,
    /// Environment drop-in with `KUBELET_VERSION=`.
    pub version_dropin: String,
    /// The kubelet configuration file.
    pub config_path: String,
    /// The kubelet's kubeconfig (`--kubeconfig`).
    pub kubeconfig: PathBuf,
    /// The bootstrap kubeconfig (`--bootstrap-kubeconfig`).
    pub bootstrap_kubeconfig: PathBuf,
    /// The certificate directory (`--cert-dir`).
    pub cert_dir: PathBuf,
    /// The health endpoint.
    pub healthz_url: String,
}

impl Default for SystemdKubeletConfig {
    fn default() -> Self {
        Self {
            unit: "kubelet.service".into(),
            systemctl: "systemctl".into(),
            version_dropin: "/etc/systemd/system/kubelet.service.d/10-version.conf".into(),
            config_path: "/var/lib/kubelet/config/kubelet".into(),
            kubeconfig: "/var/lib/kubelet/kubeconfig-real".into(),
            bootstrap_kubeconfig: "/var/lib/kubelet/kubeconfig-bootstrap".into(),
            cert_dir: "/var/lib/kubelet/pki".into(),
            healthz_url: "http://127.0.0.1:10248/healthz".into(),
        }
    }
}

/// A kubelet run by systemd.
#[derive(Debug)]
pub struct SystemdKubelet {
    config: SystemdKubeletConfig,
    files: Arc<dyn FileSink>,
    version: Mutex<Option<String>>,
    http: reqwest::Client,
}

impl SystemdKubelet {
    /// A kubelet managed with `config`, writing files through `files`.
    pub fn new(config: SystemdKubeletConfig, files: Arc<dyn FileSink>) -> Self {
        let http =
            crate::http::client(|| reqwest::Client::builder().timeout(Duration::from_secs(10)));
        Self {
            config,
            files,
            version: Mutex::new(None),
            http,
        }
    }

    async fn systemctl(&self, args: &[&str]) -> Result<(), KubeletError> {
        let mut command = vec![self.config.systemctl.clone()];
        command.extend(args.iter().map(|a| (*a).to_owned()));
        let status = tokio::process::Command::new(&command[0])
            .args(&command[1..])
            .status()
            .await;
        match status {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(KubeletError::Command {
                command,
                detail: s.to_string(),
            }),
            Err(e) => Err(KubeletError::Command {
                command,
                detail: e.to_string(),
            }),
        }
    }

    async fn restart(&self) -> Result<(), KubeletError> {
        self.systemctl(&["daemon-reload"]).await?;
        self.systemctl(&["restart", &self.config.unit]).await
    }
}

#[async_trait::async_trait]
impl Kubelet for SystemdKubelet {
    async fn apply(&self, version: &str, config: Option<&str>) -> Result<(), KubeletError> {
        let dropin = format!("[Service]\nEnvironment=KUBELET_VERSION={version}\n");
        self.files
            .write(&self.config.version_dropin, dropin.as_bytes(), 0o644)
            .await
            .map_err(KubeletError::File)?;
        if let Some(config) = config {
            self.files
                .write(&self.config.config_path, config.as_bytes(), 0o600)
                .await
                .map_err(KubeletError::File)?;
        }
        self.restart().await?;
        *self.version.lock().expect("kubelet version lock") = Some(version.to_owned());
        Ok(())
    }

    async fn rebootstrap(&self) -> Result<(), KubeletError> {
        let c = &self.config;
        let io = |action, path: &PathBuf| {
            let path = path.clone();
            move |source| KubeletError::Io {
                action,
                path,
                source,
            }
        };
        match std::fs::read(&c.kubeconfig) {
            Ok(current) => {
                crate::store::write_atomic(&c.bootstrap_kubeconfig, &current, Some(0o600))
                    .map_err(|e| KubeletError::Io {
                        action: "write",
                        path: c.bootstrap_kubeconfig.clone(),
                        source: std::io::Error::other(e.to_string()),
                    })?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !c.bootstrap_kubeconfig.exists() {
                    return Err(KubeletError::Io {
                        action: "find",
                        path: c.bootstrap_kubeconfig.clone(),
                        source: e,
                    });
                }
            }
            Err(e) => return Err(io("read", &c.kubeconfig)(e)),
        }
        match std::fs::remove_file(&c.kubeconfig) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io("remove", &c.kubeconfig)(e));
            }
            _ => {}
        }
        match std::fs::remove_dir_all(&c.cert_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io("remove", &c.cert_dir)(e));
            }
            _ => {}
        }
        self.restart().await
    }

    async fn healthy(&self) -> bool {
        match self.http.get(&self.config.healthz_url).send().await {
            Ok(response) => response.status().is_success(),
            Err(_) => false,
        }
    }

    fn version(&self) -> Option<String> {
        self.version.lock().expect("kubelet version lock").clone()
    }
}

/// The kubelet role played by the heartbeat (lab nodes), as the agent applies it and the
/// heartbeat reports it.
#[derive(Debug, Clone)]
pub struct HeartbeatKubelet {
    inner: Arc<Mutex<HeartbeatKubeletState>>,
    nodes: Api<Node>,
    node: String,
    /// Where the applied version is kept for the other process (`None`: in memory only).
    version_file: Option<PathBuf>,
}

/// What a [`HeartbeatKubelet`] did (shared; for the heartbeat and for assertions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeartbeatKubeletState {
    /// The version reported in `nodeInfo.kubeletVersion`.
    pub version: Option<String>,
    /// The last configuration applied.
    pub config: Option<String>,
    /// How many times it was (re)started by `apply`.
    pub restarts: u32,
    /// How many rebootstraps (CA rotations) it went through.
    pub rebootstraps: u32,
}

impl HeartbeatKubelet {
    /// Reports `version` for `node` until told otherwise.
    pub fn new(client: kube::Client, node: &str, version: Option<String>) -> Self {
        let state = HeartbeatKubeletState {
            version,
            ..Default::default()
        };
        Self {
            inner: Arc::new(Mutex::new(state)),
            nodes: Api::all(client),
            node: node.to_owned(),
            version_file: None,
        }
    }

    /// Keeps the version in `path` as well (the agent writes it on `apply`, atomically): the
    /// version is the file's when it has one, else the one given to [`HeartbeatKubelet::new`].
    /// The agent and the heartbeat processes of one node name the same file.
    #[must_use]
    pub fn with_version_file(mut self, path: PathBuf) -> Self {
        self.version_file = Some(path);
        self
    }

    /// A copy of the state.
    pub fn state(&self) -> HeartbeatKubeletState {
        self.inner.lock().expect("heartbeat kubelet lock").clone()
    }

    /// The version in the version file, if there is one and it names a version.
    fn version_on_disk(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.version_file.as_ref()?).ok()?;
        Some(text.trim().to_owned()).filter(|v| !v.is_empty())
    }
}

#[async_trait::async_trait]
impl Kubelet for HeartbeatKubelet {
    async fn apply(&self, version: &str, config: Option<&str>) -> Result<(), KubeletError> {
        if let Some(path) = &self.version_file {
            crate::store::write_atomic(path, format!("{version}\n").as_bytes(), Some(0o644))
                .map_err(|e| KubeletError::Io {
                    action: "write",
                    path: path.clone(),
                    source: std::io::Error::other(e.to_string()),
                })?;
        }
        let mut state = self.inner.lock().expect("heartbeat kubelet lock");
        state.version = Some(version.to_owned());
        if let Some(config) = config {
            state.config = Some(config.to_owned());
        }
        state.restarts += 1;
        Ok(())
    }

    async fn rebootstrap(&self) -> Result<(), KubeletError> {
        self.inner
            .lock()
            .expect("heartbeat kubelet lock")
            .rebootstraps += 1;
        Ok(())
    }

    async fn healthy(&self) -> bool {
        let Some(want) = self.version() else {
            return false;
        };
        let Ok(node) = self.nodes.get(&self.node).await else {
            return false;
        };
        let Some(status) = node.status else {
            return false;
        };
        let reported = status
            .node_info
            .as_ref()
            .map(|info| info.kubelet_version.as_str());
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready && reported == Some(want.as_str())
    }

    fn version(&self) -> Option<String> {
        self.version_on_disk().or_else(|| {
            self.inner
                .lock()
                .expect("heartbeat kubelet lock")
                .version
                .clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::files::RootFiles;

    /// Two processes' heartbeat kubelets on one version file: what the agent's applies, the
    /// heartbeat's reports; before any apply, each reports the version it was started with.
    #[tokio::test]
    async fn heartbeat_kubelets_share_the_applied_version_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kubelet-version");
        // Neither asks the API server anything here (only `healthy` does).
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let agent = HeartbeatKubelet::new(client.clone(), "n", Some("1.30.4".into()))
            .with_version_file(file.clone());
        let heartbeat = HeartbeatKubelet::new(client, "n", Some("1.30.4".into()))
            .with_version_file(file.clone());
        assert_eq!(heartbeat.version().as_deref(), Some("1.30.4"));
        agent.apply("1.31.2", None).await.unwrap();
        assert_eq!(heartbeat.version().as_deref(), Some("1.31.2"));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "1.31.2\n");
    }

    #[tokio::test]
    async fn systemd_kubelet_writes_the_version_dropin_and_rebootstraps() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let config = SystemdKubeletConfig {
            systemctl: "true".into(),
            kubeconfig: root.join("kubeconfig-real"),
            bootstrap_kubeconfig: root.join("kubeconfig-bootstrap"),
            cert_dir: root.join("pki"),
            healthz_url: "http://127.0.0.1:9/healthz".into(),
            ..Default::default()
        };
        let kubelet = SystemdKubelet::new(config.clone(), Arc::new(RootFiles::new(root)));
        kubelet
            .apply("1.31.2", Some("kind: KubeletConfiguration\n"))
            .await
            .unwrap();
        assert_eq!(kubelet.version().as_deref(), Some("1.31.2"));
        let dropin =
            std::fs::read_to_string(root.join(config.version_dropin.trim_start_matches('/')))
                .unwrap();
        assert!(dropin.contains("KUBELET_VERSION=1.31.2"), "{dropin}");

        std::fs::write(&config.kubeconfig, b"current").unwrap();
        std::fs::create_dir_all(config.cert_dir.join("x")).unwrap();
        kubelet.rebootstrap().await.unwrap();
        assert_eq!(
            std::fs::read(&config.bootstrap_kubeconfig).unwrap(),
            b"current"
        );
        assert!(!config.kubeconfig.exists());
        assert!(!config.cert_dir.exists());
        assert!(!kubelet.healthy().await, "nothing listens on port 9");

        let failing = SystemdKubelet::new(
            SystemdKubeletConfig {
                systemctl: "false".into(),
                ..config
            },
            Arc::new(RootFiles::new(root)),
        );
        let err = failing.apply("1.31.3", None).await.unwrap_err();
        assert!(err.to_string().contains("daemon-reload"), "{err}");
    }
}
