//! Watches: a stream of `{"type": ..., "object": ...}` lines replaying the store's event log
//! from a resourceVersion, filtered by namespace and selectors.
//!
//! 1. Without a resourceVersion (or with "0"), the current matching objects come first as
//!    ADDED; with `sendInitialEvents=true` they end with a BOOKMARK annotated
//!    `k8s.io/initial-events-end`.
//! 2. Every event after the starting resourceVersion follows, in order, exactly once. An object
//!    that starts or stops matching the selectors arrives as ADDED or DELETED.
//! 3. A resourceVersion older than the event log keeps → one ERROR event (410 Expired), then
//!    the stream ends, as kube-apiserver does.
//! 4. With `allowWatchBookmarks`, a BOOKMARK carries the current resourceVersion every minute.
//! 5. The stream ends after `timeoutSeconds` (default 30 minutes).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};

use crate::Core;
use crate::error::ApiError;
use crate::registry::Resource;
use crate::request::ListOptions;
use crate::store::{Event, EventType};

const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

struct Cursor {
    core: Arc<Core>,
    resource: Arc<Resource>,
    namespace: Option<String>,
    options: ListOptions,
    rv: u64,
    pending: VecDeque<Bytes>,
    changed: tokio::sync::watch::Receiver<u64>,
    deadline: tokio::time::Instant,
    next_bookmark: tokio::time::Instant,
    done: bool,
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut text = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    text.push(b'\n');
    Bytes::from(text)
}

/// Starts a watch; errors in the request itself (bad resourceVersion) are returned at once.
pub(crate) fn start(core: Arc<Core>, resource: Arc<Resource>, namespace: Option<String>, options: ListOptions) -> Result<impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static, ApiError> {
    let now = core.clock.instant();
    let timeout = options.timeout_seconds.map(Duration::from_secs).unwrap_or(DEFAULT_TIMEOUT);
    let mut changed = core.changed.subscribe();
    changed.borrow_and_update();
    let mut cursor = Cursor {
        core: core.clone(),
        resource: resource.clone(),
        namespace,
        options,
        rv: 0,
        pending: VecDeque::new(),
        changed,
        deadline: now + timeout,
        next_bookmark: now + BOOKMARK_EVERY,
        done: false,
    };
    let requested = cursor.options.resource_version.clone().filter(|rv| !rv.is_empty());
    let state = core.lock();
    match requested.as_deref() {
        None | Some("0") => {
            cursor.rv = state.store.resource_version();
            let gr = resource.group_resource();
            for (_, slot) in state.store.slots(&gr, cursor.namespace.as_deref(), None) {
                if cursor.matches(&slot.object) {
                    // The object's cached encoding, spliced (see `store::Slot`).
                    let members = slot.members_json();
                    let mut text = Vec::with_capacity(members.len() + 96);
                    text.extend_from_slice(b"{\"type\":\"ADDED\",\"object\":");
                    crate::handler::splice_object(&mut text, &resource, members);
                    text.extend_from_slice(b"}\n");
                    cursor.pending.push_back(Bytes::from(text));
                }
            }
            if cursor.options.send_initial_events {
                let bookmark = cursor.bookmark(Some(true));
                cursor.pending.push_back(bookmark);
            }
        }
        Some(text) => {
            cursor.rv = text.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {text:?}")))?;
        }
    }
    drop(state);
    Ok(futures::stream::unfold(cursor, |mut cursor| async move {
        loop {
            if let Some(next) = cursor.pending.pop_front() {
                return Some((Ok(next), cursor));
            }
            if cursor.done {
                return None;
            }
            cursor.changed.borrow_and_update();
            cursor.poll_events();
            if !cursor.pending.is_empty() || cursor.done {
                continue;
            }
            // Biased (changes first): reproducible under a simulated clock.
            tokio::select! {
                biased;
                changed = cursor.changed.changed() => {
                    if changed.is_err() {
                        cursor.done = true;
                    }
                }
                () = tokio::time::sleep_until(cursor.deadline) => cursor.done = true,
                () = tokio::time::sleep_until(cursor.next_bookmark) => {
                    cursor.next_bookmark += BOOKMARK_EVERY;
                    if cursor.options.bookmarks {
                        let bookmark = cursor.bookmark(None);
                        cursor.pending.push_back(bookmark);
                    }
                }
            }
        }
    }))
}

impl Cursor {
    fn matches(&self, object: &Value) -> bool {
        let namespace_ok = self.namespace.as_deref().is_none_or(|ns| object.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns));
        namespace_ok && self.options.labels.matches(object) && self.options.fields.matches(object)
    }

    fn bookmark(&self, initial_end: Option<bool>) -> Bytes {
        let mut metadata = json!({"resourceVersion": self.rv.to_string()});
        if initial_end.is_some() {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line("BOOKMARK", &json!({"kind": self.resource.kind, "apiVersion": self.resource.api_version(), "metadata": metadata}))
    }

    fn poll_events(&mut self) {
        let core = self.core.clone();
        let state = core.lock();
        match state.store.events_since(&self.resource.group_resource(), self.rv) {
            Err(oldest) => {
                let status = ApiError::gone(format!("too old resource version: {} ({})", self.rv, oldest)).status();
                self.pending.push_back(line("ERROR", &status));
                self.done = true;
            }
            Ok(events) => {
                for event in &events {
                    if let Some((kind, object)) = self.translate(event) {
                        self.pending.push_back(line(kind, &crate::handler::present(&self.resource, &object)));
                    }
                }
                self.rv = state.store.resource_version();
            }
        }
    }

    fn translate(&self, event: &Event) -> Option<(&'static str, Arc<Value>)> {
        let now = self.matches(&event.object);
        let before = event.previous.as_ref().is_some_and(|p| self.matches(p));
        match event.kind {
            EventType::Added if now => Some(("ADDED", event.object.clone())),
            EventType::Modified if now && before => Some(("MODIFIED", event.object.clone())),
            EventType::Modified if now => Some(("ADDED", event.object.clone())),
            EventType::Modified if before => Some(("DELETED", event.object.clone())),
            EventType::Deleted if before => Some(("DELETED", event.object.clone())),
            _ => None,
        }
    }
}
