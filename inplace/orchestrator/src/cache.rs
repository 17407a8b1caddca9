//! Watch-backed caches of the MachineSets, Machines and Nodes that a pass reads, with
//! read-your-own-writes: a pass reads a cache only once it shows every write the orchestrator
//! made to that kind, else it lists from the API as before.
//!
//! Why caches: a pass used to list every Machine three times and every Node twice, and with a
//! thousand nodes in a rollout a pass runs every few tens of milliseconds, so decoding the same
//! unchanged objects again dominated the orchestrator's cost (O(nodes) decodes per pass, O(nodes)
//! passes per rollout). The watches that wake the loop decode every change anyway; keeping what
//! they decode makes a pass read memory, and each change is decoded once.
//!
//! Why that stays correct:
//!
//! - **Own writes are never missed.** Every write to a cached kind records the resourceVersion the
//!   API server returned ([`Cache::wrote`]), every delete the object it removed
//!   ([`Cache::deleting`]). [`Cache::read`] waits until the watch delivered an event at or after
//!   the highest recorded resourceVersion (events of one kind arrive in resourceVersion order, so
//!   every earlier write is then applied) and until the deleted objects are gone or terminating.
//!   A pass therefore never decides on a state older than its own last write, e.g. never selects
//!   nodes again before it sees the ones it selected.
//! - **Other writers' changes** arrive with the watch's delay, exactly as they arrived between a
//!   list and the decision made on it before. Every write is idempotent, conditions and statuses
//!   are written with read-modify-replace on the resourceVersion, and the next pass acts on what
//!   it then sees, as before.
//! - **When the cache cannot prove it is current** — the watch has not delivered a complete list
//!   or its last attempt failed (then without waiting; a watch that fails would otherwise hide
//!   other writers' changes for as long as it fails), has not caught up within [`CATCH_UP`], or the server's resourceVersions are not numbers (they are opaque to
//!   clients; kube-apiserver's and the embedded server's are etcd-style counters) — the pass lists
//!   from the API, as it always did.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use inplace_api::resource_version;
use inplace_api::unmanaged::{self, Unmanaged};
use kube::api::ListParams;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use rackproof_clock::Clock;
use rackproof_std::LockExt;
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

/// How long a read waits for the watch to deliver the orchestrator's own writes before it lists
/// from the API instead.
pub(crate) const CATCH_UP: Duration = Duration::from_secs(2);

/// An object's place in a cache: namespace (empty for cluster-scoped kinds) and name, in the
/// order the API server lists them.
type Key = (String, String);

fn key_of<K: Resource>(object: &K) -> Key {
    (
        object.meta().namespace.clone().unwrap_or_default(),
        object.meta().name.clone().unwrap_or_default(),
    )
}

/// A resourceVersion as a number, when the server's are numbers.
fn version_of<K: Resource>(object: &K) -> Option<u64> {
    object
        .meta()
        .resource_version
        .as_deref()
        .and_then(resource_version::as_number)
}

/// What a cache holds.
#[derive(Debug)]
struct State<K> {
    objects: BTreeMap<Key, Arc<K>>,
    /// The objects of a relist in progress (between the watch's `Init` and `InitDone`).
    relisting: Option<BTreeMap<Key, Arc<K>>>,
    /// The watch has delivered a complete list at least once.
    synced: bool,
    /// The highest resourceVersion the watch delivered.
    seen: u64,
    /// The highest resourceVersion of the orchestrator's own writes.
    written: u64,
    /// Objects the orchestrator deleted that the cache still shows alive.
    deleting: BTreeSet<Key>,
    /// A write returned a resourceVersion that is not a number: the cache can never prove it is
    /// current, so every read lists.
    opaque: bool,
    /// The watch's last attempt failed, so other writers' changes may not be arriving at all;
    /// reads list until it delivers an event again (a resumed watch replays what it missed).
    failing: bool,
}

impl<K: Resource> State<K> {
    fn current(&self) -> bool {
        self.synced && !self.opaque && self.seen >= self.written && self.deleting.is_empty()
    }

    fn saw(&mut self, object: &K) {
        match version_of(object) {
            Some(rv) => self.seen = self.seen.max(rv),
            None => self.opaque |= object.meta().resource_version.is_some(),
        }
    }

