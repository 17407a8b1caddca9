//! Serving the emulator on a socket: HTTPS with a freshly generated certificate authority and
//! server certificate (rcgen, rustls with ring), or plain HTTP.
//!
//! Each [`RunningEmulator`] owns its accept loop and its connections; dropping it (or calling
//! [`RunningEmulator::shutdown`]) closes the listener and every connection.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

use super::{Emulator, app};

/// Why the emulator could not start serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot generate the emulator's TLS certificate")]
    Certificate(#[source] rcgen::Error),
    #[error("cannot configure TLS for the emulator")]
    Tls(#[source] rustls::Error),
}

/// An emulator serving on a socket. Dropping it stops the server.
#[derive(Debug)]
pub struct RunningEmulator {
    addr: SocketAddr,
    https: bool,
    ca_pem: Option<String>,
    task: JoinHandle<()>,
}

impl RunningEmulator {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, e.g. `https://127.0.0.1:40123`.
    pub fn url(&self) -> String {
        format!(
            "{}://{}",
            if self.https { "https" } else { "http" },
            self.addr
        )
    }

    /// The PEM of the CA that signed the server certificate (HTTPS only); give it to clients as
    /// their custom CA.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// Stops serving and closes every connection.
    pub fn shutdown(self) {
        self.task.abort();
    }
}

impl Drop for RunningEmulator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Emulator {
    /// Serves plain HTTP on `addr` (use `127.0.0.1:0` for a free port).
    pub async fn serve_http(&self, addr: SocketAddr) -> Result<RunningEmulator, ServeError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
        let task = tokio::spawn(accept_loop(listener, self.clone(), None));
        Ok(RunningEmulator {
            addr: local,
            https: false,
            ca_pem: None,
            task,
        })
    }

    /// Serves HTTPS on `addr` with a new CA and a server certificate for `127.0.0.1`,
    /// `localhost` and `::1`.
    pub async fn serve_https(&self, addr: SocketAddr) -> Result<RunningEmulator, ServeError> {
        let (ca_pem, chain, key) = generate_certificate().map_err(ServeError::Certificate)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(ServeError::Tls)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(ServeError::Tls)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let task = tokio::spawn(accept_loop(listener, self.clone(), Some(acceptor)));
        Ok(RunningEmulator {
            addr: local,
            https: true,
            ca_pem: Some(ca_pem),
            task,
        })
    }
}

/// A CA and a server certificate it signed: (CA PEM, server chain, server key).
fn generate_certificate()
-> Result<(String, Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), rcgen::Error> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Rackproof Redfish emulator CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let mut params = CertificateParams::new(vec![
        "127.0.0.1".to_owned(),
        "localhost".to_owned(),
        "::1".to_owned(),
    ])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "Rackproof Redfish emulator");
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca)?;
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    Ok((
        ca.pem(),
        vec![cert.der().clone(), ca.der().clone()],
        key_der,
    ))
}

async fn accept_loop(listener: TcpListener, emulator: Emulator, tls: Option<TlsAcceptor>) {
    let router = app(emulator);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                let service = TowerToHyperService::new(router.clone());
                let tls = tls.clone();
                connections.spawn(async move {
                    let builder = auto::Builder::new(TokioExecutor::new());
                    let result = match tls {
                        Some(acceptor) => match acceptor.accept(stream).await {
                            Ok(stream) => builder.serve_connection(TokioIo::new(stream), service).await,
                            Err(err) => {
                                tracing::debug!(%peer, %err, "TLS handshake failed");
                                return;
                            }
                        },
                        None => builder.serve_connection(TokioIo::new(stream), service).await,
                    };
                    if let Err(err) = result {
                        tracing::debug!(%peer, %err, "connection ended with an error");
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}
