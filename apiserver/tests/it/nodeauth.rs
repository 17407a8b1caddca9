//! Node identities are restricted like Kubernetes' Node authorizer and NodeRestriction.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::{code, create_pod, server};

fn forbidden(result: kube::Result<()>) -> bool {
    matches!(result, Err(kube::Error::Api(status)) if status.code == 403)
}

pub(crate) async fn node_rules_hold(admin: kube::Client, node: kube::Client) {
    let admin_nodes: Api<Node> = Api::all(admin.clone());
    for (name, pool) in [("n1", "blue"), ("n2", "green")] {
        admin_nodes.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": name, "labels": {"worker.gardener.cloud/pool": pool}}})).unwrap()).await.unwrap();
    }
    create_pod(&admin, "mine", json!({}), Some("n1")).await;
    create_pod(&admin, "theirs", json!({}), Some("n2")).await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "kube-system");
    for name in ["osc-blue", "osc-green"] {
        secrets
            .create(
                &PostParams::default(),
                &serde_json::from_value(
                    json!({"metadata": {"name": name}, "stringData": {"osc": "x"}}),
                )
                .unwrap(),
            )
            .await
            .unwrap();
    }

    let nodes: Api<Node> = Api::all(node.clone());
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2,
        "nodes may read nodes"
    );
    nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            ),
        )
        .await
        .unwrap();
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert!(forbidden(
        nodes
            .patch(
                "n2",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}}))
            )
            .await
            .map(|_| ())
    ));
    assert!(forbidden(
        nodes
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "n3"}})).unwrap()
            )
            .await
            .map(|_| ())
    ));

    let leases: Api<Lease> = Api::namespaced(node.clone(), "kube-node-lease");
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}})).unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    leases
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"renewTime": "2025-01-01T00:00:10.000000Z"}})),
        )
        .await
        .unwrap();
    let other: Lease = serde_json::from_value(json!({"metadata": {"name": "n2"}})).unwrap();
    assert!(forbidden(
        leases
            .create(&PostParams::default(), &other)
            .await
            .map(|_| ())
    ));
    let elsewhere: Api<Lease> = Api::namespaced(node.clone(), "default");
    assert!(forbidden(
        elsewhere
            .create(&PostParams::default(), &lease)
            .await
            .map(|_| ())
    ));

    let pods: Api<Pod> = Api::namespaced(node.clone(), "default");
    pods.get("mine").await.unwrap();
    assert!(forbidden(pods.get("theirs").await.map(|_| ())));
    assert_eq!(
        pods.list(&ListParams::default().fields("spec.nodeName=n1"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert!(forbidden(
        pods.list(&ListParams::default()).await.map(|_| ())
    ));
    pods.patch_status(
        "mine",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    assert!(forbidden(
        pods.patch(
            "mine",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}))
        )
        .await
        .map(|_| ())
    ));
    pods.delete("mine", &DeleteParams::default()).await.unwrap();
    // The kubelet finishes the deletion; a pod that is gone is then not found, as NodeRestriction
    // answers (not forbidden): a kubelet finishing a deletion someone else finished treats 404
    // as done.
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    pods.delete("mine", &now).await.unwrap();
    for result in [
        pods.delete("mine", &now).await.map(|_| ()),
        pods.get("mine").await.map(|_| ()),
        pods.get_status("never-there").await.map(|_| ()),
    ] {
        assert!(
            matches!(&result, Err(kube::Error::Api(s)) if s.code == 404),
            "{result:?}"
        );
    }

    let node_secrets: Api<Secret> = Api::namespaced(node.clone(), "kube-system");
    assert!(
        forbidden(node_secrets.get("osc-blue").await.map(|_| ())),
        "no pool secret configured yet"
    );
    let events: Api<Event> = Api::namespaced(node.clone(), "default");
    let event: Event = serde_json::from_value(json!({"metadata": {"name": "e1"}, "involvedObject": {"kind": "Node", "name": "n1"}, "reason": "Updated"})).unwrap();
    events.create(&PostParams::default(), &event).await.unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(node.clone(), "default");
    assert!(forbidden(
        maps.list(&ListParams::default()).await.map(|_| ())
    ));
}

