//! Watches: a stream of `{"type": ..., "object": ...}` lines replaying the store's event log
//! from a resourceVersion, then every new event as the store records it, filtered by namespace
//! and selectors.
//!
//! 1. Without a resourceVersion (or with "0"), the current matching objects come first as
//!    ADDED; with `sendInitialEvents=true` they end with a BOOKMARK annotated
//!    `k8s.io/initial-events-end`.
//! 2. Every event after the starting resourceVersion follows, in order, exactly once. An object
//!    that starts or stops matching the selectors arrives as ADDED or DELETED. The replay and the
//!    registration with the store happen under one lock, so nothing falls in between; from then
//!    on the store pushes each event to the watch as it is recorded (see `store` for the
//!    fan-out), and the watch is unregistered when its stream is dropped.
//! 3. A resourceVersion older than the event log keeps → one ERROR event (410 Expired), then
//!    the stream ends, as kube-apiserver does.
//! 4. With `allowWatchBookmarks`, a BOOKMARK carries the current resourceVersion every minute.
//! 5. The stream ends after `timeoutSeconds`, read as kube-apiserver reads it: absent or 0 →
//!    30 minutes; negative → at once; beyond what Go's `time.Duration` holds (about 292 years)
//!    → clamped to that; beyond int64 → 400 when the request is parsed.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::Core;
use crate::error::ApiError;
use crate::pointer::At;
use crate::registry::Resource;
use crate::request::ListOptions;
use crate::store::{Delivery, Event, INDEXED_FIELDS, Matcher};

const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// The longest watch: the most seconds a Go `time.Duration` (int64 nanoseconds) holds, which
/// is what kube-apiserver turns `timeoutSeconds` into.
const MAX_TIMEOUT: Duration = Duration::from_secs(i64::MAX.unsigned_abs() / 1_000_000_000);

/// How long a watch lasts for `timeoutSeconds` (see the module docs, step 5).
fn watch_timeout(seconds: Option<i64>) -> Duration {
    match seconds {
        None | Some(0) => DEFAULT_TIMEOUT,
        Some(n) if n < 0 => Duration::ZERO,
        Some(n) => Duration::from_secs(n.unsigned_abs()).min(MAX_TIMEOUT),
    }
}

/// A watch's registration with the store, undone when the stream is dropped.
struct Registration {
    core: Arc<Core>,
    id: Option<u64>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.core.lock().store.unwatch(id);
        }
    }
}

struct Cursor {
    registration: Registration,
    resource: Arc<Resource>,
    /// The resourceVersion the watch has seen everything up to.
    rv: u64,
    bookmarks: bool,
    pending: VecDeque<Bytes>,
    events: Option<UnboundedReceiver<Delivery>>,
    deadline: tokio::time::Instant,
    next_bookmark: tokio::time::Instant,
    done: bool,
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut text = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    text.push(b'\n');
    Bytes::from(text)
}

/// `{"type":KIND,"object":…}` from an object's cached encoding (see `store::Slot`), the same
/// text as [`line`] with the object as served at `resource`'s version.
fn spliced_line(kind: &str, resource: &Resource, members: &[u8]) -> Bytes {
    let mut text = Vec::with_capacity(members.len() + 128);
    text.extend_from_slice(b"{\"type\":\"");
    text.extend_from_slice(kind.as_bytes());
    text.extend_from_slice(b"\",\"object\":");
    crate::handler::splice_object(&mut text, resource, members);
    text.extend_from_slice(b"}\n");
    Bytes::from(text)
}

fn event_line(kind: &str, resource: &Resource, event: &Event) -> Bytes {
    spliced_line(kind, resource, event.members_json())
}

/// The watch's filter: namespace, label and field selectors.
fn matcher(namespace: Option<String>, options: &ListOptions) -> Matcher {
    let labels = options.labels.clone();
    let fields = options.fields.clone();
    Box::new(move |object: &Value| {
        let namespace_ok = namespace
            .as_deref()
            .is_none_or(|ns| object.at("/metadata/namespace").and_then(Value::as_str) == Some(ns));
        namespace_ok && labels.matches(object) && fields.matches(object)
    })
}

