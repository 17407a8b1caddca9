//! Consoles of rack nodes as a [`ConsoleSource`]: a file followed as it grows (what a console
//! server, `ipmitool sol` logging or a hypervisor writes), or a TCP socket serving the raw
//! console. A task reads lines and broadcasts them; it keeps the lines since the latest boot
//! marker for late subscribers, as the sim machine does.
//!
//! A file is read from its start (so the backlog shows the boot in progress), then polled for
//! growth; if it shrinks (truncated or rotated in place) it is read again from the start. A TCP
//! console ends when the peer closes it: subscribers then see the channel closed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_std::LockExt;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncSeekExt as _};
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

use crate::console::{BootEvent, ConsoleLine, ConsoleSource};
use crate::resource::ConsoleDescription;

/// Lines kept for late subscribers, at most.
const BACKLOG_LIMIT: usize = 4096;
/// How often a console file is checked for new lines.
const FILE_POLL: Duration = Duration::from_millis(200);

/// A console that could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("node {node}: cannot open console file {}", path.display())]
    File {
        node: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("node {node}: cannot connect to console {host}:{port}")]
    Tcp {
        node: String,
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
}

/// A console read by a background task; dropping it stops the task.
#[derive(Debug)]
pub struct StreamConsole {
    node: String,
    shared: Arc<Shared>,
    task: AbortHandle,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    backlog: Vec<ConsoleLine>,
    /// `None` once the source ended.
    sender: Option<broadcast::Sender<ConsoleLine>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    fn push(&self, text: String, clock: &Clock) {
        let line = ConsoleLine {
            at: clock.now(),
            text,
        };
        let mut s = self.lock();
        if BootEvent::parse(&line.text) == Some(BootEvent::FirmwareStart) {
            s.backlog.clear();
        }
        if s.backlog.len() >= BACKLOG_LIMIT {
            s.backlog.drain(..BACKLOG_LIMIT / 2);
        }
        s.backlog.push(line.clone());
        if let Some(sender) = &s.sender {
            // No subscribers is fine.
            let _ = sender.send(line);
        }
    }

    fn close(&self) {
        self.lock().sender = None;
    }
}

/// Splits a byte stream into lines (lossy UTF-8, `\r` dropped).
#[derive(Default)]
struct LineSplitter {
    partial: Vec<u8>,
}

impl LineSplitter {
    fn feed(&mut self, bytes: &[u8], mut emit: impl FnMut(String)) {
        for &b in bytes {
            if b == b'\n' {
                let line = String::from_utf8_lossy(&self.partial)
                    .trim_end_matches('\r')
                    .to_owned();
                self.partial.clear();
                emit(line);
            } else {
                self.partial.push(b);
            }
        }
    }
}

impl StreamConsole {
    /// Opens the console `description` says `node` has.
    pub async fn open(
        node: &str,
        description: &ConsoleDescription,
        clock: Clock,
    ) -> Result<Self, ConsoleError> {
        match description {
            ConsoleDescription::File { path } => Self::follow_file(node, path, clock).await,
            ConsoleDescription::Tcp { host, port } => {
                Self::connect_tcp(node, host, *port, clock).await
            }
        }
    }

    /// Follows the file at `path` (see the module docs).
    pub async fn follow_file(node: &str, path: &Path, clock: Clock) -> Result<Self, ConsoleError> {
        let file = tokio::fs::File::open(path)
            .await
            .map_err(|source| ConsoleError::File {
                node: node.to_owned(),
                path: path.to_owned(),
                source,
            })?;
        let path = path.to_owned();
        Ok(Self::spawn(node, clock, move |shared, clock| async move {
            follow(file, &path, &shared, &clock).await;
        }))
    }

    /// Reads the console served at `host:port` until the peer closes it.
    pub async fn connect_tcp(
        node: &str,
        host: &str,
        port: u16,
        clock: Clock,
    ) -> Result<Self, ConsoleError> {
        let stream = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|source| ConsoleError::Tcp {
                node: node.to_owned(),
                host: host.to_owned(),
                port,
                source,
            })?;
        Ok(Self::spawn(node, clock, move |shared, clock| async move {
            read_to_end(stream, &shared, &clock).await;
        }))
    }

    fn spawn<F, Fut>(node: &str, clock: Clock, run: F) -> Self
    where
        F: FnOnce(Arc<Shared>, Clock) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (sender, _) = broadcast::channel(1024);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                backlog: Vec::new(),
                sender: Some(sender),
            }),
        });
        let reader = run(shared.clone(), clock);
        let closer = shared.clone();
        let task = tokio::spawn(async move {
            reader.await;
            closer.close();
        });
        Self {
            node: node.to_owned(),
            shared,
            task: task.abort_handle(),
        }
    }

    pub fn node(&self) -> &str {
        &self.node
    }
}

impl Drop for StreamConsole {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ConsoleSource for StreamConsole {
    fn subscribe(&self) -> (Vec<ConsoleLine>, broadcast::Receiver<ConsoleLine>) {
        let s = self.shared.lock();
        let receiver = match &s.sender {
            Some(sender) => sender.subscribe(),
            // Ended: a receiver that reports the channel closed.
            None => broadcast::channel(1).1,
        };
        (s.backlog.clone(), receiver)
    }
}

async fn read_to_end(mut source: impl AsyncRead + Unpin, shared: &Shared, clock: &Clock) {
    let mut splitter = LineSplitter::default();
    let mut buffer = vec![0u8; 8192];
    loop {
        match source.read(&mut buffer).await {
            Ok(0) => return,
            Ok(n) => splitter.feed(&buffer[..n], |line| shared.push(line, clock)),
            Err(error) => {
                tracing::warn!(%error, "console read failed");
                return;
            }
        }
    }
}

async fn follow(mut file: tokio::fs::File, path: &Path, shared: &Shared, clock: &Clock) {
    let mut splitter = LineSplitter::default();
    let mut buffer = vec![0u8; 8192];
    let mut position: u64 = 0;
    loop {
        match file.read(&mut buffer).await {
            Ok(0) => {
                clock.sleep(FILE_POLL).await;
                let len = match tokio::fs::metadata(path).await {
                    Ok(meta) => meta.len(),
                    Err(error) => {
                        tracing::debug!(path = %path.display(), %error, "console file gone; waiting");
                        continue;
                    }
                };
                if len < position {
                    // Truncated or replaced: start over from the new beginning.
                    match tokio::fs::File::open(path).await {
                        Ok(reopened) => file = reopened,
                        Err(_) => {
                            if file.seek(std::io::SeekFrom::Start(0)).await.is_err() {
                                continue;
                            }
                        }
                    }
                    position = 0;
                    splitter = LineSplitter::default();
                }
            }
            Ok(n) => {
                position += n as u64;
                splitter.feed(&buffer[..n], |line| shared.push(line, clock));
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "console file read failed");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_reads() {
        let mut splitter = LineSplitter::default();
        let mut lines = Vec::new();
        splitter.feed(b"firmware: po", |l| lines.push(l));
        splitter.feed(b"wer on\r\nrackproof-os 1: up\npartial", |l| lines.push(l));
        assert_eq!(lines, ["firmware: power on", "rackproof-os 1: up"]);
    }
}
