//! Eviction honouring PodDisruptionBudgets, and the budgets' status.

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
    assert_eq!((status.current_healthy, status.desired_healthy, status.disruptions_allowed, status.expected_pods), (2, 2, 0, 2));

    let (code_, reason) = code(pods.evict("w1", &EvictParams::default()).await);
    assert_eq!((code_, reason.as_str()), (429, "TooManyRequests"));

    create_pod(&client, "w3", json!({"app": "web"}), Some("n1")).await;
    set_ready(&pods, "w3", true).await;
    assert_eq!(budgets.get("web").await.unwrap().status.unwrap().disruptions_allowed, 1);
    let evicted = pods.evict("w1", &EvictParams::default()).await.unwrap();
    assert_eq!(evicted.code, 201);
    let terminating = pods.get("w1").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some(), "an evicted bound pod terminates gracefully");
    let status = budgets.get("web").await.unwrap().status.unwrap();
    assert_eq!((status.current_healthy, status.disruptions_allowed), (2, 0));
    assert_eq!(code(pods.evict("w2", &EvictParams::default()).await).0, 429);
    assert_eq!(code(pods.evict("missing", &EvictParams::default()).await).0, 404);

    // An unready pod may go while the budget is met (IfHealthyBudget).
    create_pod(&client, "w4", json!({"app": "web"}), Some("n1")).await;
    set_ready(&pods, "w4", false).await;
    pods.evict("w4", &EvictParams::default()).await.unwrap();
}