/// Starts a watch; errors in the request itself (bad resourceVersion) are returned at once.
pub(crate) fn start(
    core: Arc<Core>,
    resource: Arc<Resource>,
    namespace: Option<String>,
    options: ListOptions,
) -> Result<impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static, ApiError> {
    let now = core.clock.instant();
    let timeout = watch_timeout(options.timeout_seconds);
    let requested = options.resource_version.clone().filter(|rv| !rv.is_empty());
    let since =
        match requested.as_deref() {
            None | Some("0") => None,
            Some(text) => Some(text.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version: {text:?}"))
            })?),
        };
    let matches = matcher(namespace.clone(), &options);
    let pin = INDEXED_FIELDS.iter().find_map(|field| {
        options
            .fields
            .pinned(field)
            .map(|value| (*field, value.to_owned()))
    });
    let mut cursor = Cursor {
        registration: Registration {
            core: core.clone(),
            id: None,
        },
        resource: resource.clone(),
        rv: 0,
        bookmarks: options.bookmarks,
        pending: VecDeque::new(),
        events: None,
        // Even a clamped timeout can pass the end of the monotonic clock's range.
        deadline: now.checked_add(timeout).unwrap_or(now + DEFAULT_TIMEOUT),
        next_bookmark: now + BOOKMARK_EVERY,
        done: false,
    };
    let gr = resource.group_resource();
    let mut state = core.lock();
    cursor.rv = state.store.resource_version();
    match since {
        None => {
            for (_, slot) in state.store.slots(&gr, namespace.as_deref(), None) {
                if matches(&slot.object) {
                    cursor
                        .pending
                        .push_back(spliced_line("ADDED", &resource, slot.members_json()));
                }
            }
            if options.send_initial_events {
                let bookmark = cursor.bookmark(Some(true));
                cursor.pending.push_back(bookmark);
            }
        }
        Some(since) => match state.store.events_since(&gr, since, pin.as_ref()) {
            Err(oldest) => {
                let status =
                    ApiError::gone(format!("too old resource version: {since} ({oldest})"))
                        .status();
                cursor.pending.push_back(line("ERROR", &status));
                cursor.done = true;
            }
            Ok(events) => {
                for event in &events {
                    if let Some(kind) = event.seen_as(&*matches) {
                        cursor.pending.push_back(event_line(kind, &resource, event));
                    }
                }
            }
        },
    }
    if !cursor.done {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        cursor.registration.id = Some(state.store.watch(&gr, pin, matches, sender));
        cursor.events = Some(receiver);
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
            let events = cursor.events.as_mut()?;
            // Biased (events first): reproducible under a simulated clock.
            tokio::select! {
                biased;
                delivery = events.recv() => match delivery {
                    Some((kind, event)) => {
                        cursor.rv = event.rv;
                        cursor.pending.push_back(event_line(kind, &cursor.resource, &event));
                    }
                    None => cursor.done = true,
                },
                () = tokio::time::sleep_until(cursor.deadline) => cursor.done = true,
                () = tokio::time::sleep_until(cursor.next_bookmark) => {
                    cursor.next_bookmark += BOOKMARK_EVERY;
                    if cursor.bookmarks {
                        cursor.catch_up_and_bookmark();
                    }
                }
            }
        }
    }))
}

impl Cursor {
    fn bookmark(&self, initial_end: Option<bool>) -> Bytes {
        let mut metadata = json!({"resourceVersion": self.rv.to_string()});
        if initial_end.is_some() {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(
            "BOOKMARK",
            &json!({"kind": self.resource.kind, "apiVersion": self.resource.api_version(), "metadata": metadata}),
        )
    }

    /// Queues what the store pushed so far, then a bookmark at the store's resourceVersion
    /// (every event up to it that this watch sees is queued before it: the store pushes under
    /// the lock held here).
    fn catch_up_and_bookmark(&mut self) {
        let core = self.registration.core.clone();
        let state = core.lock();
        if let Some(events) = self.events.as_mut() {
            while let Ok((kind, event)) = events.try_recv() {
                self.pending
                    .push_back(event_line(kind, &self.resource, &event));
            }
        }
        self.rv = state.store.resource_version();
        drop(state);
        let bookmark = self.bookmark(None);
        self.pending.push_back(bookmark);
    }
}
