//! Node identities: NodeRestriction on a node's own Node, and the fields validation keeps
//! immutable once set.

use crate::support::*;

impl Pair {
    /// A pair whose real control plane gives each of `nodes` an identity
    /// (`system:node:NAME` in `system:nodes`), as the embedded server does for any name.
    pub(crate) async fn start_with_nodes(nodes: &[&str]) -> Self {
        let options = LocalOptions::default().with_nodes(nodes.iter().copied());
        let plane = LocalControlPlane::start(options)
            .await
            .unwrap_or_else(|error| panic!("{}", error_chain(&error)));
        let server = ApiServer::new(Clock::wall());
        let embedded = server.admin_client();
        let real = plane.client();
        Self {
            _server: server,
            plane,
            embedded,
            real,
            mismatches: Vec::new(),
        }
    }

    /// Clients acting as node `name` on both servers (embedded, real).
    pub(crate) async fn node_clients(&self, name: &str) -> (kube::Client, kube::Client) {
        let real = self
            .plane
            .client_as(&rackproof_cluster::local::User::node(name))
            .await
            .unwrap_or_else(|error| panic!("{}", error_chain(&error)));
        (self._server.node_client(name), real)
    }

    /// [`Pair::expect`] with `clients` (embedded, real) in place of the admin clients.
    pub(crate) async fn expect_as(
        &mut self,
        clients: &(kube::Client, kube::Client),
        call: Call,
        expected: StatusCode,
    ) -> (Reply, Reply) {
        let admin = (
            std::mem::replace(&mut self.embedded, clients.0.clone()),
            std::mem::replace(&mut self.real, clients.1.clone()),
        );
        let replies = self.expect(call, expected).await;
        (self.embedded, self.real) = admin;
        replies
    }

    /// [`Pair::known`] with `clients` (embedded, real) in place of the admin clients.
    pub(crate) async fn known_as(
        &mut self,
        clients: &(kube::Client, kube::Client),
        call: Call,
        expected: StatusCode,
        note: &str,
    ) -> (Reply, Reply) {
        let admin = (
            std::mem::replace(&mut self.embedded, clients.0.clone()),
            std::mem::replace(&mut self.real, clients.1.clone()),
        );
        let replies = self.known(call, expected, note).await;
        (self.embedded, self.real) = admin;
        replies
    }
}

/// `object` as read from one server, made fit to PUT on both: without the metadata each server
/// sets itself (`uid`, `resourceVersion`, `creationTimestamp`, `managedFields`).
fn for_replacing(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object["metadata"].as_object_mut() {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            meta.remove(field);
        }
    }
    object
}