    /// Applies one watch event; returns the object it added or changed.
    fn apply(&mut self, event: Event<K>) -> Option<Arc<K>> {
        let mut applied = None;
        match event {
            Event::Init => self.relisting = Some(BTreeMap::new()),
            Event::InitApply(object) => {
                self.saw(&object);
                let object = Arc::new(object);
                applied = Some(object.clone());
                match &mut self.relisting {
                    Some(relisting) => relisting.insert(key_of(&*object), object),
                    None => self.objects.insert(key_of(&*object), object),
                };
            }
            Event::InitDone => {
                if let Some(relisted) = self.relisting.take() {
                    self.objects = relisted;
                }
                self.synced = true;
            }
            Event::Apply(object) => {
                self.saw(&object);
                let key = key_of(&object);
                if object.meta().deletion_timestamp.is_some() {
                    self.deleting.remove(&key);
                }
                let object = Arc::new(object);
                applied = Some(object.clone());
                self.objects.insert(key, object);
            }
            Event::Delete(object) => {
                self.saw(&object);
                let key = key_of(&object);
                self.deleting.remove(&key);
                self.objects.remove(&key);
            }
        }
        // A delete the watch will never report (the object was gone before it was deleted, or a
        // relist no longer holds it) is settled by what the cache shows.
        let objects = &self.objects;
        self.deleting.retain(|key| {
            objects
                .get(key)
                .is_some_and(|o| o.meta().deletion_timestamp.is_none())
        });
        applied
    }
}

/// One kind's cache, fed by [`Cache::follow`]. Clones share it.
#[derive(Debug)]
pub(crate) struct Cache<K> {
    state: Arc<Mutex<State<K>>>,
    changed: Arc<Notify>,
}

impl<K> Clone for Cache<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            changed: self.changed.clone(),
        }
    }
}

impl<K> Default for Cache<K> {
    fn default() -> Self {
        let state = State {
            objects: BTreeMap::new(),
            relisting: None,
            synced: false,
            seen: 0,
            written: 0,
            deleting: BTreeSet::new(),
            opaque: false,
            failing: false,
        };
        Self {
            state: Arc::new(Mutex::new(state)),
            changed: Arc::new(Notify::new()),
        }
    }
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.locked()
    }

    /// Applies the watch's events as they come; yields one item per event: the object it added
    /// or changed, if any (the loop wakes on them). Failed watches are retried with back-off by
    /// the stream; their errors are yielded too.
    /// The objects are kept without their managedFields, which no controller reads.
    pub(crate) fn follow(
        &self,
        api: Api<Unmanaged<K>>,
    ) -> impl futures::Stream<Item = Result<Option<Arc<K>>, watcher::Error>> + Send + 'static {
        let cache = self.clone();
        unmanaged::watcher(api, watcher::Config::default())
            .default_backoff()
            .map(move |event| {
                let applied = {
                    let mut state = cache.lock();
                    state.failing = event.is_err();
                    state.apply(event?)
                };
                cache.changed.notify_waiters();
                Ok(applied)
            })
    }

    /// Records a write the API server acknowledged with resourceVersion `rv`.
    pub(crate) fn wrote(&self, rv: Option<&str>) {
        let mut state = self.lock();
        match rv.and_then(resource_version::as_number) {
            Some(rv) => state.written = state.written.max(rv),
            None => state.opaque = true,
        }
    }

    /// The version of the last write recorded, which reads wait for.
    #[cfg(test)]
    pub(crate) fn awaited(&self) -> u64 {
        self.lock().written
    }

    /// Records that the orchestrator deleted the object `namespace`/`name`.
    pub(crate) fn deleting(&self, namespace: &str, name: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        let mut state = self.lock();
        if state
            .objects
            .get(&key)
            .is_some_and(|o| o.meta().deletion_timestamp.is_none())
        {
            state.deleting.insert(key);
        }
    }

    /// Every object, in the API server's list order, as of at least the orchestrator's last
    /// write: from the cache once it shows that write (waiting up to [`CATCH_UP`] for it), else
    /// listed from `api`.
    pub(crate) async fn read(
        &self,
        clock: &Clock,
        api: &Api<K>,
    ) -> Result<Vec<Arc<K>>, kube::Error> {
        let usable = {
            let state = self.lock();
            state.synced && !state.opaque && !state.failing
        };
        if !usable {
            // A watch that has never delivered a complete list, or is failing now, is no reason
            // to wait: the pass reads the API, as it did before there were caches.
            return list_afresh(api).await;
        }
        let caught_up = clock
            .timeout(CATCH_UP, async {
                loop {
                    let changed = self.changed.notified();
                    tokio::pin!(changed);
                    changed.as_mut().enable();
                    {
                        let state = self.lock();
                        if state.current() {
                            return state.objects.values().cloned().collect::<Vec<_>>();
                        }
                    }
                    changed.await;
                }
            })
            .await;
        match caught_up {
            Ok(objects) => Ok(objects),
            Err(_) => {
                tracing::debug!(kind = %K::kind(&()), "cache not current; listing from the API");
                list_afresh(api).await
            }
        }
    }
}

