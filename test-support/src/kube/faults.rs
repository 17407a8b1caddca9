//! A fault-injecting `kube::Client`: every request of the component under test passes a hook that
//! sees it (method, path, JSON body) and decides what happens — forwarded to the embedded API
//! server, answered with an error status instead, or forwarded and then never answered (the
//! component "dies" right after the server applied its write). The embedded server has no fault
//! hooks of its own; this wraps its in-process client as a tower service.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use http_body_util::BodyExt;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};

/// A request as the hook sees it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: http::Method,
    pub path: String,
    /// The query string (without `?`).
    pub query: String,
    /// The body as JSON, if it is JSON.
    pub body: Option<Value>,
}

impl Seen {
    /// Whether this is a watch request.
    pub fn is_watch(&self) -> bool {
        self.query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1")
    }

    pub fn is_write(&self) -> bool {
        !matches!(
            self.method,
            http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
        )
    }

    /// Whether this is a write of the `InPlaceUpdate` condition with `reason` to a node's status.
    pub fn writes_condition(&self, reason: &str) -> bool {
        self.method == http::Method::PUT
            && self.path.starts_with("/api/v1/nodes/")
            && self.path.ends_with("/status")
            && self
                .body
                .as_ref()
                .and_then(|b| b.pointer("/status/conditions"))
                .and_then(Value::as_array)
                .is_some_and(|conditions| {
                    conditions
                        .iter()
                        .any(|c| c["type"] == "InPlaceUpdate" && c["reason"] == reason)
                })
    }

    /// Whether this is a patch of a node that sets `label` to `value`.
    pub fn sets_node_label(&self, label: &str, value: &str) -> bool {
        self.method == http::Method::PATCH
            && self.path.starts_with("/api/v1/nodes/")
            && self
                .body
                .as_ref()
                .and_then(|b| b.pointer("/metadata/labels"))
                .and_then(|l| l.get(label))
                == Some(&json!(value))
    }

    /// The node a `/api/v1/nodes/<name>[/...]` request is about.
    pub fn node(&self) -> Option<&str> {
        self.path
            .strip_prefix("/api/v1/nodes/")
            .map(|rest| rest.split('/').next().unwrap_or(rest))
    }
}

/// What happens to a request.
#[derive(Debug, Clone)]
pub enum Verdict {
    Forward,
    /// Answer with this status code and message; the server never sees the request.
    Fail(u16, String),
    /// Forward, then never answer: the caller is stuck as if killed after the write landed.
    ForwardThenHang,
}

/// What a request got, for the test to count.
#[derive(Debug, Clone)]
pub struct Record {
    pub method: http::Method,
    pub path: String,
    pub watch: bool,
    pub code: u16,
}

pub type Hook = Arc<dyn Fn(Seen) -> BoxFuture<'static, Verdict> + Send + Sync>;

/// Builds a hook from an async closure.
pub fn hook<F, Fut>(f: F) -> Hook
where
    F: Fn(Seen) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Verdict> + Send + 'static,
{
    Arc::new(move |seen| Box::pin(f(seen)))
}

/// A client that sends through `inner` after asking `hook`, logging every answer in `log`.
pub fn faulty_client(inner: Client, hook: Hook, log: Arc<Mutex<Vec<Record>>>) -> Client {
    let service = tower::service_fn(move |request: http::Request<Body>| {
        let (inner, hook, log) = (inner.clone(), hook.clone(), log.clone());
        async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await?.to_bytes();
            let seen = Seen {
                method: parts.method.clone(),
                path: parts.uri.path().to_owned(),
                query: parts.uri.query().unwrap_or_default().to_owned(),
                body: serde_json::from_slice(&bytes).ok(),
            };
            let verdict = hook(seen.clone()).await;
            let record = |code: u16| {
                log.lock().unwrap().push(Record {
                    method: seen.method.clone(),
                    path: seen.path.clone(),
                    watch: seen.is_watch(),
                    code,
                })
            };
            match verdict {
                Verdict::Fail(code, message) => {
                    record(code);
                    let status = json!({
                        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": message, "reason": if code == 429 { "TooManyRequests" } else { "InternalError" }, "code": code,
                    });
                    let response = http::Response::builder()
                        .status(code)
                        .header(http::header::CONTENT_TYPE, "application/json")
                        .body(Body::from(serde_json::to_vec(&status)?))?;
                    Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
                }
                Verdict::Forward | Verdict::ForwardThenHang => {
                    let request = http::Request::from_parts(parts, Body::from(bytes.to_vec()));
                    let response = inner.send(request).await?;
                    record(response.status().as_u16());
                    if matches!(verdict, Verdict::ForwardThenHang) {
                        futures::future::pending::<()>().await;
                    }
                    Ok(response)
                }
            }
        }
    });
    Client::new(service, "default")
}

/// Another writer racing the component under test: per object, the component's first write loses
/// (this writer changes the object between the component's read and its write, so the server
/// answers 409), its retry lands, and its next write loses again.
pub struct ConcurrentWriter {
    admin: Client,
    /// The paths whose last write lost, and how many races were lost so far.
    state: Mutex<(BTreeSet<String>, usize)>,
}

impl std::fmt::Debug for ConcurrentWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConcurrentWriter")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl ConcurrentWriter {
    /// A writer that changes objects through `admin` (a client that bypasses the faults).
    pub fn new(admin: Client) -> Arc<Self> {
        Arc::new(Self {
            admin,
            state: Mutex::default(),
        })
    }

    /// Before the component's write to `path` goes on: if this write is to lose, merge-patches the
    /// annotation `test.rackproof.dev/concurrent-writer: N` (N counting the lost races) onto the
    /// object (a `/status` suffix is dropped), so its resourceVersion moves on.
    pub async fn race(&self, path: &str) {
        let lost = {
            let mut state = self.state.lock().unwrap();
            let (raced, lost) = &mut *state;
            if raced.remove(path) {
                None
            } else {
                raced.insert(path.to_owned());
                *lost += 1;
                Some(*lost)
            }
        };
        let Some(n) = lost else {
            return;
        };
        let object = path.strip_suffix("/status").unwrap_or(path);
        let body = json!({ "metadata": { "annotations": { "test.rackproof.dev/concurrent-writer": n.to_string() } } });
        let request = http::Request::patch(object)
            .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
            .body(serde_json::to_vec(&body).expect("a JSON value serializes"))
            .expect("a patch request");
        self.admin
            .request_text(request)
            .await
            .expect("the concurrent write lands");
    }
}
