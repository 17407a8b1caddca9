//! The lab's image server: slot artifacts and their signed manifests over HTTP, for the nodes on
//! the host side of the user network (a QEMU guest reaches `http://10.0.2.2:PORT/slots`).
//!
//! `GET /slots/{version}/{file}` answers `{dir}/{version}/{file}` of the images' slot directory
//! (`ci/build-images`' `slots/`). Requests name their node in the `X-Rackproof-Node` header
//! (`rackproof-agent os-update` sends it), which lets a scenario treat one node differently:
//!
//! - [`ImageServer::serve_variant`]: serve another slot directory as a version to one node (the
//!   broken variants `1.1.0-panic`, `-hang`, `-silent`, `-rollback` are signed as `1.1.0`);
//! - [`ImageServer::add_fault`]: answer a node's next requests badly ([`ImageFault`]);
//! - [`ImageServer::stall_next_payload`]: stop a node's next slot download halfway until the
//!   connection goes away (a power cut during the download).
//!
//! Every request is journaled and announced ([`ImageServer::subscribe`]). The journal keeps the
//! last [`JOURNAL_CAPACITY`] requests and counts the ones it let go, so a long run's memory stays
//! bounded. Files are streamed from disk in chunks, never read whole. The server stops when the
//! handle is dropped.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rackproof_std::LockExt;
use tokio::sync::broadcast;

/// The header naming the node a request is for.
pub const NODE_HEADER: &str = "X-Rackproof-Node";

/// How many requests the journal keeps (the most recent ones).
pub const JOURNAL_CAPACITY: usize = 1024;

/// The size of the chunks a file is streamed in.
const CHUNK: usize = 64 * 1024;

/// A bad answer to a node's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFault {
    /// The connection drops before the body's first byte (a network problem to the client).
    Unreachable,
    /// This HTTP status instead of the file.
    Status(u16),
    /// Slot files (never the manifest) arrive with one byte flipped: their checksums fail.
    Corrupt,
}

/// One request, as journaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRequest {
    /// The `X-Rackproof-Node` header, if sent.
    pub node: Option<String>,
    pub version: String,
    pub file: String,
    /// What it was answered: `200 (N bytes)`, `404`, `fault: ...`, `stalled after N bytes`.
    pub answer: String,
}

/// The server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ImageServerError {
    #[error("image server: slot directory {} does not exist (build the images with ci/build-images)", dir.display())]
    NoSlots { dir: PathBuf },
    #[error("image server: listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug)]
struct ActiveFault {
    node: String,
    fault: ImageFault,
    /// Requests still affected (`None`: every one).
    remaining: Option<u32>,
}

#[derive(Debug, Default)]
struct Rules {
    /// (node, version) → slot directory name.
    variants: BTreeMap<(String, String), String>,
    faults: Vec<ActiveFault>,
    /// Nodes whose next slot payload stalls halfway.
    stalls: Vec<String>,
    journal: Journal,
}

/// The last [`JOURNAL_CAPACITY`] requests, and how many older ones were let go.
#[derive(Debug, Default)]
struct Journal {
    recent: VecDeque<ImageRequest>,
    dropped: u64,
}

impl Journal {
    fn push(&mut self, request: ImageRequest) {
        if self.recent.len() == JOURNAL_CAPACITY {
            self.recent.pop_front();
            self.dropped += 1;
        }
        self.recent.push_back(request);
    }
}

#[derive(Debug)]
struct Inner {
    slots: PathBuf,
    rules: Mutex<Rules>,
    events: broadcast::Sender<ImageRequest>,
}

/// A running image server. Clones share it; the last one dropped stops it.
#[derive(Debug, Clone)]
pub struct ImageServer {
    inner: Arc<Inner>,
    addr: SocketAddr,
    _task: Arc<AbortOnDrop>,
}

