//! The Machines the prober reads, from a watch that runs beside the probes. DWD reads Machines
//! through its controller manager's cached client (an informer on the seed) and lists only Nodes
//! and Leases at each probe; listing every Machine at every probe was the largest share of what a
//! 1,000-node probe decoded. A probe that comes before the watch's first complete list waits for
//! it, at most one probe interval, as a cached read waits for its informer to sync.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use inplace_api::crd::Machine;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use rackproof_clock::Clock;
use rackproof_std::LockExt;
use tokio::sync::watch;

use crate::error::Error;
use crate::probe::{MachineFacts, MachineItem};

/// What the Machine watch has shown so far.
pub(crate) struct Machines {
    namespace: String,
    state: Mutex<State>,
    synced: watch::Sender<bool>,
}

#[derive(Debug, Default)]
struct State {
    /// Each Machine's facts by Machine name (`None`: it has no `node` label).
    current: BTreeMap<String, Option<MachineFacts>>,
    /// A list in progress (the first, or a relist after the watch fell behind): what it brought.
    listing: Option<BTreeMap<String, Option<MachineFacts>>>,
    /// The watch's last error since its last complete list.
    last_error: Option<String>,
}

impl Machines {
    /// An empty cache of the Machines in `namespace`; [`Machines::follow`] fills it.
    pub(crate) fn new(namespace: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            state: Mutex::default(),
            synced: watch::Sender::new(false),
        }
    }

    /// Keeps the cache up to date until dropped; a failed watch is retried with back-off.
    pub(crate) async fn follow(&self, client: Client) {
        let api: Api<MachineItem> = Api::namespaced(client, &self.namespace);
        let mut events = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            self.apply(event);
        }
    }

    fn apply(&self, event: Result<Event<MachineItem>, watcher::Error>) {
        let mut state = self.state.locked();
        match event {
            Ok(Event::Init) => state.listing = Some(BTreeMap::new()),
            Ok(Event::InitApply(machine)) => {
                if let Some(listing) = &mut state.listing {
                    listing.insert(name(&machine), MachineFacts::of(&machine));
                }
            }
            Ok(Event::InitDone) => {
                if let Some(listing) = state.listing.take() {
                    state.current = listing;
                }
                state.last_error = None;
                drop(state);
                self.synced.send_replace(true);
            }
            Ok(Event::Apply(machine)) => {
                state
                    .current
                    .insert(name(&machine), MachineFacts::of(&machine));
            }
            Ok(Event::Delete(machine)) => {
                state.current.remove(&name(&machine));
            }
            Err(error) => {
                tracing::debug!(namespace = %self.namespace, error = %error, "machine watch failed, retrying with back-off");
                state.last_error = Some(error.to_string());
            }
        }
    }

    /// The facts of every Machine that backs a node, once the watch has listed them all; waits
    /// at most `wait` for that first list.
    pub(crate) async fn facts(
        &self,
        clock: &Clock,
        wait: Duration,
    ) -> Result<Vec<MachineFacts>, Error> {
        let mut synced = self.synced.subscribe();
        let listed = matches!(
            clock.timeout(wait, synced.wait_for(|synced| *synced)).await,
            Ok(Ok(_))
        );
        let state = self.state.locked();
        if !listed {
            return Err(Error::MachinesNotListed {
                namespace: self.namespace.clone(),
                waited: wait,
                last_error: state.last_error.clone(),
            });
        }
        Ok(state.current.values().flatten().cloned().collect())
    }
}

fn name(machine: &MachineItem) -> String {
    machine.metadata.name.clone().unwrap_or_default()
}

/// `machine.sapcloud.io/v1alpha1` Machines (names as [`Machine`] has them), decoded as
/// [`MachineItem`].
impl kube::Resource for MachineItem {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Machine::kind(&())
    }

    fn group(_: &()) -> Cow<'_, str> {
        Machine::group(&())
    }

    fn version(_: &()) -> Cow<'_, str> {
        Machine::version(&())
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Machine::plural(&())
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(name: &str, node: &str, phase: &str) -> MachineItem {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "resourceVersion": "1", "labels": {"node": node}},
            "status": {"currentStatus": {"phase": phase}},
        }))
        .unwrap()
    }

    fn shown(machines: &Machines) -> Vec<(String, String)> {
        let state = machines.state.lock().unwrap();
        state
            .current
            .values()
            .flatten()
            .map(|m| (m.node.clone(), m.phase.clone()))
            .collect()
    }

    /// A relist replaces what the cache showed only once complete; changes and deletions in
    /// between apply as they come.
    #[test]
    fn the_cache_follows_lists_changes_and_deletions() {
        let machines = Machines::new("ns");
        assert!(!*machines.synced.borrow());
        machines.apply(Ok(Event::Init));
        machines.apply(Ok(Event::InitApply(machine("m-a", "a", "Running"))));
        machines.apply(Ok(Event::InitApply(machine("m-b", "b", "Running"))));
        assert!(
            shown(&machines).is_empty(),
            "nothing shows before the list completes"
        );
        machines.apply(Ok(Event::InitDone));
        assert!(*machines.synced.borrow());
        assert_eq!(
            shown(&machines),
            [
                ("a".into(), "Running".into()),
                ("b".into(), "Running".into())
            ]
        );

        machines.apply(Ok(Event::Apply(machine("m-a", "a", "Failed"))));
        machines.apply(Ok(Event::Delete(machine("m-b", "b", "Running"))));
        assert_eq!(shown(&machines), [("a".into(), "Failed".into())]);

        // A relist after the watch fell behind: the old view stays until the new one is whole.
        machines.apply(Ok(Event::Init));
        machines.apply(Ok(Event::InitApply(machine("m-c", "c", "Running"))));
        assert_eq!(shown(&machines), [("a".into(), "Failed".into())]);
        machines.apply(Ok(Event::InitDone));
        assert_eq!(shown(&machines), [("c".into(), "Running".into())]);
    }

    /// A probe before the first complete list waits for it, then fails saying why.
    #[tokio::test(start_paused = true)]
    async fn a_probe_before_the_first_list_fails_with_the_watch_error() {
        let machines = Machines::new("shoot--x");
        machines.apply(Ok(Event::Init));
        machines.apply(Err(watcher::Error::NoResourceVersion));
        let clock = Clock::simulated(jiff::Timestamp::UNIX_EPOCH);
        let error = machines
            .facts(&clock, Duration::from_secs(10))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("shoot--x") && error.contains("10s"),
            "{error}"
        );
        machines.apply(Ok(Event::InitApply(machine("m-a", "a", "Running"))));
        machines.apply(Ok(Event::InitDone));
        let facts = machines
            .facts(&clock, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(facts.len(), 1);
    }
}
