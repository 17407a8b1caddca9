//! The `local` cluster provider: a real Kubernetes control plane on 127.0.0.1.
//!
//! etcd (Debian's `etcd-server`), kube-apiserver v1.20.2 and, when asked for
//! ([`LocalOptions::with_controller_manager`]), kube-controller-manager v1.20.2 run as child
//! processes; both Kubernetes binaries are built by `ci/build-kube-apiserver` from Debian
//! bookworm's `kubernetes` source package. There is no scheduler or kubelet. It is the fidelity
//! tier in CI and the referee of the embedded API server's differential tests (which run it
//! without the controller manager, so the API server answers alone). Install it all with
//! `ci/install-local-control-plane`.
//!
//! [`LocalControlPlane::start`]:
//! 1. finds the binaries ([`LocalOptions::kube_apiserver`], `RACKPROOF_KUBE_APISERVER`, the build
//!    cache; [`LocalOptions::etcd`], `RACKPROOF_ETCD`, `PATH`; [`ControllerManagerOptions::binary`],
//!    `RACKPROOF_KUBE_CONTROLLER_MANAGER`, the build cache): missing ones are an error naming
//!    `ci/install-local-control-plane`;
//! 2. creates a private directory (mode 0700) under the system temp dir and generates a CA,
//!    serving certificates for 127.0.0.1 (kube-apiserver's, kube-controller-manager's) and a
//!    service-account key pair into it;
//! 3. writes a token file: `admin` in group `system:masters`, `system:node:NAME` in group
//!    `system:nodes` for each of [`LocalOptions::nodes`], and `system:kube-controller-manager`
//!    when the controller manager runs; and a kubeconfig per user;
//! 4. starts etcd on free loopback ports with a data dir in the private directory, waits for its
//!    client port, then starts kube-apiserver (authorization `Node,RBAC` and the
//!    `NodeRestriction` admission plugin by default, so node identities are restricted as in a
//!    real cluster);
//! 5. waits until `/readyz` answers `ok` and the `default` and `kube-node-lease` namespaces exist;
//! 6. if asked for, starts kube-controller-manager with the [`CONTROLLERS`] Rackproof's objects
//!    meet (node lifecycle, disruption, garbage collector, namespace, service accounts; see
//!    [`ControllerManagerOptions`] for its grace periods) and waits until its `/healthz` answers
//!    `ok`. Each controller uses its own service account and the RBAC kube-apiserver bootstraps for
//!    it, as in a real cluster. With [`ControllerManagerOptions::sign_certificates`] it also signs
//!    approved CertificateSigningRequests with the CA (`csrsigning`), as a real cluster signs its
//!    kubelets' client certificates.
//!
//! Guarantees: the processes' output goes to `etcd.log`, `kube-apiserver.log` and
//! `kube-controller-manager.log` in the private directory. When startup fails, every process is
//! killed and the directory is kept; the error names it. The controller manager can be stopped
//! and started again while the API server runs ([`LocalControlPlane::stop_controller_manager`],
//! [`LocalControlPlane::start_controller_manager`]), as a Deployment scaled to zero and back
//! stops and starts it. After [`LocalControlPlane::shutdown`] or a drop, every process is killed
//! and reaped and the directory is removed.
//!
//! Caveats: without the controller manager nothing creates service accounts (the
//! `ServiceAccount` admission plugin is then disabled, or pods could not be created),
//! garbage-collects owned objects, deletes namespaces' contents, keeps PodDisruptionBudget status
//! or marks nodes whose Lease lapsed. With it, a pod created in a namespace before its `default`
//! ServiceAccount has a token is refused, as in a real cluster. No scheduler runs, so pods stay
//! unscheduled unless they name a node, and nothing but the caller sets their status. Ports are
//! found by binding port 0 and releasing it, so another process could take one in between;
//! startup then fails with the log saying so. If the owning process is itself killed with
//! SIGKILL, its children die with it (a parent-death signal) and the next run removes the
//! directory (`rackproof_reap`).

