//! A fault-injecting `kube::Client`: every request of the component under test passes a hook that
//! sees it (method, path, JSON body) and decides what happens — forwarded to the embedded API
//! server, answered with an error status instead, or forwarded and then never answered (the
//! component "dies" right after the server applied its write). The embedded server has no fault
//! hooks of its own; this wraps its in-process client as a tower service.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use http_body_util::BodyExt;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};

/// A request as the hook sees it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: http::Method,
    pub(crate) path: String,
    /// The query string (without `?`).
    pub(crate) query: String,
    /// The body as JSON, if it is JSON.
    pub(crate) body: Option<Value>,
}

impl Seen {
    /// Whether this is a watch request.
    pub(crate) fn is_watch(&self) -> bool {
        self.query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1")
    }

    pub(crate) fn is_write(&self) -> bool {
        !matches!(
            self.method,
            http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
        )
    }

    /// Whether this is a write of the `InPlaceUpdate` condition with `reason` to a node's status.
    pub(crate) fn writes_condition(&self, reason: &str) -> bool {
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
    pub(crate) fn sets_node_label(&self, label: &str, value: &str) -> bool {
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
    pub(crate) fn node(&self) -> Option<&str> {
        self.path
            .strip_prefix("/api/v1/nodes/")
            .map(|rest| rest.split('/').next().unwrap_or(rest))
    }
}

/// What happens to a request.
#[derive(Debug, Clone)]
pub(crate) enum Verdict {
    Forward,
    /// Answer with this status code and message; the server never sees the request.
    Fail(u16, String),
    /// Forward, then never answer: the caller is stuck as if killed after the write landed.
    ForwardThenHang,
}

/// What a request got, for the test to count.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub(crate) method: http::Method,
    pub(crate) path: String,
    pub(crate) watch: bool,
    pub(crate) code: u16,
}

pub(crate) type Hook = Arc<dyn Fn(Seen) -> BoxFuture<'static, Verdict> + Send + Sync>;

/// Builds a hook from an async closure.
pub(crate) fn hook<F, Fut>(f: F) -> Hook
where
    F: Fn(Seen) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Verdict> + Send + 'static,
{
    Arc::new(move |seen| Box::pin(f(seen)))
}

/// A client that sends through `inner` after asking `hook`, logging every answer in `log`.
pub(crate) fn faulty_client(inner: Client, hook: Hook, log: Arc<Mutex<Vec<Record>>>) -> Client {
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
