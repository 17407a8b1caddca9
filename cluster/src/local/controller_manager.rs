//! kube-controller-manager as the local control plane's third process: its options, its command
//! line, and starting it until its `/healthz` answers `ok`.
//!
//! It runs only the controllers Rackproof's objects meet in a real cluster ([`CONTROLLERS`]):
//! node lifecycle (Ready=Unknown and the `node.kubernetes.io/unreachable` taints when a node's
//! Lease stops being renewed), disruption (PodDisruptionBudget status), the garbage collector
//! (ownerReferences), namespace deletion, and the two service-account controllers. Each controller
//! runs with its own service account (`--use-service-account-credentials`), so it has exactly the
//! permissions kube-apiserver's bootstrap RBAC gives it in a real cluster (`system:controller:*`);
//! the service-account token controller mints those accounts' tokens, and with the service-account
//! controller it also makes the `default` ServiceAccount (and its token) of every namespace, which
//! kube-apiserver's `ServiceAccount` admission plugin needs to admit pods.
//!
//! One instance runs (`--leader-elect=false`). It serves HTTPS on a free loopback port with a
//! certificate of the control plane's CA, without delegated authentication: only `/healthz` is
//! used, and kube-controller-manager always allows it.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rackproof_clock::Clock;

use super::Error;
use super::pki::Pki;
use super::process::Process;

/// The controllers kube-controller-manager runs (its `--controllers`).
pub const CONTROLLERS: [&str; 6] = [
    "nodelifecycle",
    "disruption",
    "garbagecollector",
    "namespace",
    "serviceaccount",
    "serviceaccount-token",
];

/// How kube-controller-manager is run. The default durations are kube-controller-manager's own
/// defaults; scenarios and tests shorten them.
#[derive(Debug, Clone)]
pub struct ControllerManagerOptions {
    /// How often the node lifecycle controller checks nodes (`--node-monitor-period`, default 5 s).
    pub node_monitor_period: Duration,
    /// How long a node's Lease and status may go unrenewed before the node is marked
    /// `Ready=Unknown` and tainted unreachable (`--node-monitor-grace-period`, default 40 s).
    pub node_monitor_grace_period: Duration,
    /// How long a node that never posted a Ready condition is given
    /// (`--node-startup-grace-period`, default 60 s).
    pub node_startup_grace_period: Duration,
    /// How long pods stay on an unready node before eviction when taint-based eviction is off
    /// (`--pod-eviction-timeout`, default 5 min; with taints, pods' tolerations decide).
    pub pod_eviction_timeout: Duration,
    /// Also run the `csrsigning` controller with the control plane's CA
    /// (`--cluster-signing-cert-file`/`--cluster-signing-key-file`), so approved
    /// CertificateSigningRequests get certificates, as a real cluster signs its kubelets' client
    /// certificates (default: no). A run against an existing cluster
    /// (`cluster: {kubeconfig}`) gets its node identities this way.
    pub sign_certificates: bool,
    /// More controllers to run besides [`CONTROLLERS`] (`replicaset`, …), as a cluster that
    /// stands for someone's existing one runs them.
    pub more_controllers: Vec<String>,
    /// More kube-controller-manager flags, appended last (`--flag=value`).
    pub extra_args: Vec<String>,
    /// The binary (default: `RACKPROOF_KUBE_CONTROLLER_MANAGER`, else the build cache).
    pub binary: Option<PathBuf>,
}

impl Default for ControllerManagerOptions {
    fn default() -> Self {
        Self {
            node_monitor_period: Duration::from_secs(5),
            node_monitor_grace_period: Duration::from_secs(40),
            node_startup_grace_period: Duration::from_secs(60),
            pod_eviction_timeout: Duration::from_secs(300),
            sign_certificates: false,
            more_controllers: Vec::new(),
            extra_args: Vec::new(),
            binary: None,
        }
    }
}

impl ControllerManagerOptions {
    /// Checks what kube-controller-manager would not: durations it takes as Go durations must be
    /// whole milliseconds of at least 1 ms (a zero period crashes it), and a node must be checked
    /// more often than its grace period, or healthy nodes would flap.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let durations = [
            ("node_monitor_period", self.node_monitor_period),
            ("node_monitor_grace_period", self.node_monitor_grace_period),
            ("node_startup_grace_period", self.node_startup_grace_period),
            ("pod_eviction_timeout", self.pod_eviction_timeout),
        ];
        for (option, value) in durations {
            if value < Duration::from_millis(1) {
                return Err(Error::InvalidOption {
                    option,
                    reason: format!("{value:?} is shorter than 1ms"),
                });
            }
        }
        if self.node_monitor_period >= self.node_monitor_grace_period {
            return Err(Error::InvalidOption {
                option: "node_monitor_period",
                reason: format!(
                    "{:?} is not shorter than node_monitor_grace_period ({:?})",
                    self.node_monitor_period, self.node_monitor_grace_period
                ),
            });
        }
        Ok(())
    }
}

