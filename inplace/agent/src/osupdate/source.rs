//! Where slot artifacts come from: the lab's image server over HTTP, or memory in simulation.
//!
//! Layout on the server: `{base}/{version}/{name}` (`manifest.json` and the slot's files).
//! Errors are classified for the exit-code contract: [`FetchError::Network`] (connection, reset,
//! timeout, truncated body, HTTP 5xx/408/429) is retriable; [`FetchError::NotFound`] and
//! [`FetchError::Refused`] (other 4xx) are not, nor are the size errors.
//!
//! Every fetch carries a [`BodyLimit`]: a body is read chunk by chunk and reading stops at the
//! limit, so a server cannot make the agent hold more than the limit (plus one chunk) in memory.
//! A manifest is read up to a cap; a slot file up to exactly the size its signed manifest states.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rackproof_std::error_chain;

/// A failed download.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FetchError {
    /// The network failed (retriable).
    #[error("network problem fetching {url}: {detail}")]
    Network {
        /// The URL.
        url: String,
        /// What happened.
        detail: String,
    },
    /// The server does not have the file.
    #[error("{url} not found on the image server")]
    NotFound {
        /// The URL.
        url: String,
    },
    /// The server refused the request (4xx other than 404/408/429).
    #[error("image server refused {url} with HTTP {status}")]
    Refused {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
    },
    /// The body is longer than its limit allows; reading stopped there.
    #[error("{url} is longer than the {limit} bytes {allowed}; stopped reading there")]
    TooLong {
        /// The URL.
        url: String,
        /// The limit in bytes.
        limit: u64,
        /// What sets the limit (`allowed for it`, `its signed manifest states`).
        allowed: &'static str,
    },
    /// The body ended before the size its signed manifest states.
    #[error("{url} ended after {received} of the {expected} bytes its signed manifest states")]
    TooShort {
        /// The URL.
        url: String,
        /// The signed size.
        expected: u64,
        /// What arrived.
        received: u64,
    },
}

/// How much of a body a fetch accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLimit {
    /// Any length up to this many bytes (a manifest, before its signature is known good).
    AtMost(u64),
    /// Exactly this many bytes (a slot file, as its signed manifest states).
    Exactly(u64),
}

impl BodyLimit {
    /// The most bytes accepted.
    pub fn max(self) -> u64 {
        match self {
            Self::AtMost(n) | Self::Exactly(n) => n,
        }
    }

    /// The error for a body that would pass [`BodyLimit::max`].
    pub fn too_long(self, url: &str) -> FetchError {
        FetchError::TooLong {
            url: url.to_owned(),
            limit: self.max(),
            allowed: match self {
                Self::AtMost(_) => "allowed for it",
                Self::Exactly(_) => "its signed manifest states",
            },
        }
    }

    /// Checks a complete body of `received` bytes.
    pub fn check_complete(self, url: &str, received: u64) -> Result<(), FetchError> {
        match self {
            _ if received > self.max() => Err(self.too_long(url)),
            Self::Exactly(expected) if received < expected => Err(FetchError::TooShort {
                url: url.to_owned(),
                expected,
                received,
            }),
            _ => Ok(()),
        }
    }
}

/// A source of slot files.
#[async_trait::async_trait]
pub trait ArtifactSource: Send + Sync + std::fmt::Debug {
    /// The bytes of `{base}/{version}/{name}`, within `limit` (a longer body is
    /// [`FetchError::TooLong`] and is not read further; for [`BodyLimit::Exactly`], a shorter
    /// one is [`FetchError::TooShort`]).
    async fn fetch(
        &self,
        base: &str,
        version: &str,
        name: &str,
        limit: BodyLimit,
    ) -> Result<Vec<u8>, FetchError>;
}

/// The URL of a slot file.
pub fn artifact_url(base: &str, version: &str, name: &str) -> String {
    format!("{}/{version}/{name}", base.trim_end_matches('/'))
}

/// Downloads over HTTP(S) with reqwest (rustls with ring; no OpenSSL).
#[derive(Debug, Clone)]
pub struct HttpSource {
    client: reqwest::Client,
}

/// The request header naming the node a download is for.
pub const NODE_HEADER: &str = "X-Rackproof-Node";