#[tokio::test(start_paused = true)]
async fn node_identities_are_restricted() {
    let server = server();
    node_rules_hold(server.admin_client(), server.node_client("n1")).await;
    server.bind_node_to_pool("n1", "blue");
    server.allow_node_secret("blue", "kube-system", "osc-blue");
    let secrets: Api<Secret> = Api::namespaced(server.node_client("n1"), "kube-system");
    secrets.get("osc-blue").await.unwrap();
    assert_eq!(
        secrets
            .list(&ListParams::default().fields("metadata.name=osc-blue"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(code(secrets.get("osc-green").await).0, 403);
    let stranger: Api<Pod> = Api::namespaced(
        server.client(rackproof_apiserver::User::named(
            "eve",
            &["system:authenticated"],
        )),
        "default",
    );
    assert_eq!(code(stranger.list(&ListParams::default()).await).0, 403);
}

#[tokio::test(start_paused = true)]
async fn a_node_that_relabels_itself_into_another_pool_reads_only_its_own_pools_secret() {
    let server = server();
    let admin = server.admin_client();
    node_rules_hold(admin.clone(), server.node_client("n1")).await;
    server.bind_node_to_pool("n1", "blue");
    server.allow_node_secret("blue", "kube-system", "osc-blue");
    server.allow_node_secret("green", "kube-system", "osc-green");
    // n1 may change its own Node's labels; moving itself into pool green changes nothing.
    let nodes: Api<Node> = Api::all(server.node_client("n1"));
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"worker.gardener.cloud/pool": "green"}}})),
        )
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(server.node_client("n1"), "kube-system");
    assert_eq!(
        code(secrets.get("osc-green").await).0,
        403,
        "n1 read pool green's secret"
    );
    secrets.get("osc-blue").await.unwrap();
    // A node never bound to a pool reads no pool's secret, whatever its label says.
    let unbound: Api<Secret> = Api::namespaced(server.node_client("n2"), "kube-system");
    assert_eq!(code(unbound.get("osc-green").await).0, 403);
}

/// A merge patch of node `name`'s Node by `client`: the HTTP code and the Status reason of a
/// refusal (`""` on success).
async fn patch_node(client: &kube::Client, name: &str, patch: serde_json::Value) -> (u16, String) {
    let nodes: Api<Node> = Api::all(client.clone());
    match nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => (200, String::new()),
        Err(error) => code::<()>(Err(error)),
    }
}

#[tokio::test(start_paused = true)]
async fn a_node_may_not_change_its_taints_kubernetes_labels_or_owner_references() {
    let server = server();
    let admin = server.admin_client();
    let node = server.node_client("n1");
    let nodes: Api<Node> = Api::all(node.clone());
    // Registering: kubelet labels pass, others in kubernetes.io / k8s.io do not.
    let register = |labels: serde_json::Value| -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n1", "labels": labels}})).unwrap()
    };
    for label in [
        "node-role.kubernetes.io/worker",
        "node-restriction.kubernetes.io/pool",
        "kubernetes.io/role",
        "example.k8s.io/x",
    ] {
        let refused = nodes
            .create(&PostParams::default(), &register(json!({ label: "x" })))
            .await;
        assert_eq!(code(refused), (403, "Forbidden".to_owned()), "{label}");
    }
    nodes
        .create(
            &PostParams::default(),
            &register(json!({"kubernetes.io/hostname": "n1", "node.kubernetes.io/instance-type": "rack", "worker.gardener.cloud/pool": "blue"})),
        )
        .await
        .unwrap();

    // The agent's own labels, kubelet labels and annotations stay the node's to write.
    for patch in [
        json!({"metadata": {"labels": {"worker.gardener.cloud/pool": "green"}}}),
        json!({"metadata": {"labels": {"node.machine.sapcloud.io/update-result": "successful"}}}),
        json!({"metadata": {"labels": {"kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "z1"}}}),
        json!({"metadata": {"labels": {"kubelet.kubernetes.io/x": "y", "node.kubernetes.io/y": "z"}}}),
        json!({"metadata": {"annotations": {"node-agent.gardener.cloud/updating-os-version": "2"}}}),
        json!({"spec": {"unschedulable": true}}),
    ] {
        assert_eq!(
            patch_node(&node, "n1", patch.clone()).await,
            (200, String::new()),
            "{patch}"
        );
    }

    // Taints (the not-ready taint of registration among them), other Kubernetes labels and
    // ownerReferences are not.
    for patch in [
        json!({"spec": {"taints": null}}),
        json!({"spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}, {"key": "mine", "effect": "NoSchedule"}]}}),
        json!({"metadata": {"labels": {"node-role.kubernetes.io/master": ""}}}),
        json!({"metadata": {"labels": {"node-restriction.kubernetes.io/pool": "a"}}}),
        json!({"metadata": {"labels": {"kubernetes.io/hostname": null, "k8s.io/x": "y"}}}),
        json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u-1"}]}}),
    ] {
        assert_eq!(
            patch_node(&node, "n1", patch.clone()).await,
            (403, "Forbidden".to_owned()),
            "{patch}"
        );
    }
    // Nor through the status subresource.
    let status = nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"node-role.kubernetes.io/master": ""}}})),
        )
        .await;
    assert_eq!(code(status), (403, "Forbidden".to_owned()));

    // The admin may do all of it; a forbidden label the node did not change stays allowed.
    let admin_patch = json!({"metadata": {"labels": {"node-role.kubernetes.io/worker": ""}}, "spec": {"taints": [{"key": "dedicated", "effect": "NoSchedule"}]}});
    assert_eq!(
        patch_node(&admin, "n1", admin_patch).await,
        (200, String::new())
    );
    assert_eq!(
        patch_node(
            &node,
            "n1",
            json!({"metadata": {"labels": {"worker.gardener.cloud/pool": "blue"}}})
        )
        .await,
        (200, String::new())
    );
    let stored = Api::<Node>::all(admin).get("n1").await.unwrap();
    let taints = stored.spec.unwrap().taints.unwrap();
    assert_eq!(taints.len(), 1, "{taints:?}");
    assert!(stored.metadata.owner_references.is_none());
}