mod binaries;
mod controller_manager;
mod dir;
mod error;
mod kubeconfig;
mod options;
mod pki;
mod process;
mod startup;
mod webhook;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use controller_manager::{CONTROLLERS, ControllerManagerOptions};
use dir::PrivateDir;
pub(crate) use dir::write_file;
pub use error::{Error, INSTALL_COMMAND};
pub use options::{LocalOptions, User};
use pki::Pki;
use process::Process;
use startup::{Startup, StartupBinaries, client_from_kubeconfig, validate_node_name};
pub use webhook::{AccessRequest, Decision, NodeAuthorizer};

/// The process IDs of a running control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pids {
    /// etcd's PID.
    pub etcd: u32,
    /// kube-apiserver's PID.
    pub kube_apiserver: u32,
    /// kube-controller-manager's PID, while it runs.
    pub kube_controller_manager: Option<u32>,
}

#[derive(Debug)]
struct Credentials {
    token: String,
    kubeconfig: PathBuf,
}

/// kube-controller-manager: how to start it, and the running process if it runs.
#[derive(Debug)]
struct ControllerManager {
    launcher: controller_manager::Launcher,
    running: Option<controller_manager::Running>,
}

/// A running etcd + kube-apiserver (+ kube-controller-manager if asked for) on 127.0.0.1; all
/// stop when this is dropped.
pub struct LocalControlPlane {
    controller_manager: Option<ControllerManager>,
    kube_apiserver: Option<Process>,
    webhook: Option<webhook::WebhookServer>,
    etcd: Option<Process>,
    dir: Option<PrivateDir>,
    url: String,
    etcd_url: String,
    ca_cert: PathBuf,
    users: BTreeMap<User, Credentials>,
    client: kube::Client,
}

impl fmt::Debug for LocalControlPlane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalControlPlane")
            .field("url", &self.url)
            .field("etcd_url", &self.etcd_url)
            .field("dir", &self.dir())
            .field("pids", &self.pids())
            .finish_non_exhaustive()
    }
}

impl LocalControlPlane {
    /// Starts etcd, kube-apiserver and, if asked for, kube-controller-manager, and waits until
    /// they are ready (see the module docs).
    pub async fn start(options: LocalOptions) -> Result<Self, Error> {
        for node in &options.nodes {
            validate_node_name(node)?;
        }
        let kube_apiserver =
            binaries::kube_apiserver(options.kube_apiserver.as_deref(), &binaries::process_env)?;
        let etcd = binaries::etcd(options.etcd.as_deref(), &binaries::process_env)?;
        let kube_controller_manager = match &options.controller_manager {
            Some(controller_manager) => {
                controller_manager.validate()?;
                Some(binaries::kube_controller_manager(
                    controller_manager.binary.as_deref(),
                    &binaries::process_env,
                )?)
            }
            None => None,
        };
        // kube picks rustls' process-wide provider; make it ring whatever else is linked in.
        let _already_installed = rustls::crypto::ring::default_provider().install_default();

        let mut dir = PrivateDir::create()?;
        let binaries = StartupBinaries {
            kube_apiserver,
            etcd,
            kube_controller_manager,
        };
        match Startup::run(&options, &binaries, dir.path()).await {
            Ok(startup) => Ok(Self {
                controller_manager: startup.controller_manager,
                kube_apiserver: Some(startup.kube_apiserver),
                webhook: startup.webhook,
                etcd: Some(startup.etcd),
                dir: Some(dir),
                url: startup.url,
                etcd_url: startup.etcd_url,
                ca_cert: startup.pki.ca_cert,
                users: startup.users,
                client: startup.client,
            }),
            Err(error) => {
                dir.keep();
                Err(error)
            }
        }
    }

    /// An admin client (HTTPS with the generated CA, bearer token of `admin`).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// A client authenticated as `user`, built from its kubeconfig.
    pub async fn client_as(&self, user: &User) -> Result<kube::Client, Error> {
        client_from_kubeconfig(self.kubeconfig(user)?).await
    }

    /// The kubeconfig file of `user` (inside the control plane's directory, removed with it).
    pub fn kubeconfig(&self, user: &User) -> Result<PathBuf, Error> {
        self.credentials(user)
            .map(|credentials| credentials.kubeconfig.clone())
    }

