//! Watches what the harness judges — Nodes, Pods, the watchdog's dependents — and turns every
//! change into one stream of observations, in the order the API server delivered them.

use futures::{Stream, StreamExt, TryStreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};

use super::objects::NAMESPACE;

/// One observed change.
#[derive(Debug, Clone)]
pub enum Observation {
    Node(Box<Node>),
    NodeGone(String),
    Pod(Box<Pod>),
    PodGone { namespace: String, name: String },
    Deployment(Box<Deployment>),
    /// A watch failed; it is retried with backoff by the stream itself.
    WatchError(String),
}

fn flatten<K, F, G>(events: impl Stream<Item = Result<Event<K>, watcher::Error>>, applied: F, deleted: G) -> impl Stream<Item = Observation>
where
    F: Fn(K) -> Observation + Copy,
    G: Fn(K) -> Observation + Copy,
{
    events.flat_map(move |event| {
        let items: Vec<Observation> = match event {
            Ok(Event::Apply(object) | Event::InitApply(object)) => vec![applied(object)],
            Ok(Event::Delete(object)) => vec![deleted(object)],
            Ok(Event::Init | Event::InitDone) => Vec::new(),
            Err(e) => vec![Observation::WatchError(e.to_string())],
        };
        stream::iter(items)
    })
}

/// Every observation from now on, merged.
pub fn observe(client: &Client) -> impl Stream<Item = Observation> + Send + 'static {
    let config = watcher::Config::default();
    let nodes = watcher::watcher(Api::<Node>::all(client.clone()), config.clone()).map_err(|e| e);
    let pods = watcher::watcher(Api::<Pod>::all(client.clone()), config.clone());
    let deployments = watcher::watcher(Api::<Deployment>::namespaced(client.clone(), NAMESPACE), config);
    stream::select_all([
        flatten(nodes, |n| Observation::Node(Box::new(n)), |n: Node| Observation::NodeGone(n.name_any())).boxed(),
        flatten(
            pods,
            |p| Observation::Pod(Box::new(p)),
            |p: Pod| Observation::PodGone { namespace: p.namespace().unwrap_or_default(), name: p.name_any() },
        )
        .boxed(),
        flatten(deployments, |d| Observation::Deployment(Box::new(d)), |d| Observation::Deployment(Box::new(d))).boxed(),
    ])
}