#[tokio::test(start_paused = true)]
async fn nobody_may_change_a_nodes_provider_id_or_pod_cidr_once_set() {
    let server = server();
    let admin = server.admin_client();
    let nodes: Api<Node> = Api::all(admin.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    // From unset to a value: allowed (the cloud provider, the IPAM controller).
    let set = json!({"spec": {"providerID": "rackproof://n1", "podCIDR": "10.0.1.0/24"}});
    assert_eq!(patch_node(&admin, "n1", set).await, (200, String::new()));
    let stored = nodes.get("n1").await.unwrap().spec.unwrap();
    assert_eq!(stored.pod_cidrs, Some(vec!["10.0.1.0/24".to_owned()]));

    let invalid = |result: kube::Result<Node>, field: &str| match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
            let causes = status.details.map(|d| d.causes).unwrap_or_default();
            assert!(
                causes
                    .iter()
                    .any(|c| c.field == field && c.reason == "FieldValueForbidden"),
                "{causes:?}"
            );
        }
        other => panic!("expected 422 on {field}, got {other:?}"),
    };
    let change_provider = json!({"spec": {"providerID": "rackproof://other"}});
    invalid(
        nodes
            .patch(
                "n1",
                &PatchParams::default(),
                &Patch::Merge(change_provider),
            )
            .await,
        "spec.providerID",
    );
    let change_cidrs = json!({"spec": {"podCIDR": "10.0.2.0/24", "podCIDRs": ["10.0.2.0/24"]}});
    invalid(
        nodes
            .patch("n1", &PatchParams::default(), &Patch::Merge(change_cidrs))
            .await,
        "spec.podCIDRs",
    );
    // A replacement naming only the old podCIDR field changes podCIDRs with it.
    let mut replaced = nodes.get("n1").await.unwrap();
    let spec = replaced.spec.as_mut().unwrap();
    spec.pod_cidr = Some("10.0.3.0/24".to_owned());
    spec.pod_cidrs = None;
    invalid(
        nodes.replace("n1", &PostParams::default(), &replaced).await,
        "spec.podCIDRs",
    );
    // podCIDRs alone, disagreeing with podCIDR: podCIDR wins (as v1.20 converts), no change.
    let ignored = json!({"spec": {"podCIDRs": ["10.0.4.0/24"]}});
    assert_eq!(
        patch_node(&admin, "n1", ignored).await,
        (200, String::new())
    );
    let stored = nodes.get("n1").await.unwrap().spec.unwrap();
    assert_eq!(stored.pod_cidrs, Some(vec!["10.0.1.0/24".to_owned()]));
    // Any other spec field but unschedulable and taints is refused as a whole.
    let other = json!({"spec": {"externalID": "x"}});
    invalid(
        nodes
            .patch("n1", &PatchParams::default(), &Patch::Merge(other))
            .await,
        "[]",
    );
    let unset = json!({"spec": {"providerID": null}});
    invalid(
        nodes
            .patch("n1", &PatchParams::default(), &Patch::Merge(unset))
            .await,
        "spec.providerID",
    );
}
