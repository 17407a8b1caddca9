//! A serial console read by tailing the file libvirt appends the guest's serial port to: the
//! lines so far, a live line stream, and waiting for a pattern with a deadline.
//!
//! The tail polls the file every 50 ms from the last offset; a file that shrinks (recreated) is
//! read again from the start. Carriage returns are dropped; escape sequences are kept. Waiting
//! also looks at the unfinished last line, so prompts without a newline (`Shell> `) match.

use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_std::LockExt;
use regex::Regex;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

const POLL: Duration = Duration::from_millis(50);

/// A position in the console's line sequence: waiting "since" it ignores earlier lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mark(usize);

/// A console's lines, kept current by a background task that ends when the console is dropped.
#[derive(Debug)]
pub struct SerialConsole {
    path: PathBuf,
    clock: Clock,
    shared: Arc<Shared>,
    changed: watch::Receiver<u64>,
    task: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Lines {
    complete: Vec<String>,
    partial: String,
}

#[derive(Debug)]
struct Shared {
    lines: Mutex<Lines>,
    stream: broadcast::Sender<String>,
}

impl Shared {
    fn lines(&self) -> MutexGuard<'_, Lines> {
        self.lines.locked()
    }
}

/// Waiting on a console failed.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("console {path}: no line matching /{pattern}/ within {after:?}; last lines:\n{tail}")]
    Timeout {
        path: PathBuf,
        pattern: String,
        after: Duration,
        tail: String,
    },
}

impl SerialConsole {
    /// Starts tailing `path` (which may not exist yet). Must be called inside a tokio runtime.
    pub fn tail(path: impl Into<PathBuf>, clock: Clock) -> Self {
        let path = path.into();
        let (stream, _) = broadcast::channel(1024);
        let shared = Arc::new(Shared {
            lines: Mutex::new(Lines::default()),
            stream,
        });
        let (notify, changed) = watch::channel(0);
        let task = tokio::spawn(follow(
            path.clone(),
            clock.clone(),
            Arc::clone(&shared),
            notify,
        ));
        Self {
            path,
            clock,
            shared,
            changed,
            task,
        }
    }

    /// The file being tailed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current end of the console: lines after it are new.
    pub fn mark(&self) -> Mark {
        Mark(self.shared.lines().complete.len())
    }

    /// Every complete line so far.
    pub fn lines(&self) -> Vec<String> {
        self.shared.lines().complete.clone()
    }

    /// Complete lines after `mark`.
    pub fn lines_since(&self, mark: Mark) -> Vec<String> {
        self.shared
            .lines()
            .complete
            .get(mark.0..)
            .map(<[String]>::to_vec)
            .unwrap_or_default()
    }

    /// How many complete lines after `mark` match `pattern`.
    pub fn count_since(&self, mark: Mark, pattern: &Regex) -> usize {
        self.lines_since(mark)
            .iter()
            .filter(|l| pattern.is_match(l))
            .count()
    }

    /// A stream of complete lines from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.shared.stream.subscribe()
    }

    /// Waits until any line (from the start of the log) matches `pattern`; returns that line.
    pub async fn wait_for(
        &self,
        pattern: &Regex,
        timeout: Duration,
    ) -> Result<String, ConsoleError> {
        self.wait_for_since(Mark(0), pattern, timeout).await
    }

    /// Waits until a line after `mark` (or the unfinished last line) matches `pattern`.
    pub async fn wait_for_since(
        &self,
        mark: Mark,
        pattern: &Regex,
        timeout: Duration,
    ) -> Result<String, ConsoleError> {
        let mut changed = self.changed.clone();
        let search = async {
            loop {
                if let Some(found) = self.find(mark, pattern) {
                    return found;
                }
                if changed.changed().await.is_err() {
                    // The tail task ended (runtime shutting down): nothing new will come.
                    std::future::pending::<()>().await;
                }
            }
        };
        self.clock.timeout(timeout, search).await.map_err(|_| {
            let lines = self.shared.lines();
            let start = lines.complete.len().saturating_sub(10);
            let mut tail = lines.complete[start..].join("\n");
            if !lines.partial.is_empty() {
                tail.push('\n');
                tail.push_str(&lines.partial);
            }
            ConsoleError::Timeout {
                path: self.path.clone(),
                pattern: pattern.as_str().to_owned(),
                after: timeout,
                tail,
            }
        })
    }

    fn find(&self, mark: Mark, pattern: &Regex) -> Option<String> {
        let lines = self.shared.lines();
        let complete = lines.complete.get(mark.0..).unwrap_or_default();
        complete
            .iter()
            .find(|l| pattern.is_match(l))
            .cloned()
            .or_else(|| {
                pattern
                    .is_match(&lines.partial)
                    .then(|| lines.partial.clone())
            })
    }
}

