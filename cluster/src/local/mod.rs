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
//!    it, as in a real cluster.
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
//! startup then fails with the log saying so. Children are not killed if the owning process is
//! itself killed with SIGKILL.

mod binaries;
mod controller_manager;
mod error;
mod kubeconfig;
mod pki;
mod process;
mod webhook;

use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use rackproof_clock::Clock;

pub use controller_manager::{CONTROLLERS, ControllerManagerOptions};
pub use error::{Error, INSTALL_COMMAND};
use pki::Pki;
use process::Process;
pub use webhook::{AccessRequest, Decision, NodeAuthorizer};

/// How the control plane is started. `LocalOptions::default()` suits most tests.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Nodes that get an identity: user `system:node:NAME` in group `system:nodes`.
    pub nodes: Vec<String>,
    /// kube-apiserver's `--authorization-mode` (default `Node,RBAC`).
    pub authorization_mode: String,
    /// kube-apiserver's `--enable-admission-plugins` (default `NodeRestriction`).
    pub enable_admission_plugins: Vec<String>,
    /// kube-apiserver's `--disable-admission-plugins` (default `ServiceAccount`: without a
    /// controller manager nothing creates the `default` service accounts pods would need;
    /// [`LocalOptions::with_controller_manager`] enables it again).
    pub disable_admission_plugins: Vec<String>,
    /// kube-apiserver's `--service-cluster-ip-range` (default `10.0.0.0/24`).
    pub service_cluster_ip_range: String,
    /// Where kube-apiserver listens (default 127.0.0.1; `0.0.0.0` for every interface, as a
    /// physical rack's nodes need). Its URL names this address, or 127.0.0.1 when unspecified.
    pub listen: std::net::IpAddr,
    /// More names kube-apiserver's serving certificate is valid for, beside 127.0.0.1,
    /// `localhost` and the `kubernetes.default…` names (e.g. the name guests reach the host by).
    pub serving_names: Vec<String>,
    /// The authorization webhook kube-apiserver consults after its Node authorizer (the mode
    /// becomes `Node,Webhook,RBAC`); see [`NodeAuthorizer`]. Default: none.
    pub node_authorizer: Option<NodeAuthorizer>,
    /// More kube-apiserver flags, appended last (`--flag=value`).
    pub extra_apiserver_args: Vec<String>,
    /// How long startup may take until `/readyz` says `ok` (default 90 s).
    pub startup_timeout: Duration,
    /// The kube-apiserver binary (default: `RACKPROOF_KUBE_APISERVER`, else the build cache).
    pub kube_apiserver: Option<PathBuf>,
    /// The etcd binary (default: `RACKPROOF_ETCD`, else `etcd` on `PATH`).
    pub etcd: Option<PathBuf>,
    /// Run kube-controller-manager as well (default: no, so the API server answers alone, as the
    /// differential tests need). Set it with [`LocalOptions::with_controller_manager`].
    pub controller_manager: Option<ControllerManagerOptions>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            authorization_mode: "Node,RBAC".to_owned(),
            enable_admission_plugins: vec!["NodeRestriction".to_owned()],
            disable_admission_plugins: vec!["ServiceAccount".to_owned()],
            service_cluster_ip_range: "10.0.0.0/24".to_owned(),
            listen: Ipv4Addr::LOCALHOST.into(),
            serving_names: Vec::new(),
            node_authorizer: None,
            extra_apiserver_args: Vec::new(),
            startup_timeout: Duration::from_secs(90),
            kube_apiserver: None,
            etcd: None,
            controller_manager: None,
        }
    }
}

