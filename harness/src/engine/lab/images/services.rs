//! A scenario's `kill` of a node's agent or kubelet on the backends booting the node images: the
//! lab logs in to the node over SSH, as an operator would, and runs `rackproof-service stop` (the
//! node OS's `systemctl stop`: init holds the service stopped and SIGKILLs it) or
//! `rackproof-service start` (the hold ends; init starts the service within a second). The lab
//! knows each node's SSH endpoint: a QEMU guest's or libvirt domain's forwarded port on
//! 127.0.0.1 with a client key of the run and the images' pinned host key, a rack server's from
//! its inventory entry.

use std::path::Path;
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_ssh::{SshSession, SshTarget};

use super::{ImageLab, ImageNodeError};
use crate::scenario::Component;

/// One `rackproof-service` call on a TCG guest (connect included), on a loaded machine.
const SERVICE_CALL: Duration = Duration::from_secs(60);

/// Why a node's service could not be stopped or started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServiceError {
    /// The component does not run on a node.
    #[error("the {component} does not run on a node")]
    NotOnANode { component: &'static str },
    /// The SSH connection or the command failed.
    #[error("node {node}: `{command}` over SSH")]
    Ssh {
        node: String,
        command: String,
        #[source]
        source: Box<rackproof_ssh::Error>,
    },
    /// The command ran but did not answer as `rackproof-service` does.
    #[error(
        "node {node}: `{command}` answered {answer:?} (status {status}); do the node images have rackproof-service? rebuild them with ci/build-images"
    )]
    Answer {
        node: String,
        command: String,
        answer: String,
        status: String,
    },
}

/// Why the run's SSH client key or the images' host key could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SshSetupError {
    /// The client key could not be written.
    #[error("write the run's SSH client key")]
    ClientKey(#[source] rackproof_ssh::KeygenError),
    /// The images have no host key file.
    #[error(transparent)]
    HostKeyFile(rackproof_qemu::images::ImagesError),
    /// The host key file could not be read.
    #[error("read the images' SSH host key {path}")]
    ReadHostKey {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The host key file is not a dropbear ed25519 key.
    #[error("the images' SSH host key {path}")]
    HostKey {
        path: std::path::PathBuf,
        #[source]
        source: rackproof_ssh::DropbearKeyError,
    },
}

/// The SSH side of the guests of one run: the run's client key and the host key every slot of
/// the images presents.
#[derive(Debug, Clone)]
pub(crate) struct GuestSsh {
    /// The public half, as `authorized_keys` takes it (the nodes get it in their identity).
    pub authorized_key: String,
    private_key: std::path::PathBuf,
    host_key: rackproof_ssh::HostKeyPin,
}

impl GuestSsh {
    /// A fresh client key under `dir`, and the pin of the images' host key.
    pub(crate) fn new(dir: &Path, images: &rackproof_qemu::Images) -> Result<Self, SshSetupError> {
        let private_key = dir.join("ssh-client-key");
        let authorized_key = rackproof_ssh::generate_client_key(&private_key, "rackproof-run")
            .map_err(SshSetupError::ClientKey)?;
        let path = images.ssh_host_key().map_err(SshSetupError::HostKeyFile)?;
        let bytes = std::fs::read(&path).map_err(|source| SshSetupError::ReadHostKey {
            path: path.clone(),
            source,
        })?;
        let host_key = rackproof_ssh::dropbear_host_key_pin(&bytes)
            .map_err(|source| SshSetupError::HostKey { path, source })?;
        Ok(Self {
            authorized_key,
            private_key,
            host_key,
        })
    }

    /// The endpoint of a guest whose port 22 is forwarded to `port` on 127.0.0.1.
    pub(crate) fn target(&self, port: u16) -> SshTarget {
        let mut target = SshTarget::new(
            std::net::Ipv4Addr::LOCALHOST.to_string(),
            "root",
            &self.private_key,
        );
        target.port = port;
        target.host_key = Some(self.host_key.clone());
        target
    }
}

/// The name init supervises `component` under (the argument of `rackproof-service`).
fn unit(component: Component) -> Result<&'static str, ServiceError> {
    match component {
        Component::Agent => Ok("rackproof-agent"),
        Component::Kubelet => Ok("rackproof-kubelet"),
        Component::Orchestrator | Component::Watchdog => Err(ServiceError::NotOnANode {
            component: component.name(),
        }),
    }
}

impl ImageLab {
    /// Kills the node's `component` and holds it stopped; `true` once it is held (a service
    /// caught between two of init's restarts is held as well: it does not start again).
    pub(crate) async fn kill_service(
        &self,
        name: &str,
        component: Component,
    ) -> Result<bool, ImageNodeError> {
        let answer = self.service_call(name, "stop", component).await?;
        Ok(answer == "killed" || answer == "stopped")
    }

    /// Ends the hold of [`ImageLab::kill_service`]; `true` if there was one (the service starts
    /// within a second), `false` if the service was running (a reboot ended the hold).
    pub(crate) async fn restart_service(
        &self,
        name: &str,
        component: Component,
    ) -> Result<bool, ImageNodeError> {
        let answer = self.service_call(name, "start", component).await?;
        Ok(answer == "started")
    }

    /// Runs `rackproof-service ACTION UNIT` on node `name`; its one-word answer.
    async fn service_call(
        &self,
        name: &str,
        action: &str,
        component: Component,
    ) -> Result<String, ImageNodeError> {
        let node = self.node(name)?;
        let command = format!("rackproof-service {action} {}", unit(component)?);
        let answer = run(&node.ssh, &self.clock, name, &command).await?;
        Ok(answer)
    }
}

/// Runs `command` on the node at `target`; its trimmed standard output, which must be one of
/// `rackproof-service`'s words.
async fn run(
    target: &SshTarget,
    clock: &Clock,
    node: &str,
    command: &str,
) -> Result<String, ServiceError> {
    let ssh = |source| ServiceError::Ssh {
        node: node.to_owned(),
        command: command.to_owned(),
        source: Box::new(source),
    };
    let mut session = SshSession::connect(target, clock).await.map_err(ssh)?;
    let output = session.run(command, SERVICE_CALL).await.map_err(ssh)?;
    let _ = session.close().await;
    let answer = output.stdout_text().trim().to_owned();
    let known = ["killed", "stopped", "started", "running"];
    if !output.exit_status.success() || !known.contains(&answer.as_str()) {
        return Err(ServiceError::Answer {
            node: node.to_owned(),
            command: command.to_owned(),
            answer: format!("{answer} {}", output.stderr_text().trim())
                .trim()
                .to_owned(),
            status: output.exit_status.to_string(),
        });
    }
    Ok(answer)
}
