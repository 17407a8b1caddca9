//! Resources: passive descriptions of lab nodes as plain data (labgrid's first layer). They say
//! where a node's BMC, console, SSH and disks are, and where its credentials come from; they never
//! hold a secret and never act.
//!
//! Written in YAML (an inventory file) with camelCase keys; unknown keys are errors.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Which management protocol a node's BMC speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BmcKind {
    Redfish,
    Ipmi,
}

/// Where a BMC's username and password come from. Never inline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum CredentialsRef {
    /// Two environment variables holding the username and the password.
    Env {
        username_var: String,
        password_var: String,
    },
    /// A file with the username on the first line and the password on the second.
    File { path: PathBuf },
}

/// A node's BMC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BmcDescription {
    pub kind: BmcKind,
    /// Redfish: `https://host[:port]`; IPMI: `host[:port]` (port 623 by default).
    pub endpoint: String,
    pub credentials: CredentialsRef,
    /// Redfish only: a PEM CA bundle to verify the BMC's certificate with.
    #[serde(default)]
    pub ca_path: Option<PathBuf>,
    /// Redfish only: skip TLS verification for this endpoint (lab BMCs with self-signed certs).
    #[serde(default)]
    pub insecure_skip_tls_verify: bool,
}

/// Where a node's serial console can be read. Only what the lab can follow: a file a console
/// server or hypervisor writes (conserver, ipmitool SOL logging, QEMU/libvirt `-serial file:`),
/// or a TCP socket serving the raw console (ser2net, QEMU `-serial tcp:`). IPMI/Redfish
/// serial-over-LAN is not implemented by the BMC clients, so it cannot be described here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum ConsoleDescription {
    /// A file the console is written to, followed as it grows.
    File { path: PathBuf },
    /// A TCP socket serving the console.
    Tcp { host: String, port: u16 },
}

/// How to reach a node over SSH.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SshDescription {
    pub host: String,
    #[serde(default = "default_ssh_port")]
    pub port: u16,
    pub user: String,
    pub key_path: PathBuf,
    /// The host key the node must present, as in `known_hosts` (`ssh-ed25519 AAAA...`).
    pub host_key: String,
}

fn default_ssh_port() -> u16 {
    22
}

/// What a disk holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DiskRole {
    /// The boot disk: ESP with systemd-boot, and the state partition.
    Boot,
    Data,
}

/// A disk of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiskDescription {
    pub name: String,
    pub role: DiskRole,
    /// Device path on the node (`/dev/sda`) or image file on the host.
    #[serde(default)]
    pub path: Option<PathBuf>,
    #[serde(default)]
    pub size_bytes: Option<u64>,
}

/// One lab node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeDescription {
    pub name: String,
    #[serde(default)]
    pub bmc: Option<BmcDescription>,
    #[serde(default)]
    pub console: Option<ConsoleDescription>,
    #[serde(default)]
    pub ssh: Option<SshDescription>,
    #[serde(default)]
    pub disks: Vec<DiskDescription>,
}

/// How a rack's nodes reach the machine running Rackproof: the API server and the image server
/// a scenario run starts for them listen on `listen` and are addressed as `address`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HarnessAddress {
    /// What the nodes connect to: an IP address or DNS name of this machine as the rack sees it
    /// (the API server's certificate names it).
    pub address: String,
    /// The local address the servers listen on; every interface (`0.0.0.0`) when absent.
    #[serde(default = "every_interface")]
    pub listen: IpAddr,
}

impl HarnessAddress {
    /// Checks what serde can't: an address is given.
    pub fn validate(&self) -> Result<(), ResourceError> {
        if self.address.trim().is_empty() {
            return Err(ResourceError::NoHarnessAddress);
        }
        Ok(())
    }
}

fn every_interface() -> IpAddr {
    IpAddr::V4(Ipv4Addr::UNSPECIFIED)
}

/// A set of nodes (an inventory file's contents).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Inventory {
    /// How the nodes reach Rackproof; `rackproof run` on backend `physical` needs it, `rackproof
    /// lab` does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<HarnessAddress>,
    pub nodes: Vec<NodeDescription>,
}

/// A node description that can't be used.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    #[error("parse inventory")]
    Parse(#[source] serde_saphyr::Error),
    #[error("node {node:?}: {problem}")]
    Invalid { node: String, problem: String },
    #[error("inventory: node {node:?} is listed twice")]
    Duplicate { node: String },
    #[error("harness.address is empty; give the address the nodes reach this machine at")]
    NoHarnessAddress,
}

impl Inventory {
    /// Parses and validates an inventory in YAML.
    pub fn from_yaml(text: &str) -> Result<Self, ResourceError> {
        let inventory: Inventory = serde_saphyr::from_str(text).map_err(ResourceError::Parse)?;
        inventory.validate()?;
        for warning in inventory.warnings() {
            tracing::warn!("inventory: {warning}");
        }
        Ok(inventory)
    }

