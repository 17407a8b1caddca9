//! An API server that throttles, fails or races: the watchdog backs off, decides nothing on
//! what it could not read, and keeps the replicas it records.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_watchdog::Config;
use rackproof_test_support::kube::faults::{
    ConcurrentWriter, Hook, Record, Seen, Verdict, faulty_client, hook,
};

use crate::{Cluster, events_with_reason, names, scaled_down};

/// A fault hook that answers 429 to requests matching `matches` while `throttled` is set.
fn throttle(throttled: Arc<Mutex<bool>>, matches: fn(&Seen) -> bool) -> Hook {
    hook(move |seen: Seen| {
        let throttled = throttled.clone();
        async move {
            if *throttled.lock().unwrap() && matches(&seen) {
                Verdict::Fail(429, "too many requests, please try again later".to_owned())
            } else {
                Verdict::Forward
            }
        }
    })
}

fn count(log: &Mutex<Vec<Record>>, method: http::Method, path: &str) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|r| r.method == method && r.path == path)
        .count()
}

#[tokio::test(start_paused = true)]
async fn throttled_probe_backs_off_and_decides_nothing_until_the_throttling_ends() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    let throttled = Arc::new(Mutex::new(true));
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let client = faulty_client(
        cluster.client.clone(),
        throttle(throttled.clone(), |s| s.path == LEASES),
        log.clone(),
    );
    let config = Config {
        throttle_backoff: Duration::from_secs(60),
        ..Cluster::config()
    };
    let _watchdog = cluster.start_watchdog_with(client, config);

    // Three of five leases expire while every lease list is answered with 429.
    cluster.clock.sleep(Duration::from_secs(350)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None),
        "no decision without a lease probe"
    );
    let status = cluster.status().await;
    assert_eq!(status["decision"], "ProbeFailed");
    assert!(
        status["message"].contains("throttled: backing off"),
        "{}",
        status["message"]
    );
    assert_eq!(
        events_with_reason(&cluster, "ProbeFailed").await,
        1,
        "one Event for the failing probe, not one per probe"
    );
    // Every 429 waits out the back-off (60 s) on top of the probe interval (10 s): one try per 70 s
    // (at 0, 70, …, 350 s), where an unthrottled prober would have tried 36 times.
    let tries = count(&log, http::Method::GET, LEASES);
    assert!((4..=6).contains(&tries), "{tries} lease lists in 350 s");

    // The throttling ends: the next probe decides, and the real outage scales down.
    *throttled.lock().unwrap() = false;
    cluster.clock.sleep(Duration::from_secs(90)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("kube-controller-manager").await,
        (0, Some("2".into()))
    );
    assert_eq!(cluster.status().await["decision"], "ScaleDown");
}

#[tokio::test(start_paused = true)]
async fn throttled_scaling_backs_off_and_completes_in_order_without_losing_replicas() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let throttled = Arc::new(Mutex::new(true));
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    const AUTOSCALER: &str = "/apis/apps/v1/namespaces/kube-system/deployments/cluster-autoscaler";
    let writes = |s: &Seen| s.is_write() && s.path.starts_with(AUTOSCALER);
    let client = faulty_client(
        cluster.client.clone(),
        throttle(throttled.clone(), writes),
        log.clone(),
    );
    let config = Config {
        throttle_backoff: Duration::from_secs(60),
        ..Cluster::config()
    };
    let _watchdog = cluster.start_watchdog_with(client, config);
    cluster.clock.sleep(Duration::from_secs(30)).await;

    // A real outage, but scaling the second dependent is throttled.
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(400)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into())),
        "the first dependent is down"
    );
    assert_eq!(
        cluster.replicas("cluster-autoscaler").await,
        (1, None),
        "the throttled one is untouched"
    );
    assert_eq!(
        cluster.replicas("kube-controller-manager").await,
        (2, None),
        "in order: nothing after the throttled one"
    );
    let status = cluster.status().await;
    assert_eq!(status["decision"], "ProbeFailed");
    assert!(
        status["message"].contains("cluster-autoscaler") && status["message"].contains("throttled"),
        "{}",
        status["message"]
    );
    let tries = count(&log, http::Method::PUT, AUTOSCALER);
    assert!(
        (3..=7).contains(&tries),
        "{tries} throttled writes in 400 s: the prober backs off between them"
    );

    // The throttling ends: the rest go down in order, the first one keeps its remembered replicas.
    *throttled.lock().unwrap() = false;
    cluster.clock.sleep(Duration::from_secs(90)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("cluster-autoscaler").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("kube-controller-manager").await,
        (0, Some("2".into()))
    );
    assert_eq!(
        scaled_down(&cluster).await,
        [
            "machine-controller-manager",
            "cluster-autoscaler",
            "kube-controller-manager"
        ]
    );
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    assert_eq!(cluster.replicas("cluster-autoscaler").await, (1, None));
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
}

#[tokio::test(start_paused = true)]
async fn failing_api_server_probe_skips_the_lease_probe_and_scales_nothing() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    let failing = Arc::new(Mutex::new(true));
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    let down = failing.clone();
    let version = hook(move |seen: Seen| {
        let down = down.clone();
        async move {
            if *down.lock().unwrap() && seen.path == "/version" {
                Verdict::Fail(500, "etcd is unavailable".to_owned())
            } else {
                Verdict::Forward
            }
        }
    });
    let _watchdog = cluster.start_watchdog_with(
        faulty_client(cluster.client.clone(), version, log.clone()),
        Cluster::config(),
    );
    cluster.clock.sleep(Duration::from_secs(300)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    let status = cluster.status().await;
    assert_eq!(status["decision"], "ProbeFailed");
    assert!(
        status["message"].contains("failed to probe the API server"),
        "{}",
        status["message"]
    );
    assert_eq!(
        count(
            &log,
            http::Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        ),
        0,
        "leases are probed only after the API server"
    );
    assert!(
        count(&log, http::Method::GET, "/version") >= 20,
        "the API server probe is retried every probe interval"
    );

    *failing.lock().unwrap() = false;
    cluster.clock.sleep(Duration::from_secs(30)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (0, Some("1".into()))
    );
}

#[tokio::test(start_paused = true)]
async fn scaling_that_conflicts_with_a_concurrent_writer_is_retried_and_keeps_the_replicas() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    // Another writer changes each dependent between the watchdog's read and its first write.
    let writer = ConcurrentWriter::new(cluster.client.clone());
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    let race = hook(move |seen: Seen| {
        let writer = writer.clone();
        async move {
            if seen.method == http::Method::PUT && seen.path.contains("/deployments/") {
                writer.race(&seen.path).await;
            }
            Verdict::Forward
        }
    });
    let _watchdog = cluster.start_watchdog_with(
        faulty_client(cluster.client.clone(), race, log.clone()),
        Cluster::config(),
    );
    cluster.clock.sleep(Duration::from_secs(30)).await;
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
    assert_eq!(
        cluster.replicas("cluster-autoscaler").await,
        (0, Some("1".into()))
    );
    assert_eq!(
        cluster.replicas("kube-controller-manager").await,
        (0, Some("2".into()))
    );
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    let conflicts = log.lock().unwrap().iter().filter(|r| r.code == 409).count();
    assert_eq!(
        conflicts, 6,
        "every scale-down and scale-up write lost one race and was retried"
    );
    assert_eq!(
        events_with_reason(&cluster, "ProbeFailed").await,
        0,
        "a conflict is retried at once, not a failed probe"
    );
}
