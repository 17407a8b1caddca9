//! The HTTPS transport: the same axum app on 127.0.0.1 behind TLS, authenticating bearer
//! tokens, plus kubeconfigs for its users. The listener stops when the [`HttpsServer`] is
//! dropped.
//!
//! Bounded ([`HttpsLimits`]): a connection that has not finished its TLS handshake within
//! `tls_handshake_timeout`, or an HTTP/1 request whose header has not all arrived within
//! `header_read_timeout`, is closed; past `max_connections` open connections, a new one is
//! closed as soon as it is accepted; an HTTP/2 connection carries at most 250 concurrent
//! streams, as kube-apiserver's.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::auth::User;
use crate::tls::{self, TlsError};
use crate::transport::{self, Authenticated};
use crate::{ApiServer, Core};

/// How long a client may take over its TLS handshake, unless [`HttpsLimits`] says otherwise:
/// kube-apiserver bounds the handshake by its header-read timeout, 32 s.
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(32);

/// How long a client may take to send a request's header, unless [`HttpsLimits`] says
/// otherwise: kube-apiserver's `ReadHeaderTimeout`, 32 s.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// Connections served at once, unless [`HttpsLimits`] says otherwise. kube-apiserver has no
/// such cap (it limits requests in flight); this one keeps clients that open connections and
/// hold them from using up the process's file descriptors and memory. kube-rs opens one
/// connection per concurrent HTTP/1 request, a watch among them, so a node agent holds a few.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1000;

/// HTTP/2 streams one connection may carry at once: kube-apiserver's default.
const MAX_CONCURRENT_STREAMS: u32 = 250;

/// Bounds on the HTTPS server's connections (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpsLimits {
    /// Time from accepting a connection to the end of its TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Time to receive an HTTP/1 request's whole header.
    pub header_read_timeout: Duration,
    /// Connections served at once; further ones are closed when accepted.
    pub max_connections: usize,
}

impl Default for HttpsLimits {
    fn default() -> Self {
        Self {
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Starting the HTTPS server or writing a kubeconfig failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Certificates could not be made.
    #[error("failed to set up TLS")]
    Tls(#[from] TlsError),
    /// The listener could not be bound.
    #[error("failed to listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig could not be written.
    #[error("failed to write kubeconfig {path}")]
    Kubeconfig {
        /// Where it was to go.
        path: String,
        /// The file error.
        #[source]
        source: std::io::Error,
    },
    /// A kube client could not be built from a kubeconfig.
    #[error("failed to build a client for user {user}")]
    Client {
        /// The user name.
        user: String,
        /// kube's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A running HTTPS endpoint. Dropping it closes the listener and every connection.
#[derive(Debug)]
pub struct HttpsServer {
    server: ApiServer,
    addr: SocketAddr,
    ca_pem: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HttpsServer {
    /// The bound address (useful with port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The CA certificate (PEM) clients must trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A kubeconfig (YAML) for `user`, with a fresh bearer token for it.
    pub fn kubeconfig(&self, user: &User) -> String {
        let token = self.server.issue_token(user.clone());
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        let name = user.name.replace(':', "-");
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: rackproof\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: {name}@rackproof\n  context:\n    cluster: rackproof\n    user: {name}\n    namespace: default\ncurrent-context: {name}@rackproof\n",
            url = self.url(),
        )
    }

    /// Writes [`HttpsServer::kubeconfig`] for `user` to `path`, mode 0600 from the first byte:
    /// a temporary file beside it gets the mode before the credentials are written, then
    /// replaces `path`.
    pub fn write_kubeconfig(&self, path: &Path, user: &User) -> Result<(), ServeError> {
        use std::io::Write as _;
        use std::os::unix::fs::PermissionsExt as _;
        let error = |source| ServeError::Kubeconfig {
            path: path.display().to_string(),
            source,
        };
        let mut tmp_name = path.file_name().unwrap_or_default().to_owned();
        tmp_name.push(".tmp");
        let tmp = path.with_file_name(tmp_name);
        let mut file = std::fs::File::create(&tmp).map_err(error)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(error)?;
        file.write_all(self.kubeconfig(user).as_bytes())
            .map_err(error)?;
        drop(file);
        std::fs::rename(&tmp, path).map_err(error)
    }

    /// A kube client for `user` over HTTPS, built from its kubeconfig.
    pub async fn client(&self, user: &User) -> Result<kube::Client, ServeError> {
        let error = |source: Box<dyn std::error::Error + Send + Sync>| ServeError::Client {
            user: user.name.clone(),
            source,
        };
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig(user))
            .map_err(|e| error(Box::new(e)))?;
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| error(Box::new(e)))?;
        kube::Client::try_from(config).map_err(|e| error(Box::new(e)))
    }
}

/// Serves `server` over HTTPS on `addr` (use `127.0.0.1:0` for any free port); the certificate
/// also names `extra_names` (DNS names or IP addresses).
pub(crate) async fn serve(
    server: ApiServer,
    addr: SocketAddr,
    extra_names: &[&str],
    limits: HttpsLimits,
) -> Result<HttpsServer, ServeError> {
    let pki = tls::generate(extra_names)?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    let acceptor = TlsAcceptor::from(pki.server_config.clone());
    let core = server.core.clone();
    let task = tokio::spawn(accept_loop(listener, acceptor, core, limits));
    Ok(HttpsServer {
        server,
        addr: bound,
        ca_pem: pki.ca_pem,
        task,
    })
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    core: Arc<Core>,
    limits: HttpsLimits,
) {
    let router = transport::app(core.clone());
    let places = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS);
    let builder = Arc::new(builder);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                let Ok(place) = places.clone().try_acquire_owned() else {
                    tracing::warn!(%peer, max_connections = limits.max_connections, "refused a connection: the server holds as many as it may");
                    drop(stream);
                    continue;
                };
                let acceptor = acceptor.clone();
                let router = router.clone();
                let core = core.clone();
                let builder = builder.clone();
                connections.spawn(async move {
                    let _place = place;
                    let tls = match tokio::time::timeout(limits.tls_handshake_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(error)) => {
                            tracing::debug!(%peer, %error, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, timeout = ?limits.tls_handshake_timeout, "TLS handshake timed out");
                            return;
                        }
                    };
                    let service = tower::service_fn(move |mut request: http::Request<hyper::body::Incoming>| {
                        let router = router.clone();
                        if let Some(user) = bearer_user(&core, request.headers()) {
                            request.extensions_mut().insert(Authenticated(user));
                        }
                        let request = request.map(axum::body::Body::new);
                        tower::ServiceExt::oneshot(router, request)
                    });
                    if let Err(error) = builder.serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(service)).await {
                        tracing::debug!(%peer, %error, "connection ended with an error");
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

fn bearer_user(core: &Core, headers: &http::HeaderMap) -> Option<User> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let token = value.strip_prefix("Bearer ")?.trim();
    core.lock().auth.tokens.get(token).cloned()
}
