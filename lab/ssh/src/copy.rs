//! File copies over exec channels and `cat`, because dropbear has no SFTP subsystem by default.
//!
//! Upload (`upload`, `upload_from`):
//! 1. open a session channel and exec the snippet from `shell::upload_script` (announcing the
//!    byte count `N` and the mode);
//! 2. stream the bytes as channel data, then send EOF;
//! 3. on the node, `cat` writes them to `<path>.rackproof-upload` in the same directory; the
//!    snippet checks that exactly `N` bytes arrived, `chmod`s the temp file and `mv`s it over
//!    `<path>` (a rename: readers see the old file or the new one, never a mix);
//! 4. anything short of that (fewer bytes because the connection or the source ended early, a full
//!    disk, a missing directory) removes the temp file and leaves `<path>` untouched.
//!
//! Download (`download`): exec `cat < <path>`, stream standard output into
//! `.<name>.rackproof-download` next to the local destination, and rename it into place only
//! after the remote command exited 0.
//!
//! Caveats: the parent directory must exist on both sides; two concurrent uploads to the same
//! remote path share the temp name and may fail; the mode is set explicitly, ownership is the
//! login user's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::error::Error;
use crate::session::{Attempt, Deadline, Output, SshSession, StdoutSink, collect_output, within};
use crate::shell::{check_remote_path, download_script, upload_script};

const CHUNK: usize = 32 * 1024;
const STDERR_LIMIT: usize = 500;

impl SshSession {
    /// Copies the local file `local` to `remote` on the node with permission bits `mode`
    /// (e.g. `0o644`), atomically (module docs). Returns the byte count. Retried once on a new
    /// connection if the connection drops (an upload is idempotent).
    pub async fn upload(
        &mut self,
        local: &Path,
        remote: &str,
        mode: u32,
        timeout: Duration,
    ) -> Result<u64, Error> {
        let operation = format!("upload {} to {remote}", local.display());
        self.check_upload(&operation, remote, mode)?;
        let deadline = Deadline::new(self.clock(), timeout);
        let mut retried = false;
        loop {
            let attempt = within(&deadline, self.target(), &operation, async {
                let local_error = |source| self.local_error(&operation, local, source);
                let file = tokio::fs::File::open(local)
                    .await
                    .map_err(|e| Attempt::fatal(local_error(e)))?;
                let len = file
                    .metadata()
                    .await
                    .map_err(|e| Attempt::fatal(local_error(e)))?
                    .len();
                self.send(file, len, remote, mode, &operation, local).await
            })
            .await;
            if let Some(len) = self
                .settle(attempt, &operation, true, &mut retried, &deadline)
                .await?
            {
                return Ok(len);
            }
        }
    }

    /// Copies exactly `len` bytes from `reader` to `remote` with `mode`, atomically. If `reader`
    /// ends early the remote file is left unchanged and [`Error::ShortUpload`] is returned. Not
    /// retried after bytes were sent (a reader cannot be rewound).
    pub async fn upload_from<R: AsyncRead + Unpin + Send>(
        &mut self,
        mut reader: R,
        len: u64,
        remote: &str,
        mode: u32,
        timeout: Duration,
    ) -> Result<u64, Error> {
        let operation = format!("upload to {remote}");
        self.check_upload(&operation, remote, mode)?;
        let deadline = Deadline::new(self.clock(), timeout);
        let mut retried = false;
        loop {
            let attempt = within(&deadline, self.target(), &operation, async {
                self.send(
                    &mut reader,
                    len,
                    remote,
                    mode,
                    &operation,
                    Path::new("<stream>"),
                )
                .await
            })
            .await;
            if let Some(len) = self
                .settle(attempt, &operation, false, &mut retried, &deadline)
                .await?
            {
                return Ok(len);
            }
        }
    }

    /// Copies the node's file `remote` to `local`, replacing `local` only once the whole file
    /// arrived. Returns the byte count. Retried once on a new connection if the connection drops.
    pub async fn download(
        &mut self,
        remote: &str,
        local: &Path,
        timeout: Duration,
    ) -> Result<u64, Error> {
        let deadline = Deadline::new(self.clock(), timeout);
        self.download_by(remote, local, &deadline).await
    }

    pub(crate) async fn download_by(
        &mut self,
        remote: &str,
        local: &Path,
        deadline: &Deadline,
    ) -> Result<u64, Error> {
        let operation = format!("download {remote} to {}", local.display());
        check_remote_path(remote).map_err(|reason| self.invalid(&operation, reason))?;
        let Some(name) = local.file_name() else {
            return Err(self.invalid(
                &operation,
                format!("local path {} names no file", local.display()),
            ));
        };
        let partial =
            local.with_file_name(format!(".{}.rackproof-download", name.to_string_lossy()));
        let mut retried = false;
        loop {
            let attempt = within(
                deadline,
                self.target(),
                &operation,
                self.receive(remote, &partial, &operation),
            )
            .await;
            match self
                .settle(attempt, &operation, true, &mut retried, deadline)
                .await
            {
                Ok(Some(len)) => {
                    return match tokio::fs::rename(&partial, local).await {
                        Ok(()) => Ok(len),
                        Err(source) => {
                            remove_quietly(&partial).await;
                            Err(self.local_error(&operation, local, source))
                        }
                    };
                }
                Ok(None) => continue,
                Err(error) => {
                    remove_quietly(&partial).await;
                    return Err(error);
                }
            }
        }
    }

