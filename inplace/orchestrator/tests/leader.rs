//! Leader election: of several orchestrators, only the holder of the Lease acts; another takes
//! over only once the holder's Lease lapsed; a leader whose Lease is taken stops writing at once.
//! Each instance gets its own client, whose requests a journal records in the order sent, with
//! the virtual time and the instance's name.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_api::keys::{CONDITION_IN_PLACE_UPDATE, LABEL_SELECTED_FOR_UPDATE};
use inplace_api::strategy::OrchestrationType;
use inplace_orchestrator::{Config, LEADER_LEASE_NAME, LeaderElection};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::PostParams;
use kube::{Api, Client, ResourceExt};
use rackproof_test_support::kube::faults::{Seen, Verdict, faulty_client, hook};
use serde_json::Value;
use support::{Lab, NS};

const LEASE_DURATION: Duration = Duration::from_secs(15);

/// One request of one instance.
#[derive(Debug, Clone)]
struct Entry {
    instance: &'static str,
    at: Timestamp,
    method: http::Method,
    path: String,
    body: Option<Value>,
}

impl Entry {
    /// A request for the leader Lease (the bid, not an action).
    fn on_lock(&self) -> bool {
        self.path.ends_with(&format!("/leases/{LEADER_LEASE_NAME}"))
            || (self.path.ends_with("/leases") && self.method == http::Method::POST)
    }

    /// A write that is an action of the orchestrator (anything but its bid for the Lease).
    fn acts(&self) -> bool {
        !self.on_lock()
            && !matches!(
                self.method,
                http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
            )
    }

    /// The node this request selects for update, if it does.
    fn selects(&self) -> Option<String> {
        let selected = self
            .body
            .as_ref()?
            .pointer("/metadata/labels")?
            .get(LABEL_SELECTED_FOR_UPDATE)?;
        if self.method != http::Method::PATCH || selected.is_null() {
            return None;
        }
        self.path
            .strip_prefix("/api/v1/nodes/")
            .map(|rest| rest.split('/').next().unwrap_or(rest).to_owned())
    }
}

#[derive(Debug, Clone, Default)]
struct Journal(Arc<Mutex<Vec<Entry>>>);

impl Journal {
    /// A client for `instance` whose requests this journal records.
    fn client(&self, lab: &Lab, instance: &'static str) -> Client {
        let (journal, clock) = (self.0.clone(), lab.clock.clone());
        let record = hook(move |seen: Seen| {
            let (journal, clock) = (journal.clone(), clock.clone());
            async move {
                if !seen.is_watch() {
                    journal.lock().unwrap().push(Entry {
                        instance,
                        at: clock.now(),
                        method: seen.method,
                        path: seen.path,
                        body: seen.body,
                    });
                }
                Verdict::Forward
            }
        });
        faulty_client(lab.client.clone(), record, Arc::default())
    }

    fn entries(&self) -> Vec<Entry> {
        self.0.lock().unwrap().clone()
    }

    fn actions_of(&self, instance: &str) -> Vec<Entry> {
        self.entries()
            .into_iter()
            .filter(|e| e.instance == instance && e.acts())
            .collect()
    }
}

fn config(identity: &str) -> Config {
    Config {
        leader_election: Some(LeaderElection {
            identity: identity.to_owned(),
            ..LeaderElection::new(LEADER_LEASE_NAME, NS)
        }),
        ..Lab::config()
    }
}

async fn lease(lab: &Lab) -> Option<Lease> {
    Api::<Lease>::namespaced(lab.client.clone(), NS)
        .get_opt(LEADER_LEASE_NAME)
        .await
        .unwrap()
}

fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref()?.holder_identity.as_deref()
}

async fn wait_for_holder(lab: &Lab, what: &str) -> Lease {
    lab.wait_for(what, Duration::from_secs(120), || async {
        lease(lab).await.filter(|l| holder(l).is_some())
    })
    .await
}

