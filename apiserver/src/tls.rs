//! A throw-away PKI for the HTTPS transport: a CA generated with rcgen and a server
//! certificate for `127.0.0.1`, `localhost` and any extra names signed by it, as a rustls server
//! config.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::ServerConfig;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Generating the certificates or the TLS configuration failed.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen could not build a key or certificate.
    #[error("failed to generate the {what}")]
    Generate {
        /// Which item: CA or server certificate.
        what: &'static str,
        /// The rcgen error.
        #[source]
        source: rcgen::Error,
    },
    /// rustls refused the configuration.
    #[error("failed to build the TLS server configuration")]
    Config(#[source] rustls::Error),
}

/// The CA (PEM, for kubeconfigs) and the server's TLS configuration.
#[derive(Debug)]
pub(crate) struct Pki {
    pub(crate) ca_pem: String,
    pub(crate) server_config: Arc<ServerConfig>,
}

pub(crate) fn generate(extra_names: &[&str]) -> Result<Pki, TlsError> {
    let ca_error = |source| TlsError::Generate {
        what: "CA certificate",
        source,
    };
    let ca_key = KeyPair::generate().map_err(ca_error)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(ca_error)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "rackproof-apiserver-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(ca_error)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let server_error = |source| TlsError::Generate {
        what: "server certificate",
        source,
    };
    let server_key = KeyPair::generate().map_err(server_error)?;
    let mut names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
    names.extend(extra_names.iter().map(|n| (*n).to_owned()));
    let mut server_params = CertificateParams::new(names).map_err(server_error)?;
    server_params
        .distinguished_name
        .push(DnType::CommonName, "rackproof-apiserver");
    let server_cert = server_params
        .signed_by(&server_key, &issuer)
        .map_err(server_error)?;

    let chain = vec![
        CertificateDer::from(server_cert.der().to_vec()),
        CertificateDer::from(ca_cert.der().to_vec()),
    ];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(TlsError::Config)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Pki {
        ca_pem: ca_cert.pem(),
        server_config: Arc::new(config),
    })
}
