//! A QMP client over a unix socket: the greeting, `qmp_capabilities`, one command at a time, and
//! asynchronous events (kept in order and broadcast).
//!
//! Protocol steps: 1. QEMU sends a greeting (`{"QMP": ...}`); 2. the client sends
//! `qmp_capabilities` and gets `{"return": {}}`; 3. each command gets exactly one `return` or
//! `error`, while events (`{"event": ...}`) may arrive at any time in between. Commands are
//! serialised here, so the next non-event message answers the command in flight.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_std::LockExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{Mutex as AsyncMutex, broadcast, mpsc};

/// How long one QMP command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// A command as QMP's wire format spells it: `execute` first, then `arguments` when given.
#[derive(serde::Serialize)]
struct Command<'a> {
    execute: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a Value>,
}

/// A QMP event.
#[derive(Debug, Clone, PartialEq)]
pub struct QmpEvent {
    /// `RESET`, `SHUTDOWN`, `STOP`, `RESUME`, `POWERDOWN`, ...
    pub event: String,
    pub data: Value,
}

impl QmpEvent {
    /// `data.reason` (e.g. `guest-reset`, `host-qmp-system-reset`, `guest-shutdown`, `host-qmp-quit`).
    pub fn reason(&self) -> Option<&str> {
        self.data.get("reason").and_then(Value::as_str)
    }
}

/// A failed QMP exchange.
#[derive(Debug, thiserror::Error)]
pub enum QmpError {
    #[error("connect to QMP socket {path}")]
    Connect {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("QMP {command}: connection closed")]
    Closed { command: String },
    #[error("QMP {command}: no answer within {after:?}")]
    Timeout { command: String, after: Duration },
    #[error("QMP {command}: {class}: {desc}")]
    Command {
        command: String,
        class: String,
        desc: String,
    },
    #[error("QMP {command}: unexpected message {message}")]
    Protocol { command: String, message: String },
}

