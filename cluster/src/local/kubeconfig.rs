//! Kubeconfig files for the control plane's users: one cluster (the HTTPS URL with the CA file),
//! one user with a bearer token, one context, current.

use std::path::Path;

use serde_json::json;

/// Renders a kubeconfig as YAML.
pub(crate) fn render(server: &str, ca_cert: &Path, user: &str, token: &str) -> String {
    let document = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "rackproof-local",
            "cluster": { "server": server, "certificate-authority": ca_cert.to_string_lossy() },
        }],
        "users": [{ "name": user, "user": { "token": token } }],
        "contexts": [{
            "name": "rackproof-local",
            "context": { "cluster": "rackproof-local", "user": user },
        }],
        "current-context": "rackproof-local",
    });
    serde_saphyr::to_string(&document).unwrap_or_else(|_| document.to_string())
}

#[cfg(test)]
mod tests {
    use kube::config::Kubeconfig;

    use super::*;

    #[test]
    fn kube_reads_back_server_ca_user_and_token() {
        let text = render(
            "https://127.0.0.1:6443",
            Path::new("/tmp/x/ca.crt"),
            "system:node:a",
            "t0k3n",
        );
        let config = Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(config.current_context.as_deref(), Some("rackproof-local"));
        let cluster = config.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(
            cluster.certificate_authority.as_deref(),
            Some("/tmp/x/ca.crt")
        );
        assert_eq!(config.auth_infos[0].name, "system:node:a");
        assert!(text.contains("t0k3n"), "{text}");
    }
}
