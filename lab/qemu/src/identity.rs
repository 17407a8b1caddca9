//! The per-node identity handed to the guest through fw_cfg (`opt/rackproof/identity`): plain
//! `key=value` lines, which the image's init reads without evaluating them (images/init):
//!
//! ```text
//! node=worker-1
//! pool=pool-a
//! osc_secret=kube-system/osc-pool-a
//! api_server=https://10.0.2.2:6443      # the host, seen from the user network
//! token=...                             # a bearer token, or else:
//! client_certificate_base64=...         # a client certificate (PEM, base64) and its key, as an
//! client_key_base64=...                 #   existing cluster signs them for its nodes
//! ca_base64=...                         # the API server's CA, PEM, base64
//! tls_server_name=127.0.0.1             # the name to verify the server as, when the guest
//!                                       #   reaches it by another address (10.0.2.2)
//! node_labels=rackproof.dev/run=ab12    # extra Node labels (KEY=VALUE, comma-separated)
//! ssh_authorized_key=ssh-ed25519 AAAA...
//! kubelet_version=1.34.2                # what the agent's heartbeat reports as the kubelet
//! ```

use base64::Engine as _;

/// The fw_cfg name the guest reads (`/sys/firmware/qemu_fw_cfg/by_name/opt/rackproof/identity/raw`).
pub const FW_CFG_NAME: &str = "opt/rackproof/identity";

/// The address of the host on QEMU's user network (its 127.0.0.1 services are reachable there).
pub const HOST_ALIAS: &str = "10.0.2.2";

/// Who a node is and how it reaches the cluster: a bearer token or a client certificate.
/// `Debug` shows everything but the token and the private key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NodeIdentity {
    pub node: String,
    pub pool: String,
    /// The pool's OSC Secret, `NAMESPACE/NAME`.
    pub osc_secret: String,
    /// The API server URL as the guest sees it (use [`HOST_ALIAS`] for a host service).
    pub api_server: String,
    /// Bearer token. Never logged.
    pub token: String,
    /// A client certificate (PEM), used instead of the token when given.
    pub client_certificate_pem: String,
    /// The client certificate's private key (PEM). Never logged.
    pub client_key_pem: String,
    /// The API server's CA certificate (PEM).
    pub ca_pem: String,
    /// The name the server's certificate is verified as, when it differs from the host in
    /// `api_server` (a host service reached as [`HOST_ALIAS`]). Empty: that host.
    pub tls_server_name: String,
    /// Labels the node registers its Node with, beyond its pool's.
    pub node_labels: std::collections::BTreeMap<String, String>,
    /// One OpenSSH public key line for root.
    pub ssh_authorized_key: String,
    /// The kubelet version the node reports (the images have no kubelet; the agent's heartbeat
    /// plays it). Empty: none until an OSC installs one.
    pub kubelet_version: String,
}

/// A value that can't be carried in the identity file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node identity of {node:?}: field {field} must be a single line")]
pub struct IdentityError {
    pub node: String,
    pub field: &'static str,
}

impl std::fmt::Debug for NodeIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeIdentity")
            .field("node", &self.node)
            .field("pool", &self.pool)
            .field("osc_secret", &self.osc_secret)
            .field("api_server", &self.api_server)
            .field("token", &"<redacted>")
            .field("client_certificate_pem", &self.client_certificate_pem)
            .field("client_key_pem", &"<redacted>")
            .field("ca_pem", &self.ca_pem)
            .field("tls_server_name", &self.tls_server_name)
            .field("node_labels", &self.node_labels)
            .field("ssh_authorized_key", &self.ssh_authorized_key)
            .field("kubelet_version", &self.kubelet_version)
            .finish()
    }
}

impl NodeIdentity {
    /// The file contents; refuses values containing line breaks or NULs.
    pub fn render(&self) -> Result<String, IdentityError> {
        let base64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem.as_bytes());
        let labels = self
            .node_labels
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join(",");
        let fields: [(&'static str, &str); 12] = [
            ("node", &self.node),
            ("pool", &self.pool),
            ("osc_secret", &self.osc_secret),
            ("api_server", &self.api_server),
            ("token", &self.token),
            (
                "client_certificate_base64",
                &base64(&self.client_certificate_pem),
            ),
            ("client_key_base64", &base64(&self.client_key_pem)),
            ("ca_base64", &base64(&self.ca_pem)),
            ("tls_server_name", &self.tls_server_name),
            ("node_labels", &labels),
            ("ssh_authorized_key", &self.ssh_authorized_key),
            ("kubelet_version", &self.kubelet_version),
        ];
        let mut out = String::new();
        for (field, value) in fields {
            if value.contains(['\n', '\r', '\0']) {
                return Err(IdentityError {
                    node: self.node.clone(),
                    field,
                });
            }
            out.push_str(field);
            out.push('=');
            out.push_str(value);
            out.push('\n');
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_key_value_lines_and_refuses_line_breaks() {
        let id = NodeIdentity {
            node: "worker-1".into(),
            pool: "a".into(),
            api_server: format!("https://{HOST_ALIAS}:6443"),
            ca_pem: "-----BEGIN CERTIFICATE-----\nx\n".into(),
            ..NodeIdentity::default()
        };
        let text = id.render().unwrap();
        assert!(
            text.starts_with(
                "node=worker-1\npool=a\nosc_secret=\napi_server=https://10.0.2.2:6443\ntoken=\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("ca_base64=LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCngK\n"),
            "{text}"
        );
        let bad = NodeIdentity {
            token: "a\nnode=evil".into(),
            ..id
        };
        assert_eq!(
            bad.render().unwrap_err().to_string(),
            "node identity of \"worker-1\": field token must be a single line"
        );
    }

    #[test]
    fn renders_a_client_certificate_the_server_name_and_labels() {
        let id = NodeIdentity {
            node: "worker-1".into(),
            client_certificate_pem: "CERT\n".into(),
            client_key_pem: "KEY\n".into(),
            tls_server_name: "127.0.0.1".into(),
            node_labels: [("a/b", "1"), ("c", "2")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .into(),
            ..NodeIdentity::default()
        };
        let text = id.render().unwrap();
        for line in [
            "client_certificate_base64=Q0VSVAo=\n",
            "client_key_base64=S0VZCg==\n",
            "tls_server_name=127.0.0.1\n",
            "node_labels=a/b=1,c=2\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn debug_output_never_shows_the_token() {
        let id = NodeIdentity {
            node: "worker-1".into(),
            token: "canary-node-token-3f9a".into(),
            ..NodeIdentity::default()
        };
        let printed = format!("{id:?} {id:#?}");
        assert!(!printed.contains("canary-node-token-3f9a"), "{printed}");
        let with_key = NodeIdentity {
            client_key_pem: "-----BEGIN PRIVATE KEY-----\ncanary-key-77c1\n".into(),
            ..id.clone()
        };
        let printed = format!("{with_key:?} {with_key:#?}");
        assert!(!printed.contains("canary-key-77c1"), "{printed}");
        assert!(printed.contains("worker-1"), "{printed}");
        assert!(printed.contains("<redacted>"), "{printed}");
    }
}
