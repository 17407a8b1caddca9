//! HTTP client setup shared by the artifact source and the kubelet health probe.

/// Installs rustls' `ring` provider as the process default (once; later calls do nothing).
/// reqwest is built without a bundled provider so the binary links no aws-lc (nor OpenSSL) and
/// builds statically for musl.
pub(crate) fn install_crypto_provider() {
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
}
