//! Two watchdogs: only the Lease holder scales, the other takes over once the Lease lapsed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_watchdog::Config;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use rackproof_test_support::kube::faults::{Seen, Verdict, faulty_client, hook};

use crate::{Cluster, NS, names};

/// A write of one watchdog instance: when, and to what.
#[derive(Debug, Clone)]
struct Write {
    at: jiff::Timestamp,
    path: String,
}

/// A client whose writes (other than its bids for the leader Lease) land in `log`.
fn recording_client(cluster: &Cluster, log: Arc<Mutex<Vec<Write>>>) -> Client {
    let clock = cluster.clock.clone();
    let record = hook(move |seen: Seen| {
        let (log, clock) = (log.clone(), clock.clone());
        async move {
            let bid = seen
                .path
                .ends_with(&format!("/leases/{}", inplace_watchdog::LEADER_LEASE_NAME))
                || seen.path.ends_with("/leases");
            if seen.is_write() && !bid {
                log.lock().unwrap().push(Write {
                    at: clock.now(),
                    path: format!("{} {}", seen.method, seen.path),
                });
            }
            Verdict::Forward
        }
    });
    faulty_client(cluster.client.clone(), record, Arc::default())
}

fn elected(identity: &str) -> Config {
    Config {
        leader_election: Some(inplace_watchdog::LeaderElection {
            identity: identity.to_owned(),
            ..inplace_watchdog::LeaderElection::new(inplace_watchdog::LEADER_LEASE_NAME, NS)
        }),
        ..Cluster::config()
    }
}

async fn leader_lease(cluster: &Cluster) -> Option<Lease> {
    Api::<Lease>::namespaced(cluster.client.clone(), NS)
        .get_opt(inplace_watchdog::LEADER_LEASE_NAME)
        .await
        .unwrap()
}

/// Two watchdogs: only the Lease holder probes, scales and writes its status; when it dies, the
/// other scales the dependents back, and not before the dead one's Lease lapsed.
#[tokio::test(start_paused = true)]
async fn of_two_watchdogs_only_the_leader_scales_and_the_other_takes_over_once_its_lease_lapsed() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let logs: [Arc<Mutex<Vec<Write>>>; 2] = Default::default();
    let mut tasks = vec![
        cluster.start_watchdog_with(recording_client(&cluster, logs[0].clone()), elected("a")),
        cluster.start_watchdog_with(recording_client(&cluster, logs[1].clone()), elected("b")),
    ];
    cluster.clock.sleep(Duration::from_secs(30)).await;
    let lease = leader_lease(&cluster)
        .await
        .expect("the leader Lease exists");
    let leader = match lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
    {
        Some("a") => 0,
        Some("b") => 1,
        other => panic!("the Lease is held by {other:?}"),
    };
    let follower = 1 - leader;

    // A real outage: three of five nodes die; the dependents go to zero.
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(120)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into()))
    );
    let follower_writes = logs[follower].lock().unwrap().clone();
    assert!(
        follower_writes.is_empty(),
        "the watchdog without the Lease wrote: {follower_writes:?}"
    );
    let scaled_by_leader = logs[leader]
        .lock()
        .unwrap()
        .iter()
        .filter(|w| w.path.contains("/deployments/"))
        .count();
    assert!(
        scaled_by_leader >= 3,
        "the leader scaled the dependents down"
    );

    // The leader dies; the nodes come back. The follower scales up, once the Lease lapsed.
    let dead = tasks.remove(leader);
    dead.abort();
    let _ = dead.await;
    let last = leader_lease(&cluster).await.unwrap().spec.unwrap();
    let lapsed = last
        .renew_time
        .unwrap()
        .0
        .checked_add(Duration::from_secs(15))
        .unwrap();
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(90)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
    let follower_writes = logs[follower].lock().unwrap().clone();
    assert!(
        follower_writes
            .iter()
            .any(|w| w.path.contains("/deployments/")),
        "the new leader scaled the dependents back"
    );
    let early: Vec<&Write> = follower_writes.iter().filter(|w| w.at < lapsed).collect();
    assert!(
        early.is_empty(),
        "the follower wrote before the leader's Lease lapsed at {lapsed}: {early:?}"
    );
    let new = leader_lease(&cluster).await.unwrap().spec.unwrap();
    assert_eq!(new.holder_identity.as_deref(), Some(["a", "b"][follower]));
    assert_eq!(new.lease_transitions, Some(1));
}
