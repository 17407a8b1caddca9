//! A Redfish client for one system behind one BMC.
//!
//! [`RedfishClient::connect`]:
//!
//! 1. reads the service root (`/redfish/v1/`, no credentials) for the `Systems` collection and
//!    the sessions collection (`Links.Sessions`);
//! 2. logs in (session mode: `POST` to the sessions collection, keeping `X-Auth-Token` and the
//!    session's `Location`; basic mode: nothing to do);
//! 3. picks the system (by `Id`, or the first member) and reads its reset targets and allowable
//!    values (`ResetType@Redfish.AllowableValues`; when a BMC advertises none, every reset type
//!    counts as allowed).
//!
//! Every request goes to the BMC's own scheme, host and port: a path a BMC names elsewhere is
//! refused ([`RedfishError::NotOnTheBmc`]) and redirects are not followed (a 3xx is an error).
//! Every request then retries 5xx answers and connection failures with exponential backoff
//! ([`RetryPolicy`]), and in session mode logs in again once on a 401. Credentials and tokens go
//! only into headers marked sensitive; errors and logs name the BMC by `host:port`.

mod boot;
mod config;
mod error;
mod power;
mod tls;
mod transport;

use std::sync::{Arc, Mutex, MutexGuard};

use rackproof_clock::Clock;
use rackproof_driver::{BootOverride, PowerState, ResetAction};
use rackproof_std::LockExt;
use serde_json::Value;

pub use self::config::{
    AuthMode, ClientOptions, Credentials, Endpoint, Quirks, RetryPolicy, TlsPolicy,
};
pub use self::error::{RedfishError, TlsSetupError};
use self::transport::Session;

/// A connected Redfish client for one system. Cheap to clone; clones share the session.
#[derive(Clone)]
pub struct RedfishClient {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    base: reqwest::Url,
    /// `host:port`, for messages.
    host: String,
    credentials: Credentials,
    options: ClientOptions,
    clock: Clock,
    sessions_path: String,
    session: tokio::sync::Mutex<Option<Session>>,
    system: Mutex<SystemInfo>,
}

/// What the client knows about its system from the last read.
#[derive(Debug, Clone, Default)]
pub(crate) struct SystemInfo {
    pub(crate) path: String,
    pub(crate) reset_target: String,
    pub(crate) allowed: Vec<ResetAction>,
    pub(crate) power: Option<PowerState>,
    pub(crate) boot: BootOverride,
    pub(crate) boot_targets: Option<Vec<String>>,
    pub(crate) etag: Option<String>,
}

impl std::fmt::Debug for RedfishClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedfishClient")
            .field("bmc", &self.inner.host)
            .field("system", &self.system_info().path)
            .field("credentials", &self.inner.credentials)
            .field("auth", &self.inner.options.auth)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.locked()
}

