//! Users and authorization: bearer tokens mapped to users and groups, the admin identity
//! (`system:masters`), and per-node identities restricted like Kubernetes' Node authorizer plus
//! NodeRestriction admission.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::error::ApiError;
use crate::pointer::At;
use crate::request::{Action, Subresource, Target};
use crate::state::{State, gr};
use crate::store::Key;

/// Group of the admin identity; members may do anything.
pub const MASTERS_GROUP: &str = "system:masters";
/// Group of node identities.
pub const NODES_GROUP: &str = "system:nodes";

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct User {
    /// User name, e.g. `system:node:worker-1`.
    pub name: String,
    /// Groups, e.g. `system:nodes`.
    pub groups: Vec<String>,
}

impl User {
    /// The admin identity (`system:masters`).
    pub fn admin() -> Self {
        Self {
            name: "rackproof:admin".to_owned(),
            groups: vec![MASTERS_GROUP.to_owned(), "system:authenticated".to_owned()],
        }
    }

    /// The identity of node `name`'s kubelet or node agent.
    pub fn node(name: &str) -> Self {
        Self {
            name: format!("system:node:{name}"),
            groups: vec![NODES_GROUP.to_owned(), "system:authenticated".to_owned()],
        }
    }

    /// Any other user with `groups`; it may use discovery only.
    pub fn named(name: &str, groups: &[&str]) -> Self {
        Self {
            name: name.to_owned(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }

    /// The node this identity belongs to, if it is a node identity.
    pub fn node_name(&self) -> Option<&str> {
        if !self.groups.iter().any(|g| g == NODES_GROUP) {
            return None;
        }
        self.name.strip_prefix("system:node:")
    }

    pub(crate) fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS_GROUP)
    }
}

/// Authentication and authorization settings. `Debug` shows the users, never their tokens.
#[derive(Default)]
pub(crate) struct AuthConfig {
    pub(crate) tokens: HashMap<String, User>,
    /// Node → its pool, as bound by whoever issued the node's identity (never read from an
    /// object the node may write, such as its own labels).
    pub(crate) node_pools: BTreeMap<String, String>,
    /// Pool → the (namespace, name) secrets nodes of that pool may read.
    pub(crate) node_secrets: BTreeMap<String, Vec<(String, String)>>,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut users: Vec<&str> = self.tokens.values().map(|u| u.name.as_str()).collect();
        users.sort_unstable();
        f.debug_struct("AuthConfig")
            .field("tokens", &format_args!("<{} redacted>", self.tokens.len()))
            .field("users", &users)
            .field("node_pools", &self.node_pools)
            .field("node_secrets", &self.node_secrets)
            .finish()
    }
}

