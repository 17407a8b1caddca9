//! The rule of the local control plane's authorization webhook, the part Gardener's node-agent
//! authorizer plays: node `N` may read Secret `ns/name` when a Machine of the run names `N` in its
//! `node` label and `ns/name` in its OSC annotation. Both are written by the machine provider and
//! the orchestrator, never by a node, so a node cannot widen its own access (relabelling its Node
//! changes nothing). Everything else gets no opinion, so RBAC decides.

use std::sync::{Arc, OnceLock};

use inplace_api::crd::Machine;
use inplace_api::keys::MACHINE_LABEL_NODE;
use inplace_orchestrator::workerpool::ANNOTATION_OSC_SECRET;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use rackproof_cluster::local::{AccessRequest, Decision, NodeAuthorizer};

use crate::engine::cluster::objects::NAMESPACE;

/// The webhook's rule, reading Machines with the admin client once it is set (until then, every
/// answer is "no opinion").
pub(crate) fn authorizer(admin: Arc<OnceLock<Client>>) -> NodeAuthorizer {
    NodeAuthorizer::new(move |access| {
        let admin = admin.get().cloned();
        async move {
            match admin {
                Some(client) => decide(&client, &access).await,
                None => Decision::NoOpinion("the run is still starting".to_owned()),
            }
        }
    })
}

async fn decide(client: &Client, access: &AccessRequest) -> Decision {
    let Some(node) = access.user.strip_prefix("system:node:") else {
        return Decision::NoOpinion("not a node".to_owned());
    };
    let reads_a_secret = access.group.is_empty()
        && access.resource == "secrets"
        && access.subresource.is_empty()
        && matches!(access.verb.as_str(), "get" | "list" | "watch")
        && !access.name.is_empty();
    if !access.groups.iter().any(|g| g == "system:nodes") || !reads_a_secret {
        return Decision::NoOpinion(format!(
            "node {node} may only read its pool's OSC Secret here"
        ));
    }
    let machines: Api<Machine> = Api::namespaced(client.clone(), NAMESPACE);
    let bound = ListParams::default().labels(&format!("{MACHINE_LABEL_NODE}={node}"));
    let wanted = format!("{}/{}", access.namespace, access.name);
    match machines.list(&bound).await {
        Ok(list) => {
            if list
                .items
                .iter()
                .any(|m| m.annotations().get(ANNOTATION_OSC_SECRET) == Some(&wanted))
            {
                Decision::Allow
            } else {
                Decision::NoOpinion(format!(
                    "no Machine bound to node {node} names Secret {wanted}"
                ))
            }
        }
        Err(e) => Decision::NoOpinion(format!(
            "reading the Machines of node {node} failed: {}",
            rackproof_std::error_chain(&e)
        )),
    }
}

#[cfg(test)]
mod tests {
    use kube::api::PostParams;
    use rackproof_apiserver::ApiServer;
    use rackproof_clock::Clock;
    use serde_json::json;

    use super::*;

    fn secret_read(node: &str, verb: &str, namespace: &str, name: &str) -> AccessRequest {
        AccessRequest {
            user: format!("system:node:{node}"),
            groups: vec!["system:nodes".to_owned(), "system:authenticated".to_owned()],
            verb: verb.to_owned(),
            resource: "secrets".to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            ..AccessRequest::default()
        }
    }

    #[tokio::test]
    async fn a_node_reads_only_the_secret_its_machine_names() {
        let server = ApiServer::new(Clock::wall());
        let client = server.admin_client();
        for crd in inplace_api::crd::crds() {
            Api::all(client.clone())
                .create(&PostParams::default(), &crd)
                .await
                .unwrap();
        }
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap(),
            )
            .await
            .unwrap();
        let machine: Machine = serde_json::from_value(json!({
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "Machine",
            "metadata": {
                "name": "workers-abc-0",
                "namespace": NAMESPACE,
                "labels": { MACHINE_LABEL_NODE: "node-1" },
                "annotations": { ANNOTATION_OSC_SECRET: "kube-system/osc-workers" }
            },
            "spec": {}
        }))
        .unwrap();
        Api::<Machine>::namespaced(client.clone(), NAMESPACE)
            .create(&PostParams::default(), &machine)
            .await
            .unwrap();

        let allowed = decide(
            &client,
            &secret_read("node-1", "get", "kube-system", "osc-workers"),
        )
        .await;
        assert_eq!(allowed, Decision::Allow);
        let watched = decide(
            &client,
            &secret_read("node-1", "watch", "kube-system", "osc-workers"),
        )
        .await;
        assert_eq!(watched, Decision::Allow);
        for (node, verb, name) in [
            ("node-1", "get", "osc-other-pool"),
            ("node-2", "get", "osc-workers"),
            ("node-1", "list", ""),
            ("node-1", "update", "osc-workers"),
        ] {
            let decision = decide(&client, &secret_read(node, verb, "kube-system", name)).await;
            assert!(
                matches!(decision, Decision::NoOpinion(_)),
                "{node} {verb} {name:?}: {decision:?}"
            );
        }
        let mut not_a_node = secret_read("node-1", "get", "kube-system", "osc-workers");
        not_a_node.groups = vec!["system:authenticated".to_owned()];
        assert!(matches!(
            decide(&client, &not_a_node).await,
            Decision::NoOpinion(_)
        ));
    }
}
