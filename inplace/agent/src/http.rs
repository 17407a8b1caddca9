//! HTTP client setup shared by the artifact source and the kubelet health probe.

/// Installs rustls' `ring` provider as the process default (once; later calls do nothing).
/// reqwest is built without a bundled provider so the binary links no aws-lc (nor OpenSSL) and
/// builds statically for musl.
pub(crate) fn install_crypto_provider() {
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
}

/// A reqwest client from `builder`. Where the system has no CA store (the lab images'
/// initramfs), reqwest's platform verifier refuses to build; the client then trusts no
/// certificate at all, so plain-HTTP image servers still work and HTTPS ones fail with a TLS
/// error naming the server, instead of the agent panicking.
pub(crate) fn client(builder: impl Fn() -> reqwest::ClientBuilder) -> reqwest::Client {
    install_crypto_provider();
    builder().build().unwrap_or_else(|error| {
        tracing::warn!(%error, "no system CA certificates; HTTPS downloads will not verify");
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        builder()
            .tls_backend_preconfigured(config)
            .build()
            .unwrap_or_else(|_| reqwest::Client::new())
    })
}