impl HttpSource {
    /// A client whose every request (connect to last byte) must finish within `timeout`; each
    /// request names `node` in [`NODE_HEADER`] when given.
    pub fn new(timeout: Duration, node: Option<&str>) -> Self {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(value) = node.and_then(|n| reqwest::header::HeaderValue::from_str(n).ok()) {
            headers.insert(NODE_HEADER, value);
        }
        let client = crate::http::client(|| {
            reqwest::Client::builder()
                .default_headers(headers.clone())
                .timeout(timeout)
                .connect_timeout(timeout.min(Duration::from_secs(30)))
        });
        Self { client }
    }
}

#[async_trait::async_trait]
impl ArtifactSource for HttpSource {
    async fn fetch(
        &self,
        base: &str,
        version: &str,
        name: &str,
        limit: BodyLimit,
    ) -> Result<Vec<u8>, FetchError> {
        let url = artifact_url(base, version, name);
        let network = |e: reqwest::Error| FetchError::Network {
            url: url.clone(),
            detail: error_chain(&e),
        };
        let mut response = self.client.get(&url).send().await.map_err(network)?;
        let status = response.status().as_u16();
        match status {
            200..=299 => {}
            404 => return Err(FetchError::NotFound { url }),
            408 | 429 | 500..=599 => {
                return Err(FetchError::Network {
                    url: url.clone(),
                    detail: format!("HTTP {status}"),
                });
            }
            _ => return Err(FetchError::Refused { url, status }),
        }
        let max = limit.max();
        let announced = response.content_length();
        if announced.is_some_and(|len| len > max) {
            return Err(limit.too_long(&url));
        }
        let capacity = announced.unwrap_or(0).min(max);
        let mut body = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
        while let Some(chunk) = response.chunk().await.map_err(network)? {
            if (body.len() + chunk.len()) as u64 > max {
                return Err(limit.too_long(&url));
            }
            body.extend_from_slice(&chunk);
        }
        limit.check_complete(&url, body.len() as u64)?;
        Ok(body)
    }
}

/// Slot files in memory, for simulated machines; clones share the files and the faults.
#[derive(Debug, Clone, Default)]
pub struct MemorySource {
    inner: Arc<Mutex<MemoryInner>>,
}

#[derive(Debug, Default)]
struct MemoryInner {
    files: BTreeMap<(String, String), Vec<u8>>,
    failing: BTreeMap<(String, String), u32>,
    fetches: Vec<(String, String)>,
}

impl MemorySource {
    /// No files.
    pub fn new() -> Self {
        Self::default()
    }

    /// Publishes `name` of `version`.
    pub fn put(&self, version: &str, name: &str, data: Vec<u8>) {
        self.inner
            .lock()
            .expect("source lock")
            .files
            .insert((version.to_owned(), name.to_owned()), data);
    }

    /// Makes the next `times` fetches of `name` of `version` fail like a dropped connection.
    pub fn fail_network(&self, version: &str, name: &str, times: u32) {
        self.inner
            .lock()
            .expect("source lock")
            .failing
            .insert((version.to_owned(), name.to_owned()), times);
    }

    /// Every `(version, name)` fetched so far, in order.
    pub fn fetches(&self) -> Vec<(String, String)> {
        self.inner.lock().expect("source lock").fetches.clone()
    }
}

#[async_trait::async_trait]
impl ArtifactSource for MemorySource {
    async fn fetch(
        &self,
        base: &str,
        version: &str,
        name: &str,
        limit: BodyLimit,
    ) -> Result<Vec<u8>, FetchError> {
        let url = artifact_url(base, version, name);
        let key = (version.to_owned(), name.to_owned());
        let mut inner = self.inner.lock().expect("source lock");
        inner.fetches.push(key.clone());
        if let Some(left) = inner.failing.get_mut(&key)
            && *left > 0
        {
            *left -= 1;
            return Err(FetchError::Network {
                url,
                detail: "connection reset by peer (simulated)".into(),
            });
        }
        let data = inner
            .files
            .get(&key)
            .ok_or_else(|| FetchError::NotFound { url: url.clone() })?;
        limit.check_complete(&url, data.len() as u64)?;
        Ok(data.clone())
    }
}