impl Drop for SerialConsole {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn follow(path: PathBuf, clock: Clock, shared: Arc<Shared>, notify: watch::Sender<u64>) {
    let mut offset = 0u64;
    let mut generation = 0u64;
    let mut buf = Vec::new();
    loop {
        if let Ok(mut file) = tokio::fs::File::open(&path).await {
            let len = file.metadata().await.map(|m| m.len()).unwrap_or(0);
            if len < offset {
                offset = 0;
            }
            buf.clear();
            if len > offset
                && file.seek(SeekFrom::Start(offset)).await.is_ok()
                && file.read_to_end(&mut buf).await.is_ok()
            {
                offset += buf.len() as u64;
                append(&shared, &buf);
                generation += 1;
                notify.send_replace(generation);
            }
        }
        clock.sleep(POLL).await;
    }
}

fn append(shared: &Shared, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let mut lines = shared.lines();
    for c in text.chars() {
        match c {
            '\r' => {}
            '\n' => {
                let line = std::mem::take(&mut lines.partial);
                let _ = shared.stream.send(line.clone());
                lines.complete.push(line);
            }
            c => lines.partial.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn append_to(path: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    #[tokio::test]
    async fn waits_for_lines_written_later_and_splits_crlf() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serial.log");
        let console = SerialConsole::tail(&path, Clock::wall());
        let mut stream = console.subscribe();
        let writer = {
            let path = path.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(120)).await;
                append_to(&path, "BdsDxe: loading\r\nShell> ");
            })
        };
        let line = console
            .wait_for(&Regex::new("BdsDxe").unwrap(), Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(line, "BdsDxe: loading");
        assert_eq!(stream.recv().await.unwrap(), "BdsDxe: loading");
        let prompt = console
            .wait_for(&Regex::new("^Shell> $").unwrap(), Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(prompt, "Shell> ");
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn marks_count_only_newer_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serial.log");
        append_to(&path, "boot 1\n");
        let console = SerialConsole::tail(&path, Clock::wall());
        let boot = Regex::new("^boot ").unwrap();
        console
            .wait_for(&boot, Duration::from_secs(10))
            .await
            .unwrap();
        let mark = console.mark();
        append_to(&path, "noise\nboot 2\n");
        let line = console
            .wait_for_since(mark, &boot, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(line, "boot 2");
        assert_eq!(console.count_since(mark, &boot), 1);
        assert_eq!(console.lines(), ["boot 1", "noise", "boot 2"]);
    }

    #[tokio::test]
    async fn timeout_names_the_pattern_and_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serial.log");
        append_to(&path, "only this\n");
        let console = SerialConsole::tail(&path, Clock::wall());
        console
            .wait_for(&Regex::new("only").unwrap(), Duration::from_secs(10))
            .await
            .unwrap();
        let err = console
            .wait_for(&Regex::new("never").unwrap(), Duration::from_millis(200))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no line matching /never/ within 200ms"),
            "{err}"
        );
        assert!(err.contains("only this"), "{err}");
    }

    #[tokio::test]
    async fn a_recreated_file_is_read_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serial.log");
        append_to(&path, "first run with a long line\n");
        let console = SerialConsole::tail(&path, Clock::wall());
        console
            .wait_for(&Regex::new("first").unwrap(), Duration::from_secs(10))
            .await
            .unwrap();
        std::fs::write(&path, "second\n").unwrap();
        console
            .wait_for(&Regex::new("^second$").unwrap(), Duration::from_secs(10))
            .await
            .unwrap();
    }
}