    async fn send<R: AsyncRead + Unpin + Send>(
        &self,
        mut reader: R,
        len: u64,
        remote: &str,
        mode: u32,
        operation: &str,
        local: &Path,
    ) -> Result<u64, Attempt> {
        let (mut read, write) = self
            .open_channel()
            .await
            .map_err(Attempt::before_exec)?
            .split();
        write
            .exec(true, upload_script(remote, len, mode))
            .await
            .map_err(Attempt::before_exec)?;
        let writing = async {
            let mut buffer = vec![0; CHUNK];
            let mut sent = 0u64;
            while sent < len {
                let want = usize::try_from(len - sent).unwrap_or(CHUNK).min(CHUNK);
                let read = match reader.read(&mut buffer[..want]).await {
                    Ok(read) => read,
                    Err(source) => {
                        // End the remote side now: it sees a short file and discards it.
                        let _ = write.eof().await;
                        return Err(Attempt::fatal(self.local_error(operation, local, source)));
                    }
                };
                if read == 0 {
                    break;
                }
                write
                    .data(&buffer[..read])
                    .await
                    .map_err(Attempt::after_exec)?;
                sent += read as u64;
            }
            write.eof().await.map_err(Attempt::after_exec)?;
            Ok(sent)
        };
        // Read while writing: the node may fail early (missing directory, full disk) and the
        // connection may drop, and then no more window arrives for the data still to send.
        let reading = collect_output(&mut read, None);
        tokio::pin!(writing, reading);
        let (sent, output) = tokio::select! {
            sent = &mut writing => {
                let sent = sent?;
                (Some(sent), reading.await?)
            }
            output = &mut reading => (None, output?),
        };
        if let Some(sent) = sent
            && sent != len
        {
            return Err(Attempt::fatal(Error::ShortUpload {
                address: self.address(),
                operation: operation.to_owned(),
                sent,
                expected: len,
            }));
        }
        self.require_success(output, operation)?;
        Ok(len)
    }

    async fn receive(&self, remote: &str, partial: &Path, operation: &str) -> Result<u64, Attempt> {
        let local_error = |source| self.local_error(operation, partial, source);
        let mut file = tokio::fs::File::create(partial)
            .await
            .map_err(|e| Attempt::fatal(local_error(e)))?;
        let (mut read, write) = self
            .open_channel()
            .await
            .map_err(Attempt::before_exec)?
            .split();
        write
            .exec(true, download_script(remote))
            .await
            .map_err(Attempt::before_exec)?;
        write.eof().await.map_err(Attempt::after_exec)?;
        let mut sink = StdoutSink {
            file: &mut file,
            written: 0,
            error: &local_error,
        };
        let output = collect_output(&mut read, Some(&mut sink)).await?;
        let written = sink.written;
        self.require_success(output, operation)?;
        file.sync_all()
            .await
            .map_err(|e| Attempt::fatal(local_error(e)))?;
        Ok(written)
    }

    fn require_success(&self, output: Output, operation: &str) -> Result<(), Attempt> {
        if output.exit_status.success() {
            return Ok(());
        }
        Err(Attempt::fatal(Error::RemoteFailed {
            address: self.address(),
            operation: operation.to_owned(),
            status: output.exit_status.to_string(),
            stderr: short_text(&output.stderr),
        }))
    }

    fn check_upload(&self, operation: &str, remote: &str, mode: u32) -> Result<(), Error> {
        check_remote_path(remote).map_err(|reason| self.invalid(operation, reason))?;
        if mode > 0o7777 {
            return Err(self.invalid(
                operation,
                format!("mode {mode:o} is not a permission mode (at most 7777)"),
            ));
        }
        Ok(())
    }

    pub(crate) fn invalid(&self, operation: &str, reason: String) -> Error {
        Error::InvalidArgument {
            address: self.address(),
            operation: operation.to_owned(),
            reason,
        }
    }

    pub(crate) fn local_error(
        &self,
        operation: &str,
        path: &Path,
        source: std::io::Error,
    ) -> Error {
        Error::Local {
            address: self.address(),
            operation: operation.to_owned(),
            path: PathBuf::from(path),
            source,
        }
    }
}

async fn remove_quietly(path: &Path) {
    if let Err(error) = tokio::fs::remove_file(path).await
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), %error, "could not remove partial download");
    }
}

/// Remote stderr for an error message: trimmed, at most a few hundred characters.
pub(crate) fn short_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.chars().count() <= STDERR_LIMIT {
        return text.to_owned();
    }
    let short: String = text.chars().take(STDERR_LIMIT).collect();
    format!("{short}...")
}