/// Waits until some node is `ReadyForUpdate` (a rollout in mid-flight).
async fn wait_mid_rollout(lab: &Lab) {
    lab.wait_for(
        "a node to be ReadyForUpdate",
        Duration::from_secs(1800),
        || async {
            lab.nodes()
                .await
                .iter()
                .any(|n| {
                    support::condition_reason(n).as_deref() == Some("ReadyForUpdate")
                        && n.status
                            .as_ref()
                            .and_then(|s| s.conditions.as_ref())
                            .is_some_and(|c| c.iter().any(|c| c.type_ == CONDITION_IN_PLACE_UPDATE))
                })
                .then_some(())
        },
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn of_two_instances_only_the_lease_holder_acts() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    lab.create_deployment("workers", 4, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    let journal = Journal::default();
    let _a = lab.start_orchestrator_with(journal.client(&lab, "a"), config("a"));
    let _b = lab.start_orchestrator_with(journal.client(&lab, "b"), config("b"));
    lab.wait_running(4).await;
    lab.change_template("workers", "v2").await;
    lab.wait_rolled_out("v2", 4, Duration::from_secs(3600))
        .await;

    let (a, b) = (journal.actions_of("a"), journal.actions_of("b"));
    let leader = lease(&lab).await.expect("the leader Lease exists");
    let (acting, waiting) = match holder(&leader) {
        Some("a") => (a, b),
        Some("b") => (b, a),
        other => panic!("the Lease is held by {other:?}, not by one of the instances"),
    };
    assert!(!acting.is_empty(), "the holder rolled the deployment out");
    assert!(
        waiting.is_empty(),
        "the instance without the Lease wrote {} times, first {:?}",
        waiting.len(),
        waiting.first()
    );
    assert_eq!(
        leader.spec.unwrap().lease_transitions,
        Some(0),
        "nobody took the Lease over"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stopped_leader_is_replaced_once_its_lease_lapsed_and_no_node_is_selected_twice() {
    let mut lab = Lab::new().await;
    lab.update_time = Duration::from_secs(30);
    let _doubles = lab.start_doubles();
    let max_unavailable = 2;
    lab.create_deployment(
        "workers",
        6,
        "v1",
        max_unavailable,
        0,
        OrchestrationType::Auto,
    )
    .await;
    let journal = Journal::default();
    let mut instances = BTreeMap::new();
    instances.insert(
        "a",
        lab.start_orchestrator_with(journal.client(&lab, "a"), config("a")),
    );
    instances.insert(
        "b",
        lab.start_orchestrator_with(journal.client(&lab, "b"), config("b")),
    );
    let first = wait_for_holder(&lab, "a leader").await;
    let leader: &'static str = if holder(&first) == Some("a") {
        "a"
    } else {
        "b"
    };
    let follower: &'static str = if leader == "a" { "b" } else { "a" };
    lab.wait_running(6).await;
    let (max_selected, _monitor) = lab.monitor_selected();
    lab.change_template("workers", "v2").await;
    wait_mid_rollout(&lab).await;

    // The leader dies mid-rollout (no chance to release the Lease).
    let dead = instances.remove(leader).unwrap();
    dead.abort();
    let _ = dead.await;
    let last = lease(&lab).await.unwrap().spec.unwrap();
    assert_eq!(last.holder_identity.as_deref(), Some(leader));
    let last_renewal = last.renew_time.unwrap().0;
    let lapsed = last_renewal.checked_add(LEASE_DURATION).unwrap();

    let taken = lab
        .wait_for(
            "the follower to take the Lease",
            Duration::from_secs(120),
            || async { lease(&lab).await.filter(|l| holder(l) == Some(follower)) },
        )
        .await
        .spec
        .unwrap();
    let acquired = taken.acquire_time.unwrap().0;
    assert!(
        acquired >= lapsed,
        "taken over at {acquired}, before the Lease renewed at {last_renewal} lapsed ({lapsed})"
    );
    assert_eq!(taken.lease_transitions, Some(1));
    lab.wait_rolled_out("v2", 6, Duration::from_secs(7200))
        .await;
    let first_action = journal
        .actions_of(follower)
        .first()
        .cloned()
        .expect("the follower finished the rollout");
    assert!(
        first_action.at >= lapsed,
        "the follower acted at {} ({} {}), before the leader's Lease lapsed at {lapsed}",
        first_action.at,
        first_action.method,
        first_action.path
    );

    let max = *max_selected.lock().unwrap();
    assert!(
        max <= max_unavailable as usize,
        "{max} nodes selected at once across the handover"
    );
    let mut selections: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    for entry in journal.entries() {
        if let Some(node) = entry.selects() {
            selections.entry(node).or_default().push(entry.instance);
        }
    }
    assert_eq!(
        selections.len(),
        6,
        "every node was selected: {selections:?}"
    );
    for (node, by) in &selections {
        assert_eq!(
            by.len(),
            1,
            "node {node} selected more than once, by {by:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_lease_is_taken_makes_no_write_after_it_sees_that() {
    let mut lab = Lab::new().await;
    lab.update_time = Duration::from_secs(60);
    let _doubles = lab.start_doubles();
    lab.create_deployment("workers", 4, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    let journal = Journal::default();
    let _a = lab.start_orchestrator_with(journal.client(&lab, "a"), config("a"));
    lab.wait_running(4).await;
    lab.change_template("workers", "v2").await;
    wait_mid_rollout(&lab).await;
    assert!(!journal.actions_of("a").is_empty(), "a leads and acts");

    // Another holder is written into the Lease, and keeps renewing it.
    let api: Api<Lease> = Api::namespaced(lab.client.clone(), NS);
    let mut taken = api.get(LEADER_LEASE_NAME).await.unwrap();
    let spec = taken.spec.get_or_insert_default();
    spec.holder_identity = Some("intruder".into());
    spec.renew_time = Some(MicroTime(lab.clock.now()));
    spec.acquire_time = Some(MicroTime(lab.clock.now()));
    api.replace(LEADER_LEASE_NAME, &PostParams::default(), &taken)
        .await
        .unwrap();
    // Requests recorded from here on were sent after the Lease named another holder.
    let before_take = journal.entries().len();
    let intruder = {
        let (api, clock) = (api.clone(), lab.clock.clone());
        tokio::spawn(async move {
            loop {
                clock.sleep(Duration::from_secs(2)).await;
                let mut lease = api.get(LEADER_LEASE_NAME).await.unwrap();
                lease.spec.get_or_insert_default().renew_time = Some(MicroTime(clock.now()));
                api.replace(LEADER_LEASE_NAME, &PostParams::default(), &lease)
                    .await
                    .unwrap();
            }
        })
    };
    // Once a has read the Lease naming another holder (its renew deadline has not passed yet),
    // new work appears: a second deployment, which a leader would give a MachineSet at once.
    let read_taken = |e: &Entry| e.instance == "a" && e.on_lock() && e.method == http::Method::GET;
    let learned = lab
        .wait_for(
            "a to read the taken Lease",
            Duration::from_secs(30),
            || async {
                journal.entries()[before_take..]
                    .iter()
                    .find(|e| read_taken(e))
                    .map(|e| e.at)
            },
        )
        .await;
    lab.create_deployment("others", 2, "v1", 1, 0, OrchestrationType::Auto)
        .await;
    lab.clock.sleep(Duration::from_secs(300)).await;
    intruder.abort();

    let after: Vec<Entry> = journal.entries().split_off(before_take);
    let others = lab
        .sets()
        .await
        .into_iter()
        .filter(|s| s.owner_references().iter().any(|o| o.name == "others"))
        .count();
    assert_eq!(others, 0, "a deposed leader created a MachineSet");
    let late: Vec<&Entry> = after
        .iter()
        .filter(|e| e.acts() && e.at > learned)
        .collect();
    assert!(
        late.is_empty(),
        "a read the Lease held by another at {learned} and still wrote {} times after, first at {} ({} {})",
        late.len(),
        late[0].at,
        late[0].method,
        late[0].path
    );
    let bids: Vec<&Entry> = after
        .iter()
        .filter(|e| e.on_lock() && e.method != http::Method::GET)
        .collect();
    assert!(
        bids.is_empty(),
        "a wrote the Lease while another held it: {bids:?}"
    );
    let lease = api.get(LEADER_LEASE_NAME).await.unwrap();
    assert_eq!(holder(&lease), Some("intruder"));
    assert_eq!(
        lease.name_any(),
        LEADER_LEASE_NAME,
        "the Lease is the orchestrator's own"
    );
}
