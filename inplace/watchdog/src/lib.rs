//! Dependency watchdog (DWD): a node-lease prober that scales the controllers which would act on
//! a mass node outage (machine-controller-manager, kube-controller-manager, cluster-autoscaler) to
//! zero when most node leases expire at once, and that does not mistake nodes under an in-place
//! update for dead ones (GEP-31, "Dependency Watchdog").
//!
//! # Running it
//!
//! ```text
//! inplace-watchdog --kubeconfig ~/.kube/config --namespace shoot--dev--lab
//! ```
//!
//! or, in-process, [`run`] with a [`kube::Client`], a [`Clock`] and a [`Config`]. [`run`] probes
//! until its future is dropped; all state lives in the API (the remembered replicas are an
//! annotation on each dependent), so dropping it and calling it again continues correctly.
//!
//! # One probe (as dependency-watchdog's `prober.go` does it)
//!
//! 1. Wait out a 429 back-off if one is pending ([`Config::throttle_backoff`], DWD: 10 s).
//! 2. Probe the API server (`GET /version`). Failure: no scaling decision at all, status says so.
//! 3. List Nodes and the Leases in `kube-node-lease`, read the Machines
//!    (`machine.sapcloud.io/v1alpha1`, [`Config::machine_namespace`]) from a watch that runs
//!    beside the probes (DWD reads them through its manager's cache; `machines`); compute
//!    candidates and expired leases ([`probe`] documents the rules: managed, healthy by
//!    [`Config::unhealthy_conditions`], Machine not Failed/Terminating, not under in-place
//!    update by [`Config::in_place_reasons`], has a lease).
//! 4. Exactly one candidate: no action. Otherwise `expired / candidates ≥`
//!    [`Config::node_lease_failure_fraction`] → scale the [`Config::dependents`] down in order,
//!    else scale them back up in reverse order ([`scale`] documents the annotations).
//! 5. Write the outcome into the status ConfigMap [`Config::status_config_map`] (every probe) and
//!    publish an Event when the decision changes and for every dependent scaled.
//!
//! Each probe runs in a `probe{n, namespace, decision}` span (`n` counts the probes of a term,
//! `namespace` is the control plane's, `decision` is recorded once made), so its log lines and
//! its Events' lines say which probe decided what.
//!
//! # Choices where DWD and GEP-31 leave room
//!
//! - In-place exclusion follows DWD's `IsNodeUndergoingInPlaceUpdate`: condition `InPlaceUpdate`
//!   with reason `ReadyForUpdate` or `UpdateFailed` (configurable). Nodes that are merely
//!   candidates, selected or draining still have a kubelet and stay candidates.
//! - Default unhealthy conditions are `KernelDeadlock`, `ReadonlyFilesystem`, `DiskPressure` (the
//!   issue's list; DWD also lists `NetworkUnavailable`, add it via config if wanted). `Ready` is
//!   never one: a NotReady node with an expired lease is exactly what the probe is for.
//! - Scale-up goes in reverse scale-down order and restores only Deployments this watchdog scaled
//!   down (those with the replicas annotation); DWD would also raise other zero-replica dependents
//!   to 1.
//! - The watchdog does not wait for dependents to reach their target ready replicas between steps
//!   (DWD does, with a timeout): nothing in the lab keeps Deployment status.
//! - Any 429 from any call backs the next probe off; other errors are retried at the next probe.

pub mod cli;
mod error;
mod events;
mod machines;
pub mod probe;
pub mod scale;

use std::collections::BTreeMap;
use std::time::Duration;

use inplace_api::leader::Elector;
pub use inplace_api::leader::LeaderElection;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, ObjectReference};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, Resource};
use rackproof_clock::Clock;
use rackproof_std::error_chain;
use tracing::Instrument;

pub use error::Error;
use error::{is_conflict, is_not_found};
use events::{Kind, Recorder};
use machines::Machines;
use probe::{Decision, Filter, LeaseFacts, LeaseProbe, List, NodeFacts};
use scale::Outcome;