    /// The bearer token of `user`.
    pub fn token(&self, user: &User) -> Result<&str, Error> {
        self.credentials(user)
            .map(|credentials| credentials.token.as_str())
    }

    /// kube-apiserver's URL, `https://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// etcd's client URL, `http://127.0.0.1:PORT`.
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// The CA certificate (PEM) that kube-apiserver's serving certificate chains to.
    pub fn ca_cert(&self) -> &Path {
        &self.ca_cert
    }

    /// The control plane's private directory: certificates, tokens, kubeconfigs, etcd data, and
    /// the logs `etcd.log`, `kube-apiserver.log` and `kube-controller-manager.log` (every run of
    /// the controller manager appends to it).
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), PrivateDir::path)
    }

    /// The PIDs of etcd, kube-apiserver and (while it runs) kube-controller-manager.
    pub fn pids(&self) -> Pids {
        Pids {
            etcd: self.etcd.as_ref().map_or(0, Process::pid),
            kube_apiserver: self.kube_apiserver.as_ref().map_or(0, Process::pid),
            kube_controller_manager: self
                .controller_manager
                .as_ref()
                .and_then(|manager| manager.running.as_ref())
                .map(|running| running.process.pid()),
        }
    }

    /// kube-controller-manager's HTTPS URL (`https://127.0.0.1:PORT`, a new port on each start)
    /// while it runs.
    pub fn controller_manager_url(&self) -> Option<&str> {
        self.controller_manager
            .as_ref()
            .and_then(|manager| manager.running.as_ref())
            .map(|running| running.url.as_str())
    }

    /// Stops kube-controller-manager (SIGKILL) and waits until it is reaped, leaving etcd and
    /// kube-apiserver running: what a Deployment scaled to zero does to it. Stopping a stopped
    /// one does nothing. An error if the control plane was started without one.
    pub async fn stop_controller_manager(&mut self) -> Result<(), Error> {
        let manager = self
            .controller_manager
            .as_mut()
            .ok_or(Error::NoControllerManager)?;
        if let Some(mut running) = manager.running.take() {
            running.process.stop().await?;
            tracing::info!(
                pid = running.process.pid(),
                "kube-controller-manager stopped"
            );
        }
        Ok(())
    }

    /// Starts kube-controller-manager again with the options it was started with and waits until
    /// its `/healthz` answers `ok`; its controllers then resync from the API as after any
    /// restart. Starting a running one does nothing; one that exited by itself is started anew.
    /// An error if the control plane was started without one.
    pub async fn start_controller_manager(&mut self) -> Result<(), Error> {
        let manager = self
            .controller_manager
            .as_mut()
            .ok_or(Error::NoControllerManager)?;
        if let Some(running) = manager.running.as_mut() {
            match running.process.check_running() {
                Ok(()) => return Ok(()),
                Err(error) => {
                    tracing::warn!(%error, "kube-controller-manager had exited; starting it anew");
                }
            }
        }
        manager.running = None;
        let timeout = manager.launcher.startup_timeout;
        manager.running = Some(manager.launcher.start(timeout).await?);
        Ok(())
    }

    /// Stops kube-controller-manager, kube-apiserver, then etcd, waits until each is reaped, and
    /// removes the directory.
    pub async fn shutdown(mut self) -> Result<(), Error> {
        if let Some(mut running) = self
            .controller_manager
            .as_mut()
            .and_then(|manager| manager.running.take())
        {
            running.process.stop().await?;
        }
        if let Some(mut apiserver) = self.kube_apiserver.take() {
            apiserver.stop().await?;
        }
        drop(self.webhook.take());
        if let Some(mut etcd) = self.etcd.take() {
            etcd.stop().await?;
        }
        if let Some(dir) = self.dir.take() {
            dir.remove()?;
        }
        Ok(())
    }

    fn credentials(&self, user: &User) -> Result<&Credentials, Error> {
        self.users.get(user).ok_or_else(|| Error::UnknownUser {
            user: user.to_string(),
            nodes: self
                .users
                .keys()
                .filter_map(|user| match user {
                    User::Node(name) => Some(name.clone()),
                    User::Admin | User::ControllerManager => None,
                })
                .collect(),
        })
    }
}

