//! Eviction honouring PodDisruptionBudgets, and the budgets' status.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::{code, create_pod, server};

async fn set_ready(pods: &Api<Pod>, name: &str, ready: bool) {
    let status = if ready { "True" } else { "False" };
    pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": status}]}})))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_budget_blocks_evictions_then_allows_them() {
    let server = server();
    let client = server.admin_client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    for name in ["w1", "w2"] {
        create_pod(&client, name, json!({"app": "web"}), Some("n1")).await;
        set_ready(&pods, name, true).await;
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})).unwrap();
    budgets.create(&PostParams::default(), &pdb).await.unwrap();
    let status = budgets.get("web").await.unwrap().status.unwrap();
    assert_eq!(
        (
            status.current_healthy,
            status.desired_healthy,
            status.disruptions_allowed,
            status.expected_pods
        ),
        (2, 2, 0, 2)
    );

    let (code_, reason) = code(pods.evict("w1", &EvictParams::default()).await);
    assert_eq!((code_, reason.as_str()), (429, "TooManyRequests"));

    create_pod(&client, "w3", json!({"app": "web"}), Some("n1")).await;
    set_ready(&pods, "w3", true).await;
    assert_eq!(
        budgets
            .get("web")
            .await
            .unwrap()
            .status
            .unwrap()
            .disruptions_allowed,
        1
    );
    let evicted = pods.evict("w1", &EvictParams::default()).await.unwrap();
    assert_eq!(evicted.code, 201);
    let terminating = pods.get("w1").await.unwrap();
    assert!(
        terminating.metadata.deletion_timestamp.is_some(),
        "an evicted bound pod terminates gracefully"
    );
    let status = budgets.get("web").await.unwrap().status.unwrap();
    assert_eq!((status.current_healthy, status.disruptions_allowed), (2, 0));
    assert_eq!(code(pods.evict("w2", &EvictParams::default()).await).0, 429);
    assert_eq!(
        code(pods.evict("missing", &EvictParams::default()).await).0,
        404
    );

    // An unready pod may go while the budget is met (IfHealthyBudget).
    create_pod(&client, "w4", json!({"app": "web"}), Some("n1")).await;
    set_ready(&pods, "w4", false).await;
    pods.evict("w4", &EvictParams::default()).await.unwrap();
}

/// With `maxUnavailable`, a budget expects its pods' controllers' replicas, as
/// kube-controller-manager's disruption controller counts: over pods without a controller it
/// allows nothing, and an evicted pod of a ReplicaSet keeps counting as expected until its
/// replacement is there, so the next eviction waits for it.
#[tokio::test(start_paused = true)]
async fn a_max_unavailable_budget_counts_the_replicas_of_the_pods_controllers() {
    let server = server();
    let client = server.admin_client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    for name in ["w1", "w2", "w3"] {
        create_pod(&client, name, json!({"app": "web"}), Some("n1")).await;
        set_ready(&pods, name, true).await;
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}})).unwrap();
    budgets.create(&PostParams::default(), &pdb).await.unwrap();
    let allowed = || async {
        let status = budgets.get("web").await.unwrap().status.unwrap();
        (status.expected_pods, status.disruptions_allowed)
    };
    assert_eq!(allowed().await.1, 0, "no controller: no disruption");
    assert_eq!(code(pods.evict("w1", &EvictParams::default()).await).0, 429);

    let replica_set: ReplicaSet = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "web"}]}}}})).unwrap();
    let uid = replica_sets
        .create(&PostParams::default(), &replica_set)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let owner = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": uid, "controller": true}]}});
    for name in ["w1", "w2", "w3"] {
        pods.patch(name, &PatchParams::default(), &Patch::Merge(owner.clone()))
            .await
            .unwrap();
    }
    assert_eq!(
        allowed().await,
        (3, 1),
        "adopted: one of three replicas may go"
    );
    pods.evict("w1", &EvictParams::default()).await.unwrap();
    pods.delete("w1", &kube::api::DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert_eq!(
        allowed().await,
        (3, 0),
        "the evicted pod still counts as expected until it is replaced"
    );
    assert_eq!(code(pods.evict("w2", &EvictParams::default()).await).0, 429);

    create_pod(&client, "w4", json!({"app": "web"}), Some("n2")).await;
    pods.patch("w4", &PatchParams::default(), &Patch::Merge(owner))
        .await
        .unwrap();
    set_ready(&pods, "w4", true).await;
    assert_eq!(allowed().await, (3, 1), "the replacement is Ready");
    pods.evict("w2", &EvictParams::default()).await.unwrap();
}

/// What a budget selecting `app=web` should count among `pods`: (expected, healthy).
fn counted_by_hand(pods: &[Pod]) -> (i32, i32) {
    let matching: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .map(String::as_str)
                == Some("web")
        })
        .collect();
    let healthy = matching
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    (matching.len() as i32, healthy as i32)
}

#[tokio::test(start_paused = true)]
async fn budget_counts_stay_exact_through_pod_creates_relabels_readiness_and_deletes() {
    let server = server();
    let client = server.admin_client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    // An integer `minAvailable`: the budget counts the pods themselves (with `maxUnavailable` it
    // would count their controllers' replicas, and these pods have none).
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})).unwrap();
    budgets.create(&PostParams::default(), &pdb).await.unwrap();
    // A fixed pseudo-random walk over twelve pod names: create (bound or not), readiness,
    // relabel in and out of the budget, graceful and immediate deletes.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    for step in 0..400 {
        // Halfway, a change to the budget itself (every pod is counted again).
        let min_available = if step < 200 { 1 } else { 2 };
        if step == 200 {
            budgets
                .patch(
                    "web",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"minAvailable": 2}})),
                )
                .await
                .unwrap();
        }
        let name = format!("p{}", next(12));
        let exists = pods.get_opt(&name).await.unwrap();
        let what = next(6);
        match (&exists, what) {
            (None, _) => {
                let app = if next(3) == 0 { "other" } else { "web" };
                let node = if next(2) == 0 { Some("n1") } else { None };
                create_pod(&client, &name, json!({"app": app}), node).await;
            }
            (Some(_), 0 | 1) => set_ready(&pods, &name, true).await,
            (Some(_), 2) => set_ready(&pods, &name, false).await,
            (Some(_), 3) => {
                let app = if next(2) == 0 { "other" } else { "web" };
                pods.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {"app": app}}})),
                )
                .await
                .unwrap();
            }
            (Some(_), 4) => {
                let _ = pods
                    .delete(&name, &kube::api::DeleteParams::default())
                    .await
                    .unwrap();
            }
            (Some(_), _) => {
                let _ = pods
                    .delete(&name, &kube::api::DeleteParams::default().grace_period(0))
                    .await
                    .unwrap();
            }
        }
        let all = pods.list(&Default::default()).await.unwrap().items;
        let status = budgets.get("web").await.unwrap().status.unwrap();
        assert_eq!(
            (status.expected_pods, status.current_healthy),
            counted_by_hand(&all),
            "after step {step} ({name}, {what})"
        );
        assert_eq!(
            status.disruptions_allowed,
            (status.current_healthy - min_available).max(0),
            "after step {step}"
        );
    }
}