/// Namespace of node leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// What the watchdog probes and scales.
#[derive(Debug, Clone)]
pub struct Config {
    /// Namespace of the dependents and of the status ConfigMap (the cluster's control plane).
    pub namespace: String,
    /// Namespace of the Machine objects.
    pub machine_namespace: String,
    /// Dependent Deployments in scale-down order (scale-up uses the reverse).
    pub dependents: Vec<String>,
    /// Time between probes (DWD: `probeInterval`, default 10 s).
    pub probe_interval: Duration,
    /// kube-controller-manager's `--node-monitor-grace-period` (DWD: `kcmNodeMonitorGraceDuration`).
    pub kcm_node_monitor_grace: Duration,
    /// Scale down when `expired / candidates` reaches this (DWD: `nodeLeaseFailureFraction`, 0.6).
    pub node_lease_failure_fraction: f64,
    /// Node condition types that make a node unhealthy (and no candidate) when `True`.
    pub unhealthy_conditions: Vec<String>,
    /// `InPlaceUpdate` reasons that take a node out of the probe.
    pub in_place_reasons: Vec<String>,
    /// Back-off after a 429 (DWD: 10 s).
    pub throttle_backoff: Duration,
    /// Name of the status ConfigMap in [`Config::namespace`].
    pub status_config_map: String,
    /// Hold this Lease before probing and scaling (DWD's and MCM's leader election); `None` acts
    /// at once, which is right for exactly one instance. Several instances each need an election
    /// on the same Lease with their own `identity`: only the holder probes, scales and writes the
    /// status, and it stops the moment it loses the Lease ([`inplace_api::leader`]).
    pub leader_election: Option<LeaderElection>,
}

/// The Lease the watchdog's instances compete for unless told otherwise.
pub const LEADER_LEASE_NAME: &str = "dependency-watchdog-prober";

impl Default for Config {
    fn default() -> Self {
        Self {
            namespace: "kube-system".to_owned(),
            machine_namespace: "kube-system".to_owned(),
            dependents: vec![
                "machine-controller-manager".to_owned(),
                "cluster-autoscaler".to_owned(),
                "kube-controller-manager".to_owned(),
            ],
            probe_interval: Duration::from_secs(10),
            kcm_node_monitor_grace: Duration::from_secs(40),
            node_lease_failure_fraction: 0.6,
            unhealthy_conditions: vec![
                "KernelDeadlock".to_owned(),
                "ReadonlyFilesystem".to_owned(),
                "DiskPressure".to_owned(),
            ],
            in_place_reasons: vec!["ReadyForUpdate".to_owned(), "UpdateFailed".to_owned()],
            throttle_backoff: Duration::from_secs(10),
            status_config_map: "dependency-watchdog-status".to_owned(),
            leader_election: None,
        }
    }
}

impl Config {
    fn validate(&self) -> Result<(), Error> {
        if !(self.node_lease_failure_fraction > 0.0 && self.node_lease_failure_fraction <= 1.0) {
            return Err(Error::Config(format!(
                "nodeLeaseFailureFraction must be in (0, 1], got {}",
                self.node_lease_failure_fraction
            )));
        }
        if self.probe_interval.is_zero() {
            return Err(Error::Config(
                "the probe interval must be longer than zero".to_owned(),
            ));
        }
        Ok(())
    }
}

/// Probes until the future is dropped. Returns only for an unusable [`Config`].
///
/// With [`Config::leader_election`], probes run only while this instance holds the Lease (the
/// Machine watch, a read, runs throughout); each term starts with no remembered decision.
pub async fn run(client: Client, clock: Clock, config: Config) -> Result<(), Error> {
    config.validate()?;
    let elector = match config.leader_election.clone() {
        Some(election) => Some(
            Elector::new(
                client.clone(),
                clock.clone(),
                election,
                "dependency-watchdog",
            )
            .map_err(|e| Error::Config(e.to_string()))?,
        ),
        None => None,
    };
    let machines = Machines::new(&config.machine_namespace);
    let probes = async {
        let term = || Watchdog::new(client.clone(), clock.clone(), config.clone(), &machines).run();
        match elector {
            Some(elector) => elector.run(term).await,
            None => term().await,
        }
    };
    // Biased: the watch first, so a probe sees every Machine event delivered before it.
    tokio::select! {
        biased;
        _ = machines.follow(client.clone()) => {}
        _ = probes => {}
    }
    Ok(())
}

/// The last decision, for Events on change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    Down,
    Up,
    Skip,
    Failed,
}

struct Watchdog<'a> {
    client: Client,
    clock: Clock,
    config: Config,
    machines: &'a Machines,
    recorder: Recorder,
    last: Option<Last>,
}

impl<'a> Watchdog<'a> {
    fn new(client: Client, clock: Clock, config: Config, machines: &'a Machines) -> Self {
        let recorder = Recorder::new(client.clone(), clock.clone(), "dependency-watchdog");
        Self {
            client,
            clock,
            config,
            machines,
            recorder,
            last: None,
        }
    }