/// Everything needed to start kube-controller-manager, again and again, against one control plane.
#[derive(Debug)]
pub(crate) struct Launcher {
    pub(crate) binary: PathBuf,
    pub(crate) options: ControllerManagerOptions,
    /// The kubeconfig of user `system:kube-controller-manager`.
    pub(crate) kubeconfig: PathBuf,
    pub(crate) pki: Pki,
    pub(crate) log: PathBuf,
    /// How long a restart may take until `/healthz` answers `ok`.
    pub(crate) startup_timeout: Duration,
}

/// A running kube-controller-manager.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) process: Process,
    /// `https://127.0.0.1:PORT`.
    pub(crate) url: String,
}

impl Launcher {
    /// Starts kube-controller-manager on a free port and waits up to `timeout` until `/healthz`
    /// answers `ok`. On failure the process is killed and reaped (its log is kept).
    pub(crate) async fn start(&self, timeout: Duration) -> Result<Running, Error> {
        let port = free_port()?;
        let url = format!("https://127.0.0.1:{port}");
        let mut process = Process::spawn(
            "kube-controller-manager",
            &self.binary,
            &args(&self.options, &self.kubeconfig, &self.pki, port),
            self.log.clone(),
        )?;
        let client = healthz_client(&url, &self.pki.ca_der)?;
        let clock = Clock::wall();
        let mut last_answer = "no answer yet".to_owned();
        let healthy = clock
            .timeout(
                timeout,
                wait_until_healthy(&clock, &client, &mut process, &mut last_answer),
            )
            .await;
        match healthy {
            Ok(Ok(())) => {
                tracing::info!(%url, pid = process.pid(), "kube-controller-manager healthy");
                Ok(Running { process, url })
            }
            Ok(Err(error)) => Err(error),
            Err(_) => Err(Error::ControllerManagerNotHealthy {
                after: timeout,
                url,
                last_answer,
                log: self.log.clone(),
            }),
        }
    }
}

const POLL: Duration = Duration::from_millis(100);

async fn wait_until_healthy(
    clock: &Clock,
    client: &kube::Client,
    process: &mut Process,
    last_answer: &mut String,
) -> Result<(), Error> {
    loop {
        process.check_running()?;
        let mut request = http::Request::new(Vec::new());
        *request.uri_mut() = http::Uri::from_static("/healthz");
        match client.request_text(request).await {
            Ok(body) if body.trim() == "ok" => return Ok(()),
            Ok(body) => *last_answer = format!("/healthz answered {:?}", body.trim()),
            Err(error) => *last_answer = format!("/healthz: {error}"),
        }
        clock.sleep(POLL).await;
    }
}

/// A client for kube-controller-manager's HTTPS endpoint, trusting the control plane's CA only.
fn healthz_client(url: &str, ca_der: &[u8]) -> Result<kube::Client, Error> {
    let boxed = |error: Box<dyn std::error::Error + Send + Sync>| Error::HealthzClient {
        url: url.to_owned(),
        source: error,
    };
    let uri: http::Uri = url.parse().map_err(|error| boxed(Box::new(error)))?;
    let mut config = kube::Config::new(uri);
    config.root_cert = Some(vec![ca_der.to_vec()]);
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(5));
    config.default_retry = false;
    kube::Client::try_from(config).map_err(|error| boxed(Box::new(error)))
}

/// A Go duration in whole milliseconds (validated to be at least 1 ms).
fn go_duration(value: Duration) -> String {
    format!("{}ms", value.as_millis())
}

