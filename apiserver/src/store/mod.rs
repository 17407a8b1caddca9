//! The object store: JSON objects keyed by group/resource, namespace and name; one global
//! resourceVersion counter; a bounded event log per group/resource for watches to start from;
//! the registered watches, to which each event is pushed as it is recorded; indexes by uid and
//! by owner uid for garbage collection. Transport-free and synchronous.
//!
//! Watch fan-out: a watch whose field selector pins `metadata.name` or `spec.nodeName` (a node
//! agent watching its own Node, its pods) is indexed by that value, so an event is offered only
//! to the watches of its resource that are unpinned or pinned to the event object's value (before
//! or after the change). Each watch's filter runs once per offered event, and an event's JSON is
//! encoded at most once however many watches receive it.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;

use crate::pointer::At;
use crate::registry::GroupResource;

/// Where an object lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Key {
    pub(crate) gr: GroupResource,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change, as watches replay it.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) rv: u64,
    pub(crate) kind: EventType,
    /// The object after the change (for deletions: as it was, with the deletion's rv).
    pub(crate) object: Arc<Value>,
    /// The object before the change, for selector transitions.
    pub(crate) previous: Option<Arc<Value>>,
    /// The object's encoding (see [`Slot::members_json`]), shared by every watch it goes to
    /// and, for a write, with the slot the object is stored in.
    json: Arc<OnceLock<Bytes>>,
    /// The values of the [`INDEXED_FIELDS`] in the object and in the previous object: a watch
    /// pinned to any other value never sees this event.
    pins: Vec<(&'static str, String)>,
}

impl Event {
    fn new(
        rv: u64,
        kind: EventType,
        object: Arc<Value>,
        previous: Option<Arc<Value>>,
        json: Arc<OnceLock<Bytes>>,
    ) -> Self {
        let mut pins = Vec::with_capacity(2 * INDEXED_FIELDS.len());
        for field in INDEXED_FIELDS {
            for object in std::iter::once(&object).chain(previous.as_ref()) {
                let pin = (field, crate::selector::field_value(object, field));
                if !pins.contains(&pin) {
                    pins.push(pin);
                }
            }
        }
        Self {
            rv,
            kind,
            object,
            previous,
            json,
            pins,
        }
    }

    /// Whether a watch pinned to `pin` (or unpinned) may see this event.
    fn may_reach(&self, pin: Option<&(&'static str, String)>) -> bool {
        pin.is_none_or(|pin| self.pins.contains(pin))
    }

    /// The object's members except `apiVersion` and `kind`, encoded once.
    pub(crate) fn members_json(&self) -> &Bytes {
        self.json.get_or_init(|| members_json(&self.object))
    }

    /// What a watch with filter `matches` sees of this event: the object entering the filter is
    /// ADDED, leaving it DELETED.
    pub(crate) fn seen_as(&self, matches: &dyn Fn(&Value) -> bool) -> Option<&'static str> {
        let now = matches(&self.object);
        let before = self.previous.as_ref().is_some_and(|p| matches(p));
        match self.kind {
            EventType::Added if now => Some("ADDED"),
            EventType::Modified if now && before => Some("MODIFIED"),
            EventType::Modified if now => Some("ADDED"),
            EventType::Modified if before => Some("DELETED"),
            EventType::Deleted if before => Some("DELETED"),
            _ => None,
        }
    }
}

/// The fields a watch can be indexed by (when its field selector pins one of them).
pub(crate) const INDEXED_FIELDS: [&str; 2] = ["metadata.name", "spec.nodeName"];

/// A watch's filter (namespace, label and field selectors).
pub(crate) type Matcher = Box<dyn Fn(&Value) -> bool + Send>;

