//! The store's writes, reads, event log, watch fan-out and indexes.

use serde_json::json;

use super::*;

fn key(name: &str) -> Key {
    Key {
        gr: GroupResource {
            group: String::new(),
            resource: "pods".into(),
        },
        namespace: "default".into(),
        name: name.into(),
    }
}

#[test]
fn writes_bump_the_resource_version_and_are_logged() {
    let mut store = Store::new(2);
    let a = store.put(&key("a"), json!({"metadata": {"name": "a"}}));
    assert_eq!(a["metadata"]["resourceVersion"], "2");
    store.put(&key("a"), json!({"metadata": {"name": "a"}}));
    store.remove(&key("a"));
    let gr = key("a").gr;
    let events = store.events_since(&gr, 2, None).unwrap();
    assert_eq!(
        events.iter().map(|e| (e.rv, e.kind)).collect::<Vec<_>>(),
        vec![(3, EventType::Modified), (4, EventType::Deleted)]
    );
    assert_eq!(store.events_since(&gr, 1, None).unwrap_err(), 2);
}

/// A replay for a watch pinned to a node's name holds the events of the pods bound to that
/// node before or after the change, and no other.
#[test]
fn a_pinned_replay_holds_only_the_events_that_can_match() {
    let mut store = Store::new(10);
    let pod =
        |name: &str, node: &str| json!({"metadata": {"name": name}, "spec": {"nodeName": node}});
    store.put(&key("a"), pod("a", "n1"));
    store.put(&key("b"), pod("b", "n2"));
    store.put(&key("a"), pod("a", "n2"));
    store.put(&key("c"), pod("c", "n3"));
    let gr = key("a").gr;
    let rvs = |pin: Option<(&'static str, &str)>| {
        let pin = pin.map(|(field, value)| (field, value.to_owned()));
        store
            .events_since(&gr, 0, pin.as_ref())
            .unwrap()
            .iter()
            .map(|e| e.rv)
            .collect::<Vec<_>>()
    };
    assert_eq!(rvs(None), vec![2, 3, 4, 5]);
    assert_eq!(rvs(Some(("spec.nodeName", "n1"))), vec![2, 4]);
    assert_eq!(rvs(Some(("spec.nodeName", "n2"))), vec![3, 4]);
    assert_eq!(rvs(Some(("metadata.name", "c"))), vec![5]);
    assert_eq!(rvs(Some(("spec.nodeName", "n9"))), Vec::<u64>::new());
}

/// The owner index follows every write: an update that keeps the owners keeps the object a
/// dependent, one that changes them moves it.
#[test]
fn the_owner_index_follows_updates() {
    let mut store = Store::new(10);
    let owned = |owner: &str, image: &str| json!({"metadata": {"name": "a", "uid": "u-a", "ownerReferences": [{"uid": owner}]}, "spec": {"image": image}});
    store.put(&key("a"), owned("o1", "v1"));
    store.put(&key("a"), owned("o1", "v2"));
    assert_eq!(store.dependents_of("o1"), vec![key("a")]);
    store.put(&key("a"), owned("o2", "v2"));
    assert_eq!(store.dependents_of("o1"), Vec::<Key>::new());
    assert_eq!(store.dependents_of("o2"), vec![key("a")]);
}
