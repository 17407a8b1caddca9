//! A serial console captured line by line: appended to a log file, kept in memory, and broadcast
//! live. It outlives QEMU processes, so a node's console spans power cycles.
//!
//! Waiting is race-free: take a [`Mark`] before acting, then [`Console::wait_for_since`] looks at
//! every line from the mark on, including lines that arrived before the wait began.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_std::LockExt;
use regex::Regex;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWriteExt as _, BufReader};
use tokio::sync::{Notify, broadcast};

/// A position in the console's line history (`Mark::default()` is the very beginning).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mark(usize);

/// A console line and its index in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub index: usize,
    pub text: String,
}

/// Waiting on the console failed.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("console of {node}: no line matching /{pattern}/ within {after:?} (log: {log})")]
    Timeout {
        node: String,
        pattern: String,
        after: Duration,
        log: PathBuf,
    },
}

#[derive(Debug)]
struct Shared {
    node: String,
    log: PathBuf,
    lines: Mutex<Vec<String>>,
    notify: Notify,
    live: broadcast::Sender<Line>,
}

/// A node's serial console. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Console {
    shared: Arc<Shared>,
}

impl Console {
    /// A console logging to `log` (created or appended).
    pub fn new(node: &str, log: impl Into<PathBuf>) -> Self {
        let (live, _) = broadcast::channel(1024);
        Self {
            shared: Arc::new(Shared {
                node: node.to_owned(),
                log: log.into(),
                lines: Mutex::new(Vec::new()),
                notify: Notify::new(),
                live,
            }),
        }
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.shared.log
    }

    /// The position after the last line seen so far.
    pub fn mark(&self) -> Mark {
        Mark(self.lock().len())
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lock().clone()
    }

    /// Lines from `mark` on.
    pub fn lines_since(&self, mark: Mark) -> Vec<String> {
        self.lock()
            .get(mark.0..)
            .map(<[String]>::to_vec)
            .unwrap_or_default()
    }

    /// How many lines from `mark` on match `pattern`.
    pub fn count_since(&self, mark: Mark, pattern: &Regex) -> usize {
        self.lock()
            .get(mark.0..)
            .unwrap_or_default()
            .iter()
            .filter(|l| pattern.is_match(l))
            .count()
    }

    /// A live stream of the lines arriving from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Line> {
        self.shared.live.subscribe()
    }

    /// Waits for a line matching `pattern` from `mark` on, for at most `timeout` on `clock`.
    pub async fn wait_for_since(
        &self,
        clock: &Clock,
        mark: Mark,
        pattern: &Regex,
        timeout: Duration,
    ) -> Result<Line, ConsoleError> {
        let search = async {
            let mut next = mark.0;
            loop {
                let notified = self.shared.notify.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                {
                    let lines = self.lock();
                    while next < lines.len() {
                        if pattern.is_match(&lines[next]) {
                            return Line {
                                index: next,
                                text: lines[next].clone(),
                            };
                        }
                        next += 1;
                    }
                }
                notified.await;
            }
        };
        clock
            .timeout(timeout, search)
            .await
            .map_err(|_| ConsoleError::Timeout {
                node: self.shared.node.clone(),
                pattern: pattern.as_str().to_owned(),
                after: timeout,
                log: self.shared.log.clone(),
            })
    }

    /// Waits for a line matching `pattern` arriving from now on.
    pub async fn wait_for(
        &self,
        clock: &Clock,
        pattern: &Regex,
        timeout: Duration,
    ) -> Result<Line, ConsoleError> {
        self.wait_for_since(clock, self.mark(), pattern, timeout)
            .await
    }

    /// Records one line (without its end of line): what [`Console::capture`] does per line, and
    /// how a console read elsewhere (a rack node's console server) is fed in.
    pub fn push(&self, text: String) {
        let index = {
            let mut lines = self.lock();
            lines.push(text.clone());
            lines.len() - 1
        };
        let _ = self.shared.live.send(Line { index, text });
        self.shared.notify.notify_waiters();
    }

    /// Reads `source` to its end, line by line, into the history, the live stream and the log.
    pub(crate) async fn capture(self, source: impl AsyncRead + Unpin) {
        let mut log = match tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.shared.log)
            .await
        {
            Ok(f) => Some(f),
            Err(error) => {
                tracing::warn!(node = %self.shared.node, log = %self.shared.log.display(), %error, "console log not writable");
                None
            }
        };
        let mut reader = BufReader::new(source);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if let Some(f) = log.as_mut() {
                let _ = f.write_all(&buf).await;
                let _ = f.flush().await;
            }
            let text = String::from_utf8_lossy(&buf);
            self.push(clean(&text));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.shared.lines.locked()
    }
}

/// Strips the end of line and the terminal control sequences firmware menus print.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                if chars.peek() == Some(&'[') {
                    chars.next();
                    while let Some(&n) = chars.peek() {
                        chars.next();
                        if n.is_ascii_alphabetic() {
                            break;
                        }
                    }
                }
            }
            '\r' | '\n' => {}
            c if c.is_control() && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn waits_see_lines_from_the_mark_even_before_the_wait_began() {
        let tmp = tempfile::tempdir().unwrap();
        let console = Console::new("n1", tmp.path().join("serial.log"));
        let clock = Clock::wall();
        let mark = console.mark();
        console.push("rackproof-os 1.0.0: up".into());
        let re = Regex::new(r"rackproof-os (\S+): up").unwrap();
        let line = console
            .wait_for_since(&clock, mark, &re, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(line.index, 0);
        let err = console
            .wait_for(&clock, &re, Duration::from_secs(5))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("console of n1: no line matching /rackproof-os (\\S+): up/ within 5s"),
            "{err}"
        );
        assert_eq!(console.count_since(mark, &re), 1);
    }

    #[tokio::test]
    async fn capture_writes_the_log_streams_and_cleans_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("serial.log");
        let console = Console::new("n1", &log);
        let mut live = console.subscribe();
        let input: &[u8] = b"\x1b[2J\x1b[01;01HBdsDxe: loading\r\nsecond\n";
        console.clone().capture(input).await;
        assert_eq!(console.lines(), ["BdsDxe: loading", "second"]);
        assert_eq!(live.recv().await.unwrap().text, "BdsDxe: loading");
        assert_eq!(std::fs::read(&log).unwrap(), input);
    }
}
