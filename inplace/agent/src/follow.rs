//! Following one API object by name: a watch with the field selector `metadata.name=NAME`
//! (what the Node authorizer lets a node do for its own Node and its pool's Secret), publishing
//! the latest version of the object into a `tokio::sync::watch` channel (`None` while it does
//! not exist). A failed watch is retried after a backoff on the agent's clock (so simulated runs
//! stay reproducible) that starts short, because the first failure is usually brief: a node
//! that has not registered yet may not read its pool's Secret, and registers moments later.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use inplace_api::unmanaged::{self, Unmanaged};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use rackproof_clock::Clock;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

/// The first retry after a watch failed; each further failure in a row doubles it, up to the
/// `retry` given to [`follow`].
const FIRST_RETRY: Duration = Duration::from_millis(250);

/// Keeps `latest` up to date with object `name` of `api` until the future is dropped. Watch
/// errors are logged at debug level (a node that is not registered yet may not read its pool's
/// Secret) and retried after a backoff from [`FIRST_RETRY`] up to `retry`.
pub(crate) async fn follow<K>(
    api: Api<Unmanaged<K>>,
    name: &str,
    clock: &Clock,
    retry: Duration,
    latest: &watch::Sender<Option<K>>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(unmanaged::watcher(api, config));
    // Whether the current (re)list found the object.
    let mut listed = false;
    let mut backoff = FIRST_RETRY.min(retry);
    while let Some(event) = events.next().await {
        if event.is_ok() {
            backoff = FIRST_RETRY.min(retry);
        }
        match event {
            Ok(Event::Apply(object)) => {
                latest.send_replace(Some(object));
            }
            Ok(Event::Delete(_)) => {
                latest.send_replace(None);
            }
            Ok(Event::Init) => listed = false,
            Ok(Event::InitApply(object)) => {
                listed = true;
                latest.send_replace(Some(object));
            }
            Ok(Event::InitDone) => {
                if !listed {
                    latest.send_if_modified(|current| current.take().is_some());
                }
            }
            Err(e) => {
                tracing::debug!(object = name, error = %rackproof_std::error_chain(&e), retry_in = ?backoff, "watch failed; retrying");
                clock.sleep(backoff).await;
                backoff = (backoff * 2).min(retry);
            }
        }
    }
}
