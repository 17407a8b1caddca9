//! The per-node identity handed to the guest through fw_cfg (`opt/rackproof/identity`): plain
//! `key=value` lines, which the image's init reads without evaluating them (images/init):
//!
//! ```text
//! node=worker-1
//! pool=pool-a
//! osc_secret=kube-system/osc-pool-a
//! api_server=https://10.0.2.2:6443      # the host, seen from the user network
//! token=...
//! ca_base64=...                         # the API server's CA, PEM, base64
//! ssh_authorized_key=ssh-ed25519 AAAA...
//! kubelet_version=1.34.2                # what the agent's heartbeat reports as the kubelet
//! ```

use base64::Engine as _;

/// The fw_cfg name the guest reads (`/sys/firmware/qemu_fw_cfg/by_name/opt/rackproof/identity/raw`).
pub const FW_CFG_NAME: &str = "opt/rackproof/identity";

/// The address of the host on QEMU's user network (its 127.0.0.1 services are reachable there).
pub const HOST_ALIAS: &str = "10.0.2.2";

/// Who a node is and how it reaches the cluster. `Debug` shows everything but the token.
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
    /// The API server's CA certificate (PEM).
    pub ca_pem: String,
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
            .field("ca_pem", &self.ca_pem)
            .field("ssh_authorized_key", &self.ssh_authorized_key)
            .field("kubelet_version", &self.kubelet_version)
            .finish()
    }
}

impl NodeIdentity {
    /// The file contents; refuses values containing line breaks or NULs.
    pub fn render(&self) -> Result<String, IdentityError> {
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes());
        let fields: [(&'static str, &str); 8] = [
            ("node", &self.node),
            ("pool", &self.pool),
            ("osc_secret", &self.osc_secret),
            ("api_server", &self.api_server),
            ("token", &self.token),
            ("ca_base64", &ca),
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
    fn debug_output_never_shows_the_token() {
        let id = NodeIdentity {
            node: "worker-1".into(),
            token: "canary-node-token-3f9a".into(),
            ..NodeIdentity::default()
        };
        let printed = format!("{id:?} {id:#?}");
        assert!(!printed.contains("canary-node-token-3f9a"), "{printed}");
        assert!(printed.contains("worker-1"), "{printed}");
        assert!(printed.contains("<redacted>"), "{printed}");
    }
}