#[derive(Debug)]
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl ImageServer {
    /// Serves the slot directories under `slots` on `bind` (`127.0.0.1:0` for any free port).
    pub async fn serve(slots: PathBuf, bind: SocketAddr) -> Result<Self, ImageServerError> {
        if !slots.is_dir() {
            return Err(ImageServerError::NoSlots { dir: slots });
        }
        let listener = tokio::net::TcpListener::bind(bind)
            .await
            .map_err(|source| ImageServerError::Bind { addr: bind, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ImageServerError::Bind { addr: bind, source })?;
        let (events, _) = broadcast::channel(256);
        let inner = Arc::new(Inner {
            slots,
            rules: Mutex::default(),
            events,
        });
        let app = Router::new()
            .route("/slots/{version}/{file}", get(fetch))
            .with_state(inner.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, "image server stopped");
            }
        });
        Ok(Self {
            inner,
            addr,
            _task: Arc::new(AbortOnDrop(task.abort_handle())),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL (for `os-update --image-server`) as seen from `host`, e.g. `10.0.2.2` for
    /// a QEMU guest on the user network.
    pub fn url_as_seen_from(&self, host: &str) -> String {
        format!("http://{host}:{}/slots", self.addr.port())
    }

    /// Serves slot directory `dir` (e.g. `1.1.0-panic`) whenever `node` asks for `version`.
    pub fn serve_variant(&self, node: &str, version: &str, dir: &str) {
        self.rules()
            .variants
            .insert((node.to_owned(), version.to_owned()), dir.to_owned());
    }

    /// Answers `node`'s next `count` requests (all, when `None`) with `fault`.
    pub fn add_fault(&self, node: &str, fault: ImageFault, count: Option<u32>) {
        self.rules().faults.push(ActiveFault {
            node: node.to_owned(),
            fault,
            remaining: count,
        });
    }

    /// Stops `node`'s next slot-file download (not a manifest) halfway, until the client goes.
    pub fn stall_next_payload(&self, node: &str) {
        self.rules().stalls.push(node.to_owned());
    }

    /// The last [`JOURNAL_CAPACITY`] requests, in order ([`ImageServer::journal_dropped`] says
    /// how many came before them).
    pub fn journal(&self) -> Vec<ImageRequest> {
        self.rules().journal.recent.iter().cloned().collect()
    }

    /// How many requests the journal no longer holds (older than its last [`JOURNAL_CAPACITY`]).
    pub fn journal_dropped(&self) -> u64 {
        self.rules().journal.dropped
    }

    /// Each request as it is answered.
    pub fn subscribe(&self) -> broadcast::Receiver<ImageRequest> {
        self.inner.events.subscribe()
    }

    fn rules(&self) -> std::sync::MutexGuard<'_, Rules> {
        self.inner.rules.locked()
    }
}

/// A plain file or version name: no separators, no `..`.
fn plain(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+'))
}

/// What the rules say about one request (and the counts they use up).
#[derive(Debug)]
struct Decision {
    dir: String,
    fault: Option<ImageFault>,
    stall: bool,
}

fn decide(rules: &mut Rules, node: Option<&str>, version: &str, file: &str) -> Decision {
    let mut decision = Decision {
        dir: version.to_owned(),
        fault: None,
        stall: false,
    };
    let Some(node) = node else { return decision };
    if let Some(dir) = rules.variants.get(&(node.to_owned(), version.to_owned())) {
        decision.dir.clone_from(dir);
    }
    let manifest = file == "manifest.json";
    for active in rules.faults.iter_mut().filter(|f| f.node == node) {
        if active.fault == ImageFault::Corrupt && manifest {
            continue;
        }
        match &mut active.remaining {
            Some(0) => continue,
            Some(n) => *n -= 1,
            None => {}
        }
        decision.fault = Some(active.fault);
        break;
    }
    rules.faults.retain(|f| f.remaining != Some(0));
    if decision.fault.is_none()
        && !manifest
        && let Some(at) = rules.stalls.iter().position(|n| n == node)
    {
        rules.stalls.remove(at);
        decision.stall = true;
    }
    decision
}

