//! When dead nodes scale the dependents down and back: nodes under update, the machine watch,
//! the order of scaling, a single candidate.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Api;
use kube::api::{Patch, PatchParams};
use rackproof_test_support::kube::faults::{Record, Seen, Verdict, faulty_client, hook};
use serde_json::json;

use crate::{Cluster, NS, events_with_reason, names, scaled_down};

#[tokio::test(start_paused = true)]
async fn nodes_under_update_with_expired_leases_do_not_trigger_a_scale_down() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let _watchdog = cluster.start_watchdog();
    // Three nodes reboot for their update (ReadyForUpdate) or failed it: their leases expire.
    cluster
        .set_condition("n0", "InPlaceUpdate", "True", "ReadyForUpdate")
        .await;
    cluster
        .set_condition("n1", "InPlaceUpdate", "True", "ReadyForUpdate")
        .await;
    cluster
        .set_condition("n2", "InPlaceUpdate", "True", "UpdateFailed")
        .await;
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(300)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
    let status = cluster.status().await;
    assert_eq!(status["decision"], "ScaleUp", "{status:?}");
    assert_eq!(status["candidates"], "n3,n4");
}

/// Machines come from a watch, not a list per probe (as DWD reads them through its cache): a
/// Machine that fails after the watchdog started takes its node out of the next probe, and a new
/// node's Machine makes it a candidate, with the Machines listed once.
#[tokio::test(start_paused = true)]
async fn machines_are_read_from_a_watch_and_their_changes_reach_the_next_probe() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    let forward = hook(|_: Seen| async { Verdict::Forward });
    let _watchdog = cluster.start_watchdog_with(
        faulty_client(cluster.client.clone(), forward, log.clone()),
        Cluster::config(),
    );
    cluster.clock.sleep(Duration::from_secs(30)).await;
    assert_eq!(cluster.status().await["candidates"], "n0,n1,n2,n3,n4");

    // The Machines of n0 and n1 fail; then the leases of n0, n1 and n2 expire. Without the
    // failures that would be 3 of 5 (a scale-down); with them it is 1 of 3.
    let gvk = kube::api::GroupVersionKind::gvk("machine.sapcloud.io", "v1alpha1", "Machine");
    let machines: Api<kube::api::DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        NS,
        &kube::api::ApiResource::from_gvk(&gvk),
    );
    for node in ["n0", "n1"] {
        let failed = json!({"status": {"currentStatus": {"phase": "Failed"}}});
        machines
            .patch_status(
                &format!("m-{node}"),
                &PatchParams::default(),
                &Patch::Merge(&failed),
            )
            .await
            .unwrap();
    }
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(120)).await;
    let status = cluster.status().await;
    assert_eq!(status["candidates"], "n2,n3,n4", "{status:?}");
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );

    // A node added later is a candidate at the next probe.
    cluster.add_node("n5").await;
    cluster.clock.sleep(Duration::from_secs(20)).await;
    assert_eq!(cluster.status().await["candidates"], "n2,n3,n4,n5");

    const MACHINES: &str = "/apis/machine.sapcloud.io/v1alpha1/namespaces/kube-system/machines";
    let lists = log
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.path == MACHINES && !r.watch)
        .count();
    assert_eq!(lists, 1, "the Machines are listed once, then watched");
}

#[tokio::test(start_paused = true)]
async fn the_same_number_of_dead_nodes_not_under_update_scales_down_in_order_and_back() {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let _watchdog = cluster.start_watchdog();
    cluster.clock.sleep(Duration::from_secs(30)).await;
    // Three nodes really die; one of them is NotReady, which still counts.
    cluster
        .set_condition("n2", "Ready", "False", "KubeletNotReady")
        .await;
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
    assert_eq!(cluster.status().await["decision"], "ScaleDown");
    let events = Api::<k8s_openapi::api::core::v1::Event>::all(cluster.client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    let mut events = events;
    events.sort_by_key(|e| {
        e.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    });
    let order: Vec<String> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("ScaledDown"))
        .map(|e| e.involved_object.name.clone().unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "machine-controller-manager",
            "cluster-autoscaler",
            "kube-controller-manager"
        ]
    );
    // The nodes come back: replicas restored, annotations gone.
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
}

