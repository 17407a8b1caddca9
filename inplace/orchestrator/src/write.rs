//! The orchestrator's writes to the kinds it caches: sent as `kube::Api` sends them, with only the
//! reply's resourceVersion decoded. The caches want nothing else of it (see `cache`: a read
//! waits until the watch shows the orchestrator's last write), and a Node's or Machine's reply
//! is mostly managedFields.

use inplace_api::resource_version::Written;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde::Serialize;
use serde_json::Value;

use crate::Context;
use crate::cache::Cached;

/// One write to an object of kind `K`.
#[derive(Debug)]
pub(crate) enum Write<'a, K> {
    Create(&'a K),
    /// Update the object with this name.
    Replace(&'a str, &'a K),
    /// Update the status of the object with this name.
    ReplaceStatus(&'a str, &'a K),
    /// A JSON merge patch of the object with this name.
    MergePatch(&'a str, Value),
}

impl Context {
    /// Sends `write` through `api` and records the resourceVersion the API server answered with:
    /// reads of kind `K` wait until the watch shows it. Returns that resourceVersion.
    pub(crate) async fn write<K: Cached + Serialize>(
        &self,
        api: &Api<K>,
        write: Write<'_, K>,
    ) -> Result<Option<String>, kube::Error> {
        let request = kube::core::Request::new(api.resource_url());
        let body = |object: &K| serde_json::to_vec(object).map_err(kube::Error::SerdeError);
        let request = match write {
            Write::Create(object) => request.create(&PostParams::default(), body(object)?),
            Write::Replace(name, object) => {
                request.replace(name, &PostParams::default(), body(object)?)
            }
            Write::ReplaceStatus(name, object) => {
                request.replace_subresource("status", name, &PostParams::default(), body(object)?)
            }
            Write::MergePatch(name, patch) => {
                request.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            }
        }
        .map_err(kube::Error::BuildRequest)?;
        let version = self
            .client
            .request::<Written>(request)
            .await?
            .resource_version();
        K::cache(&self.caches).wrote(version.as_deref());
        Ok(version)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;
    use rackproof_apiserver::ApiServer;
    use rackproof_clock::Clock;
    use serde_json::json;

    use super::*;
    use crate::Config;

    /// Each kind of write moves the version reads of its kind wait for to the written object's.
    #[tokio::test(start_paused = true)]
    async fn every_write_is_awaited_at_the_version_it_wrote() {
        let clock = Clock::simulated("2026-01-01T00:00:00Z".parse().unwrap());
        let server = ApiServer::new(clock.clone());
        let ctx = Context::new(server.admin_client(), clock, Config::default());
        let nodes: Api<Node> = Api::all(ctx.client.clone());
        let version = |node: &Node| {
            node.metadata
                .resource_version
                .as_deref()
                .and_then(|rv| rv.parse::<u64>().ok())
                .unwrap()
        };
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();

        ctx.write(&nodes, Write::Create(&node)).await.unwrap();
        assert_eq!(
            ctx.caches.nodes.awaited(),
            version(&nodes.get("n1").await.unwrap())
        );
        ctx.write(
            &nodes,
            Write::MergePatch("n1", json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
        let patched = nodes.get("n1").await.unwrap();
        assert_eq!(ctx.caches.nodes.awaited(), version(&patched));
        ctx.write(&nodes, Write::Replace("n1", &patched))
            .await
            .unwrap();
        let mut replaced = nodes.get("n1").await.unwrap();
        assert_eq!(ctx.caches.nodes.awaited(), version(&replaced));
        replaced.status =
            serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "True"}]}))
                .unwrap();
        ctx.write(&nodes, Write::ReplaceStatus("n1", &replaced))
            .await
            .unwrap();
        let written = nodes.get("n1").await.unwrap();
        assert_eq!(ctx.caches.nodes.awaited(), version(&written));
        assert_eq!(
            written.status.and_then(|s| s.conditions).map(|c| c.len()),
            Some(1),
            "the status write went to the status"
        );
        assert_eq!(
            ctx.caches.machines.awaited(),
            0,
            "other kinds' reads wait for nothing"
        );
    }
}