/// kube-controller-manager's command line.
pub(crate) fn args(
    options: &ControllerManagerOptions,
    kubeconfig: &Path,
    pki: &Pki,
    port: u16,
) -> Vec<String> {
    let path = |path: &Path| path.display().to_string();
    let mut controllers = CONTROLLERS.join(",");
    if options.sign_certificates {
        controllers.push_str(",csrsigning");
    }
    for controller in &options.more_controllers {
        controllers.push(',');
        controllers.push_str(controller);
    }
    let mut args = vec![
        format!("--kubeconfig={}", path(kubeconfig)),
        format!("--controllers={controllers}"),
        "--use-service-account-credentials=true".to_owned(),
        format!(
            "--service-account-private-key-file={}",
            path(&pki.service_account_key)
        ),
        format!("--root-ca-file={}", path(&pki.ca_cert)),
        "--leader-elect=false".to_owned(),
        // 1.20 still serves plain HTTP on 10252 unless told not to.
        "--port=0".to_owned(),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        format!("--tls-cert-file={}", path(&pki.controller_manager_cert)),
        format!(
            "--tls-private-key-file={}",
            path(&pki.controller_manager_key)
        ),
        format!(
            "--node-monitor-period={}",
            go_duration(options.node_monitor_period)
        ),
        format!(
            "--node-monitor-grace-period={}",
            go_duration(options.node_monitor_grace_period)
        ),
        format!(
            "--node-startup-grace-period={}",
            go_duration(options.node_startup_grace_period)
        ),
        format!(
            "--pod-eviction-timeout={}",
            go_duration(options.pod_eviction_timeout)
        ),
        "--profiling=false".to_owned(),
    ];
    if options.sign_certificates {
        args.push(format!(
            "--cluster-signing-cert-file={}",
            path(&pki.ca_cert)
        ));
        args.push(format!("--cluster-signing-key-file={}", path(&pki.ca_key)));
    }
    args.extend(options.extra_args.iter().cloned());
    args
}

/// A free port on 127.0.0.1 (bound, then released).
fn free_port() -> Result<u16, Error> {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(Error::FreePort)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pki() -> Pki {
        Pki {
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
        }
    }

    #[test]
    fn args_carry_the_options_and_the_controllers() {
        let options = ControllerManagerOptions {
            node_monitor_period: Duration::from_millis(500),
            node_monitor_grace_period: Duration::from_secs(4),
            extra_args: vec!["--v=2".to_owned()],
            ..ControllerManagerOptions::default()
        };
        let args = args(&options, Path::new("/d/kcm.yaml"), &pki(), 7);
        for expected in [
            "--kubeconfig=/d/kcm.yaml",
            "--controllers=nodelifecycle,disruption,garbagecollector,namespace,serviceaccount,serviceaccount-token",
            "--use-service-account-credentials=true",
            "--service-account-private-key-file=/d/sa.key",
            "--root-ca-file=/d/ca.crt",
            "--leader-elect=false",
            "--port=0",
            "--secure-port=7",
            "--tls-cert-file=/d/cm.crt",
            "--node-monitor-period=500ms",
            "--node-monitor-grace-period=4000ms",
            "--node-startup-grace-period=60000ms",
            "--pod-eviction-timeout=300000ms",
        ] {
            assert!(
                args.iter().any(|arg| arg == expected),
                "{expected} missing from {args:?}"
            );
        }
        assert_eq!(args.last().map(String::as_str), Some("--v=2"));
    }

    #[test]
    fn signing_adds_the_csrsigning_controller_with_the_ca() {
        let options = ControllerManagerOptions {
            sign_certificates: true,
            ..ControllerManagerOptions::default()
        };
        let args = args(&options, Path::new("/d/kcm.yaml"), &pki(), 7);
        for expected in [
            "--controllers=nodelifecycle,disruption,garbagecollector,namespace,serviceaccount,serviceaccount-token,csrsigning",
            "--cluster-signing-cert-file=/d/ca.crt",
            "--cluster-signing-key-file=/d/ca.key",
        ] {
            assert!(
                args.iter().any(|arg| arg == expected),
                "{expected} missing from {args:?}"
            );
        }
    }

    #[test]
    fn the_defaults_are_valid() {
        ControllerManagerOptions::default().validate().unwrap();
    }

    #[test]
    fn a_zero_duration_is_a_typed_error_naming_the_option() {
        let options = ControllerManagerOptions {
            pod_eviction_timeout: Duration::ZERO,
            ..ControllerManagerOptions::default()
        };
        let error = options.validate().unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidOption {
                    option: "pod_eviction_timeout",
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn a_monitor_period_not_shorter_than_the_grace_period_is_refused() {
        let options = ControllerManagerOptions {
            node_monitor_period: Duration::from_secs(5),
            node_monitor_grace_period: Duration::from_secs(5),
            ..ControllerManagerOptions::default()
        };
        let error = options.validate().unwrap_err();
        assert!(
            error.to_string().contains("node_monitor_grace_period"),
            "{error}"
        );
    }
}
