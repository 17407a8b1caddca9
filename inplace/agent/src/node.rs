//! Reading and marking the agent's Node: labels and annotations by JSON merge patch on metadata
//! (maps merge, `null` deletes), so the agent never overwrites what the orchestrator wrote.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use inplace_api::keys;
use inplace_api::resource_version::{self, Written};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use rackproof_std::LockExt;
use serde_json::{Value, json};

/// An API call on the Node or its pods failed.
#[derive(Debug, thiserror::Error)]
#[error("failed to {action} for node {node}")]
pub struct NodeError {
    /// What was attempted.
    pub action: String,
    /// The node.
    pub node: String,
    /// The cause.
    #[source]
    pub source: kube::Error,
}

/// The field manager the agent patches with.
pub const FIELD_MANAGER: &str = "rackproof-agent";

/// Whether the Node's `InPlaceUpdate` condition has reason `ReadyForUpdate`.
pub fn ready_for_update(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == keys::CONDITION_IN_PLACE_UPDATE
                && c.reason.as_deref() == Some(keys::REASON_READY_FOR_UPDATE)
        })
}

/// A label's value.
pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// An annotation's value.
pub fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The Node API for one node.
#[derive(Clone)]
pub struct NodeHandle {
    nodes: Api<Node>,
    pods: Api<Pod>,
    client: kube::Client,
    name: String,
    /// The resourceVersion of the agent's last write of the Node, until a followed copy shows it.
    unseen_write: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for NodeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeHandle")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl NodeHandle {
    /// Node `name` through `client`.
    pub fn new(client: kube::Client, name: &str) -> Self {
        Self {
            nodes: Api::all(client.clone()),
            pods: Api::all(client.clone()),
            client,
            name: name.to_owned(),
            unseen_write: Arc::default(),
        }
    }

    fn error(&self, action: &str, source: kube::Error) -> NodeError {
        NodeError {
            action: action.to_owned(),
            node: self.name.clone(),
            source,
        }
    }

    /// The Node, if it exists.
    pub async fn get(&self) -> Result<Option<Node>, NodeError> {
        self.nodes
            .get_opt(&self.name)
            .await
            .map_err(|e| self.error("read the node", e))
    }

    /// The Node as `followed` (the latest copy the agent's watch delivered) has it, or read from
    /// the API while that copy may not show the agent's own last write yet: a pass must not take
    /// the failed label it just set for one a person removed.
    pub async fn get_followed(&self, followed: Option<Node>) -> Result<Option<Node>, NodeError> {
        let behind = {
            let mut unseen = self.unseen_write.locked();
            let shown = match (
                unseen.as_deref(),
                followed
                    .as_ref()
                    .and_then(|n| n.metadata.resource_version.as_deref()),
            ) {
                (None, _) => true,
                (Some(written), Some(cached)) => resource_version::includes(cached, written),
                (Some(_), None) => false,
            };
            if shown {
                *unseen = None;
            }
            !shown
        };
        if behind {
            self.get().await
        } else {
            Ok(followed)
        }
    }

    /// Sets (`Some`) or removes (`None`) labels and annotations in one merge patch.
    pub async fn mark(
        &self,
        labels: &BTreeMap<&str, Option<&str>>,
        annotations: &BTreeMap<&str, Option<&str>>,
    ) -> Result<(), NodeError> {
        let to_map = |m: &BTreeMap<&str, Option<&str>>| -> Value {
            Value::Object(
                m.iter()
                    .map(|(k, v)| ((*k).to_owned(), v.map_or(Value::Null, |v| json!(v))))
                    .collect(),
            )
        };
        let patch =
            json!({"metadata": {"labels": to_map(labels), "annotations": to_map(annotations)}});
        let request = kube::core::Request::new(self.nodes.resource_url())
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .map_err(|e| self.error("label and annotate the node", kube::Error::BuildRequest(e)))?;
        let written: Written = self
            .client
            .request(request)
            .await
            .map_err(|e| self.error("label and annotate the node", e))?;
        *self.unseen_write.locked() = written.resource_version();
        Ok(())
    }

    /// Labels the node `update-result=failed` with `reason`.
    pub async fn mark_failed(&self, reason: &str) -> Result<(), NodeError> {
        self.mark(
            &BTreeMap::from([(keys::LABEL_UPDATE_RESULT, Some(keys::UPDATE_RESULT_FAILED))]),
            &BTreeMap::from([(keys::ANNOTATION_UPDATE_FAILED_REASON, Some(reason))]),
        )
        .await
    }

    /// The pods bound to the node.
    pub async fn pods(&self) -> Result<Vec<Pod>, NodeError> {
        let params = ListParams::default().fields(&format!("spec.nodeName={}", self.name));
        let list = self
            .pods
            .list(&params)
            .await
            .map_err(|e| self.error("list the pods", e))?;
        Ok(list
            .items
            .into_iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&self.name))
            .collect())
    }

    /// Deletes every pod bound to the node (gracefully; the kubelet, or the heartbeat, confirms).
    pub async fn delete_pods(&self) -> Result<usize, NodeError> {
        let pods = self.pods().await?;
        let mut deleted = 0;
        for pod in pods {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let (Some(namespace), Some(name)) = (
                pod.metadata.namespace.as_deref(),
                pod.metadata.name.as_deref(),
            ) else {
                continue;
            };
            let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => deleted += 1,
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => return Err(self.error(&format!("delete pod {namespace}/{name}"), e)),
            }
        }
        Ok(deleted)
    }
}