    async fn run(mut self) {
        let mut interval = self.clock.interval(self.config.probe_interval);
        let mut probes: u64 = 0;
        loop {
            interval.tick().await;
            probes += 1;
            // Every line of a probe (its scaling Events included) names the probe and the
            // control plane whose dependents it scales; `decision` once it is made.
            let span = tracing::info_span!(
                "probe",
                n = probes,
                namespace = %self.config.namespace,
                decision = tracing::field::Empty,
            );
            if self.probe_and_report().instrument(span).await {
                interval.reset();
            }
        }
    }

    /// One probe and, when it failed, the failure's status and Event (on change) and the 429
    /// back-off; returns whether it backed off.
    async fn probe_and_report(&mut self) -> bool {
        let Err(error) = self.probe_once().await else {
            return false;
        };
        let throttled = error.is_throttled();
        tracing::warn!(error = %error_chain(&error), throttled, "probe failed");
        self.write_status(&Status::failed(&error, throttled), None)
            .await;
        if self.last != Some(Last::Failed) {
            self.event(Kind::Warning, "ProbeFailed", &error_chain(&error))
                .await;
            self.last = Some(Last::Failed);
        }
        if throttled {
            self.clock.sleep(self.config.throttle_backoff).await;
        }
        throttled
    }

    async fn probe_once(&mut self) -> Result<(), Error> {
        self.client
            .apiserver_version()
            .await
            .map_err(Error::ApiServer)?;
        let probe = self.probe_leases().await?;
        let decision = probe::decide(&probe, self.config.node_lease_failure_fraction);
        let status = Status::decided(&probe, decision, self.config.node_lease_failure_fraction);
        tracing::Span::current().record("decision", tracing::field::display(status.decision));
        // Each dependent's Event is published as soon as it is scaled, so a later failure (a 429
        // on the next dependent) never swallows the Event of one already scaled.
        let last = match decision {
            Decision::Skip => Last::Skip,
            Decision::ScaleDown { .. } => {
                self.scale(true, &status.message).await?;
                Last::Down
            }
            Decision::ScaleUp { .. } => {
                self.scale(false, &status.message).await?;
                Last::Up
            }
        };
        self.write_status(&status, Some(&probe)).await;
        if self.last != Some(last) {
            let (kind, reason) = match last {
                Last::Down => (Kind::Warning, "NodeLeaseProbeFailed"),
                Last::Up => (Kind::Normal, "NodeLeaseProbeSucceeded"),
                _ => (Kind::Normal, "NodeLeaseProbeSkipped"),
            };
            self.event(kind, reason, &status.message).await;
            self.last = Some(last);
        }
        Ok(())
    }

    async fn probe_leases(&self) -> Result<LeaseProbe, Error> {
        let nodes: List<NodeFacts> = self.list("nodes", Node::url_path(&(), None)).await?;
        let machines = self
            .machines
            .facts(&self.clock, self.config.probe_interval)
            .await?;
        let leases: List<LeaseFacts> = self
            .list(
                "node leases",
                Lease::url_path(&(), Some(NODE_LEASE_NAMESPACE)),
            )
            .await?;
        let filter = Filter {
            unhealthy_conditions: self.config.unhealthy_conditions.clone(),
            in_place_reasons: self.config.in_place_reasons.clone(),
        };
        Ok(probe::probe_leases(
            &nodes.items,
            &machines,
            &leases.items,
            &filter,
            self.config.kcm_node_monitor_grace,
            self.clock.now(),
        ))
    }

    /// Lists the objects at `path`, decoding only what `T` names (see [`probe`]).
    async fn list<T: serde::de::DeserializeOwned>(
        &self,
        what: &'static str,
        path: String,
    ) -> Result<T, Error> {
        let request = kube::core::Request::new(path)
            .list(&ListParams::default())
            .map_err(|e| Error::List {
                what,
                source: kube::Error::BuildRequest(e),
            })?;
        self.client
            .request(request)
            .await
            .map_err(|source| Error::List { what, source })
    }

    /// Scales every dependent down (or back up, in reverse order), publishing an Event for each
    /// one scaled; stops at the first failure.
    async fn scale(&self, down: bool, why: &str) -> Result<(), Error> {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let mut order: Vec<&String> = self.config.dependents.iter().collect();
        if !down {
            order.reverse();
        }
        for name in order {
            let outcome = if down {
                scale::scale_down(&api, name).await?
            } else {
                scale::scale_up(&api, name).await?
            };
            if let Outcome::Scaled { from, to } = outcome {
                let reason = if to == 0 { "ScaledDown" } else { "ScaledUp" };
                let message =
                    format!("scaled deployment {name} from {from} to {to} replicas: {why}");
                self.deployment_event(name, reason, &message).await;
            }
        }
        Ok(())
    }