/// A connected QMP session. Dropping it closes the socket.
#[derive(Debug)]
pub struct Qmp {
    writer: AsyncMutex<(OwnedWriteHalf, mpsc::Receiver<Value>)>,
    events: Arc<Mutex<Vec<QmpEvent>>>,
    live: broadcast::Sender<QmpEvent>,
    clock: Clock,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Qmp {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Qmp {
    /// Connects, reads the greeting and negotiates capabilities.
    pub async fn connect(path: &Path, clock: Clock) -> Result<Self, QmpError> {
        let stream = UnixStream::connect(path)
            .await
            .map_err(|source| QmpError::Connect {
                path: path.display().to_string(),
                source,
            })?;
        let (read, write) = stream.into_split();
        let (answers_tx, answers_rx) = mpsc::channel(16);
        let events = Arc::new(Mutex::new(Vec::new()));
        let (live, _) = broadcast::channel(256);
        let reader = tokio::spawn(read_loop(
            BufReader::new(read),
            answers_tx,
            events.clone(),
            live.clone(),
        ));
        let qmp = Self {
            writer: AsyncMutex::new((write, answers_rx)),
            events,
            live,
            clock,
            reader,
        };
        {
            let mut guard = qmp.writer.lock().await;
            let greeting = qmp.next_answer(&mut guard.1, "greeting").await?;
            if greeting.get("QMP").is_none() {
                return Err(QmpError::Protocol {
                    command: "greeting".into(),
                    message: greeting.to_string(),
                });
            }
        }
        qmp.execute("qmp_capabilities", None).await?;
        Ok(qmp)
    }

    async fn next_answer(
        &self,
        answers: &mut mpsc::Receiver<Value>,
        command: &str,
    ) -> Result<Value, QmpError> {
        match self.clock.timeout(COMMAND_TIMEOUT, answers.recv()).await {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(QmpError::Closed {
                command: command.to_owned(),
            }),
            Err(_) => Err(QmpError::Timeout {
                command: command.to_owned(),
                after: COMMAND_TIMEOUT,
            }),
        }
    }

    /// Runs one command and returns its `return` value.
    pub async fn execute(
        &self,
        command: &str,
        arguments: Option<Value>,
    ) -> Result<Value, QmpError> {
        let message = Command {
            execute: command,
            arguments: arguments.as_ref(),
        };
        let mut line = serde_json::to_string(&message).map_err(|e| QmpError::Protocol {
            command: command.to_owned(),
            message: e.to_string(),
        })?;
        line.push('\n');
        let mut guard = self.writer.lock().await;
        let (writer, answers) = &mut *guard;
        writer
            .write_all(line.as_bytes())
            .await
            .map_err(|_| QmpError::Closed {
                command: command.to_owned(),
            })?;
        let answer = self.next_answer(answers, command).await?;
        if let Some(ret) = answer.get("return") {
            return Ok(ret.clone());
        }
        if let Some(err) = answer.get("error") {
            let text = |k: &str| {
                err.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            return Err(QmpError::Command {
                command: command.to_owned(),
                class: text("class"),
                desc: text("desc"),
            });
        }
        Err(QmpError::Protocol {
            command: command.to_owned(),
            message: answer.to_string(),
        })
    }

    /// `query-status`'s `status` (`running`, `paused`, `shutdown`, `prelaunch`, ...).
    pub async fn status(&self) -> Result<String, QmpError> {
        let ret = self.execute("query-status", None).await?;
        Ok(ret
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned())
    }

    /// Every event received so far, in order.
    pub fn events(&self) -> Vec<QmpEvent> {
        self.events.locked().clone()
    }

    /// Events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<QmpEvent> {
        self.live.subscribe()
    }
}

async fn read_loop(
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    answers: mpsc::Sender<Value>,
    events: Arc<Mutex<Vec<QmpEvent>>>,
    live: broadcast::Sender<QmpEvent>,
) {
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(value) = serde_json::from_str::<Value>(&line) else {
            tracing::warn!(line = line.trim(), "QMP: unparseable message");
            continue;
        };
        if let Some(name) = value.get("event").and_then(Value::as_str) {
            let event = QmpEvent {
                event: name.to_owned(),
                data: value.get("data").cloned().unwrap_or(Value::Null),
            };
            tracing::debug!(event = %event.event, data = %event.data, "QMP event");
            events.locked().push(event.clone());
            let _ = live.send(event);
        } else if answers.send(value).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::AsyncReadExt as _;
    use tokio::net::UnixListener;

    /// A scripted QMP server: greets, then answers each command line with the next reply,
    /// sending an event before every answer.
    async fn serve(listener: UnixListener, replies: Vec<&'static str>) -> Vec<String> {
        let (mut stream, _) = listener.accept().await.unwrap();
        stream
            .write_all(b"{\"QMP\": {\"version\": {}, \"capabilities\": []}}\n")
            .await
            .unwrap();
        let mut received = Vec::new();
        let mut buf = vec![0u8; 4096];
        for reply in replies {
            let n = stream.read(&mut buf).await.unwrap();
            received.push(String::from_utf8_lossy(&buf[..n]).trim().to_owned());
            stream
                .write_all(b"{\"event\": \"RESET\", \"data\": {\"guest\": false, \"reason\": \"host-qmp-system-reset\"}}\n")
                .await
                .unwrap();
            stream.write_all(reply.as_bytes()).await.unwrap();
            stream.write_all(b"\n").await.unwrap();
        }
        received
    }

    #[tokio::test]
    async fn commands_get_their_answers_and_events_are_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("qmp.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let server = tokio::spawn(serve(
            listener,
            vec![
                r#"{"return": {}}"#,
                r#"{"return": {"status": "running", "running": true}}"#,
                r#"{"error": {"class": "GenericError", "desc": "no such thing"}}"#,
            ],
        ));
        let qmp = Qmp::connect(&path, Clock::wall()).await.unwrap();
        assert_eq!(qmp.status().await.unwrap(), "running");
        let err = qmp
            .execute("bogus", Some(json!({"a": 1})))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(err, "QMP bogus: GenericError: no such thing");
        let received = server.await.unwrap();
        assert_eq!(received[0], r#"{"execute":"qmp_capabilities"}"#);
        assert_eq!(received[2], r#"{"execute":"bogus","arguments":{"a":1}}"#);
        let events = qmp.events();
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].reason(), Some("host-qmp-system-reset"));
        let err = qmp.status().await.unwrap_err().to_string();
        assert_eq!(err, "QMP query-status: connection closed");
    }
}
