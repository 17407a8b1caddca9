//! The heartbeat as a kubelet: Lease renewals, node status reports only when something changed or
//! every status report interval, pods handled as they arrive, recovery from a lost Lease.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use inplace_agent::HeartbeatConfig;
use inplace_agent::heartbeat::{ANNOTATION_OS_VERSION, Heartbeat, LEASE_NAMESPACE};
use inplace_agent::platform::kubelet::{HeartbeatKubelet, Kubelet};
use inplace_agent::platform::os_version::FixedOsVersion;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use rackproof_apiserver::ApiServer;
use rackproof_clock::Clock;
use serde_json::json;

#[path = "common/recording.rs"]
mod recording;

const NODE: &str = "worker-1";

fn heartbeat_time(node: &Node) -> jiff::Timestamp {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .expect("conditions");
    let ready = conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("a Ready condition");
    ready
        .last_heartbeat_time
        .as_ref()
        .expect("a heartbeat time")
        .0
}

async fn renew_time(leases: &Api<Lease>) -> jiff::Timestamp {
    leases
        .get(NODE)
        .await
        .unwrap()
        .spec
        .unwrap()
        .renew_time
        .unwrap()
        .0
}

#[tokio::test(start_paused = true)]
async fn the_heartbeat_renews_the_lease_and_reports_the_status_only_when_due() {
    let start: jiff::Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
    let clock = Clock::simulated(start);
    let server = ApiServer::new(clock.clone());
    let admin = server.admin_client();
    let client = server.node_client(NODE);
    let requests: Arc<Mutex<Vec<String>>> = Arc::default();
    let heartbeat = Heartbeat::new(
        recording::recording(client.clone(), requests.clone()),
        NODE,
        "pool-a",
        HeartbeatConfig::default(),
        clock.clone(),
    );
    let kubelet = HeartbeatKubelet::new(client, NODE, Some("1.30.4".into()));
    let os = FixedOsVersion::new("1.0.0");
    let run = heartbeat.run(&os, &kubelet);
    let lease_requests = || {
        requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.contains("/leases"))
            .cloned()
            .collect::<Vec<_>>()
    };
    let nodes: Api<Node> = Api::all(admin.clone());
    let leases: Api<Lease> = Api::namespaced(admin.clone(), LEASE_NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");

    let checks = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let node = nodes.get(NODE).await.unwrap();
        let first_report = heartbeat_time(&node);
        assert_eq!(
            node.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_OS_VERSION))
                .map(String::as_str),
            Some("1.0.0")
        );
        assert_eq!(
            node.status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.os_image.as_str()),
            Some("Rackproof 1.0.0")
        );

        // The Lease moves every renewal, with one update of the Lease as last written (no
        // read, no conflict); an unchanged status is not reported again.
        let before = lease_requests().len();
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(
            renew_time(&leases).await,
            start + jiff::SignedDuration::from_secs(60)
        );
        let renewals = lease_requests().split_off(before);
        assert_eq!(renewals.len(), 6, "one request per renewal: {renewals:?}");
        assert!(
            renewals.iter().all(|r| r.starts_with("PUT ")),
            "{renewals:?}"
        );
        // Renewals leave managedFields out of their updates; the server keeps the owner of the
        // renew time, and the time of its last write.
        let lease = leases.get(NODE).await.unwrap();
        let managed = lease
            .metadata
            .managed_fields
            .expect("the Lease keeps its managedFields");
        let renewer = managed
            .iter()
            .find(|e| {
                e.fields_v1
                    .as_ref()
                    .and_then(|f| f.0.pointer("/f:spec/f:renewTime"))
                    .is_some()
            })
            .expect("a manager owns spec.renewTime");
        assert_eq!(
            renewer.time.as_ref().map(|t| t.0),
            Some(start + jiff::SignedDuration::from_secs(60))
        );
        assert_eq!(
            heartbeat_time(&nodes.get(NODE).await.unwrap()),
            first_report,
            "an unchanged status waits for the report interval"
        );

        // A change is reported at the next renewal.
        kubelet.apply("1.31.0", None).await.unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
        let node = nodes.get(NODE).await.unwrap();
        assert_eq!(
            node.status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.kubelet_version.as_str()),
            Some("1.31.0")
        );
        let changed_report = heartbeat_time(&node);
        assert!(changed_report > first_report);

        // Unchanged, it is reported again once the report interval (5 min) passed.
        tokio::time::sleep(Duration::from_secs(4 * 60)).await;
        assert_eq!(
            heartbeat_time(&nodes.get(NODE).await.unwrap()),
            changed_report
        );
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(
            heartbeat_time(&nodes.get(NODE).await.unwrap()) > changed_report,
            "the status is reported every 5 minutes"
        );

        // A Lease deleted behind the heartbeat's back is read (and created) again.
        leases.delete(NODE, &DeleteParams::default()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(20)).await;
        let renewed = renew_time(&leases).await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(
            renew_time(&leases).await > renewed,
            "the Lease is renewed again after it was lost"
        );

        // Pods bound to the node are reported running as they arrive, and their graceful
        // deletion is completed.
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let running = pods.get("web").await.unwrap();
        assert_eq!(
            running.status.and_then(|s| s.phase).as_deref(),
            Some("Running"),
            "reported without waiting for a renewal"
        );
        pods.delete("web", &DeleteParams::default()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            pods.get_opt("web").await.unwrap().is_none(),
            "the graceful deletion is completed"
        );
    };
    tokio::select! {
        () = run => unreachable!("the heartbeat runs until dropped"),
        () = checks => {}
    }
}
