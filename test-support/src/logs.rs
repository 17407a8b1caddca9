//! Log output captured in memory, for tests that assert what a log line says and which spans
//! (with their identity fields) it was logged in.

use std::sync::{Arc, Mutex};

use tracing::subscriber::DefaultGuard;

/// The log lines (INFO and above, without colours) of the current thread, from [`capture`] until
/// its guard drops. Spawned tasks of a current-thread runtime log to it too.
#[derive(Debug, Clone, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

/// Starts capturing; keep the guard for as long as lines should be captured.
pub fn capture() -> (CapturedLogs, DefaultGuard) {
    let captured = CapturedLogs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    (captured, guard)
}

impl CapturedLogs {
    /// Everything captured so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// The first captured line containing `needle`; panics with all the captured lines if none
    /// does.
    pub fn line_with(&self, needle: &str) -> String {
        let text = self.text();
        text.lines()
            .find(|line| line.contains(needle))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no log line contains {needle:?} in:\n{text}"))
    }
}

impl std::io::Write for CapturedLogs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLogs {
    type Writer = Self;

    fn make_writer(&'a self) -> Self {
        self.clone()
    }
}