    fn status_reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("ConfigMap".to_owned()),
            name: Some(self.config.status_config_map.clone()),
            namespace: Some(self.config.namespace.clone()),
            ..Default::default()
        }
    }

    async fn event(&self, kind: Kind, reason: &str, message: &str) {
        self.recorder
            .publish(&self.status_reference(), kind, reason, message)
            .await;
    }

    async fn deployment_event(&self, name: &str, reason: &str, message: &str) {
        let reference = ObjectReference {
            api_version: Some("apps/v1".to_owned()),
            kind: Some("Deployment".to_owned()),
            name: Some(name.to_owned()),
            namespace: Some(self.config.namespace.clone()),
            ..Default::default()
        };
        self.recorder
            .publish(&reference, Kind::Warning, reason, message)
            .await;
    }

    async fn write_status(&self, status: &Status, probe: Option<&LeaseProbe>) {
        let mut data = BTreeMap::new();
        data.insert("decision".to_owned(), status.decision.to_owned());
        data.insert("message".to_owned(), status.message.clone());
        data.insert("lastProbeTime".to_owned(), self.clock.now().to_string());
        if let Some(probe) = probe {
            data.insert("candidates".to_owned(), probe.candidates.join(","));
            data.insert("expired".to_owned(), probe.expired.join(","));
            let excluded: Vec<String> = probe
                .excluded
                .iter()
                .map(|(n, why)| format!("{n}: {why}"))
                .collect();
            data.insert("excluded".to_owned(), excluded.join("; "));
        }
        if let Err(error) = self.put_status(data).await {
            tracing::warn!(error = %error_chain(&error), "failed to write status");
        }
    }

    async fn put_status(&self, data: BTreeMap<String, String>) -> Result<(), Error> {
        let name = self.config.status_config_map.clone();
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let wrap = |source| Error::Status {
            name: name.clone(),
            source,
        };
        for _ in 0..5 {
            match api.get(&name).await {
                Ok(mut existing) => {
                    existing.data = Some(data.clone());
                    match api.replace(&name, &PostParams::default(), &existing).await {
                        Ok(_) => return Ok(()),
                        Err(e) if is_conflict(&e) => continue,
                        Err(e) => return Err(wrap(e)),
                    }
                }
                Err(e) if is_not_found(&e) => {
                    let config_map = ConfigMap {
                        metadata: kube::api::ObjectMeta {
                            name: Some(name.clone()),
                            namespace: Some(self.config.namespace.clone()),
                            ..Default::default()
                        },
                        data: Some(data.clone()),
                        ..Default::default()
                    };
                    match api.create(&PostParams::default(), &config_map).await {
                        Ok(_) => return Ok(()),
                        Err(e) if is_conflict(&e) => continue,
                        Err(e) => return Err(wrap(e)),
                    }
                }
                Err(e) => return Err(wrap(e)),
            }
        }
        Ok(())
    }
}

/// One probe's outcome for the status ConfigMap.
struct Status {
    decision: &'static str,
    message: String,
}

impl Status {
    fn decided(probe: &LeaseProbe, decision: Decision, threshold: f64) -> Self {
        let (candidates, expired) = (probe.candidates.len(), probe.expired.len());
        match decision {
            Decision::ScaleDown { fraction } => Self {
                decision: "ScaleDown",
                message: format!(
                    "{expired} of {candidates} candidate node leases expired (fraction {fraction:.2} ≥ {threshold}): dependents held at zero"
                ),
            },
            Decision::ScaleUp { fraction } => Self {
                decision: "ScaleUp",
                message: format!(
                    "{expired} of {candidates} candidate node leases expired (fraction {fraction:.2} < {threshold}): dependents running"
                ),
            },
            Decision::Skip => Self {
                decision: "Skip",
                message: format!(
                    "{candidates} candidate node lease: no scaling decision with a single candidate"
                ),
            },
        }
    }

    fn failed(error: &Error, throttled: bool) -> Self {
        let mut message = error_chain(error);
        if throttled {
            message.push_str(" (throttled: backing off)");
        }
        Self {
            decision: "ProbeFailed",
            message,
        }
    }
}