impl LocalOptions {
    /// These options with identities for `nodes`.
    pub fn with_nodes<I, S>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.nodes.extend(nodes.into_iter().map(Into::into));
        self
    }

    /// These options with kube-controller-manager running `options`, and with kube-apiserver's
    /// `ServiceAccount` admission plugin enabled again: the controller manager's service-account
    /// controllers make the `default` ServiceAccount and its token in every namespace, as in a
    /// real cluster. A pod created in a namespace before they did is refused (Forbidden while the
    /// account is missing, ServerTimeout "No API token found … retry after the token is
    /// automatically created" while its token is), as a real cluster refuses it.
    pub fn with_controller_manager(mut self, options: ControllerManagerOptions) -> Self {
        self.disable_admission_plugins
            .retain(|plugin| plugin != "ServiceAccount");
        self.controller_manager = Some(options);
        self
    }
}

/// An identity of the control plane's token file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum User {
    /// `admin`, in group `system:masters`.
    Admin,
    /// `system:node:NAME`, in group `system:nodes`, for a node of [`LocalOptions::nodes`].
    Node(String),
    /// `system:kube-controller-manager`, the identity kube-apiserver's bootstrap RBAC binds the
    /// `system:kube-controller-manager` ClusterRole to; only when a controller manager runs.
    ControllerManager,
}

impl User {
    /// The user a node agent on `name` authenticates as.
    pub fn node(name: impl Into<String>) -> Self {
        Self::Node(name.into())
    }

    fn file_stem(&self) -> String {
        match self {
            Self::Admin => "admin".to_owned(),
            Self::Node(name) => format!("node-{name}"),
            Self::ControllerManager => "kube-controller-manager".to_owned(),
        }
    }
}

impl fmt::Display for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Admin => f.write_str("admin"),
            Self::Node(name) => write!(f, "system:node:{name}"),
            Self::ControllerManager => f.write_str("system:kube-controller-manager"),
        }
    }
}

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
                dir.keep = true;
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

/// The binaries a startup runs.
#[derive(Debug)]
struct StartupBinaries {
    kube_apiserver: PathBuf,
    etcd: PathBuf,
    /// Present when a controller manager was asked for.
    kube_controller_manager: Option<PathBuf>,
}

/// What a successful startup produced; its processes are killed if it is dropped.
struct Startup {
    controller_manager: Option<ControllerManager>,
    kube_apiserver: Process,
    webhook: Option<webhook::WebhookServer>,
    etcd: Process,
    url: String,
    etcd_url: String,
    pki: Pki,
    users: BTreeMap<User, Credentials>,
    client: kube::Client,
}

