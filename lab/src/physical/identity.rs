//! Handing a rack node its identity over SSH. A server has no fw_cfg, so the identity (who the
//! node is, the API server it reports to, its token and CA) goes into `/state/identity` on the
//! node's state partition, which the node images' init reads at every boot (images/README.md).
//!
//! [`deliver_identity`] connects with the inventory's `ssh` (host key pinned), reads the OS
//! version the node runs, keeps the SSH key the node already authorizes (so the next boot stays
//! reachable), writes the identity atomically, clears the agent's state directory (a run starts
//! the agent afresh, as a new disk would) and syncs. The node must be up; the caller reboots it
//! for the identity to take effect.

use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_qemu::NodeIdentity;
use rackproof_ssh::{HostKeyPin, SshSession, SshTarget};

use crate::resource::NodeDescription;

/// Where init reads the identity on a node.
pub const IDENTITY_PATH: &str = "/state/identity";
/// The agent's state directory on a node (images/init: `--state-dir`).
const AGENT_STATE: &str = "/state/agent";
/// How long a node that just printed `up` may take to accept SSH (DHCP, dropbear starting).
const CONNECT_WITHIN: Duration = Duration::from_secs(90);
/// One command on the node.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);

/// The identity could not be delivered.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error(
        "node {node}: no `ssh` in the inventory; a run writes the node's identity over SSH (add host, user, keyPath and hostKey)"
    )]
    NoSsh { node: String },
    #[error("node {node}: ssh hostKey {host_key:?}: {problem}")]
    HostKey {
        node: String,
        host_key: String,
        problem: String,
    },
    #[error("node {node}: {what}")]
    Ssh {
        node: String,
        what: String,
        #[source]
        source: Box<rackproof_ssh::Error>,
    },
    #[error("node {node}: `{command}` failed (exit {status}): {stderr}")]
    Command {
        node: String,
        command: String,
        status: String,
        stderr: String,
    },
    #[error("node {node}: its identity can't be written: {problem}")]
    Identity { node: String, problem: String },
}

/// What the node said while its identity was delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// The OS version the node runs (`VERSION_ID` of its `/etc/os-release`).
    pub version: String,
}

/// The SSH target of `node`, from its inventory entry.
pub fn ssh_target(node: &NodeDescription) -> Result<SshTarget, DeliveryError> {
    let ssh = node.ssh.as_ref().ok_or_else(|| DeliveryError::NoSsh {
        node: node.name.clone(),
    })?;
    let pin: HostKeyPin = ssh
        .host_key
        .parse()
        .map_err(|problem| DeliveryError::HostKey {
            node: node.name.clone(),
            host_key: ssh.host_key.clone(),
            problem,
        })?;
    let mut target = SshTarget::new(&ssh.host, &ssh.user, &ssh.key_path);
    target.port = ssh.port;
    target.host_key = Some(pin);
    Ok(target)
}

/// Writes `identity` to the node (see the module docs).
pub async fn deliver_identity(
    node: &NodeDescription,
    identity: &NodeIdentity,
    clock: &Clock,
) -> Result<Delivered, DeliveryError> {
    let target = ssh_target(node)?;
    let name = node.name.as_str();
    let mut session = connect(name, &target, clock).await?;
    let version = run(
        &mut session,
        name,
        "sed -n 's/^VERSION_ID=//p' /etc/os-release",
    )
    .await?;
    let version = version.trim().trim_matches('"').to_owned();
    let mut identity = identity.clone();
    if identity.ssh_authorized_key.is_empty() {
        let keys = run(
            &mut session,
            name,
            "cat ~/.ssh/authorized_keys 2>/dev/null || true",
        )
        .await?;
        identity.ssh_authorized_key = keys
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap_or_default()
            .to_owned();
    }
    let text = identity.render().map_err(|e| DeliveryError::Identity {
        node: name.to_owned(),
        problem: e.to_string(),
    })?;
    session
        .upload_from(
            text.as_bytes(),
            text.len() as u64,
            IDENTITY_PATH,
            0o600,
            COMMAND_LIMIT,
        )
        .await
        .map_err(|source| DeliveryError::Ssh {
            node: name.to_owned(),
            what: format!("write {IDENTITY_PATH}"),
            source: Box::new(source),
        })?;
    run(&mut session, name, &format!("rm -rf {AGENT_STATE} && sync")).await?;
    let _ = session.close().await;
    tracing::info!(node = name, %version, "identity written to {IDENTITY_PATH}");
    Ok(Delivered { version })
}

/// Connects, trying again while the node's SSH server is not answering yet.
async fn connect(
    node: &str,
    target: &SshTarget,
    clock: &Clock,
) -> Result<SshSession, DeliveryError> {
    let deadline = clock.instant() + CONNECT_WITHIN;
    loop {
        match SshSession::connect(target, clock).await {
            Ok(session) => return Ok(session),
            Err(source) if clock.instant() >= deadline || !retriable(&source) => {
                return Err(DeliveryError::Ssh {
                    node: node.to_owned(),
                    what: format!("connect to {}", target.address()),
                    source: Box::new(source),
                });
            }
            Err(_) => clock.sleep(Duration::from_secs(2)).await,
        }
    }
}

/// Whether connecting again may help: the server not answering yet, not a refused key.
fn retriable(error: &rackproof_ssh::Error) -> bool {
    use rackproof_ssh::Error as E;
    !matches!(
        error,
        E::InvalidTarget { .. }
            | E::ClientKey { .. }
            | E::EncryptedClientKey { .. }
            | E::HostKeyMismatch { .. }
            | E::UnknownHostKey { .. }
            | E::AuthRejected { .. }
    )
}

/// Runs `command`; its standard output, or an error with its standard error.
async fn run(session: &mut SshSession, node: &str, command: &str) -> Result<String, DeliveryError> {
    let output = session
        .run(command, COMMAND_LIMIT)
        .await
        .map_err(|source| DeliveryError::Ssh {
            node: node.to_owned(),
            what: format!("run `{command}`"),
            source: Box::new(source),
        })?;
    if !output.exit_status.success() {
        return Err(DeliveryError::Command {
            node: node.to_owned(),
            command: command.to_owned(),
            status: output.exit_status.to_string(),
            stderr: output.stderr_text().trim().to_owned(),
        });
    }
    Ok(output.stdout_text())
}
