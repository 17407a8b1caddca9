//! Log collection: copy a list of remote files into a local folder, mirroring their paths, and
//! report which ones could not be read instead of failing on the first missing log.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use crate::error::Error;
use crate::session::{Deadline, SshSession};

/// One log that was copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectedLog {
    /// The path on the node.
    pub remote: String,
    /// Where it now is.
    pub local: PathBuf,
    /// Its size.
    pub bytes: u64,
}

/// One log that could not be read on the node (missing, unreadable, a directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingLog {
    /// The path on the node.
    pub remote: String,
    /// What the node said.
    pub reason: String,
}

/// The outcome of [`SshSession::collect_logs`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectedLogs {
    /// Logs copied, in the order asked.
    pub collected: Vec<CollectedLog>,
    /// Logs the node could not provide, in the order asked.
    pub missing: Vec<MissingLog>,
}

impl SshSession {
    /// Copies each remote file in `paths` to `dest_dir`, at the same relative path
    /// (`/var/log/messages` → `dest_dir/var/log/messages`), all within `timeout`. A file the node
    /// cannot read is listed in [`CollectedLogs::missing`]; connection failures, timeouts and local
    /// write failures are errors. Each copy is retried once on a dropped connection.
    pub async fn collect_logs<P: AsRef<str>>(
        &mut self,
        paths: &[P],
        dest_dir: &Path,
        timeout: Duration,
    ) -> Result<CollectedLogs, Error> {
        let deadline = Deadline::new(self.clock(), timeout);
        let mut outcome = CollectedLogs::default();
        for remote in paths {
            let remote = remote.as_ref();
            let operation = format!("collect log {remote}");
            let relative =
                local_relative(remote).map_err(|reason| self.invalid(&operation, reason))?;
            let local = dest_dir.join(relative);
            if let Some(parent) = local.parent() {
                tokio::fs::create_dir_all(parent)
                    .await
                    .map_err(|source| self.local_error(&operation, parent, source))?;
            }
            match self.download_by(remote, &local, &deadline).await {
                Ok(bytes) => outcome.collected.push(CollectedLog {
                    remote: remote.to_owned(),
                    local,
                    bytes,
                }),
                Err(Error::RemoteFailed { stderr, status, .. }) => {
                    let reason = if stderr.is_empty() {
                        format!("exited with {status}")
                    } else {
                        stderr
                    };
                    outcome.missing.push(MissingLog {
                        remote: remote.to_owned(),
                        reason,
                    });
                }
                Err(other) => return Err(other),
            }
        }
        Ok(outcome)
    }
}

/// The path under the destination folder for a remote path: its normal components only.
fn local_relative(remote: &str) -> Result<PathBuf, String> {
    let mut relative = PathBuf::new();
    for component in Path::new(remote).components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                return Err(format!(
                    "log path {remote:?} contains `..`; name the file directly"
                ));
            }
        }
    }
    if relative.as_os_str().is_empty() {
        return Err(format!("log path {remote:?} names no file"));
    }
    Ok(relative)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_paths_map_under_the_destination() {
        assert_eq!(
            local_relative("/var/log/messages").unwrap(),
            PathBuf::from("var/log/messages")
        );
        assert_eq!(
            local_relative("boot.log").unwrap(),
            PathBuf::from("boot.log")
        );
        assert!(local_relative("/var/log/../../etc/shadow").is_err());
        assert!(local_relative("/").is_err());
    }
}
