//! Cordon and drain, one round per reconcile (MCM's `drainNodeForInPlace`, made non-blocking so
//! one slow node never stalls the others).
//!
//! A round:
//!
//! 1. Lists the pods bound to the node. Mirror pods (annotation `kubernetes.io/config.mirror`) and
//!    DaemonSet pods are left alone: the agent restarts them after the update.
//! 2. Normal round: every other pod not yet terminating gets one Eviction (the API server applies
//!    PodDisruptionBudgets; a 429 means a budget blocks it), unless its last eviction was refused
//!    less than `eviction_retry_interval` ago. Refusals are counted per pod in memory;
//!    when a pod reaches `maxEvictRetries` refusals it is deleted instead (with its own grace
//!    period, as MCM's drain does), and an Event says so. Terminating pods are waited for.
//! 3. Forced round — the drain timeout has passed since the node was selected, or an eviction
//!    failed with anything but a budget's refusal (429) or a missing pod (404), i.e. the drain
//!    failed (GEP-31: "If a drain operation times out or fails, the node will be forcefully
//!    drained"): every remaining pod, terminating or not, is deleted with grace period 0, PDBs
//!    notwithstanding.
//! 4. The node is drained when no pods other than those in 1 remain. Until then the next round
//!    comes one [`POD_DELETION_POLL`] later while evicted or deleted pods are still going (as
//!    `kubectl drain` waits for their deletion), else when the first refused eviction is due.
//!
//! Caveats: refusal counts restart with the orchestrator (the drain timeout, which is stored in the
//! node condition's transition time, still bounds the whole drain); volume detachment is not
//! awaited (the lab has no volumes).

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client, ResourceExt};

use crate::error::{Error, status_code};

/// How often a drain looks again while pods it evicted or deleted are still going (`kubectl
/// drain` polls their deletion every second; MCM's drain waits for them the same way).
pub const POD_DELETION_POLL: Duration = Duration::from_secs(1);

/// How the drain treats a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PodClass {
    /// A static pod's mirror: the kubelet owns it.
    Mirror,
    /// Owned by a DaemonSet: it would come straight back.
    DaemonSet,
    /// Already being deleted.
    Terminating,
    /// To be evicted (or deleted when forced).
    Evict,
}

pub(crate) fn classify(pod: &Pod) -> PodClass {
    if pod
        .annotations()
        .contains_key("kubernetes.io/config.mirror")
    {
        return PodClass::Mirror;
    }
    if pod
        .owner_references()
        .iter()
        .any(|o| o.kind == "DaemonSet" && o.controller == Some(true))
    {
        return PodClass::DaemonSet;
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return PodClass::Terminating;
    }
    PodClass::Evict
}

/// Why a round deleted pods instead of evicting them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Forced {
    /// The drain timeout passed since the node was selected.
    TimedOut,
    /// An eviction failed with an error that is neither a budget's refusal nor a missing pod.
    Failed(String),
}

/// What one round did.
#[derive(Debug, Default, Clone)]
pub(crate) struct Round {
    pub(crate) evicted: Vec<String>,
    /// Pods deleted with grace period 0 because the drain was forced, and why it was.
    pub(crate) forced: Option<Forced>,
    pub(crate) deleted: Vec<String>,
    /// Pods whose eviction was refused `maxEvictRetries` times: deleted (with their own grace
    /// period) instead.
    pub(crate) exhausted: Vec<String>,
    /// Pods still on the node that keep the drain from finishing.
    pub(crate) remaining: usize,
    /// When the next round can change something: one [`POD_DELETION_POLL`] while evicted or
    /// deleted pods are still going, else when the first refused eviction is due again (`None`:
    /// nothing is pending).
    pub(crate) look_again: Option<Duration>,
}

impl Round {
    pub(crate) fn drained(&self) -> bool {
        self.remaining == 0
    }

    /// Asks for the next round no later than `after`.
    fn look_again_within(&mut self, after: Duration) {
        self.look_again = Some(self.look_again.map_or(after, |now| now.min(after)));
    }
}

/// Per `namespace/pod`: how often its eviction was refused and when last, kept across rounds of
/// one orchestrator process.
pub(crate) type Refusals = HashMap<String, (u32, Timestamp)>;

