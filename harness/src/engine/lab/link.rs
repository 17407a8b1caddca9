//! A simulated node's network link (fault `partition` on `sim`): while it is down, the node's
//! requests to the API server fail after a connect timeout, the responses it is still reading
//! (watches) break off, and its downloads from the image server fail, as a cut cable makes them.
//! The machine, its power and its pods stay; its kubelet cannot renew its Lease.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body::{Body as HttpBody, Frame};
use tokio::sync::watch;

/// How long a request waits for a connection that the partition never lets through.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The link of one node; clones share it. Up when made.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    up: watch::Sender<bool>,
}

impl Default for Link {
    fn default() -> Self {
        Self {
            up: watch::Sender::new(true),
        }
    }
}

impl Link {
    /// Cuts (`false`) or restores (`true`) the link.
    pub(crate) fn set(&self, up: bool) {
        self.up.send_replace(up);
    }

    /// Whether the link is cut.
    pub(crate) fn is_down(&self) -> bool {
        !*self.up.borrow()
    }

    /// Resolves when the link is (or goes) down.
    fn down(&self) -> BoxFuture<'static, ()> {
        let mut up = self.up.subscribe();
        Box::pin(async move {
            // An error means the link itself is gone: nothing will cut it any more.
            if up.wait_for(|up| !*up).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }

    /// The error a request or a download meets while the link is down.
    pub(crate) fn unreachable() -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no route to the host: the node's network is cut (lab fault `partition`)",
        )
    }

    /// `client` as the node sees it through this link.
    pub(crate) fn client(&self, client: kube::Client) -> kube::Client {
        let namespace = client.default_namespace().to_owned();
        let link = self.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let (client, link) = (client.clone(), link.clone());
            async move {
                if link.is_down() {
                    tokio::time::sleep(CONNECT_TIMEOUT).await;
                    return Err(BoxError::from(Self::unreachable()));
                }
                let response = client.send(request).await.map_err(BoxError::from)?;
                let down = link.down();
                Ok::<_, BoxError>(response.map(|body| Severable { body, down }))
            }
        });
        kube::Client::new(service, namespace)
    }
}

/// A response body that breaks off when the link goes down.
struct Severable {
    body: kube::client::Body,
    down: BoxFuture<'static, ()>,
}

impl HttpBody for Severable {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.down.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(BoxError::from(Link::unreachable()))));
        }
        Pin::new(&mut self.body)
            .poll_frame(cx)
            .map_err(BoxError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt as _;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use kube::runtime::watcher;

    #[tokio::test(start_paused = true)]
    async fn a_cut_link_fails_requests_breaks_watches_and_heals() {
        let server = rackproof_apiserver::ApiServer::new(rackproof_clock::Clock::simulated(
            "2026-01-01T00:00:00Z".parse().unwrap(),
        ));
        let link = Link::default();
        let api: Api<ConfigMap> = Api::namespaced(link.client(server.admin_client()), "default");
        api.list(&Default::default())
            .await
            .expect("up: requests pass");
        let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
        assert!(matches!(
            events.next().await,
            Some(Ok(watcher::Event::Init))
        ));
        assert!(matches!(
            events.next().await,
            Some(Ok(watcher::Event::InitDone))
        ));

        link.set(false);
        let cut = events.next().await.expect("the watch reports the cut");
        assert!(cut.is_err(), "{cut:?}");
        let error = api.list(&Default::default()).await.unwrap_err();
        assert!(
            error.to_string().contains("network is cut")
                || format!("{error:?}").contains("network is cut"),
            "{error:?}"
        );

        link.set(true);
        api.list(&Default::default())
            .await
            .expect("healed: requests pass again");
    }
}