impl RedfishClient {
    /// Discovers the service, logs in and finds the system (see the module docs).
    pub async fn connect(
        endpoint: &Endpoint,
        credentials: Credentials,
        options: ClientOptions,
        clock: Clock,
    ) -> Result<Self, RedfishError> {
        let base = parse_base(&endpoint.url)?;
        let host = format!(
            "{}:{}",
            base.host_str().unwrap_or("?"),
            base.port_or_known_default().unwrap_or(0)
        );
        let tls = tls::client_config(&endpoint.tls).map_err(|source| RedfishError::Tls {
            host: host.clone(),
            source,
        })?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            // A redirect could carry the login body or X-Auth-Token to another host.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(options.request_timeout)
            .build()
            .map_err(|source| RedfishError::Client {
                host: host.clone(),
                source,
            })?;
        let mut inner = Inner {
            http,
            base,
            host,
            credentials,
            options,
            clock,
            sessions_path: "/redfish/v1/SessionService/Sessions".to_owned(),
            session: tokio::sync::Mutex::new(None),
            system: Mutex::new(SystemInfo::default()),
        };
        let root = inner.get_json_open("/redfish/v1/").await?;
        if let Some(path) = root
            .pointer("/Links/Sessions/@odata.id")
            .and_then(Value::as_str)
        {
            inner.sessions_path = path.to_owned();
        }
        let systems_path = root
            .pointer("/Systems/@odata.id")
            .and_then(Value::as_str)
            .unwrap_or("/redfish/v1/Systems")
            .to_owned();
        let client = Self {
            inner: Arc::new(inner),
        };
        let systems = client.inner.get_json(&systems_path).await?;
        let members: Vec<String> = systems
            .get("Members")
            .and_then(Value::as_array)
            .map(|m| {
                m.iter()
                    .filter_map(|m| m.get("@odata.id").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let chosen = match &endpoint.system {
            Some(id) => members
                .iter()
                .find(|m| m.trim_end_matches('/').rsplit('/').next() == Some(id.as_str())),
            None => members.first(),
        };
        let Some(path) = chosen.cloned() else {
            return Err(RedfishError::NoSuchSystem {
                host: client.inner.host.clone(),
                wanted: endpoint
                    .system
                    .clone()
                    .unwrap_or_else(|| "(any)".to_owned()),
                available: members,
            });
        };
        lock(&client.inner.system).path = path;
        client.refresh().await?;
        Ok(client)
    }

    /// The BMC as `host:port`.
    pub fn host(&self) -> &str {
        &self.inner.host
    }

    /// The system's URI, e.g. `/redfish/v1/Systems/1`.
    pub fn system_path(&self) -> String {
        self.system_info().path
    }

    pub(crate) fn system_info(&self) -> SystemInfo {
        lock(&self.inner.system).clone()
    }

    /// Reads the system again and updates what the client knows about it.
    pub(crate) async fn refresh(&self) -> Result<SystemInfo, RedfishError> {
        let path = self.system_info().path;
        let reply = self
            .inner
            .request(http::Method::GET, &path, None, None)
            .await?;
        let etag = reply
            .headers
            .get(http::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = self.inner.json_of(&path, "GET", reply)?;
        let info = self.parse_system(&path, &body, etag)?;
        *lock(&self.inner.system) = info.clone();
        Ok(info)
    }

    fn parse_system(
        &self,
        path: &str,
        body: &Value,
        etag: Option<String>,
    ) -> Result<SystemInfo, RedfishError> {
        let bad = |reason: String| RedfishError::BadResponse {
            host: self.inner.host.clone(),
            path: path.to_owned(),
            reason,
        };
        let action = body.pointer("/Actions/#ComputerSystem.Reset");
        let reset_target = action
            .and_then(|a| a.get("target"))
            .and_then(Value::as_str)
            .map_or_else(
                || {
                    format!(
                        "{}/Actions/ComputerSystem.Reset",
                        path.trim_end_matches('/')
                    )
                },
                str::to_owned,
            );
        let allowed = match action
            .and_then(|a| a.get("ResetType@Redfish.AllowableValues"))
            .and_then(Value::as_array)
        {
            Some(values) => values
                .iter()
                .filter_map(Value::as_str)
                .filter_map(|v| v.parse().ok())
                .collect(),
            None => ResetAction::ALL.to_vec(),
        };
        let power = match body.get("PowerState").and_then(Value::as_str) {
            Some(text) => Some(
                power::parse_power_state(text)
                    .ok_or_else(|| bad(format!("unknown PowerState {text:?}")))?,
            ),
            None => None,
        };
        let boot = boot::parse_boot(body.get("Boot")).map_err(bad)?;
        let boot_targets = body
            .pointer("/Boot/BootSourceOverrideTarget@Redfish.AllowableValues")
            .and_then(Value::as_array)
            .map(|v| {
                v.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            });
        let etag = etag.or_else(|| {
            body.get("@odata.etag")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        Ok(SystemInfo {
            path: path.to_owned(),
            reset_target,
            allowed,
            power,
            boot,
            boot_targets,
            etag,
        })
    }

    /// Ends the session (session mode); the next request logs in again.
    pub async fn logout(&self) -> Result<(), RedfishError> {
        self.inner.logout().await
    }
}

fn parse_base(url: &str) -> Result<reqwest::Url, RedfishError> {
    // Never echo a URL that carries credentials.
    let shown = |u: &reqwest::Url| {
        if u.password().is_some() || !u.username().is_empty() {
            "(URL with credentials)".to_owned()
        } else {
            url.to_owned()
        }
    };
    let parsed = reqwest::Url::parse(url).map_err(|e| RedfishError::BadUrl {
        url: "(unparsable)".to_owned(),
        reason: e.to_string(),
    })?;
    if parsed.password().is_some() || !parsed.username().is_empty() {
        return Err(RedfishError::BadUrl {
            url: shown(&parsed),
            reason: "credentials belong in Credentials, not in the URL".to_owned(),
        });
    }
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(RedfishError::BadUrl {
            url: shown(&parsed),
            reason: "the scheme must be https or http".to_owned(),
        });
    }
    if parsed.host_str().is_none() {
        return Err(RedfishError::BadUrl {
            url: shown(&parsed),
            reason: "it names no host".to_owned(),
        });
    }
    let mut base = parsed;
    base.set_path("/");
    base.set_query(None);
    Ok(base)
}