/// What a registered watch receives: how it sees the event, and the event.
pub(crate) type Delivery = (&'static str, Arc<Event>);

struct Watcher {
    gr: GroupResource,
    pin: Option<(&'static str, String)>,
    matches: Matcher,
    sender: tokio::sync::mpsc::Sender<Delivery>,
}

/// The registered watches, by resource and pinned field value. Ordered maps: the delivery order
/// is the registration order, so simulated runs stay reproducible.
#[derive(Default)]
struct Watchers {
    next: u64,
    all: BTreeMap<u64, Watcher>,
    unpinned: HashMap<GroupResource, BTreeSet<u64>>,
    pinned: HashMap<(GroupResource, &'static str, String), BTreeSet<u64>>,
}

impl std::fmt::Debug for Watchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watchers")
            .field("count", &self.all.len())
            .finish_non_exhaustive()
    }
}

impl Watchers {
    fn add(&mut self, watcher: Watcher) -> u64 {
        self.next += 1;
        let id = self.next;
        match &watcher.pin {
            Some((field, value)) => self
                .pinned
                .entry((watcher.gr.clone(), field, value.clone()))
                .or_default()
                .insert(id),
            None => self
                .unpinned
                .entry(watcher.gr.clone())
                .or_default()
                .insert(id),
        };
        self.all.insert(id, watcher);
        id
    }

    fn remove(&mut self, id: u64) {
        let Some(watcher) = self.all.remove(&id) else {
            return;
        };
        match watcher.pin {
            Some((field, value)) => {
                let key = (watcher.gr, field, value);
                if let Some(set) = self.pinned.get_mut(&key) {
                    set.remove(&id);
                    if set.is_empty() {
                        self.pinned.remove(&key);
                    }
                }
            }
            None => {
                if let Some(set) = self.unpinned.get_mut(&watcher.gr) {
                    set.remove(&id);
                }
            }
        }
    }

    fn dispatch(&mut self, gr: &GroupResource, event: &Arc<Event>) {
        if self.all.is_empty() {
            return;
        }
        let mut candidates: BTreeSet<u64> = self.unpinned.get(gr).cloned().unwrap_or_default();
        for (field, value) in &event.pins {
            if let Some(set) = self.pinned.get(&(gr.clone(), *field, value.clone())) {
                candidates.extend(set.iter().copied());
            }
        }
        let mut gone = Vec::new();
        for id in candidates {
            let Some(watcher) = self.all.get(&id) else {
                continue;
            };
            // A full queue means the watch fell behind: it is dropped here, which ends its
            // stream once the queued events are out, as kube-apiserver closes a watcher it
            // cannot deliver to; the client lists again.
            if let Some(kind) = event.seen_as(&*watcher.matches)
                && watcher.sender.try_send((kind, event.clone())).is_err()
            {
                gone.push(id);
            }
        }
        for id in gone {
            self.remove(id);
        }
    }
}

#[derive(Debug, Default)]
struct Log {
    events: VecDeque<Arc<Event>>,
    /// Events with rv ≤ this have been dropped.
    compacted: u64,
}

/// A stored object and, once first read, its JSON serialization without `apiVersion` and
/// `kind` (the fields a response sets per served version), so that lists, gets and the answer
/// to the write splice bytes instead of cloning and re-encoding every object. The write's watch
/// event shares the same cache, so a write is encoded at most once. A write replaces the slot,
/// and with it the cached bytes.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) object: Arc<Value>,
    json: Arc<OnceLock<Bytes>>,
}

impl Slot {
    /// The object's members except `apiVersion` and `kind`, as JSON text without the
    /// surrounding braces (empty for an object with no other members).
    pub(crate) fn members_json(&self) -> &Bytes {
        self.json.get_or_init(|| members_json(&self.object))
    }
}

/// `object`'s members except `apiVersion` and `kind`, encoded, without the braces.
pub(crate) fn members_json(object: &Value) -> Bytes {
    struct Members<'a>(&'a serde_json::Map<String, Value>);
    impl serde::Serialize for Members<'_> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = serializer.serialize_map(None)?;
            for (key, value) in self
                .0
                .iter()
                .filter(|(key, _)| !matches!(key.as_str(), "apiVersion" | "kind"))
            {
                map.serialize_entry(key, value)?;
            }
            map.end()
        }
    }
    let Some(map) = object.as_object() else {
        return Bytes::new();
    };
    let mut text = serde_json::to_vec(&Members(map)).unwrap_or_else(|_| b"{}".to_vec());
    // `{...}` → `...`
    text.pop();
    text.remove(0);
    Bytes::from(text)
}