    /// Checks the harness address, every node, and that names are unique.
    pub fn validate(&self) -> Result<(), ResourceError> {
        if let Some(harness) = &self.harness {
            harness.validate()?;
        }
        let mut seen = BTreeSet::new();
        for node in &self.nodes {
            node.validate()?;
            if !seen.insert(node.name.as_str()) {
                return Err(ResourceError::Duplicate {
                    node: node.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// What the inventory allows but should not be used that way: each Redfish BMC reached over
    /// plain `http://`, whose password and session tokens cross the network in the clear.
    pub fn warnings(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter_map(|node| {
                let bmc = node.bmc.as_ref()?;
                (bmc.kind == BmcKind::Redfish && bmc.endpoint.starts_with("http://")).then(|| {
                    format!(
                        "node {:?}: BMC {} is plain http, so its password and session tokens \
                         cross the network in the clear; use https://",
                        node.name, bmc.endpoint
                    )
                })
            })
            .collect()
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<&NodeDescription> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

impl NodeDescription {
    /// Checks what serde can't: names, endpoints, ports, host keys, credentials references.
    pub fn validate(&self) -> Result<(), ResourceError> {
        let invalid = |problem: String| {
            Err(ResourceError::Invalid {
                node: self.name.clone(),
                problem,
            })
        };
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 63
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !self.name.starts_with('-')
            && !self.name.ends_with('-');
        if !name_ok {
            return invalid("name must be 1-63 lowercase letters, digits or '-', not starting or ending with '-'".into());
        }
        if let Some(bmc) = &self.bmc {
            match bmc.kind {
                BmcKind::Redfish => {
                    if !(bmc.endpoint.starts_with("https://")
                        || bmc.endpoint.starts_with("http://"))
                    {
                        return invalid(format!(
                            "redfish endpoint {:?} must start with https:// or http://",
                            bmc.endpoint
                        ));
                    }
                    if bmc.ca_path.is_some() && bmc.insecure_skip_tls_verify {
                        return invalid(
                            "caPath and insecureSkipTlsVerify contradict each other: keep caPath \
                             to verify the BMC's certificate against that CA, or remove it to \
                             skip verification"
                                .into(),
                        );
                    }
                }
                BmcKind::Ipmi => {
                    if bmc.endpoint.is_empty() || bmc.endpoint.contains("://") {
                        return invalid(format!(
                            "ipmi endpoint {:?} must be host or host:port",
                            bmc.endpoint
                        ));
                    }
                    if bmc.ca_path.is_some() || bmc.insecure_skip_tls_verify {
                        return invalid(
                            "caPath and insecureSkipTlsVerify apply to redfish only".into(),
                        );
                    }
                }
            }
            match &bmc.credentials {
                CredentialsRef::Env {
                    username_var,
                    password_var,
                } => {
                    for var in [username_var, password_var] {
                        if var.is_empty()
                            || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                        {
                            return invalid(format!(
                                "credentials variable {var:?} is not an environment variable name"
                            ));
                        }
                    }
                }
                CredentialsRef::File { path } => {
                    if !path.is_absolute() {
                        return invalid(format!(
                            "credentials file {} must be an absolute path",
                            path.display()
                        ));
                    }
                }
            }
        }
        if let Some(ssh) = &self.ssh {
            if ssh.host.is_empty() || ssh.user.is_empty() {
                return invalid("ssh host and user must not be empty".into());
            }
            if ssh.port == 0 {
                return invalid("ssh port must not be 0".into());
            }
            let mut parts = ssh.host_key.split_whitespace();
            let known = parts
                .next()
                .is_some_and(|t| t.starts_with("ssh-") || t.starts_with("ecdsa-"));
            if !known || parts.next().is_none() {
                return invalid(format!(
                    "ssh hostKey {:?} must be `TYPE BASE64` as in known_hosts",
                    ssh.host_key
                ));
            }
        }
        match &self.console {
            Some(ConsoleDescription::File { path }) if !path.is_absolute() => {
                return invalid(format!(
                    "console file {} must be an absolute path",
                    path.display()
                ));
            }
            Some(ConsoleDescription::Tcp { host, port }) if host.is_empty() || *port == 0 => {
                return invalid("console tcp needs a host and a port other than 0".into());
            }
            _ => {}
        }
        if self
            .disks
            .iter()
            .filter(|d| d.role == DiskRole::Boot)
            .count()
            > 1
        {
            return invalid("at most one boot disk".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
harness: { address: 10.0.0.1 }
nodes:
  - name: rack1-node1
    bmc:
      kind: redfish
      endpoint: https://10.0.0.11
      credentials:
        env: { usernameVar: RACK1_BMC_USER, passwordVar: RACK1_BMC_PASSWORD }
      caPath: /etc/rackproof/bmc-ca.pem
    console:
      tcp: { host: console-server, port: 7001 }
    ssh:
      host: 10.0.1.11
      user: root
      keyPath: /etc/rackproof/id_ed25519
      hostKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample
    disks:
      - { name: sda, role: boot, path: /dev/sda, sizeBytes: 480103981056 }
  - name: rack1-node2
    bmc:
      kind: ipmi
      endpoint: 10.0.0.12:623
      credentials:
        file: { path: /etc/rackproof/node2.cred }
    console:
      file: { path: /var/log/conserver/rack1-node2.log }
"#;

    #[test]
    fn a_full_inventory_parses() {
        let inv = Inventory::from_yaml(GOOD).unwrap();
        let harness = inv.harness.as_ref().unwrap();
        assert_eq!(
            (harness.address.as_str(), harness.listen),
            ("10.0.0.1", IpAddr::V4(Ipv4Addr::UNSPECIFIED))
        );
        let empty = GOOD.replace("address: 10.0.0.1", "address: ''");
        assert!(matches!(
            Inventory::from_yaml(&empty),
            Err(ResourceError::NoHarnessAddress)
        ));
        let n1 = inv.node("rack1-node1").unwrap();
        assert_eq!(n1.ssh.as_ref().unwrap().port, 22);
        assert_eq!(n1.bmc.as_ref().unwrap().kind, BmcKind::Redfish);
        assert_eq!(n1.disks[0].role, DiskRole::Boot);
        let n2 = inv.node("rack1-node2").unwrap();
        assert_eq!(
            n2.console,
            Some(ConsoleDescription::File {
                path: "/var/log/conserver/rack1-node2.log".into()
            })
        );
        assert!(matches!(
            n2.bmc.as_ref().unwrap().credentials,
            CredentialsRef::File { .. }
        ));
    }

    #[test]
    fn unknown_fields_and_inline_secrets_are_rejected() {
        let inline = GOOD.replace("caPath: /etc/rackproof/bmc-ca.pem", "password: hunter2");
        assert!(matches!(
            Inventory::from_yaml(&inline),
            Err(ResourceError::Parse(_))
        ));
    }

    #[test]
    fn invalid_nodes_are_explained() {
        let cases = [
            (GOOD.replace("rack1-node2", "Rack1"), "name must be"),
            (
                GOOD.replace("https://10.0.0.11", "10.0.0.11"),
                "must start with https://",
            ),
            (
                GOOD.replace("RACK1_BMC_USER", "RACK-1"),
                "not an environment variable name",
            ),
            (
                GOOD.replace("/etc/rackproof/node2.cred", "node2.cred"),
                "must be an absolute path",
            ),
            (
                GOOD.replace("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample", "AAAA"),
                "must be `TYPE BASE64`",
            ),
            (
                GOOD.replace("/var/log/conserver/rack1-node2.log", "rack1-node2.log"),
                "console file rack1-node2.log must be an absolute path",
            ),
            (GOOD.replace("port: 7001", "port: 0"), "port other than 0"),
            (GOOD.replace("rack1-node2", "rack1-node1"), "listed twice"),
            (
                GOOD.replace(
                    "caPath: /etc/rackproof/bmc-ca.pem",
                    "caPath: /etc/rackproof/bmc-ca.pem\n      insecureSkipTlsVerify: true",
                ),
                "caPath and insecureSkipTlsVerify contradict each other",
            ),
        ];
        for (text, expected) in cases {
            let err = Inventory::from_yaml(&text).unwrap_err().to_string();
            assert!(err.contains(expected), "{err} should mention {expected}");
        }
    }

    #[test]
    fn a_plain_http_bmc_is_warned_about() {
        let inv = Inventory::from_yaml(GOOD).unwrap();
        assert_eq!(inv.warnings(), Vec::<String>::new());
        let plain = GOOD.replace(
            "endpoint: https://10.0.0.11\n      credentials:\n        env: { usernameVar: RACK1_BMC_USER, passwordVar: RACK1_BMC_PASSWORD }\n      caPath: /etc/rackproof/bmc-ca.pem",
            "endpoint: http://10.0.0.11\n      credentials:\n        env: { usernameVar: RACK1_BMC_USER, passwordVar: RACK1_BMC_PASSWORD }",
        );
        let inv = Inventory::from_yaml(&plain).unwrap();
        let warnings = inv.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("rack1-node1"), "{warnings:?}");
        assert!(warnings[0].contains("http://10.0.0.11"), "{warnings:?}");
        assert!(warnings[0].contains("in the clear"), "{warnings:?}");
    }
}
