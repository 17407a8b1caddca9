//! Watches what the harness judges — Nodes, Pods, node Leases, the watchdog's dependents — and turns every
//! change into one stream of observations, in the order the API server delivered them.

use futures::{Stream, StreamExt, stream};
use inplace_api::unmanaged::{self, Unmanaged};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as KubeEvent, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use serde::Deserialize;

use crate::engine::cluster::objects::NAMESPACE;

/// One observed change.
#[derive(Debug, Clone)]
pub enum Observation {
    Node(Box<Node>),
    NodeGone(String),
    Pod(Box<Pod>),
    PodGone {
        namespace: String,
        name: String,
    },
    Deployment(Box<Deployment>),
    /// A Kubernetes Event (from the orchestrator, the watchdog, the agents).
    KubeEvent {
        object: String,
        reason: String,
        message: String,
        warning: bool,
    },
    /// A node's Lease was renewed (its new expiry: renew time plus duration) or went (`None`).
    Lease {
        node: String,
        expiry: Option<Timestamp>,
    },
    /// A watch failed; it is retried with backoff by the stream itself.
    WatchError(String),
}

/// A node Lease as the judge reads it: name, renew time and duration (nothing else decoded:
/// every kubelet renews its Lease every 10 s).
#[derive(Debug, Clone, Deserialize)]
struct NodeLease {
    #[serde(deserialize_with = "inplace_api::unmanaged::metadata")]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<NodeLeaseSpec>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeLeaseSpec {
    #[serde(default)]
    renew_time: Option<MicroTime>,
    #[serde(default)]
    lease_duration_seconds: Option<i32>,
}

impl NodeLease {
    /// When the Lease expires; a Lease never renewed expired at once (the epoch).
    fn expiry(&self) -> Timestamp {
        let spec = self.spec.clone().unwrap_or_default();
        let Some(renewed) = spec.renew_time else {
            return Timestamp::UNIX_EPOCH;
        };
        let duration = u64::try_from(spec.lease_duration_seconds.unwrap_or(40)).unwrap_or(0);
        renewed
            .0
            .checked_add(std::time::Duration::from_secs(duration))
            .unwrap_or(Timestamp::MAX)
    }

    fn lease_observation(self) -> Observation {
        let expiry = self.expiry();
        Observation::Lease {
            node: self.metadata.name.unwrap_or_default(),
            expiry: Some(expiry),
        }
    }
}

impl k8s_openapi::Resource for NodeLease {
    const API_VERSION: &'static str = <Lease as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Lease as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Lease as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Lease as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Lease as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Lease as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for NodeLease {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn flatten<K, F, G>(
    events: impl Stream<Item = Result<Event<K>, watcher::Error>>,
    applied: F,
    deleted: G,
) -> impl Stream<Item = Observation>
where
    F: Fn(K) -> Observation + Copy,
    G: Fn(K) -> Option<Observation> + Copy,
{
    events.flat_map(move |event| {
        let items: Vec<Observation> = match event {
            Ok(Event::Apply(object) | Event::InitApply(object)) => vec![applied(object)],
            Ok(Event::Delete(object)) => deleted(object).into_iter().collect(),
            Ok(Event::Init | Event::InitDone) => Vec::new(),
            Err(e) => vec![Observation::WatchError(e.to_string())],
        };
        stream::iter(items)
    })
}

/// Every observation from now on, merged. Failed watches are retried with backoff.
pub(crate) fn observe(client: &Client) -> impl Stream<Item = Observation> + Send + 'static {
    let config = watcher::Config::default();
    // Nothing here reads managedFields: they are skipped, not decoded (see `inplace_api::unmanaged`).
    let nodes = unmanaged::watcher(Api::<Unmanaged<Node>>::all(client.clone()), config.clone())
        .default_backoff();
    let pods = unmanaged::watcher(Api::<Unmanaged<Pod>>::all(client.clone()), config.clone())
        .default_backoff();
    let deployments = unmanaged::watcher(
        Api::<Unmanaged<Deployment>>::namespaced(client.clone(), NAMESPACE),
        config.clone(),
    )
    .default_backoff();
    let leases = watcher::watcher(
        Api::<NodeLease>::namespaced(client.clone(), "kube-node-lease"),
        config.clone(),
    )
    .default_backoff();
    let events = unmanaged::watcher(Api::<Unmanaged<KubeEvent>>::all(client.clone()), config)
        .default_backoff();
    stream::select_all([
        flatten(
            nodes,
            |n| Observation::Node(Box::new(n)),
            |n: Node| Some(Observation::NodeGone(n.name_any())),
        )
        .boxed(),
        flatten(
            pods,
            |p| Observation::Pod(Box::new(p)),
            |p: Pod| {
                Some(Observation::PodGone {
                    namespace: p.namespace().unwrap_or_default(),
                    name: p.name_any(),
                })
            },
        )
        .boxed(),
        flatten(
            deployments,
            |d| Observation::Deployment(Box::new(d)),
            |d| Some(Observation::Deployment(Box::new(d))),
        )
        .boxed(),
        flatten(events, kube_event, |_| None).boxed(),
        flatten(leases, NodeLease::lease_observation, |l: NodeLease| {
            Some(Observation::Lease {
                node: l.metadata.name.unwrap_or_default(),
                expiry: None,
            })
        })
        .boxed(),
    ])
}

fn kube_event(event: KubeEvent) -> Observation {
    let involved = &event.involved_object;
    Observation::KubeEvent {
        object: format!(
            "{}/{}",
            involved.kind.as_deref().unwrap_or("?"),
            involved.name.as_deref().unwrap_or("?")
        ),
        reason: event.reason.unwrap_or_default(),
        message: event.message.unwrap_or_default(),
        warning: event.type_.as_deref() == Some("Warning"),
    }
}