/// A pod write that changed what budgets count: the pod before and after (`None`: absent).
#[derive(Debug, Clone)]
pub(crate) struct PodChange {
    pub(crate) before: Option<Arc<Value>>,
    pub(crate) after: Option<Arc<Value>>,
}

/// The store. Every write bumps the global resourceVersion.
#[derive(Debug)]
pub(crate) struct Store {
    objects: BTreeMap<GroupResource, BTreeMap<(String, String), Slot>>,
    logs: HashMap<GroupResource, Log>,
    rv: u64,
    window: usize,
    by_uid: HashMap<String, Key>,
    dependents: HashMap<String, BTreeSet<Key>>,
    /// Pods by `spec.nodeName` (bound pods only): what a kubelet's or a drain's
    /// `fieldSelector=spec.nodeName=…` list reads instead of every pod.
    pods_by_node: HashMap<String, BTreeSet<(String, String)>>,
    watchers: Watchers,
    /// Per namespace, the pods that appeared, went, or changed their labels or readiness since
    /// the PodDisruptionBudgets were last recomputed (`pdb`).
    counted_pod_changes: BTreeMap<String, Vec<PodChange>>,
}

impl Store {
    /// An empty store keeping the last `window` events of each resource for watches.
    pub(crate) fn new(window: usize) -> Self {
        Self {
            objects: BTreeMap::new(),
            logs: HashMap::new(),
            rv: 1,
            window: window.max(1),
            by_uid: HashMap::new(),
            dependents: HashMap::new(),
            pods_by_node: HashMap::new(),
            watchers: Watchers::default(),
            counted_pod_changes: BTreeMap::new(),
        }
    }

    pub(crate) fn resource_version(&self) -> u64 {
        self.rv
    }

    pub(crate) fn get(&self, key: &Key) -> Option<&Arc<Value>> {
        self.slot(key).map(|slot| &slot.object)
    }

    pub(crate) fn slot(&self, key: &Key) -> Option<&Slot> {
        self.objects
            .get(&key.gr)?
            .get(&(key.namespace.clone(), key.name.clone()))
    }