impl Startup {
    async fn run(
        options: &LocalOptions,
        binaries: &StartupBinaries,
        dir: &Path,
    ) -> Result<Self, Error> {
        let clock = Clock::wall();
        let mut names = options.serving_names.clone();
        names.push(reach(options.listen).to_string());
        let pki = pki::generate(dir, &names)?;
        let [etcd_port, peer_port, apiserver_port] = free_ports()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let url = format!("https://{}:{apiserver_port}", reach(options.listen));

        let mut users = BTreeMap::new();
        let mut token_lines = String::new();
        let kubeconfig_dir = dir.join("kubeconfig");
        create_dir(&kubeconfig_dir)?;
        let identities = std::iter::once(User::Admin)
            .chain(options.nodes.iter().map(|name| User::Node(name.clone())))
            .chain(
                options
                    .controller_manager
                    .as_ref()
                    .map(|_| User::ControllerManager),
            );
        for user in identities {
            let token = uuid::Uuid::new_v4().simple().to_string();
            let uid = user.file_stem();
            let group = match &user {
                User::Admin => Some("system:masters"),
                User::Node(_) => Some("system:nodes"),
                // The bootstrap ClusterRoleBinding names the user; it needs no group.
                User::ControllerManager => None,
            };
            match group {
                Some(group) => token_lines.push_str(&format!("{token},{user},{uid},\"{group}\"\n")),
                None => token_lines.push_str(&format!("{token},{user},{uid}\n")),
            }
            let kubeconfig = kubeconfig_dir.join(format!("{}.yaml", user.file_stem()));
            write_file(
                &kubeconfig,
                &kubeconfig::render(&url, &pki.ca_cert, &user.to_string(), &token),
            )?;
            users.insert(user, Credentials { token, kubeconfig });
        }
        let token_file = dir.join("tokens.csv");
        write_file(&token_file, &token_lines)?;

        let started = clock.instant();
        let mut etcd = Process::spawn(
            "etcd",
            &binaries.etcd,
            &etcd_args(dir, etcd_port, peer_port),
            dir.join("etcd.log"),
        )?;
        let mut waiting_for = format!("etcd to listen on 127.0.0.1:{etcd_port}");
        let etcd_up = clock
            .timeout(
                options.startup_timeout,
                wait_for_port(&clock, &mut etcd, etcd_port),
            )
            .await;
        match etcd_up {
            Ok(result) => result?,
            Err(_) => return Err(not_ready(options, waiting_for, dir)),
        }

        let webhook = match &options.node_authorizer {
            Some(authorizer) => {
                let token = uuid::Uuid::new_v4().simple().to_string();
                let read = |path: &Path| {
                    std::fs::read_to_string(path).map_err(|source| Error::Write {
                        path: path.to_owned(),
                        source,
                    })
                };
                let server = webhook::WebhookServer::start(
                    authorizer.clone(),
                    &read(&pki.webhook_cert)?,
                    &read(&pki.webhook_key)?,
                    token.clone(),
                )
                .await?;
                write_file(
                    &dir.join(WEBHOOK_KUBECONFIG),
                    &kubeconfig::render(server.url(), &pki.ca_cert, "kube-apiserver", &token),
                )?;
                Some(server)
            }
            None => None,
        };
        let args = apiserver_args(options, dir, &pki, &token_file, &etcd_url, apiserver_port);
        let mut kube_apiserver = Process::spawn(
            "kube-apiserver",
            &binaries.kube_apiserver,
            &args,
            dir.join("kube-apiserver.log"),
        )?;
        let admin_kubeconfig = users
            .get(&User::Admin)
            .map(|admin| admin.kubeconfig.clone())
            .unwrap_or_default();
        let client = client_from_kubeconfig(admin_kubeconfig).await?;
        let remaining = options.startup_timeout.saturating_sub(clock.since(started));
        waiting_for = format!("{url}/readyz");
        let ready = clock
            .timeout(
                remaining,
                wait_until_ready(
                    &clock,
                    &client,
                    [&mut etcd, &mut kube_apiserver],
                    &mut waiting_for,
                ),
            )
            .await;
        match ready {
            Ok(result) => result?,
            Err(_) => return Err(not_ready(options, waiting_for, dir)),
        }
        let controller_manager = match (
            &options.controller_manager,
            &binaries.kube_controller_manager,
        ) {
            (Some(manager_options), Some(binary)) => {
                let launcher = controller_manager::Launcher {
                    binary: binary.clone(),
                    options: manager_options.clone(),
                    kubeconfig: users
                        .get(&User::ControllerManager)
                        .map(|manager| manager.kubeconfig.clone())
                        .unwrap_or_default(),
                    pki: pki.clone(),
                    log: dir.join("kube-controller-manager.log"),
                    startup_timeout: options.startup_timeout,
                };
                let remaining = options.startup_timeout.saturating_sub(clock.since(started));
                let running = launcher.start(remaining).await?;
                Some(ControllerManager {
                    launcher,
                    running: Some(running),
                })
            }
            _ => None,
        };
        tracing::info!(%url, etcd = %etcd_url, dir = %dir.display(), "local control plane ready");
        Ok(Self {
            controller_manager,
            kube_apiserver,
            webhook,
            etcd,
            url,
            etcd_url,
            pki,
            users,
            client,
        })
    }
}

fn not_ready(options: &LocalOptions, waiting_for: String, dir: &Path) -> Error {
    Error::NotReady {
        after: options.startup_timeout,
        waiting_for,
        dir: dir.to_owned(),
    }
}

fn etcd_args(dir: &Path, client_port: u16, peer_port: u16) -> Vec<String> {
    let client = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    vec![
        "--name=rackproof".to_owned(),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=rackproof={peer}"),
        "--initial-cluster-state=new".to_owned(),
    ]
}

