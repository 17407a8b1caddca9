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
            crate::engine::error_chain(&e)
        )),
    }
}