/// Decides whether `user` may perform `action`; Err(403) otherwise.
pub(crate) fn authorize(state: &State, user: &User, action: &Action) -> Result<(), ApiError> {
    if user.is_admin() {
        return Ok(());
    }
    let Some((verb, target)) = action.verb_and_target() else {
        // Discovery, OpenAPI and health are open to every authenticated user.
        return Ok(());
    };
    let resource = &target.resource;
    let namespace = target.namespace.as_deref().unwrap_or_default();
    let deny = |why: &str| {
        Err(ApiError::forbidden(
            &user.name,
            verb,
            &resource.group,
            &subresource_name(target),
            namespace,
            why,
        ))
    };
    let Some(node) = user.node_name() else {
        return deny("no RBAC policy matched");
    };
    let name = target.name.as_deref();
    let group = resource.group.as_str();
    let plural = resource.plural.as_str();
    let read = matches!(verb, "get" | "list" | "watch");
    match (group, plural) {
        ("", "nodes") => {
            if read {
                return Ok(());
            }
            if matches!(verb, "create" | "update" | "patch" | "delete")
                && name == Some(node)
                && !matches!(target.sub, Some(Subresource::Scale | Subresource::Eviction))
            {
                return Ok(());
            }
            if verb == "create" && name.is_none() {
                // The name is in the body; the handler checks it matches (NodeRestriction).
                return Ok(());
            }
            deny(&format!(
                "node {node:?} may only modify its own Node object"
            ))
        }
        ("coordination.k8s.io", "leases") => {
            if namespace == "kube-node-lease"
                && (name == Some(node) || (verb == "create" && name.is_none()))
                && verb != "list"
                && verb != "watch"
            {
                return Ok(());
            }
            deny(&format!(
                "node {node:?} may only use its own Lease in kube-node-lease"
            ))
        }
        ("", "pods") => {
            if matches!(verb, "list" | "watch") {
                return match action
                    .field_selector()
                    .and_then(|f| f.pinned("spec.nodeName"))
                {
                    Some(pinned) if pinned == node => Ok(()),
                    _ => deny(&format!(
                        "node {node:?} may only list pods with fieldSelector spec.nodeName={node}"
                    )),
                };
            }
            let allowed_verb = match target.sub {
                None => matches!(verb, "get" | "delete"),
                Some(Subresource::Status) => matches!(verb, "get" | "update" | "patch"),
                _ => false,
            };
            // A pod that does not exist is the handler's 404, as NodeRestriction answers: a
            // kubelet finishing a deletion that was finished meanwhile sees "not found".
            let bound_here = name.is_some_and(|name| match pod_node(state, namespace, name) {
                PodBinding::Missing => true,
                PodBinding::Bound(bound) => bound.as_deref() == Some(node),
            });
            if allowed_verb && bound_here {
                return Ok(());
            }
            deny(&format!("node {node:?} can only access pods bound to it"))
        }
        ("", "secrets") => {
            let allowed = state
                .auth
                .node_pools
                .get(node)
                .and_then(|pool| state.auth.node_secrets.get(pool))
                .cloned()
                .unwrap_or_default();
            let wanted = match verb {
                "get" => name.map(str::to_owned),
                "list" | "watch" => action
                    .field_selector()
                    .and_then(|f| f.pinned("metadata.name"))
                    .map(str::to_owned),
                _ => None,
            };
            if let Some(wanted) = wanted
                && allowed
                    .iter()
                    .any(|(ns, n)| ns == namespace && *n == wanted)
            {
                return Ok(());
            }
            deny(&format!(
                "no relationship found between node '{node}' and this object"
            ))
        }
        ("", "events") | ("events.k8s.io", "events") => {
            if matches!(verb, "create" | "update" | "patch") {
                return Ok(());
            }
            deny("nodes may only write events")
        }
        _ => deny(&format!(
            "node {node:?} is not allowed to access this resource"
        )),
    }
}

fn subresource_name(target: &Target) -> String {
    match target.sub {
        Some(sub) => format!("{}/{}", target.resource.plural, sub.as_str()),
        None => target.resource.plural.clone(),
    }
}

/// Whether a pod exists, and the node it is bound to.
enum PodBinding {
    Missing,
    Bound(Option<String>),
}

fn pod_node(state: &State, namespace: &str, name: &str) -> PodBinding {
    let Some(pod) = state.store.get(&Key {
        gr: gr("", "pods"),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    }) else {
        return PodBinding::Missing;
    };
    PodBinding::Bound(
        pod.at("/spec/nodeName")
            .and_then(Value::as_str)
            .map(str::to_owned),
    )
}

/// NodeRestriction: a node creating or updating a Node or Lease must use its own name.
pub(crate) fn check_node_body(
    user: &User,
    target: &Target,
    body_name: Option<&str>,
) -> Result<(), ApiError> {
    let Some(node) = user.node_name() else {
        return Ok(());
    };
    let own = matches!(
        (
            target.resource.group.as_str(),
            target.resource.plural.as_str()
        ),
        ("", "nodes") | ("coordination.k8s.io", "leases")
    );
    if own && body_name.is_some_and(|n| n != node) {
        return Err(ApiError::forbidden(
            &user.name,
            "create",
            &target.resource.group,
            &target.resource.plural,
            target.namespace.as_deref().unwrap_or_default(),
            &format!(
                "node {node:?} is not allowed to modify {:?}",
                body_name.unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_config_debug_output_never_shows_a_token() {
        let mut config = AuthConfig::default();
        config
            .tokens
            .insert("canary-admin-token-77c1".to_owned(), User::admin());
        config
            .tokens
            .insert("canary-node-token-12ab".to_owned(), User::node("worker-1"));
        let printed = format!("{config:?} {config:#?}");
        assert!(!printed.contains("canary-admin-token-77c1"), "{printed}");
        assert!(!printed.contains("canary-node-token-12ab"), "{printed}");
        assert!(printed.contains("system:node:worker-1"), "{printed}");
    }
}