fn apiserver_args(
    options: &LocalOptions,
    dir: &Path,
    pki: &Pki,
    token_file: &Path,
    etcd_url: &str,
    port: u16,
) -> Vec<String> {
    let path = |path: &Path| path.display().to_string();
    let mut args = vec![
        format!("--bind-address={}", options.listen),
        format!("--advertise-address={}", reach(options.listen)),
        format!("--secure-port={port}"),
        "--insecure-port=0".to_owned(),
        format!("--cert-dir={}", path(&dir.join("cert"))),
        format!("--tls-cert-file={}", path(&pki.serving_cert)),
        format!("--tls-private-key-file={}", path(&pki.serving_key)),
        format!("--client-ca-file={}", path(&pki.ca_cert)),
        format!("--etcd-servers={etcd_url}"),
        format!("--token-auth-file={}", path(token_file)),
        format!("--authorization-mode={}", authorization_mode(options)),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
        format!(
            "--service-account-key-file={}",
            path(&pki.service_account_pub)
        ),
        format!(
            "--service-account-signing-key-file={}",
            path(&pki.service_account_key)
        ),
        format!(
            "--service-cluster-ip-range={}",
            options.service_cluster_ip_range
        ),
        // Endpoints may not hold loopback addresses, so the `kubernetes` Service gets none.
        "--endpoint-reconciler-type=none".to_owned(),
        "--allow-privileged=true".to_owned(),
        "--profiling=false".to_owned(),
    ];
    if options.node_authorizer.is_some() {
        args.extend([
            format!(
                "--authorization-webhook-config-file={}",
                path(&dir.join(WEBHOOK_KUBECONFIG))
            ),
            "--authorization-webhook-version=v1".to_owned(),
            // A node asks for its Secret right after its Machine is bound: a denial is kept
            // only briefly, so the binding is seen at the next try.
            "--authorization-webhook-cache-authorized-ttl=10s".to_owned(),
            "--authorization-webhook-cache-unauthorized-ttl=1s".to_owned(),
        ]);
    }
    if !options.enable_admission_plugins.is_empty() {
        args.push(format!(
            "--enable-admission-plugins={}",
            options.enable_admission_plugins.join(",")
        ));
    }
    if !options.disable_admission_plugins.is_empty() {
        args.push(format!(
            "--disable-admission-plugins={}",
            options.disable_admission_plugins.join(",")
        ));
    }
    args.extend(options.extra_apiserver_args.iter().cloned());
    args
}

const POLL: Duration = Duration::from_millis(100);

async fn wait_for_port(clock: &Clock, process: &mut Process, port: u16) -> Result<(), Error> {
    loop {
        process.check_running()?;
        if tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        clock.sleep(POLL).await;
    }
}

/// Polls `/readyz` and the system namespaces, recording the last answer in `waiting_for`.
async fn wait_until_ready(
    clock: &Clock,
    client: &kube::Client,
    processes: [&mut Process; 2],
    waiting_for: &mut String,
) -> Result<(), Error> {
    let [etcd, apiserver] = processes;
    let mut step = 0;
    let paths = [
        "/readyz",
        "/api/v1/namespaces/default",
        "/api/v1/namespaces/kube-node-lease",
    ];
    while step < paths.len() {
        etcd.check_running()?;
        apiserver.check_running()?;
        let path = paths[step];
        let mut request = http::Request::new(Vec::new());
        *request.uri_mut() = http::Uri::from_static(path);
        match client.request_text(request).await {
            Ok(body) if path != "/readyz" || body.trim() == "ok" => step += 1,
            Ok(body) => *waiting_for = format!("{path} answered {:?}", body.trim()),
            Err(error) => *waiting_for = format!("{path}: {error}"),
        }
        if step < paths.len() {
            clock.sleep(POLL).await;
        }
    }
    Ok(())
}