impl Drop for LocalControlPlane {
    fn drop(&mut self) {
        // The controller manager first, then kube-apiserver, so neither sees its server vanish;
        // Process' drop kills and reaps.
        drop(self.controller_manager.take());
        drop(self.kube_apiserver.take());
        drop(self.webhook.take());
        drop(self.etcd.take());
        if let Some(dir) = self.dir.take()
            && let Err(error) = dir.remove()
        {
            tracing::warn!(%error, "failed to remove the local control plane's directory");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::dir::*;
    use super::startup::*;
    use super::*;

    #[test]
    fn node_names_must_be_dns_subdomains() {
        for good in ["node-a", "worker-1.rack2", "a"] {
            assert!(validate_node_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Node",
            "a,b",
            "a\"b",
            "-a",
            "a-",
            "a b",
            &"a".repeat(254),
        ] {
            assert!(
                matches!(validate_node_name(bad), Err(Error::InvalidNodeName(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn users_print_as_kubernetes_user_names() {
        assert_eq!(User::Admin.to_string(), "admin");
        assert_eq!(User::node("n1").to_string(), "system:node:n1");
    }

    #[test]
    fn free_ports_are_distinct() {
        let [a, b, c] = free_ports().unwrap();
        assert!(a != b && b != c && a != c);
    }

    #[test]
    fn apiserver_args_carry_the_options() {
        let options = LocalOptions {
            extra_apiserver_args: vec!["--v=4".to_owned()],
            ..LocalOptions::default()
        };
        let pki = Pki {
            ca_cert: "/d/ca.crt".into(),
            ca_der: Vec::new(),
            ca_key: "/d/ca.key".into(),
            serving_cert: "/d/s.crt".into(),
            serving_key: "/d/s.key".into(),
            controller_manager_cert: "/d/cm.crt".into(),
            controller_manager_key: "/d/cm.key".into(),
            webhook_cert: "/d/w.crt".into(),
            webhook_key: "/d/w.key".into(),
            service_account_key: "/d/sa.key".into(),
            service_account_pub: "/d/sa.pub".into(),
        };
        let args = apiserver_args(
            &options,
            Path::new("/d"),
            &pki,
            Path::new("/d/t.csv"),
            "http://127.0.0.1:1",
            2,
        );
        for expected in [
            "--secure-port=2",
            "--etcd-servers=http://127.0.0.1:1",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--disable-admission-plugins=ServiceAccount",
            "--token-auth-file=/d/t.csv",
        ] {
            assert!(
                args.iter().any(|arg| arg == expected),
                "{expected} missing from {args:?}"
            );
        }
        assert_eq!(args.last().map(String::as_str), Some("--v=4"));
    }

    #[test]
    fn with_controller_manager_enables_the_service_account_admission_plugin() {
        let options = LocalOptions::default();
        assert!(options.controller_manager.is_none());
        assert!(
            options
                .disable_admission_plugins
                .contains(&"ServiceAccount".to_owned())
        );
        let options = options.with_controller_manager(ControllerManagerOptions::default());
        assert!(options.controller_manager.is_some());
        assert!(
            !options
                .disable_admission_plugins
                .contains(&"ServiceAccount".to_owned()),
            "{:?}",
            options.disable_admission_plugins
        );
    }

    #[test]
    fn the_controller_manager_user_prints_as_its_bootstrap_rbac_name() {
        assert_eq!(
            User::ControllerManager.to_string(),
            "system:kube-controller-manager"
        );
    }

    #[test]
    fn a_private_dir_is_removed_on_drop_unless_kept() {
        let dir = PrivateDir::create().unwrap();
        let path = dir.path().to_owned();
        drop(dir);
        assert!(!path.exists());

        let mut kept = PrivateDir::create().unwrap();
        kept.keep();
        let path = kept.path().to_owned();
        drop(kept);
        assert!(path.exists());
        std::fs::remove_dir_all(path).unwrap();
    }
}
