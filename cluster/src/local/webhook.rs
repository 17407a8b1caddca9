//! The authorization webhook kube-apiserver consults after its Node authorizer
//! (`--authorization-mode=Node,Webhook,RBAC`): the part Gardener's node-agent authorizer plays.
//! The caller decides ([`NodeAuthorizer`]); this module serves the decision to kube-apiserver.
//!
//! It listens on 127.0.0.1 with a certificate the control plane's CA signed, answers
//! `POST /authorize` with an `authorization.k8s.io/v1` SubjectAccessReview, and only for
//! kube-apiserver: the request must carry the bearer token written into kube-apiserver's webhook
//! kubeconfig. A request it cannot read is answered "no opinion" with the reason, so the next
//! authorizer (RBAC) decides; it never allows what it did not understand.

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::Error;

/// The largest SubjectAccessReview read (kube-apiserver's are a few hundred bytes).
const MAX_REVIEW_BYTES: usize = 64 * 1024;

/// One access kube-apiserver asks about: a SubjectAccessReview's user and resource attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessRequest {
    /// The user, e.g. `system:node:node-1`.
    pub user: String,
    /// The user's groups, e.g. `system:nodes`.
    pub groups: Vec<String>,
    /// `get`, `list`, `watch`, `create`, …
    pub verb: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource's plural, e.g. `secrets`.
    pub resource: String,
    /// The subresource, e.g. `status` (empty: none).
    pub subresource: String,
    /// The namespace (empty: cluster-scoped or all namespaces).
    pub namespace: String,
    /// The object's name (for `list`/`watch`, the `metadata.name` field selector's value; empty:
    /// none).
    pub name: String,
}

/// The webhook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Not this authorizer's to allow; the next one (RBAC) decides. The reason goes into
    /// kube-apiserver's Forbidden message when nothing allows it.
    NoOpinion(String),
}

type Decide = dyn Fn(AccessRequest) -> Pin<Box<dyn Future<Output = Decision> + Send>> + Send + Sync;

/// What decides the webhook's answers: a function of the request, asked once per review
/// (kube-apiserver caches answers for the TTLs the control plane sets).
#[derive(Clone)]
pub struct NodeAuthorizer(Arc<Decide>);

impl NodeAuthorizer {
    /// An authorizer that answers with `decide`.
    pub fn new<F, Fut>(decide: F) -> Self
    where
        F: Fn(AccessRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Decision> + Send + 'static,
    {
        Self(Arc::new(move |request| Box::pin(decide(request))))
    }

    async fn decide(&self, request: AccessRequest) -> Decision {
        (self.0)(request).await
    }
}

impl std::fmt::Debug for NodeAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeAuthorizer(..)")
    }
}

/// The running webhook; it stops when dropped.
#[derive(Debug)]
pub(crate) struct WebhookServer {
    url: String,
    task: JoinHandle<()>,
}

impl WebhookServer {
    /// Serves `authorizer` on a free loopback port with the PEM certificate chain and key,
    /// accepting only requests that carry `token`.
    pub(crate) async fn start(
        authorizer: NodeAuthorizer,
        cert_pem: &str,
        key_pem: &str,
        token: String,
    ) -> Result<Self, Error> {
        let tls = tls_config(cert_pem, key_pem)?;
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .await
            .map_err(Error::FreePort)?;
        let addr = listener.local_addr().map_err(Error::FreePort)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let token = Arc::new(token);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, authorizer, token) =
                    (acceptor.clone(), authorizer.clone(), token.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |request| {
                        let (authorizer, token) = (authorizer.clone(), token.clone());
                        async move {
                            Ok::<_, std::convert::Infallible>(
                                answer(&authorizer, &token, request).await,
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self {
            url: format!("https://127.0.0.1:{}/authorize", addr.port()),
            task,
        })
    }

    /// Where kube-apiserver sends its reviews.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn tls_config(cert_pem: &str, key_pem: &str) -> Result<rustls::ServerConfig, Error> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let invalid = |reason: String| Error::InvalidOption {
        option: "node_authorizer",
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("the webhook's certificate: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| invalid(format!("the webhook's key: {e}")))?;
    rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| invalid(format!("the webhook's TLS configuration: {e}")))
}

async fn answer(
    authorizer: &NodeAuthorizer,
    token: &str,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let bearer = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if bearer != Some(token) {
        return plain(StatusCode::UNAUTHORIZED, "only kube-apiserver may ask");
    }
    if request.method() != hyper::Method::POST || request.uri().path() != "/authorize" {
        return plain(
            StatusCode::NOT_FOUND,
            "POST a SubjectAccessReview to /authorize",
        );
    }
    let body = match Limited::new(request.into_body(), MAX_REVIEW_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(e) => return plain(StatusCode::PAYLOAD_TOO_LARGE, &e.to_string()),
    };
    let decision = match serde_json::from_slice::<Value>(&body)
        .map_err(|e| e.to_string())
        .and_then(|review| access_request(&review))
    {
        Ok(access) => authorizer.decide(access).await,
        Err(why) => Decision::NoOpinion(format!("unreadable SubjectAccessReview: {why}")),
    };
    let status = match &decision {
        Decision::Allow => json!({ "allowed": true }),
        Decision::NoOpinion(reason) => json!({ "allowed": false, "reason": reason }),
    };
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "status": status,
    });
    let mut response = Response::new(Full::new(Bytes::from(review.to_string())));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_owned())));
    *response.status_mut() = status;
    response
}

/// The access a v1 SubjectAccessReview asks about; only resource requests are read (a
/// non-resource request is not an error, it has empty resource attributes).
fn access_request(review: &Value) -> Result<AccessRequest, String> {
    if review["apiVersion"] != "authorization.k8s.io/v1" || review["kind"] != "SubjectAccessReview"
    {
        return Err(format!(
            "expected an authorization.k8s.io/v1 SubjectAccessReview, got {} {}",
            review["apiVersion"], review["kind"]
        ));
    }
    let spec = &review["spec"];
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let attributes = &spec["resourceAttributes"];
    Ok(AccessRequest {
        user: text(&spec["user"]),
        groups: spec["groups"]
            .as_array()
            .map(|groups| {
                groups
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        verb: text(&attributes["verb"]),
        group: text(&attributes["group"]),
        resource: text(&attributes["resource"]),
        subresource: text(&attributes["subresource"]),
        namespace: text(&attributes["namespace"]),
        name: text(&attributes["name"]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_is_read_into_its_user_and_resource_attributes() {
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "system:node:node-1",
                "groups": ["system:nodes", "system:authenticated"],
                "resourceAttributes": {
                    "namespace": "shoot--lab", "verb": "get", "version": "v1",
                    "resource": "secrets", "name": "osc-pool-a"
                }
            }
        });
        let access = access_request(&review).unwrap();
        assert_eq!(access.user, "system:node:node-1");
        assert_eq!(access.groups, ["system:nodes", "system:authenticated"]);
        assert_eq!(
            (
                access.verb.as_str(),
                access.group.as_str(),
                access.resource.as_str()
            ),
            ("get", "", "secrets")
        );
        assert_eq!(
            (access.namespace.as_str(), access.name.as_str()),
            ("shoot--lab", "osc-pool-a")
        );
    }

    #[test]
    fn a_review_of_another_version_is_refused() {
        let review = json!({"apiVersion": "authorization.k8s.io/v1beta1", "kind": "SubjectAccessReview", "spec": {}});
        let error = access_request(&review).unwrap_err();
        assert!(error.contains("v1beta1"), "{error}");
    }
}
