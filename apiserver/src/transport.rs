//! The HTTP edge shared by both transports: an axum [`Router`] whose one handler reads the body
//! (with kube-apiserver's 3 MiB limit), parses the request, runs it and renders the reply; and
//! the in-process tower service a `kube::Client` is built on.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};

use crate::Core;
use crate::auth::User;
use crate::error::ApiError;
use crate::handler::{self, Context, Reply};
use crate::request::RawRequest;

/// Largest request body accepted, as kube-apiserver's default.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The authenticated user of a request, set by the transport before the router runs.
#[derive(Debug, Clone)]
pub(crate) struct Authenticated(pub(crate) User);

/// The API as an axum app. Requests without an [`Authenticated`] extension get 401.
pub(crate) fn app(core: Arc<Core>) -> Router {
    Router::new().fallback(serve).with_state(core)
}

async fn serve(State(core): State<Arc<Core>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let user = match parts.extensions.get::<Authenticated>().cloned() {
        Some(Authenticated(user)) => user,
        // Like kube-apiserver's system:public-info-viewer: health and version are public.
        None if matches!(
            parts.uri.path(),
            "/healthz" | "/readyz" | "/livez" | "/version"
        ) =>
        {
            User::named("system:anonymous", &["system:unauthenticated"])
        }
        None => return error_response(&ApiError::unauthorized()),
    };
    if parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n > MAX_BODY_BYTES)
    {
        return error_response(&ApiError::too_large(MAX_BODY_BYTES));
    }
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => return error_response(&ApiError::too_large(MAX_BODY_BYTES)),
    };
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let if_none_match = parts
        .headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let user_agent = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let state = core.lock_for_request().await;
    let span = tracing::debug_span!("request", method = %parts.method, path = parts.uri.path(), user = user.name);
    let _guard = span.enter();
    let raw = RawRequest {
        method: &parts.method,
        path: parts.uri.path(),
        query: parts.uri.query().unwrap_or_default(),
        content_type,
        accept,
        body,
    };
    match handler::handle(&core, state, &Context { user, user_agent }, raw) {
        Ok(Reply::Json(code, value)) => json_response(code, &value),
        Ok(Reply::Encoded(code, body)) => encoded_response(code, body),
        Ok(Reply::Text(code, text)) => text_response(code, text),
        Ok(Reply::Typed(code, value, content_type)) => {
            let mut response = json_response(code, &value);
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            response
        }
        Ok(Reply::Document {
            body,
            content_type,
            etag,
        }) => document_response(body, content_type, &etag, if_none_match.as_deref()),
        Ok(Reply::Watch(stream)) => {
            let mut response = Response::new(Body::from_stream(stream));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("no-cache, private"),
            );
            response
        }
        Err(error) => error_response(&error),
    }
}

fn text_response(code: u16, text: String) -> Response {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn json_response(code: u16, value: &serde_json::Value) -> Response {
    encoded_response(
        code,
        bytes::Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
    )
}

/// A negotiated document, as kube-openapi serves it (`http.ServeContent` with a quoted ETag):
/// 304 without a body when `If-None-Match` lists the ETag (or is `*`).
fn document_response(
    body: bytes::Bytes,
    content_type: &'static str,
    etag: &str,
    if_none_match: Option<&str>,
) -> Response {
    let quoted = format!("\"{etag}\"");
    let matched = if_none_match.is_some_and(|tags| {
        tags.split(',')
            .map(|t| t.trim().trim_start_matches("W/"))
            .any(|t| t == quoted || t == "*")
    });
    let mut response = if matched {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        let mut response = Response::new(Body::from(body));
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        response
    };
    let headers = response.headers_mut();
    headers.insert(header::VARY, HeaderValue::from_static("Accept"));
    if let Ok(value) = HeaderValue::from_str(&quoted) {
        headers.insert(header::ETAG, value);
    }
    response
}

fn encoded_response(code: u16, body: bytes::Bytes) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    response
}

/// The error's Status; with `Retry-After` when its details say how long to wait, as
/// kube-apiserver sends it.
pub(crate) fn error_response(error: &ApiError) -> Response {
    let mut response = json_response(error.code, &error.status());
    let retry_after = error
        .details
        .as_ref()
        .and_then(|details| details.get("retryAfterSeconds"))
        .and_then(serde_json::Value::as_u64)
        .filter(|seconds| *seconds > 0);
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// A `kube::Client` talking to `core` through an in-memory tower service, as `user`. It calls
/// the app's one handler directly: routing to the only route cost more than some requests.
pub(crate) fn in_process_client(core: Arc<Core>, user: User) -> kube::Client {
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(Authenticated(user.clone()));
        let request = http::Request::from_parts(parts, Body::new(body));
        let core = core.clone();
        async move { Ok::<_, Infallible>(serve(State(core), request).await) }
    });
    kube::Client::new(service, "default")
}