/// Every object `api` lists, read from the API server.
async fn list_afresh<K: Clone + DeserializeOwned + Debug>(
    api: &Api<K>,
) -> Result<Vec<Arc<K>>, kube::Error> {
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(Arc::new)
        .collect())
}

/// Nodes by name, as a pass read them.
pub(crate) type NodesByName =
    std::collections::HashMap<String, Arc<k8s_openapi::api::core::v1::Node>>;

/// The caches one orchestrator keeps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caches {
    pub(crate) sets: Cache<inplace_api::crd::MachineSet>,
    pub(crate) machines: Cache<inplace_api::crd::Machine>,
    pub(crate) nodes: Cache<k8s_openapi::api::core::v1::Node>,
}

/// The kinds the orchestrator caches.
pub(crate) trait Cached:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
    /// This kind's cache.
    fn cache(caches: &Caches) -> &Cache<Self>;
}

impl Cached for inplace_api::crd::MachineSet {
    fn cache(caches: &Caches) -> &Cache<Self> {
        &caches.sets
    }
}

impl Cached for inplace_api::crd::Machine {
    fn cache(caches: &Caches) -> &Cache<Self> {
        &caches.machines
    }
}

impl Cached for k8s_openapi::api::core::v1::Node {
    fn cache(caches: &Caches) -> &Cache<Self> {
        &caches.nodes
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn object(name: &str, rv: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                resource_version: Some(rv.to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn synced(objects: &[ConfigMap]) -> Cache<ConfigMap> {
        let cache = Cache::default();
        let mut state = cache.lock();
        state.apply(Event::Init);
        for o in objects {
            state.apply(Event::InitApply(o.clone()));
        }
        state.apply(Event::InitDone);
        drop(state);
        cache
    }

    fn names(cache: &Cache<ConfigMap>) -> Vec<String> {
        cache
            .lock()
            .objects
            .values()
            .map(|o| o.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn a_cache_is_current_only_once_it_shows_the_last_write() {
        let unsynced: Cache<ConfigMap> = Cache::default();
        assert!(!unsynced.lock().current(), "no complete list yet");
        let cache = synced(&[object("a", "5")]);
        assert!(cache.lock().current());
        cache.wrote(Some("9"));
        assert!(!cache.lock().current(), "the write at 9 has not arrived");
        cache.lock().apply(Event::Apply(object("a", "7")));
        assert!(
            !cache.lock().current(),
            "an older event does not cover the write"
        );
        cache.lock().apply(Event::Apply(object("b", "9")));
        assert!(cache.lock().current());
        assert_eq!(names(&cache), ["a", "b"]);
    }

    #[test]
    fn a_deleted_object_keeps_the_cache_stale_until_the_watch_reports_it() {
        let cache = synced(&[object("a", "5"), object("b", "6")]);
        cache.deleting("ns", "a");
        assert!(!cache.lock().current());
        cache.lock().apply(Event::Delete(object("a", "8")));
        assert!(cache.lock().current());
        assert_eq!(names(&cache), ["b"]);
        // Deleting what the cache does not hold leaves nothing to wait for.
        cache.deleting("ns", "gone");
        assert!(cache.lock().current());
    }

    #[test]
    fn a_relist_replaces_what_the_cache_held() {
        let cache = synced(&[object("a", "5"), object("b", "6")]);
        let mut state = cache.lock();
        state.apply(Event::Init);
        state.apply(Event::InitApply(object("c", "20")));
        assert_eq!(
            state.objects.len(),
            2,
            "the old objects serve reads until the relist is complete"
        );
        state.apply(Event::InitDone);
        drop(state);
        assert_eq!(names(&cache), ["c"]);
    }

    #[test]
    fn opaque_resource_versions_make_the_cache_never_current() {
        let cache = synced(&[object("a", "5")]);
        cache.wrote(Some("not-a-number"));
        assert!(!cache.lock().current());
        cache.lock().apply(Event::Apply(object("a", "999")));
        assert!(!cache.lock().current());
    }
}