    /// Objects of `gr` (in `namespace`, if given), ordered by namespace then name, starting
    /// strictly after `after`.
    pub(crate) fn range<'a>(
        &'a self,
        gr: &GroupResource,
        namespace: Option<&'a str>,
        after: Option<(String, String)>,
    ) -> impl Iterator<Item = (&'a (String, String), &'a Arc<Value>)> + 'a {
        self.slots(gr, namespace, after)
            .map(|(key, slot)| (key, &slot.object))
    }

    /// Like [`Store::range`], with the slots (for their cached JSON).
    pub(crate) fn slots<'a>(
        &'a self,
        gr: &GroupResource,
        namespace: Option<&'a str>,
        after: Option<(String, String)>,
    ) -> impl Iterator<Item = (&'a (String, String), &'a Slot)> + 'a {
        let start = range_start(namespace, after);
        self.objects
            .get(gr)
            .into_iter()
            .flat_map(move |map| map.range((start.clone(), std::ops::Bound::Unbounded)))
            .take_while(move |((ns, _), _)| namespace.is_none_or(|want| ns == want))
    }

    /// Like [`Store::slots`] for pods, only those bound to `node`.
    pub(crate) fn pod_slots_on_node<'a>(
        &'a self,
        node: &str,
        namespace: Option<&'a str>,
        after: Option<(String, String)>,
    ) -> impl Iterator<Item = (&'a (String, String), &'a Slot)> + 'a {
        let start = range_start(namespace, after);
        let pods = self.objects.get(&GroupResource {
            group: String::new(),
            resource: "pods".to_owned(),
        });
        self.pods_by_node
            .get(node)
            .into_iter()
            .flat_map(move |keys| keys.range((start.clone(), std::ops::Bound::Unbounded)))
            .take_while(move |(ns, _)| namespace.is_none_or(|want| ns == want))
            .filter_map(move |key| pods.and_then(|pods| pods.get_key_value(key)))
    }

    pub(crate) fn key_of_uid(&self, uid: &str) -> Option<&Key> {
        self.by_uid.get(uid)
    }

    /// Keys of objects with an owner reference to `uid`.
    pub(crate) fn dependents_of(&self, uid: &str) -> Vec<Key> {
        self.dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Writes `object` (creating or replacing), stamping the next resourceVersion. Returns it.
    pub(crate) fn put(&mut self, key: &Key, mut object: Value) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        object["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let object = Arc::new(object);
        let json = Arc::new(OnceLock::new());
        let slot = Slot {
            object: object.clone(),
            json: json.clone(),
        };
        let previous = self
            .objects
            .entry(key.gr.clone())
            .or_default()
            .insert((key.namespace.clone(), key.name.clone()), slot)
            .map(|slot| slot.object);
        match &previous {
            // Most writes (a heartbeat, a status) keep the uid, owners and node: indexed already.
            Some(previous) if same_index_entries(key, previous, &object) => {}
            Some(previous) => {
                self.unindex(key, previous);
                self.index(key, &object);
            }
            None => self.index(key, &object),
        }
        self.note_pod_change(key, previous.as_ref(), Some(&object));
        let kind = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(key, Event::new(rv, kind, object.clone(), previous, json));
        object
    }

    /// Removes an object; the deletion gets its own resourceVersion. Returns the object as deleted.
    pub(crate) fn remove(&mut self, key: &Key) -> Option<Arc<Value>> {
        let previous = self
            .objects
            .get_mut(&key.gr)?
            .remove(&(key.namespace.clone(), key.name.clone()))?
            .object;
        self.unindex(key, &previous);
        self.note_pod_change(key, Some(&previous), None);
        self.rv += 1;
        let rv = self.rv;
        let mut object = (*previous).clone();
        object["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let object = Arc::new(object);
        self.record(
            key,
            Event::new(
                rv,
                EventType::Deleted,
                object.clone(),
                Some(previous),
                Arc::default(),
            ),
        );
        Some(object)
    }

    fn note_pod_change(
        &mut self,
        key: &Key,
        before: Option<&Arc<Value>>,
        after: Option<&Arc<Value>>,
    ) {
        if key.gr.group.is_empty()
            && key.gr.resource == "pods"
            && crate::pdb::counts_differ(before.map(|b| &**b), after.map(|a| &**a))
        {
            self.counted_pod_changes
                .entry(key.namespace.clone())
                .or_default()
                .push(PodChange {
                    before: before.cloned(),
                    after: after.cloned(),
                });
        }
    }

    /// The pods of `namespace` that changed what budgets count since the last call for it, in
    /// the order they changed.
    pub(crate) fn take_counted_pod_changes(&mut self, namespace: &str) -> Vec<PodChange> {
        self.counted_pod_changes
            .remove(namespace)
            .unwrap_or_default()
    }

    fn record(&mut self, key: &Key, event: Event) {
        let window = self.window;
        let event = Arc::new(event);
        self.watchers.dispatch(&key.gr, &event);
        let log = self.logs.entry(key.gr.clone()).or_default();
        log.events.push_back(event);
        while log.events.len() > window {
            if let Some(dropped) = log.events.pop_front() {
                log.compacted = dropped.rv;
            }
        }
    }

    /// Events of `gr` with rv > `since` that a watch pinned to `pin` (see [`Store::watch`]) may
    /// see, or `Err(oldest available)` when some were compacted.
    pub(crate) fn events_since(
        &self,
        gr: &GroupResource,
        since: u64,
        pin: Option<&(&'static str, String)>,
    ) -> Result<Vec<Arc<Event>>, u64> {
        let Some(log) = self.logs.get(gr) else {
            return Ok(Vec::new());
        };
        if since < log.compacted {
            return Err(log.compacted);
        }
        let start = log.events.partition_point(|e| e.rv <= since);
        Ok(log
            .events
            .iter()
            .skip(start)
            .filter(|e| e.may_reach(pin))
            .cloned()
            .collect())
    }

    /// Registers a watch of `gr` with filter `matches`, indexed by `pin` (one of
    /// [`INDEXED_FIELDS`] and the value the filter requires it to have), if given: every event
    /// recorded from now on that the filter sees goes to `sender`. Returns the id for
    /// [`Store::unwatch`]. When `sender`'s queue is full at an event, the watch is dropped (its
    /// sender with it, so its receiver ends after the queued events).
    pub(crate) fn watch(
        &mut self,
        gr: &GroupResource,
        pin: Option<(&'static str, String)>,
        matches: Matcher,
        sender: tokio::sync::mpsc::Sender<Delivery>,
    ) -> u64 {
        self.watchers.add(Watcher {
            gr: gr.clone(),
            pin,
            matches,
            sender,
        })
    }

    /// Forgets a watch.
    pub(crate) fn unwatch(&mut self, id: u64) {
        self.watchers.remove(id);
    }

    fn index(&mut self, key: &Key, object: &Value) {
        if let Some(uid) = object.at("/metadata/uid").and_then(Value::as_str) {
            self.by_uid.insert(uid.to_owned(), key.clone());
        }
        for owner in owner_uids(object) {
            self.dependents
                .entry(owner)
                .or_default()
                .insert(key.clone());
        }
        if let Some(node) = bound_node(key, object) {
            self.pods_by_node
                .entry(node.to_owned())
                .or_default()
                .insert((key.namespace.clone(), key.name.clone()));
        }
    }

    fn unindex(&mut self, key: &Key, object: &Value) {
        if let Some(uid) = object.at("/metadata/uid").and_then(Value::as_str)
            && self.by_uid.get(uid) == Some(key)
        {
            self.by_uid.remove(uid);
        }
        for owner in owner_uids(object) {
            if let Some(set) = self.dependents.get_mut(&owner) {
                set.remove(key);
                if set.is_empty() {
                    self.dependents.remove(&owner);
                }
            }
        }
        if let Some(node) = bound_node(key, object)
            && let Some(set) = self.pods_by_node.get_mut(node)
        {
            set.remove(&(key.namespace.clone(), key.name.clone()));
            if set.is_empty() {
                self.pods_by_node.remove(node);
            }
        }
    }
}

/// Where a range of (namespace, name) keys starts: after the continue key, else at `namespace`.
fn range_start(
    namespace: Option<&str>,
    after: Option<(String, String)>,
) -> std::ops::Bound<(String, String)> {
    use std::ops::Bound;
    match after {
        Some(key) => Bound::Excluded(key),
        None => match namespace {
            Some(ns) => Bound::Included((ns.to_owned(), String::new())),
            None => Bound::Unbounded,
        },
    }
}

/// The node a pod is bound to; `None` for other kinds and unbound pods.
fn bound_node<'a>(key: &Key, object: &'a Value) -> Option<&'a str> {
    (key.gr.group.is_empty() && key.gr.resource == "pods")
        .then(|| {
            object
                .get("spec")
                .and_then(|s| s.get("nodeName"))
                .and_then(Value::as_str)
        })
        .flatten()
        .filter(|node| !node.is_empty())
}

/// Whether the indexes hold the same entries for `a` as for `b` at `key`: same uid, owners
/// and bound node.
fn same_index_entries(key: &Key, a: &Value, b: &Value) -> bool {
    fn uid(object: &Value) -> Option<&str> {
        object.at("/metadata/uid").and_then(Value::as_str)
    }
    fn owners(object: &Value) -> impl Iterator<Item = &str> {
        object
            .at("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("uid").and_then(Value::as_str))
    }
    uid(a) == uid(b) && owners(a).eq(owners(b)) && bound_node(key, a) == bound_node(key, b)
}

fn owner_uids(object: &Value) -> Vec<String> {
    object
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}