#[tokio::test]
async fn node_restriction_of_a_nodes_own_node_object() {
    let mut pair = Pair::start_with_nodes(&["node-a"]).await;
    let node_a = pair.node_clients("node-a").await;
    let own = format!("{NODES}/node-a");

    // Registration: labels outside the kubelet's set are refused, the rest pass.
    for label in [
        "node-role.kubernetes.io/worker",
        "node-restriction.kubernetes.io/pool",
        "kubernetes.io/role",
        "example.k8s.io/x",
    ] {
        pair.expect_as(
            &node_a,
            Call::post(NODES, node("node-a", json!({ label: "x" }))),
            StatusCode::FORBIDDEN,
        )
        .await;
    }
    pair.expect_as(
        &node_a,
        Call::post(
            NODES,
            node(
                "node-a",
                json!({ "kubernetes.io/hostname": "node-a", "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "rack", "worker.gardener.cloud/pool": "a" }),
            ),
        ),
        StatusCode::CREATED,
    )
    .await;

    // Labels the agent and the kubelet write stay the node's.
    for patch in [
        r#"{"metadata":{"labels":{"worker.gardener.cloud/pool":"b","node.machine.sapcloud.io/update-result":"successful"}}}"#,
        r#"{"metadata":{"labels":{"topology.kubernetes.io/zone":"z1","beta.kubernetes.io/arch":"amd64","kubelet.kubernetes.io/x":"y","sub.node.kubernetes.io/z":"w"}}}"#,
        r#"{"metadata":{"labels":{"kubernetes.io/os":null}}}"#,
        r#"{"spec":{"unschedulable":true}}"#,
    ] {
        pair.expect_as(&node_a, Call::patch(&own, MERGE, patch), StatusCode::OK)
            .await;
    }

    // Taints and other Kubernetes labels are not, through the main resource or status.
    for patch in [
        r#"{"spec":{"taints":null}}"#,
        r#"{"spec":{"taints":[{"key":"node.kubernetes.io/not-ready","effect":"NoSchedule"},{"key":"mine","effect":"NoSchedule"}]}}"#,
        r#"{"metadata":{"labels":{"node-role.kubernetes.io/master":""}}}"#,
        r#"{"metadata":{"labels":{"node-restriction.kubernetes.io/pool":"a"}}}"#,
        r#"{"metadata":{"labels":{"k8s.io/x":"y"}}}"#,
        r#"{"metadata":{"labels":{"kubernetes.io/hostname":null,"topology.kubernetes.io/rack":"r1"}}}"#,
    ] {
        pair.expect_as(
            &node_a,
            Call::patch(&own, MERGE, patch),
            StatusCode::FORBIDDEN,
        )
        .await;
    }
    pair.expect_as(
        &node_a,
        Call::patch(
            format!("{own}/status"),
            MERGE,
            r#"{"metadata":{"labels":{"node-role.kubernetes.io/master":""}}}"#,
        ),
        StatusCode::FORBIDDEN,
    )
    .await;
    let (_, real) = pair
        .expect_as(&node_a, Call::get(&own), StatusCode::OK)
        .await;
    let mut replaced = for_replacing(&real.body);
    replaced["spec"]["taints"] = json!([]);
    pair.expect_as(&node_a, Call::put(&own, replaced), StatusCode::FORBIDDEN)
        .await;

    // The admin may; a forbidden label the node leaves alone does not stop its other writes.
    pair.expect(
        Call::patch(
            &own,
            MERGE,
            r#"{"metadata":{"labels":{"node-role.kubernetes.io/worker":""}},"spec":{"taints":[{"key":"dedicated","value":"rack","effect":"NoSchedule"}]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect_as(
        &node_a,
        Call::patch(
            &own,
            MERGE,
            r#"{"metadata":{"labels":{"worker.gardener.cloud/pool":"a"}}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect_as(
        &node_a,
        Call::patch(
            &own,
            MERGE,
            r#"{"metadata":{"labels":{"node-role.kubernetes.io/worker":null}}}"#,
        ),
        StatusCode::FORBIDDEN,
    )
    .await;
    // Version difference V6 (last: the real server's Node keeps the change).
    pair.known_as(
        &node_a,
        Call::patch(
            &own,
            MERGE,
            r#"{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"c","uid":"8c7a8e0e-7b4f-4c1e-9d7a-000000000001"}]}}"#,
        ),
        StatusCode::OK,
        "V6 (a node may not change its Node's ownerReferences)",
    )
    .await;
    pair.finish().await;
}

#[tokio::test]
async fn node_provider_id_and_pod_cidr_are_immutable_once_set() {
    let mut pair = Pair::start_with_nodes(&["node-a"]).await;
    let node_a = pair.node_clients("node-a").await;
    let own = format!("{NODES}/node-a");
    pair.expect(
        Call::post(NODES, node("node-a", json!({}))),
        StatusCode::CREATED,
    )
    .await;
    // From unset to a value, by anyone allowed to write the Node; podCIDRs follows podCIDR.
    pair.known(
        Call::patch(
            &own,
            MERGE,
            r#"{"spec":{"providerID":"rackproof://node-a","podCIDR":"10.0.1.0/24"}}"#,
        ),
        StatusCode::OK,
        "R18 (no managedFields for a Node write that sets podCIDR)",
    )
    .await;
    // Changing either afterwards: 422 for every user, the admin included.
    for patch in [
        r#"{"spec":{"providerID":"rackproof://other"}}"#,
        r#"{"spec":{"providerID":null}}"#,
        r#"{"spec":{"podCIDR":"10.0.2.0/24","podCIDRs":["10.0.2.0/24"]}}"#,
        r#"{"spec":{"podCIDR":"10.0.3.0/24"}}"#,
        r#"{"spec":{"providerID":"rackproof://other","podCIDR":"10.0.2.0/24"}}"#,
        r#"{"spec":{"externalID":"other"}}"#,
    ] {
        pair.expect(
            Call::patch(&own, MERGE, patch),
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    pair.expect_as(
        &node_a,
        Call::patch(&own, MERGE, r#"{"spec":{"providerID":"rackproof://mine"}}"#),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    // podCIDRs alone in a patch: podCIDR, still set, wins and nothing changes. (Compared
    // without managedFields: R18.)
    pair.expect_without_managed_fields(
        Call::patch(&own, MERGE, r#"{"spec":{"podCIDRs":["10.0.4.0/24"]}}"#),
        StatusCode::OK,
    )
    .await;
    // A replacement naming only podCIDR changes podCIDRs with it.
    let real = send(&pair.real, &Call::get(&own)).await;
    let mut replaced = for_replacing(&real.body);
    replaced["spec"]["podCIDR"] = json!("10.0.3.0/24");
    if let Some(spec) = replaced["spec"].as_object_mut() {
        spec.remove("podCIDRs");
    }
    pair.expect(Call::put(&own, replaced), StatusCode::UNPROCESSABLE_ENTITY)
        .await;
    // Setting the same values again is no change.
    pair.expect_without_managed_fields(
        Call::patch(
            &own,
            MERGE,
            r#"{"spec":{"providerID":"rackproof://node-a","podCIDRs":["10.0.1.0/24"]}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.finish().await;
}