/// How a round evicts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retries {
    /// Refusals before the pod is deleted instead.
    pub(crate) max: u32,
    /// The time between two evictions of one pod.
    pub(crate) interval: Duration,
    pub(crate) now: Timestamp,
}

/// The API version of the Eviction bodies the server reads: `policy/v1` from Kubernetes 1.22,
/// `policy/v1beta1` before (a 1.20 server refuses a `policy/v1` Eviction as a bad request, which
/// would turn every drain into a forced one). Asked once, from discovery.
pub(crate) async fn eviction_version(client: &Client) -> Result<&'static str, Error> {
    match client.list_api_group_resources("policy/v1").await {
        Ok(list)
            if list
                .resources
                .iter()
                .any(|r| r.name == "poddisruptionbudgets") =>
        {
            Ok("policy/v1")
        }
        Ok(_) => Ok("policy/v1beta1"),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok("policy/v1beta1"),
        Err(source) => Err(Error::Kube {
            action: "discover the policy API's versions".to_owned(),
            source,
        }),
    }
}

/// Evicts `namespace/name` with an Eviction of `version` (see [`eviction_version`]).
async fn evict(client: &Client, namespace: &str, name: &str, version: &str) -> kube::Result<()> {
    let body = serde_json::json!({
        "apiVersion": version,
        "kind": "Eviction",
        "metadata": { "name": name, "namespace": namespace },
    });
    let request = http::Request::post(format!(
        "/api/v1/namespaces/{namespace}/pods/{name}/eviction"
    ))
    .header(http::header::CONTENT_TYPE, "application/json")
    .body(serde_json::to_vec(&body).map_err(kube::Error::SerdeError)?)
    .map_err(kube::Error::HttpError)?;
    client
        .request::<serde_json::Value>(request)
        .await
        .map(|_| ())
}

pub(crate) async fn drain_round(
    client: &Client,
    node: &str,
    force: bool,
    retries: Retries,
    refusals: &mut Refusals,
    eviction: &str,
) -> Result<Round, Error> {
    let pods: Api<Pod> = Api::all(client.clone());
    // The server picks the node's pods (as `kubectl drain` asks): the other nodes' pods are
    // neither encoded nor decoded.
    let list = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .map_err(|source| Error::Kube {
            action: format!("list pods on node {node}"),
            source,
        })?;
    let drainable: Vec<&Pod> = list
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .filter(|p| !matches!(classify(p), PodClass::Mirror | PodClass::DaemonSet))
        .collect();
    let mut round = Round::default();
    if force {
        round.forced = Some(Forced::TimedOut);
        force_delete(client, node, &drainable, refusals, &mut round).await?;
        return Ok(round);
    }
    for pod in &drainable {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let key = format!("{namespace}/{name}");
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        round.remaining += 1;
        if classify(pod) == PodClass::Terminating {
            round.look_again_within(POD_DELETION_POLL);
            continue;
        }
        // A refused eviction is retried once the interval has passed, however often rounds run.
        if let Some((_, at)) = refusals.get(&key) {
            let due = add(*at, retries.interval);
            if retries.now < due {
                round.look_again_within(due.duration_since(retries.now).unsigned_abs());
                continue;
            }
        }
        match evict(client, &namespace, &name, eviction).await {
            Ok(_) => {
                refusals.remove(&key);
                round.evicted.push(key);
                round.look_again_within(POD_DELETION_POLL);
            }
            Err(e) if status_code(&e) == Some(404) => {
                round.remaining -= 1;
            }
            Err(e) if status_code(&e) == Some(429) => {
                let (count, at) = refusals.entry(key.clone()).or_insert((0, retries.now));
                *count += 1;
                *at = retries.now;
                round.look_again_within(retries.interval);
                if *count >= retries.max.max(1) {
                    round.look_again_within(POD_DELETION_POLL);
                    // MCM's drain: once the retries are spent the pod is deleted, budget or not.
                    match api.delete(&name, &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(e) if status_code(&e) == Some(404) => round.remaining -= 1,
                        Err(source) => {
                            return Err(Error::Kube {
                                action: format!("delete pod {key} on node {node}"),
                                source,
                            });
                        }
                    }
                    refusals.remove(&key);
                    round.exhausted.push(key);
                }
            }
            Err(e) => {
                // GEP-31: "If a drain operation times out or fails, the node will be forcefully
                // drained."
                round.forced = Some(Forced::Failed(format!(
                    "evicting pod {key} failed: {}",
                    rackproof_std::error_chain(&e)
                )));
                round.remaining = 0;
                force_delete(client, node, &drainable, refusals, &mut round).await?;
                return Ok(round);
            }
        }
    }
    Ok(round)
}