async fn fetch(
    State(inner): State<Arc<Inner>>,
    Path((version, file)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let node = headers
        .get(NODE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let record = |answer: String| {
        let request = ImageRequest {
            node: node.clone(),
            version: version.clone(),
            file: file.clone(),
            answer,
        };
        tracing::debug!(node = ?request.node, version = %request.version, file = %request.file, answer = %request.answer, "image server");
        inner.rules.locked().journal.push(request.clone());
        let _ = inner.events.send(request);
    };
    if !plain(&version) || !plain(&file) {
        record("400 (not a plain name)".to_owned());
        return (
            StatusCode::BAD_REQUEST,
            "version and file must be plain names\n",
        )
            .into_response();
    }
    let decision = decide(&mut inner.rules.locked(), node.as_deref(), &version, &file);
    match decision.fault {
        Some(ImageFault::Status(code)) => {
            record(format!("fault: HTTP {code}"));
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (status, format!("image server fault: HTTP {code}\n")).into_response();
        }
        Some(ImageFault::Unreachable) => {
            record("fault: connection dropped".to_owned());
            let failing = futures::stream::once(async {
                Err::<bytes::Bytes, _>(std::io::Error::other("connection dropped (fault)"))
            });
            return Body::from_stream(failing).into_response();
        }
        Some(ImageFault::Corrupt) | None => {}
    }
    let path = inner.slots.join(&decision.dir).join(&file);
    let opened = match tokio::fs::File::open(&path).await {
        Ok(opened) => opened,
        Err(_) => {
            record("404".to_owned());
            return (StatusCode::NOT_FOUND, format!("no {version}/{file}\n")).into_response();
        }
    };
    let len = match opened.metadata().await {
        Ok(meta) if meta.is_file() => meta.len(),
        _ => {
            record("404".to_owned());
            return (StatusCode::NOT_FOUND, format!("no {version}/{file}\n")).into_response();
        }
    };
    let chunks = tokio_util::io::ReaderStream::with_capacity(opened, CHUNK);
    let shaped = if decision.fault == Some(ImageFault::Corrupt) {
        record(format!("fault: 200 ({len} bytes, one flipped)"));
        Shape::FlipByte(len / 2)
    } else if decision.stall {
        let half = len / 2;
        record(format!("stalled after {half} of {len} bytes"));
        Shape::StallAt(half)
    } else {
        record(format!("200 ({len} bytes)"));
        Shape::Plain
    };
    let body = shape(chunks, shaped);
    let mut response = Body::from_stream(body).into_response();
    if !matches!(shaped, Shape::StallAt(_)) {
        response
            .headers_mut()
            .insert(axum::http::header::CONTENT_LENGTH, len.into());
    }
    response
}

/// How a file's bytes are altered on their way out.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Plain,
    /// The byte at this offset is flipped.
    FlipByte(u64),
    /// Everything before this offset is sent, then nothing until the client goes away.
    StallAt(u64),
}

/// `chunks` (a file read from its start) altered by `how`, chunk by chunk.
fn shape(
    chunks: impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send + 'static,
    how: Shape,
) -> impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send + 'static {
    use futures::StreamExt as _;
    let mut offset = 0u64;
    let altered = chunks.map(move |chunk| {
        let chunk = chunk?;
        let start = offset;
        offset += chunk.len() as u64;
        Ok(match how {
            Shape::FlipByte(at) if (start..offset).contains(&at) => {
                let mut owned = bytes::BytesMut::from(&chunk[..]);
                let index = usize::try_from(at - start).unwrap_or_default();
                owned[index] ^= 0xff;
                owned.freeze()
            }
            Shape::StallAt(at) if offset > at => {
                chunk.slice(..usize::try_from(at.saturating_sub(start)).unwrap_or_default())
            }
            _ => chunk,
        })
    });
    let limit = match how {
        Shape::StallAt(at) => Some(at),
        _ => None,
    };
    let mut sent = 0u64;
    let until_stall = altered.take_while(move |chunk| {
        let go_on = match (limit, chunk) {
            (Some(at), Ok(_)) => sent < at,
            _ => true,
        };
        if let Ok(chunk) = chunk {
            sent += chunk.len() as u64;
        }
        std::future::ready(go_on)
    });
    let tail = if limit.is_some() {
        futures::stream::pending().left_stream()
    } else {
        futures::stream::empty().right_stream()
    };
    until_stall.chain(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_are_served() {
        for good in ["1.1.0", "manifest.json", "initrd.img", "1.1.0+build_2"] {
            assert!(plain(good), "{good}");
        }
        for bad in ["", ".", "..", "../x", "a/b", "a\\b", "x y"] {
            assert!(!plain(bad), "{bad}");
        }
    }

    #[test]
    fn faults_count_down_per_node_and_corruption_spares_the_manifest() {
        let mut rules = Rules::default();
        rules.faults.push(ActiveFault {
            node: "a".into(),
            fault: ImageFault::Corrupt,
            remaining: Some(1),
        });
        rules
            .variants
            .insert(("a".into(), "1.1.0".into()), "1.1.0-panic".into());
        let d = decide(&mut rules, Some("b"), "1.1.0", "vmlinuz");
        assert_eq!((d.dir.as_str(), d.fault), ("1.1.0", None));
        let d = decide(&mut rules, Some("a"), "1.1.0", "manifest.json");
        assert_eq!((d.dir.as_str(), d.fault), ("1.1.0-panic", None));
        assert_eq!(
            decide(&mut rules, Some("a"), "1.1.0", "vmlinuz").fault,
            Some(ImageFault::Corrupt)
        );
        assert_eq!(
            decide(&mut rules, Some("a"), "1.1.0", "vmlinuz").fault,
            None
        );
        assert!(rules.faults.is_empty());
        assert_eq!(decide(&mut rules, None, "1.1.0", "vmlinuz").dir, "1.1.0");
    }
}
