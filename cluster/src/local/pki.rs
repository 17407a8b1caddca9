//! The control plane's key material: a CA (its key kept for kube-controller-manager's signer), kube-apiserver's serving certificate (signed by the
//! CA, valid for 127.0.0.1 and localhost), kube-controller-manager's serving certificate (signed
//! by the CA, valid for 127.0.0.1 and localhost), and the service-account signing key pair. All
//! ECDSA P-256 (rcgen on ring), written as PEM files into the control plane's directory.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::{Error, write_file};

/// Paths of the generated files.
#[derive(Debug, Clone)]
pub(crate) struct Pki {
    pub(crate) ca_cert: PathBuf,
    /// The CA certificate as DER, for clients built without a kubeconfig.
    pub(crate) ca_der: Vec<u8>,
    /// The CA's key, for kube-controller-manager's certificate signer (when it signs).
    pub(crate) ca_key: PathBuf,
    pub(crate) serving_cert: PathBuf,
    pub(crate) serving_key: PathBuf,
    pub(crate) controller_manager_cert: PathBuf,
    pub(crate) controller_manager_key: PathBuf,
    /// The authorization webhook's serving pair (127.0.0.1).
    pub(crate) webhook_cert: PathBuf,
    pub(crate) webhook_key: PathBuf,
    pub(crate) service_account_key: PathBuf,
    pub(crate) service_account_pub: PathBuf,
}

/// Names kube-apiserver's serving certificate is valid for.
const SERVING_NAMES: [&str; 6] = [
    "127.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

fn cert_error(what: &'static str) -> impl FnOnce(rcgen::Error) -> Error {
    move |source| Error::Certificate { what, source }
}

/// Generates the key material into `dir`; kube-apiserver's certificate is valid for
/// `extra_names` too.
pub(crate) fn generate(dir: &Path, extra_names: &[String]) -> Result<Pki, Error> {
    let ca_key = KeyPair::generate().map_err(cert_error("the CA key"))?;
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).map_err(cert_error("the CA certificate"))?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "rackproof-local-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .map_err(cert_error("the CA certificate"))?;
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca_params, ca_key);

    let names: Vec<&str> = SERVING_NAMES
        .into_iter()
        .chain(extra_names.iter().map(String::as_str))
        .collect();
    let (serving_cert, serving_key) = serving_pair(&issuer, "kube-apiserver", &names)?;
    let (webhook_cert, webhook_key) =
        serving_pair(&issuer, "rackproof-authorization-webhook", &["127.0.0.1"])?;
    let (controller_manager_cert, controller_manager_key) = serving_pair(
        &issuer,
        "kube-controller-manager",
        &["127.0.0.1", "localhost"],
    )?;

    let service_account = KeyPair::generate().map_err(cert_error("the service-account key"))?;

    let pki = Pki {
        ca_cert: dir.join("ca.crt"),
        ca_der: ca_cert.der().to_vec(),
        ca_key: dir.join("ca.key"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        controller_manager_cert: dir.join("controller-manager.crt"),
        controller_manager_key: dir.join("controller-manager.key"),
        webhook_cert: dir.join("webhook.crt"),
        webhook_key: dir.join("webhook.key"),
        service_account_key: dir.join("sa.key"),
        service_account_pub: dir.join("sa.pub"),
    };
    write_file(&pki.ca_cert, &ca_cert.pem())?;
    write_file(&pki.ca_key, &ca_key_pem)?;
    write_file(&pki.serving_cert, &serving_cert.pem())?;
    write_file(&pki.serving_key, &serving_key.serialize_pem())?;
    write_file(&pki.controller_manager_cert, &controller_manager_cert.pem())?;
    write_file(
        &pki.controller_manager_key,
        &controller_manager_key.serialize_pem(),
    )?;
    write_file(&pki.webhook_cert, &webhook_cert.pem())?;
    write_file(&pki.webhook_key, &webhook_key.serialize_pem())?;
    write_file(&pki.service_account_key, &service_account.serialize_pem())?;
    write_file(&pki.service_account_pub, &service_account.public_key_pem())?;
    Ok(pki)
}

/// A key pair and a certificate for serving HTTPS as `common_name` on `names`, signed by the CA.
fn serving_pair(
    issuer: &Issuer<'_, KeyPair>,
    common_name: &str,
    names: &[&str],
) -> Result<(rcgen::Certificate, KeyPair), Error> {
    let key = KeyPair::generate().map_err(cert_error("a serving key"))?;
    let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    let mut params = CertificateParams::new(names).map_err(cert_error("a serving certificate"))?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params
        .signed_by(&key, issuer)
        .map_err(cert_error("a serving certificate"))?;
    Ok((cert, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_pem_files_for_every_piece() {
        let dir = std::env::temp_dir().join(format!("rackproof-pki-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let pki = generate(&dir, &["host.lab".to_owned()]).unwrap();
        let read = |path: &Path| std::fs::read_to_string(path).unwrap();
        assert!(read(&pki.ca_cert).starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(read(&pki.ca_key).starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(read(&pki.serving_cert).starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(read(&pki.serving_key).starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(read(&pki.controller_manager_cert).starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(read(&pki.controller_manager_key).starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(!pki.ca_der.is_empty());
        assert!(read(&pki.service_account_key).starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(read(&pki.service_account_pub).starts_with("-----BEGIN PUBLIC KEY-----"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
