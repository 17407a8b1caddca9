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
//! 6. Bounded ([`WatchLimits`]): each watch queues at most `buffer` events the client has not
//!    taken yet; a watch whose queue is full when an event comes is closed (its stream ends
//!    after the queued events, with no ERROR event), as kube-apiserver closes a watcher that
//!    does not keep up, and counted in `apiserver_terminated_watchers_total`. Clients list and
//!    watch again (kube-rs' watcher does). A user outside `system:masters` holds at most
//!    `per_user` watches at once; one more gets 429 TooManyRequests with `Retry-After: 1`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::mpsc::Receiver;

use crate::Core;
use crate::auth::User;
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

/// Events a watch may hold that its client has not taken yet, unless
/// [`crate::ApiServer::set_watch_limits`] says otherwise: as many as the event log keeps per
/// resource by default ([`crate::DEFAULT_WATCH_WINDOW`]), since a watch further behind could
/// not resume from its resourceVersion either. Queued events are shared with the log and other
/// watches, so a stalled watch holds about one event log's worth at most. (kube-apiserver
/// queues 10 per watcher and then blocks its dispatcher up to a deadline before closing the
/// watcher; this server delivers under its one lock, so it queues more and never blocks.)
pub const DEFAULT_WATCH_BUFFER: usize = 10_000;

/// Concurrent watches one user outside `system:masters` may hold, unless
/// [`crate::ApiServer::set_watch_limits`] says otherwise. kube-apiserver has no such cap (its
/// flow control leaves watches out of its concurrency limits); a node agent holds a handful,
/// a kubelet a few dozen. `system:masters` is exempt, as from kube-apiserver's flow control.
pub const DEFAULT_MAX_WATCHES_PER_USER: usize = 100;

/// The seconds a client refused for too many watches is told to wait (`Retry-After`), as
/// kube-apiserver tells clients it refuses for too many requests.
const RETRY_AFTER_SECONDS: u64 = 1;

/// Bounds on watches (module docs, step 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchLimits {
    /// Events queued per watch before it is closed for falling behind (at least 1).
    pub buffer: usize,
    /// Concurrent watches per user outside `system:masters`.
    pub per_user: usize,
}

impl Default for WatchLimits {
    fn default() -> Self {
        Self {
            buffer: DEFAULT_WATCH_BUFFER,
            per_user: DEFAULT_MAX_WATCHES_PER_USER,
        }
    }
}

/// The watch limits in force and the watches each user holds now.
#[derive(Debug, Default)]
pub(crate) struct WatchBook {
    pub(crate) limits: WatchLimits,
    open: std::collections::HashMap<String, usize>,
}

impl WatchBook {
    /// Takes one of `user`'s watch places, or 429 when it holds `per_user` already.
    fn take(&mut self, user: &User) -> Result<Option<String>, ApiError> {
        if user.is_admin() {
            return Ok(None);
        }
        let open = self.open.entry(user.name.clone()).or_default();
        if *open >= self.limits.per_user {
            return Err(ApiError::too_many_requests(format!(
                "user {:?} already holds {} watches, the most one user may hold at once; close one or try again later",
                user.name, self.limits.per_user
            ))
            .with_details(json!({"retryAfterSeconds": RETRY_AFTER_SECONDS})));
        }
        *open += 1;
        Ok(Some(user.name.clone()))
    }

    fn give_back(&mut self, user: &str) {
        if let Some(open) = self.open.get_mut(user) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                self.open.remove(user);
            }
        }
    }
}

/// One of a user's watch places ([`WatchBook::take`]), given back when dropped.
struct UserSlot {
    core: Arc<Core>,
    user: String,
}

impl Drop for UserSlot {
    fn drop(&mut self) {
        self.core.lock().watches.give_back(&self.user);
    }
}

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
    events: Option<Receiver<Delivery>>,
    /// The user's place among its concurrent watches, given back with the stream.
    _slot: Option<UserSlot>,
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
    user: &User,
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
        _slot: None,
        // Even a clamped timeout can pass the end of the monotonic clock's range.
        deadline: now.checked_add(timeout).unwrap_or(now + DEFAULT_TIMEOUT),
        next_bookmark: now + BOOKMARK_EVERY,
        done: false,
    };
    let gr = resource.group_resource();
    let mut state = core.lock();
    cursor._slot = state.watches.take(user)?.map(|user| UserSlot {
        core: core.clone(),
        user,
    });
    let buffer = state.watches.limits.buffer.max(1);
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
        let (sender, receiver) = tokio::sync::mpsc::channel(buffer);
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
                    None => {
                        // Only the store drops a live watch's sender: it fell behind.
                        cursor.done = true;
                        let core = &cursor.registration.core;
                        core.metrics.terminated_watch(&cursor.resource.group, &cursor.resource.plural);
                        tracing::info!(
                            resource = %cursor.resource.plural,
                            rv = cursor.rv,
                            "closed a watch that fell behind; its client lists again"
                        );
                    }
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
