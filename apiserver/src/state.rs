//! The server's mutable core: store, registry, authorization settings and the name/uid
//! generator, plus the built-in controllers that run synchronously after every write
//! (CRD serving, PodDisruptionBudget status, finalizers, garbage collection, namespace cleanup).

use std::collections::BTreeSet;
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::auth::AuthConfig;
use crate::crd;
use crate::error::ApiError;
use crate::pdb;
use crate::pointer::At;
use crate::registry::{GroupResource, Registry, Resource, split_api_version};
use crate::store::{Key, Store};

/// Namespaces every cluster starts with.
pub(crate) const INITIAL_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The port the `kubernetes` Service forwards to: kube-apiserver's default secure port. (The
/// embedded server's HTTPS listeners take ports of their own; clients reach it by their
/// kubeconfig, as `kubectl cluster-info` prints.)
const KUBERNETES_TARGET_PORT: u16 = 6443;

/// Everything behind the server's lock.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) store: Store,
    pub(crate) registry: Registry,
    pub(crate) auth: AuthConfig,
    pub(crate) watches: crate::watch::WatchBook,
    /// Each PodDisruptionBudget's counts of its pods, kept between pod changes.
    pub(crate) budget_tallies: std::collections::HashMap<Key, pdb::Tally>,
    random: u64,
}

/// The storage key of `resource`'s object `name` in `namespace`.
pub(crate) fn key(resource: &Resource, namespace: &str, name: &str) -> Key {
    Key {
        gr: resource.group_resource(),
        namespace: if resource.namespaced {
            namespace.to_owned()
        } else {
            String::new()
        },
        name: name.to_owned(),
    }
}

pub(crate) fn gr(group: &str, resource: &str) -> GroupResource {
    GroupResource {
        group: group.to_owned(),
        resource: resource.to_owned(),
    }
}