#[tokio::test(start_paused = true)]
async fn a_single_candidate_never_scales_down() {
    let cluster = Cluster::new(&["n0", "n1"]).await;
    cluster
        .set_condition("n1", "InPlaceUpdate", "True", "ReadyForUpdate")
        .await;
    let _watchdog = cluster.start_watchdog();
    // No kubelets: both leases expire, but only n0 is a candidate.
    cluster.clock.sleep(Duration::from_secs(300)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    assert_eq!(cluster.status().await["decision"], "Skip");
}

#[tokio::test(start_paused = true)]
async fn expired_leases_of_nodes_under_update_are_ignored_but_as_many_real_deaths_scale_down_and_recovery_restores()
 {
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let _watchdog = cluster.start_watchdog();
    cluster.clock.sleep(Duration::from_secs(30)).await;

    // 1. Three of five nodes are under in-place update (rebooting, or failed) and renew nothing:
    //    3/5 = 0.6 would reach the threshold if they counted.
    cluster
        .set_condition("n0", "InPlaceUpdate", "True", "ReadyForUpdate")
        .await;
    cluster
        .set_condition("n1", "InPlaceUpdate", "True", "ReadyForUpdate")
        .await;
    cluster
        .set_condition("n2", "InPlaceUpdate", "True", "UpdateFailed")
        .await;
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    for _ in 0..30 {
        cluster.clock.sleep(Duration::from_secs(10)).await;
        assert_eq!(
            cluster.replicas("machine-controller-manager").await,
            (1, None),
            "no scale-down for nodes under update"
        );
    }
    let status = cluster.status().await;
    assert_eq!(
        (
            status["decision"].as_str(),
            status["candidates"].as_str(),
            status["expired"].as_str()
        ),
        ("ScaleUp", "n3,n4", "")
    );
    assert!(
        status["excluded"].contains("n0: under in-place update"),
        "{status:?}"
    );
    assert!(scaled_down(&cluster).await.is_empty());

    // 2. The update is over (conditions gone, leases renewed); then the same number of nodes not
    //    under update really die.
    for node in ["n0", "n1", "n2"] {
        cluster
            .set_condition(node, "InPlaceUpdate", "False", "UpdateSuccessful")
            .await;
    }
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(cluster.status().await["decision"], "ScaleUp");
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n2".to_owned(), "n3".to_owned(), "n4".to_owned()]);
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
    let status = cluster.status().await;
    assert_eq!(
        (status["decision"].as_str(), status["expired"].as_str()),
        ("ScaleDown", "n2,n3,n4")
    );
    assert_eq!(
        scaled_down(&cluster).await,
        [
            "machine-controller-manager",
            "cluster-autoscaler",
            "kube-controller-manager"
        ]
    );

    // 3. They come back: the remembered replicas are restored, the annotations removed.
    cluster.dead.lock().unwrap().clear();
    cluster.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(
        cluster.replicas("machine-controller-manager").await,
        (1, None)
    );
    assert_eq!(cluster.replicas("cluster-autoscaler").await, (1, None));
    assert_eq!(cluster.replicas("kube-controller-manager").await, (2, None));
    assert_eq!(events_with_reason(&cluster, "ScaledUp").await, 3);
}

/// Every line of a probe names it, the control plane and its decision: the Event that a
/// dependent was scaled down is logged in `probe{n=… namespace=… decision=ScaleDown}`.
#[tokio::test(start_paused = true)]
async fn log_lines_of_a_scale_down_name_the_probe_and_its_decision() {
    let (logs, _capturing) = rackproof_test_support::logs::capture();
    let all = names(5);
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let cluster = Cluster::new(&refs).await;
    let _kubelets = cluster.start_kubelets(all.clone());
    let _watchdog = cluster.start_watchdog();
    cluster.clock.sleep(Duration::from_secs(30)).await;
    cluster
        .dead
        .lock()
        .unwrap()
        .extend(["n0".to_owned(), "n1".to_owned(), "n2".to_owned()]);
    cluster.clock.sleep(Duration::from_secs(120)).await;
    assert_eq!(cluster.status().await["decision"], "ScaleDown");
    let scaled = logs.line_with("scaled deployment machine-controller-manager from 1 to 0");
    assert!(
        scaled.contains("probe{n=")
            && scaled.contains(&format!(" namespace={NS} decision=ScaleDown}}")),
        "{scaled}"
    );
}
