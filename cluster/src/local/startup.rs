//! Starting the processes in order (etcd, kube-apiserver, the controller manager) and waiting
//! for each to be ready: their command lines, ports and the checks between them.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use rackproof_clock::Clock;

use super::dir::{create_dir, write_file};
use super::*;

/// The binaries a startup runs.
#[derive(Debug)]
pub(super) struct StartupBinaries {
    pub(super) kube_apiserver: PathBuf,
    pub(super) etcd: PathBuf,
    /// Present when a controller manager was asked for.
    pub(super) kube_controller_manager: Option<PathBuf>,
}

/// What a successful startup produced; its processes are killed if it is dropped.
pub(super) struct Startup {
    pub(super) controller_manager: Option<ControllerManager>,
    pub(super) kube_apiserver: Process,
    pub(super) webhook: Option<webhook::WebhookServer>,
    pub(super) etcd: Process,
    pub(super) url: String,
    pub(super) etcd_url: String,
    pub(super) pki: Pki,
    pub(super) users: BTreeMap<User, Credentials>,
    pub(super) client: kube::Client,
}

impl Startup {
    pub(super) async fn run(
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

pub(super) fn apiserver_args(
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

pub(super) async fn client_from_kubeconfig(path: PathBuf) -> Result<kube::Client, Error> {
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

/// Three distinct free ports on 127.0.0.1 (bound together, then released).
pub(super) fn free_ports() -> Result<[u16; 3], Error> {
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
pub(super) fn validate_node_name(name: &str) -> Result<(), Error> {
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