async fn client_from_kubeconfig(path: PathBuf) -> Result<kube::Client, Error> {
    let boxed = |error: Box<dyn std::error::Error + Send + Sync>| Error::Client {
        path: path.clone(),
        source: error,
    };
    let kubeconfig = Kubeconfig::read_from(&path).map_err(|error| boxed(Box::new(error)))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|error| boxed(Box::new(error)))?;
    kube::Client::try_from(config).map_err(|error| boxed(Box::new(error)))
}

/// Three distinct free ports on 127.0.0.1 (bound together, then released).
/// The address a server listening on `listen` is reached at from this machine.
fn reach(listen: std::net::IpAddr) -> std::net::IpAddr {
    if listen.is_unspecified() {
        Ipv4Addr::LOCALHOST.into()
    } else {
        listen
    }
}

/// The webhook's kubeconfig for kube-apiserver, in the control plane's directory.
const WEBHOOK_KUBECONFIG: &str = "authorization-webhook.kubeconfig";

/// The authorization mode: the options', with `Webhook` after `Node` when a node authorizer is
/// served (so the Node authorizer answers first, the webhook what it has no opinion on, then RBAC).
fn authorization_mode(options: &LocalOptions) -> String {
    if options.node_authorizer.is_none() {
        return options.authorization_mode.clone();
    }
    let mut modes: Vec<&str> = options
        .authorization_mode
        .split(',')
        .filter(|mode| *mode != "Webhook")
        .collect();
    let at = modes
        .iter()
        .position(|mode| *mode == "Node")
        .map_or(0, |i| i + 1);
    modes.insert(at, "Webhook");
    modes.join(",")
}

fn free_ports() -> Result<[u16; 3], Error> {
    let bind =
        || TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).map_err(Error::FreePort);
    let listeners = [bind()?, bind()?, bind()?];
    let mut ports = [0; 3];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr().map_err(Error::FreePort)?.port();
    }
    Ok(ports)
}

/// Kubernetes node names are DNS subdomains; anything else could also break the token file.
fn validate_node_name(name: &str) -> Result<(), Error> {
    let valid_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    let valid_ends = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid_chars && valid_ends && name.len() <= 253 {
        Ok(())
    } else {
        Err(Error::InvalidNodeName(name.to_owned()))
    }
}

pub(crate) fn write_file(path: &Path, contents: &str) -> Result<(), Error> {
    std::fs::write(path, contents).map_err(|source| Error::Write {
        path: path.to_owned(),
        source,
    })
}

fn create_dir(path: &Path) -> Result<(), Error> {
    std::fs::create_dir(path).map_err(|source| Error::Write {
        path: path.to_owned(),
        source,
    })
}

/// The control plane's directory: removed on drop unless kept (after a failed startup), and
/// swept by the next run when this process is killed outright.
#[derive(Debug)]
struct PrivateDir {
    path: PathBuf,
    keep: bool,
}

impl PrivateDir {
    fn create() -> Result<Self, Error> {
        let path =
            std::env::temp_dir().join(format!("rackproof-local-{}", uuid::Uuid::new_v4().simple()));
        create_dir(&path)?;
        let dir = Self { path, keep: false };
        std::fs::set_permissions(&dir.path, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| Error::Write {
                path: dir.path.clone(),
                source,
            },
        )?;
        // Names this process, so a run killed outright leaves no certificates or tokens behind
        // for long: the next run's sweep (`rackproof_reap::sweep_dirs`) removes the directory.
        rackproof_reap::own_dir(&dir.path).map_err(|source| Error::Write {
            path: dir.path.join(rackproof_reap::OWNER_FILE),
            source,
        })?;
        Ok(dir)
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn remove(mut self) -> Result<(), Error> {
        self.keep = true;
        std::fs::remove_dir_all(&self.path).map_err(|source| Error::Write {
            path: self.path.clone(),
            source,
        })
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ignored = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
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
        kept.keep = true;
        let path = kept.path().to_owned();
        drop(kept);
        assert!(path.exists());
        std::fs::remove_dir_all(path).unwrap();
    }
}
