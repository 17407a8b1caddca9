//! Node Leases (`kube-node-lease`), read for one thing: whether a node's `Ready=True` is still
//! true.
//!
//! A node's `Ready` condition is only as fresh as whoever last wrote it. When its kubelet dies,
//! kube-controller-manager's node lifecycle controller turns the condition `Unknown` after the
//! node-monitor grace period — unless it is not running then: the dependency watchdog scales it
//! (and this orchestrator) to zero in an outage, and when both come back, nodes dead for
//! minutes still say `Ready=True` until the controller's next look. The kubelet's Lease says
//! what the condition cannot: a node whose Lease was last renewed longer than
//! [`crate::Config::node_monitor_grace_period`] ago is not available, whatever its condition
//! says (`crate::plan`), so it is neither counted towards `maxUnavailable` nor selected.
//!
//! The Leases come from a watch of their namespace that keeps only each Lease's renew time (a
//! partial type: no managedFields, no holder, nothing else decoded) and wakes no pass: an
//! expiring Lease only makes a node less available, and a renewed one is seen at the next pass.
//! A pass reads the watch's view once it holds a complete list and is not failing; otherwise it
//! lists the Leases from the API, as the caches do (`cache`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use kube::api::ListParams;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use rackproof_std::LockExt;

pub(crate) use inplace_api::node_lease::{NODE_LEASE_NAMESPACE, NodeLease};

/// When each node's Lease was last renewed (`None`: a Lease without a renew time).
pub(crate) type Renewals = HashMap<String, Option<Timestamp>>;

/// What a pass knows of the node Leases.
#[derive(Debug, Clone)]
pub(crate) struct LeaseView {
    renewals: Arc<Renewals>,
    now: Timestamp,
    grace: Duration,
}

impl LeaseView {
    /// Whether `node`'s Lease contradicts a `Ready=True`: it exists and was last renewed longer
    /// than the node-monitor grace period ago (or never). A node without a Lease is judged by its
    /// condition alone.
    pub(crate) fn expired(&self, node: &str) -> bool {
        match self.renewals.get(node) {
            None => false,
            Some(None) => true,
            Some(Some(renewed)) => self.now.duration_since(*renewed).unsigned_abs() > self.grace,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    renewals: Arc<Renewals>,
    relisting: Option<Renewals>,
    synced: bool,
    failing: bool,
}

/// The node Leases as a watch delivers them. Clones share them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Leases {
    state: Arc<Mutex<State>>,
}

impl Leases {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// Follows the Leases until dropped (failed watches are retried with back-off).
    pub(crate) async fn follow(&self, client: Client) {
        let api: Api<NodeLease> = Api::namespaced(client, NODE_LEASE_NAMESPACE);
        watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .for_each(|event| {
                let mut state = self.lock();
                state.failing = event.is_err();
                if let Ok(event) = event {
                    state.apply(event);
                }
                std::future::ready(())
            })
            .await;
    }

    /// The Leases as of now, judged against `grace`: the watch's view when it is complete and
    /// working, else listed from the API.
    pub(crate) async fn view(
        &self,
        client: &Client,
        now: Timestamp,
        grace: Duration,
    ) -> Result<LeaseView, kube::Error> {
        let current = {
            let state = self.lock();
            (state.synced && !state.failing).then(|| state.renewals.clone())
        };
        let renewals = match current {
            Some(renewals) => renewals,
            None => {
                let api: Api<NodeLease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
                let list = api.list(&ListParams::default()).await?;
                Arc::new(
                    list.items
                        .iter()
                        .map(|l| (l.name().to_owned(), l.renewed()))
                        .collect(),
                )
            }
        };
        Ok(LeaseView {
            renewals,
            now,
            grace,
        })
    }
}

impl State {
    fn apply(&mut self, event: Event<NodeLease>) {
        match event {
            Event::Init => self.relisting = Some(Renewals::new()),
            Event::InitApply(lease) => {
                let name = lease.metadata.name.clone().unwrap_or_default();
                match &mut self.relisting {
                    Some(relisting) => {
                        relisting.insert(name, lease.renewed());
                    }
                    None => {
                        Arc::make_mut(&mut self.renewals).insert(name, lease.renewed());
                    }
                }
            }
            Event::InitDone => {
                if let Some(relisted) = self.relisting.take() {
                    self.renewals = Arc::new(relisted);
                }
                self.synced = true;
            }
            Event::Apply(lease) => {
                let name = lease.metadata.name.clone().unwrap_or_default();
                Arc::make_mut(&mut self.renewals).insert(name, lease.renewed());
            }
            Event::Delete(lease) => {
                let name = lease.metadata.name.clone().unwrap_or_default();
                Arc::make_mut(&mut self.renewals).remove(&name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn lease(name: &str, renewed: Option<i64>) -> NodeLease {
        NodeLease::new(name, renewed.map(at), None)
    }

    #[test]
    fn a_lease_older_than_the_grace_period_contradicts_ready() {
        let mut state = State::default();
        state.apply(Event::Init);
        state.apply(Event::InitApply(lease("fresh", Some(100))));
        state.apply(Event::InitApply(lease("stale", Some(50))));
        state.apply(Event::InitApply(lease("never", None)));
        state.apply(Event::InitDone);
        let view = LeaseView {
            renewals: state.renewals.clone(),
            now: at(140),
            grace: Duration::from_secs(40),
        };
        assert!(
            !view.expired("fresh"),
            "renewed 40 s ago: within the grace period"
        );
        assert!(view.expired("stale"));
        assert!(view.expired("never"));
        assert!(!view.expired("no-lease"), "no Lease: the condition decides");
        // The stale one renews; a relist drops the ones gone.
        state.apply(Event::Apply(lease("stale", Some(139))));
        state.apply(Event::Init);
        state.apply(Event::InitApply(lease("stale", Some(139))));
        state.apply(Event::InitDone);
        let view = LeaseView {
            renewals: state.renewals.clone(),
            now: at(140),
            grace: Duration::from_secs(40),
        };
        assert!(!view.expired("stale"));
        assert!(!view.expired("never"), "gone from the relist");
    }
}
