//! Watches what the harness judges — Nodes, Pods, node Leases, the watchdog's dependents, the
//! components' leader Leases, the WorkerPool — and turns every change into one stream of
//! observations, in the order the API server delivered them.

use futures::{Stream, StreamExt, stream};
use inplace_api::crd::WorkerPool;
use inplace_api::node_lease::{NODE_LEASE_NAMESPACE, NodeLease};
use inplace_api::unmanaged::{self, Unmanaged};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as KubeEvent, Node, Pod};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};

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
    /// A component's leader Lease (in the run's namespace) names its holder (`None`: nobody, or
    /// the Lease went).
    Leader {
        lease: String,
        holder: Option<String>,
    },
    /// The WorkerPool changed (its spec versions, its last maintenance).
    Pool(Box<WorkerPool>),
    /// A watch failed; it is retried with backoff by the stream itself.
    WatchError(String),
}

/// A node Lease's new expiry (renew time plus duration).
fn lease_observation(lease: NodeLease) -> Observation {
    Observation::Lease {
        node: lease.name().to_owned(),
        expiry: Some(lease.expiry()),
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
        Api::<NodeLease>::namespaced(client.clone(), NODE_LEASE_NAMESPACE),
        config.clone(),
    )
    .default_backoff();
    let leaders = unmanaged::watcher(
        Api::<Unmanaged<Lease>>::namespaced(client.clone(), NAMESPACE),
        config.clone(),
    )
    .default_backoff();
    let pools = watcher::watcher(
        Api::<WorkerPool>::namespaced(client.clone(), NAMESPACE),
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
        flatten(
            leaders,
            |l: Lease| Observation::Leader {
                lease: l.name_any(),
                holder: l
                    .spec
                    .and_then(|s| s.holder_identity)
                    .filter(|h| !h.is_empty()),
            },
            |l: Lease| {
                Some(Observation::Leader {
                    lease: l.name_any(),
                    holder: None,
                })
            },
        )
        .boxed(),
        flatten(pools, |p| Observation::Pool(Box::new(p)), |_| None).boxed(),
        flatten(leases, lease_observation, |l: NodeLease| {
            Some(Observation::Lease {
                node: l.name().to_owned(),
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