/// RFC 3339 with second precision, as `metav1.Time` is serialized.
pub(crate) fn format_time(time: Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub(crate) fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

fn finalizers(object: &Value) -> Vec<String> {
    object
        .at("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl State {
    pub(crate) fn new(window: usize, seed: u64, now: &str) -> Self {
        let mut state = Self {
            store: Store::new(window),
            registry: Registry::builtin(),
            auth: AuthConfig::default(),
            watches: crate::watch::WatchBook::default(),
            budget_tallies: std::collections::HashMap::new(),
            random: seed ^ 0x9e37_79b9_7f4a_7c15,
        };
        let namespaces = state
            .registry
            .get("", "v1", "namespaces")
            .expect("namespaces are built in");
        for name in INITIAL_NAMESPACES {
            let uid = state.uid();
            let object = json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "uid": uid, "creationTimestamp": now, "labels": {"kubernetes.io/metadata.name": name}},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            });
            state.store.put(&key(&namespaces, "", name), object);
        }
        // The `kubernetes` Service's uid comes from a stream of its own, so that a seed names
        // every later object as it did before the Service existed.
        let stream = std::mem::replace(&mut state.random, seed ^ 0x6b75_6265_7365_7276);
        let uid = state.uid();
        state.random = stream;
        let services = state
            .registry
            .get("", "v1", "services")
            .expect("services are built in");
        state.store.put(
            &key(&services, "default", "kubernetes"),
            crate::kinds::service::kubernetes(&uid, now, KUBERNETES_TARGET_PORT),
        );
        state
    }

    fn next_random(&mut self) -> u64 {
        // splitmix64: deterministic for a seed, so simulated runs repeat exactly.
        self.random = self.random.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn uid(&mut self) -> String {
        let bytes =
            ((u128::from(self.next_random()) << 64) | u128::from(self.next_random())).to_be_bytes();
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .to_string()
    }

    /// Five characters from kube-apiserver's generateName alphabet.
    pub(crate) fn name_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut n = self.next_random();
        (0..5)
            .map(|_| {
                let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
                n /= ALPHABET.len() as u64;
                c
            })
            .collect()
    }

    /// Stores `object` and runs the built-in controllers it affects.
    pub(crate) fn write(
        &mut self,
        resource: &Resource,
        key: &Key,
        object: Value,
        now: &str,
    ) -> Result<Arc<Value>, ApiError> {
        if resource.group == "apiextensions.k8s.io"
            && resource.plural == "customresourcedefinitions"
        {
            self.serve_crd(&object)?;
        }
        let deleting = object.at("/metadata/deletionTimestamp").is_some();
        let grace_over = object
            .at("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0;
        if deleting && grace_over && finalizers(&object).is_empty() && self.store.get(key).is_some()
        {
            // The write removes the last finalizer: like kube-apiserver, the object is deleted
            // instead of stored (watchers see only DELETED, with the object as last stored), and
            // the writer gets the object it wrote.
            self.purge(key, now);
            return Ok(Arc::new(object));
        }
        let stored = self.store.put(key, object);
        self.after_change(key, now);
        Ok(stored)
    }

    fn serve_crd(&mut self, crd: &Value) -> Result<(), ApiError> {
        let resources = crd::resources(crd)?;
        if crd.at("/metadata/deletionTimestamp").is_some() {
            return Ok(());
        }
        if let Some(first) = resources.first() {
            let builtin = Registry::builtin();
            if builtin.any_version(&first.group, &first.plural).is_some() {
                return Err(ApiError::invalid(
                    "apiextensions.k8s.io",
                    "CustomResourceDefinition",
                    meta_str(crd, "name").unwrap_or_default(),
                    vec![(
                        "spec.group".into(),
                        "Invalid value: the group is served by a built-in API".into(),
                    )],
                ));
            }
            self.registry.remove(&first.group, &first.plural);
        }
        for resource in resources {
            self.registry.insert(resource);
        }
        Ok(())
    }

    /// Removes an object for good, then lets dependents and namespaces react.
    pub(crate) fn purge(&mut self, key: &Key, now: &str) -> Option<Arc<Value>> {
        let removed = self.store.remove(key)?;
        if key.gr.group == "apiextensions.k8s.io"
            && key.gr.resource == "customresourcedefinitions"
            && let (Some(group), Some(plural)) = (
                removed.at("/spec/group").and_then(Value::as_str),
                removed.at("/spec/names/plural").and_then(Value::as_str),
            )
        {
            let gr = gr(group, plural);
            let keys: Vec<Key> = self
                .store
                .range(&gr, None, None)
                .map(|((ns, name), _)| Key {
                    gr: gr.clone(),
                    namespace: ns.clone(),
                    name: name.clone(),
                })
                .collect();
            for k in keys {
                self.store.remove(&k);
            }
            self.registry.remove(group, plural);
        }
        if let Some(uid) = meta_str(&removed, "uid") {
            let uid = uid.to_owned();
            self.collect_garbage(&uid, now);
        }
        self.after_change(key, now);
        // Owners waiting in foreground deletion for this dependent may now go.
        let owners: Vec<String> = removed
            .at("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| r.get("uid").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        for owner in owners {
            if let Some(owner_key) = self.store.key_of_uid(&owner).cloned()
                && let Some(object) = self.store.get(&owner_key).cloned()
            {
                self.settle_deleting(&owner_key, &object, now);
            }
        }
        Some(removed)
    }

    fn after_change(&mut self, key: &Key, now: &str) {
        if key.gr.group.is_empty() && key.gr.resource == "pods" {
            pdb::refresh_namespace(self, &key.namespace, pdb::Trigger::Pod, now);
        } else if key.gr.group == "policy" && key.gr.resource == "poddisruptionbudgets" {
            pdb::refresh_namespace(self, &key.namespace, pdb::Trigger::Budget, now);
        } else if matches!(
            (key.gr.group.as_str(), key.gr.resource.as_str()),
            ("apps", "replicasets" | "statefulsets") | ("", "replicationcontrollers")
        ) {
            pdb::refresh_namespace(self, &key.namespace, pdb::Trigger::Controller, now);
        }
        if !key.namespace.is_empty() {
            self.finish_namespace(&key.namespace, now);
        }
        if let Some(object) = self.store.get(key).cloned() {
            self.settle_deleting(key, &object, now);
        }
    }

    /// Deletes the object at `key` the way a DELETE request does (without graceful pod
    /// handling, which the handler decides): finalizers keep it with a deletionTimestamp.
    pub(crate) fn delete(
        &mut self,
        key: &Key,
        propagation: Option<&str>,
        now: &str,
    ) -> Option<Arc<Value>> {
        let current = self.store.get(key)?.clone();
        let mut object = (*current).clone();
        let mut fins = finalizers(&object);
        let policy = propagation.unwrap_or("Background");
        let has_dependents =
            meta_str(&object, "uid").is_some_and(|uid| !self.store.dependents_of(uid).is_empty());
        match policy {
            "Orphan" if has_dependents && !fins.iter().any(|f| f == "orphan") => {
                fins.push("orphan".to_owned())
            }
            "Foreground" if has_dependents && !fins.iter().any(|f| f == "foregroundDeletion") => {
                fins.push("foregroundDeletion".to_owned())
            }
            _ => {}
        }
        if fins.is_empty() {
            return self.purge(key, now);
        }
        let meta = &mut object["metadata"];
        if meta.get("deletionTimestamp").is_none() {
            meta["deletionTimestamp"] = Value::String(now.to_owned());
            meta["deletionGracePeriodSeconds"] = json!(0);
        }
        meta["finalizers"] = json!(fins);
        if *current == object {
            return Some(current);
        }
        let stored = self.store.put(key, object);
        self.after_change(key, now);
        self.store.get(key).cloned().or(Some(stored))
    }

    /// Deletes a pod as kube-apiserver does: a pod bound to a node (and not terminal) gets a
    /// deletionTimestamp `grace` seconds ahead and stays until its kubelet deletes it with grace
    /// 0; an unbound or terminal pod goes at once (after its finalizers).
    pub(crate) fn delete_pod(
        &mut self,
        key: &Key,
        grace: Option<i64>,
        propagation: Option<&str>,
        now: &str,
    ) -> Option<Arc<Value>> {
        let current = self.store.get(key)?.clone();
        let bound = current
            .at("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let terminal = matches!(
            current.at("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        );
        let default_grace = current
            .at("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30);
        let mut grace = grace.unwrap_or(default_grace).max(0);
        if !bound || terminal {
            grace = 0;
        }
        if let Some(existing) = current
            .at("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            && current.at("/metadata/deletionTimestamp").is_some()
        {
            grace = grace.min(existing);
        }
        if grace == 0 {
            // As kube-apiserver: the pod is first stored with deletionTimestamp now and grace
            // period 0 (watchers see it MODIFIED), then deleted unless finalizers hold it.
            let mut object = (*current).clone();
            if object.at("/metadata/deletionTimestamp").is_none() {
                object["metadata"]["deletionTimestamp"] = Value::String(now.to_owned());
            }
            object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if *current != object {
                self.store.put(key, object);
            }
            return self.delete(key, propagation, now);
        }
        let now_ts: Timestamp = now.parse().ok()?;
        let deadline = now_ts
            .checked_add(jiff::SignedDuration::from_secs(grace))
            .unwrap_or(now_ts);
        let mut object = (*current).clone();
        object["metadata"]["deletionTimestamp"] = Value::String(format_time(deadline));
        object["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        if *current == object {
            return Some(current);
        }
        let stored = self.store.put(key, object);
        self.after_change(key, now);
        Some(stored)
    }

    /// A deleting object whose finalizers are gone (and whose grace period is over) is removed;
    /// the `orphan` and `foregroundDeletion` finalizers are processed here.
    fn settle_deleting(&mut self, key: &Key, object: &Value, now: &str) {
        if object.at("/metadata/deletionTimestamp").is_none() {
            return;
        }
        let mut fins = finalizers(object);
        let uid = meta_str(object, "uid").unwrap_or_default().to_owned();
        let mut changed = false;
        if fins.iter().any(|f| f == "orphan") {
            for dependent in self.store.dependents_of(&uid) {
                if let Some(dep) = self.store.get(&dependent).cloned() {
                    let mut dep = (*dep).clone();
                    if let Some(refs) = dep
                        .at_mut("/metadata/ownerReferences")
                        .and_then(Value::as_array_mut)
                    {
                        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid.as_str()));
                    }
                    self.store.put(&dependent, dep);
                }
            }
            fins.retain(|f| f != "orphan");
            changed = true;
        }
        if fins.iter().any(|f| f == "foregroundDeletion") {
            let dependents = self.store.dependents_of(&uid);
            for dependent in &dependents {
                let deleting = self
                    .store
                    .get(dependent)
                    .is_some_and(|d| d.at("/metadata/deletionTimestamp").is_some());
                if !deleting {
                    self.delete(dependent, Some("Foreground"), now);
                }
            }
            if self.store.dependents_of(&uid).is_empty() {
                fins.retain(|f| f != "foregroundDeletion");
                changed = true;
            }
        }
        let grace_over = object
            .at("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0;
        if fins.is_empty() && grace_over {
            self.purge(key, now);
        } else if changed {
            let mut updated = object.clone();
            updated["metadata"]["finalizers"] = json!(fins);
            self.store.put(key, updated);
        }
    }

    /// The owner of `uid` is gone: dependents whose every owner is gone are deleted.
    fn collect_garbage(&mut self, uid: &str, now: &str) {
        for dependent in self.store.dependents_of(uid) {
            let Some(object) = self.store.get(&dependent).cloned() else {
                continue;
            };
            if object.at("/metadata/deletionTimestamp").is_some() && finalizers(&object).is_empty()
            {
                continue;
            }
            if self.all_owners_gone(&object, &dependent) {
                self.delete(&dependent, Some("Background"), now);
            } else {
                let mut updated = (*object).clone();
                let gone = |r: &Value| r.get("uid").and_then(Value::as_str) == Some(uid);
                if let Some(refs) = updated
                    .at_mut("/metadata/ownerReferences")
                    .and_then(Value::as_array_mut)
                {
                    refs.retain(|r| !gone(r));
                }
                self.store.put(&dependent, updated);
            }
        }
    }

    /// Whether every owner reference of `object` points at an object that no longer exists
    /// (owners of kinds this server does not serve count as existing).
    pub(crate) fn all_owners_gone(&self, object: &Value, key: &Key) -> bool {
        let Some(refs) = object
            .at("/metadata/ownerReferences")
            .and_then(Value::as_array)
        else {
            return false;
        };
        !refs.is_empty()
            && refs.iter().all(|r| {
                let api_version = r
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let kind = r.get("kind").and_then(Value::as_str).unwrap_or_default();
                let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
                let uid = r.get("uid").and_then(Value::as_str).unwrap_or_default();
                let (group, _) = split_api_version(api_version);
                let Some(owner_resource) = self.registry.by_kind(api_version, kind).or_else(|| {
                    self.registry
                        .all()
                        .find(|res| res.group == group && res.kind == kind)
                        .cloned()
                }) else {
                    return false;
                };
                let owner_key = self::key(&owner_resource, &key.namespace, name);
                self.store
                    .get(&owner_key)
                    .is_none_or(|owner| meta_str(owner, "uid") != Some(uid))
            })
    }

    /// A terminating namespace is emptied, then removed.
    fn finish_namespace(&mut self, namespace: &str, now: &str) {
        let ns_key = Key {
            gr: gr("", "namespaces"),
            namespace: String::new(),
            name: namespace.to_owned(),
        };
        let Some(ns) = self.store.get(&ns_key).cloned() else {
            return;
        };
        if ns.at("/metadata/deletionTimestamp").is_none() {
            return;
        }
        let resources: BTreeSet<GroupResource> = self
            .registry
            .all()
            .filter(|r| r.namespaced)
            .map(|r| r.group_resource())
            .collect();
        let mut remaining = 0;
        for gr in resources {
            let keys: Vec<(Key, bool)> = self
                .store
                .range(&gr, Some(namespace), None)
                .map(|((ns, name), object)| {
                    (
                        Key {
                            gr: gr.clone(),
                            namespace: ns.clone(),
                            name: name.clone(),
                        },
                        object.at("/metadata/deletionTimestamp").is_some(),
                    )
                })
                .collect();
            for (key, deleting) in keys {
                remaining += 1;
                if !deleting {
                    if key.gr.group.is_empty() && key.gr.resource == "pods" {
                        self.delete_pod(&key, None, None, now);
                    } else {
                        self.delete(&key, Some("Background"), now);
                    }
                }
            }
        }
        if remaining == 0 || self.namespace_is_empty(namespace) {
            self.store.remove(&ns_key);
        }
    }

    fn namespace_is_empty(&self, namespace: &str) -> bool {
        self.registry.all().filter(|r| r.namespaced).all(|r| {
            self.store
                .range(&r.group_resource(), Some(namespace), None)
                .next()
                .is_none()
        })
    }

    /// Deletes a namespace: it turns Terminating and its content goes.
    pub(crate) fn delete_namespace(&mut self, name: &str, now: &str) -> Option<Arc<Value>> {
        let ns_key = Key {
            gr: gr("", "namespaces"),
            namespace: String::new(),
            name: name.to_owned(),
        };
        let current = self.store.get(&ns_key)?.clone();
        if current.at("/metadata/deletionTimestamp").is_none() {
            let mut object = (*current).clone();
            object["metadata"]["deletionTimestamp"] = Value::String(now.to_owned());
            object["status"]["phase"] = json!("Terminating");
            self.store.put(&ns_key, object);
        }
        let result = self.store.get(&ns_key).cloned();
        self.finish_namespace(name, now);
        self.store.get(&ns_key).cloned().or(result)
    }
}
