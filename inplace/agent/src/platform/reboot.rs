//! Rebooting the node: a command on real nodes, a callback on simulated machines.
//!
//! [`Reboot::reboot`] does not return on success: the machine goes down. The command backend
//! runs the configured command (`systemctl reboot` under systemd, `reboot -f` with busybox) and
//! then waits; if the machine is still up after the grace period the reboot is reported as
//! failed, so the agent can say so on the Node instead of hanging. The callback backend hands the
//! request to the simulation harness, which tears the agent down and boots the machine again.

use std::sync::Arc;
use std::time::Duration;

use rackproof_clock::Clock;

/// A failed reboot request.
#[derive(Debug, thiserror::Error)]
pub enum RebootError {
    /// The reboot command could not be started.
    #[error("failed to run reboot command {command:?}")]
    Spawn {
        /// The command line.
        command: Vec<String>,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The reboot command failed.
    #[error("reboot command {command:?} exited with {status}")]
    Failed {
        /// The command line.
        command: Vec<String>,
        /// Its exit status.
        status: String,
    },
    /// The machine did not go down.
    #[error("the machine is still up {after:?} after reboot command {command:?}")]
    StillUp {
        /// The command line.
        command: Vec<String>,
        /// How long the agent waited.
        after: Duration,
    },
    /// The command line was empty.
    #[error("the reboot command is empty")]
    Empty,
}

/// Restarts the machine.
#[async_trait::async_trait]
pub trait Reboot: Send + Sync + std::fmt::Debug {
    /// Reboots; returns only if the reboot failed.
    async fn reboot(&self) -> RebootError;
    /// An identifier of the current boot, different after every reboot, if the platform has one.
    /// The agent records it with its reboot request, so that after a restart it can tell "the
    /// reboot never happened" from "the machine rebooted and came back on the old slot".
    fn boot_id(&self) -> Option<String>;
}

/// Reboots by running a command, e.g. `["systemctl", "reboot"]` or `["reboot", "-f"]`.
#[derive(Debug, Clone)]
pub struct CommandReboot {
    command: Vec<String>,
    grace: Duration,
    clock: Clock,
    boot_id_path: std::path::PathBuf,
}

impl CommandReboot {
    /// Runs `command`, then waits up to `grace` for the machine to go down.
    pub fn new(command: Vec<String>, grace: Duration, clock: Clock) -> Self {
        Self {
            command,
            grace,
            clock,
            boot_id_path: "/proc/sys/kernel/random/boot_id".into(),
        }
    }

    /// Reads the boot id from `path` instead of `/proc/sys/kernel/random/boot_id`.
    pub fn with_boot_id_path(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.boot_id_path = path.into();
        self
    }
}

#[async_trait::async_trait]
impl Reboot for CommandReboot {
    async fn reboot(&self) -> RebootError {
        let Some((program, args)) = self.command.split_first() else {
            return RebootError::Empty;
        };
        tracing::info!(command = ?self.command, "rebooting");
        match tokio::process::Command::new(program)
            .args(args)
            .status()
            .await
        {
            Err(source) => {
                return RebootError::Spawn {
                    command: self.command.clone(),
                    source,
                };
            }
            Ok(status) if !status.success() => {
                return RebootError::Failed {
                    command: self.command.clone(),
                    status: status.to_string(),
                };
            }
            Ok(_) => {}
        }
        self.clock.sleep(self.grace).await;
        RebootError::StillUp {
            command: self.command.clone(),
            after: self.grace,
        }
    }

    fn boot_id(&self) -> Option<String> {
        std::fs::read_to_string(&self.boot_id_path)
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    }
}

/// Reboots by calling a function supplied by the simulation harness, then waiting forever (the
/// harness drops the agent's future when it resets the machine).
#[derive(Clone)]
pub struct CallbackReboot {
    callback: Arc<dyn Fn() + Send + Sync>,
    boot_id: Option<Arc<dyn Fn() -> String + Send + Sync>>,
}

impl std::fmt::Debug for CallbackReboot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallbackReboot")
    }
}

impl CallbackReboot {
    /// Calls `callback` on every reboot.
    pub fn new(callback: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            callback: Arc::new(callback),
            boot_id: None,
        }
    }

    /// Reports the simulated machine's boot id through `boot_id`.
    pub fn with_boot_id(mut self, boot_id: impl Fn() -> String + Send + Sync + 'static) -> Self {
        self.boot_id = Some(Arc::new(boot_id));
        self
    }
}

#[async_trait::async_trait]
impl Reboot for CallbackReboot {
    async fn reboot(&self) -> RebootError {
        (self.callback)();
        std::future::pending::<()>().await;
        unreachable!("a pending future never completes")
    }

    fn boot_id(&self) -> Option<String> {
        self.boot_id.as_ref().map(|f| f())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_command_that_succeeds_but_leaves_the_machine_up_is_reported() {
        let reboot = CommandReboot::new(
            vec!["true".into()],
            Duration::from_secs(60),
            Clock::simulated(jiff::Timestamp::UNIX_EPOCH),
        );
        assert!(matches!(reboot.reboot().await, RebootError::StillUp { .. }));
        let reboot = CommandReboot::new(
            vec!["false".into()],
            Duration::from_secs(60),
            Clock::simulated(jiff::Timestamp::UNIX_EPOCH),
        );
        assert!(matches!(reboot.reboot().await, RebootError::Failed { .. }));
        let reboot = CommandReboot::new(
            vec!["/nonexistent/reboot".into()],
            Duration::from_secs(1),
            Clock::simulated(jiff::Timestamp::UNIX_EPOCH),
        );
        assert!(matches!(reboot.reboot().await, RebootError::Spawn { .. }));
        let reboot = CommandReboot::new(
            vec![],
            Duration::from_secs(1),
            Clock::simulated(jiff::Timestamp::UNIX_EPOCH),
        );
        assert!(matches!(reboot.reboot().await, RebootError::Empty));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("boot_id"), "abc\n").unwrap();
        let reboot = reboot.with_boot_id_path(dir.path().join("boot_id"));
        assert_eq!(reboot.boot_id().as_deref(), Some("abc"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_callback_is_called_and_the_future_never_completes() {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = calls.clone();
        let reboot = CallbackReboot::new(move || {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        assert_eq!(reboot.boot_id(), None);
        let reboot = reboot.with_boot_id(|| "7".to_owned());
        assert_eq!(reboot.boot_id().as_deref(), Some("7"));
        let outcome = tokio::time::timeout(Duration::from_secs(3600), reboot.reboot()).await;
        assert!(outcome.is_err());
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