fn add(at: Timestamp, duration: Duration) -> Timestamp {
    at.checked_add(duration).unwrap_or(Timestamp::MAX)
}

/// Deletes every pod of `pods` with grace period 0, PDBs notwithstanding.
async fn force_delete(
    client: &Client,
    node: &str,
    pods: &[&Pod],
    refusals: &mut Refusals,
    round: &mut Round,
) -> Result<(), Error> {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    for pod in pods {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let key = format!("{namespace}/{name}");
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        match api.delete(&name, &params).await {
            Ok(_) => round.deleted.push(key.clone()),
            Err(e) if status_code(&e) == Some(404) => {}
            Err(source) => {
                return Err(Error::Kube {
                    action: format!("delete pod {key} on node {node}"),
                    source,
                });
            }
        }
        refusals.remove(&key);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

    use super::*;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn mirror_and_daemonset_pods_are_left_alone() {
        let mut mirror = pod();
        mirror.metadata.annotations =
            Some([("kubernetes.io/config.mirror".to_owned(), "x".to_owned())].into());
        assert_eq!(classify(&mirror), PodClass::Mirror);
        let mut ds = pod();
        ds.metadata.owner_references = Some(vec![OwnerReference {
            kind: "DaemonSet".into(),
            name: "d".into(),
            api_version: "apps/v1".into(),
            uid: "u".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        assert_eq!(classify(&ds), PodClass::DaemonSet);
        let mut gone = pod();
        gone.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(classify(&gone), PodClass::Terminating);
        assert_eq!(classify(&pod()), PodClass::Evict);
    }

    /// kube-apiserver 1.20 (the local control plane's) reads only `policy/v1beta1` Evictions; a
    /// `policy/v1` body was a 400 there, which forced every drain past its budgets.
    #[tokio::test]
    async fn a_round_evicts_on_a_server_without_policy_v1() {
        use rackproof_cluster::local::{LocalControlPlane, LocalOptions};
        let plane = LocalControlPlane::start(LocalOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let client = plane.client();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a1"},
            "spec": {"nodeName": "a", "containers": [{"name": "c", "image": "i"}]},
        }))
        .expect("a pod");
        pods.create(&kube::api::PostParams::default(), &pod)
            .await
            .expect("created");
        let version = eviction_version(&client).await.expect("discovery");
        assert_eq!(version, "policy/v1beta1");
        let retries = Retries {
            max: 3,
            interval: Duration::from_secs(20),
            now: Timestamp::UNIX_EPOCH,
        };
        let round = drain_round(&client, "a", false, retries, &mut Refusals::new(), version)
            .await
            .expect("a round");
        assert!(round.forced.is_none(), "{:?}", round.forced);
        assert_eq!(round.evicted, ["default/a1"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_touches_only_the_pods_of_its_node() {
        let server = rackproof_apiserver::ApiServer::new(rackproof_clock::Clock::simulated(
            "2026-01-01T00:00:00Z".parse().expect("a timestamp"),
        ));
        let client = server.admin_client();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        for (name, node) in [
            ("a1", Some("a")),
            ("b1", Some("b")),
            ("a2", Some("a")),
            ("loose", None),
        ] {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
            }))
            .expect("a pod");
            pods.create(&kube::api::PostParams::default(), &pod)
                .await
                .expect("created");
        }
        let retries = Retries {
            max: 3,
            interval: Duration::from_secs(20),
            now: Timestamp::UNIX_EPOCH,
        };
        let round = drain_round(
            &client,
            "a",
            true,
            retries,
            &mut Refusals::new(),
            "policy/v1",
        )
        .await
        .expect("a round");
        assert_eq!(round.deleted, ["default/a1", "default/a2"]);
        let left: Vec<String> = pods
            .list(&ListParams::default())
            .await
            .expect("listed")
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        assert_eq!(left, ["b1", "loose"]);
    }
}
