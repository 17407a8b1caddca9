//! A Redfish BMC emulator in front of any [`SharedMachine`].
//!
//! [`app`] builds the axum [`Router`] (call it as a tower service in tests); [`Emulator::serve_https`]
//! and [`Emulator::serve_http`] serve it on a loopback port. Requests pass these layers, outermost
//! first:
//!
//! 1. a `bmc_request{bmc, method, path}` span around the rest ([`EmulatorConfig::name`] is `bmc`);
//! 2. `OData-Version: 4.0` on every response, and a Redfish error body for `405`;
//! 3. fault rules ([`FaultRule`]), which may answer, delay, or mark the request, and the request
//!    journal;
//! 4. authentication: basic auth or `X-Auth-Token`; the service root, `/redfish`, `$metadata`,
//!    `/redfish/v1/odata` and session creation are open.

mod auth;
mod csdl;
mod errors;
mod faults;
mod handlers;
mod resources;
mod serve;
mod tasks;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderValue, Method, StatusCode};
use rackproof_clock::Clock;
use rackproof_driver::{ResetAction, SharedMachine};
use rackproof_std::LockExt;
use tracing::Instrument;

use self::auth::{Principal, SessionStore};
use self::errors::RedfishFailure;
use self::faults::{Applied, FaultSet};
use self::tasks::TaskStore;

pub use self::faults::{
    FaultEffect, FaultId, FaultRule, InvalidFault, UnknownProfile, VendorProfile,
};
pub use self::serve::{RunningEmulator, ServeError};

/// How to build an emulator.
#[derive(Clone)]
pub struct EmulatorConfig {
    /// What log lines call this BMC (the `bmc` of their `bmc_request` spans): the lab node it
    /// belongs to.
    pub name: String,
    /// The one account's user name.
    pub username: String,
    /// The one account's password.
    pub password: String,
    /// The systems, by Redfish `Id` (used in URIs: `/redfish/v1/Systems/{id}`).
    pub systems: Vec<(String, SharedMachine)>,
    /// Idle time after which a session expires (`SessionTimeout`).
    pub session_timeout: Duration,
    /// The clock for latency faults, session expiry and task times.
    pub clock: Clock,
}

impl EmulatorConfig {
    /// One system with id `1`, a 30-minute session timeout, and the given account; named `bmc`
    /// (set [`EmulatorConfig::name`] to the node's name).
    pub fn single(machine: SharedMachine, username: &str, password: &str, clock: Clock) -> Self {
        Self {
            name: "bmc".to_owned(),
            username: username.to_owned(),
            password: password.to_owned(),
            systems: vec![("1".to_owned(), machine)],
            session_timeout: Duration::from_secs(1800),
            clock,
        }
    }
}

impl std::fmt::Debug for EmulatorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatorConfig")
            .field("name", &self.name)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field(
                "systems",
                &self.systems.iter().map(|(id, _)| id).collect::<Vec<_>>(),
            )
            .field("session_timeout", &self.session_timeout)
            .finish_non_exhaustive()
    }
}

/// An emulator configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("the emulator needs at least one system")]
    NoSystems,
    #[error("system id {id:?} must be non-empty and use only letters, digits, `-`, `_` and `.`")]
    BadSystemId { id: String },
    #[error("system id {id:?} appears twice")]
    DuplicateSystemId { id: String },
}

/// One request the emulator answered, for assertions and timelines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    /// The `ResetType` of a `ComputerSystem.Reset`.
    pub reset_type: Option<ResetAction>,
    pub status: u16,
}

/// The journal keeps the most recent requests only.
const JOURNAL_LIMIT: usize = 10_000;

/// A running emulator's shared state. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Emulator {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    name: String,
    systems: Vec<(String, SharedMachine)>,
    clock: Clock,
    uuid: String,
    sessions: Mutex<SessionStore>,
    faults: Mutex<FaultSet>,
    tasks: Mutex<TaskStore>,
    journal: Mutex<Vec<RequestRecord>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.locked()
}

impl Emulator {
    /// Checks the configuration and builds the emulator's state.
    pub fn new(config: EmulatorConfig) -> Result<Self, ConfigError> {
        if config.systems.is_empty() {
            return Err(ConfigError::NoSystems);
        }
        for (index, (id, _)) in config.systems.iter().enumerate() {
            let valid = !id.is_empty()
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !valid {
                return Err(ConfigError::BadSystemId { id: id.clone() });
            }
            if config.systems[..index].iter().any(|(other, _)| other == id) {
                return Err(ConfigError::DuplicateSystemId { id: id.clone() });
            }
        }
        let uuid = uuid_from(
            &config
                .systems
                .iter()
                .map(|(id, _)| id.as_str())
                .collect::<Vec<_>>()
                .join(","),
        );
        Ok(Self {
            inner: Arc::new(Inner {
                name: config.name,
                systems: config.systems,
                uuid,
                sessions: Mutex::new(SessionStore::new(
                    config.username,
                    config.password,
                    config.session_timeout,
                )),
                clock: config.clock,
                faults: Mutex::new(FaultSet::default()),
                tasks: Mutex::new(TaskStore::default()),
                journal: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Installs a fault rule; it applies from the next request on.
    pub fn add_fault(&self, rule: FaultRule) -> Result<FaultId, InvalidFault> {
        lock(&self.inner.faults).add(rule)
    }

    /// Installs a vendor profile's rules.
    pub fn apply_profile(&self, profile: VendorProfile) -> Vec<FaultId> {
        let mut faults = lock(&self.inner.faults);
        profile
            .rules()
            .into_iter()
            .map(|rule| faults.add(rule).expect("vendor profile rules are valid"))
            .collect()
    }

    /// Removes one rule; false when it was not installed (or is used up).
    pub fn remove_fault(&self, id: FaultId) -> bool {
        lock(&self.inner.faults).remove(id)
    }

    /// Removes every rule.
    pub fn clear_faults(&self) {
        lock(&self.inner.faults).clear();
    }

    /// The installed rules and how many applications each has left (`None`: unbounded).
    pub fn faults(&self) -> Vec<(FaultId, FaultRule, Option<u32>)> {
        lock(&self.inner.faults).list()
    }

    /// Ends every session at once (clients must log in again).
    pub fn expire_sessions(&self) {
        lock(&self.inner.sessions).expire_all();
    }

    /// How many sessions are live.
    pub fn session_count(&self) -> usize {
        lock(&self.inner.sessions).ids(&self.inner.clock).len()
    }

    /// The requests answered so far (the most recent 10 000), oldest first.
    pub fn journal(&self) -> Vec<RequestRecord> {
        lock(&self.inner.journal).clone()
    }

    fn system(&self, id: &str) -> Option<&SharedMachine> {
        self.inner
            .systems
            .iter()
            .find(|(sid, _)| sid == id)
            .map(|(_, m)| m)
    }

    fn system_ids(&self) -> Vec<String> {
        self.inner
            .systems
            .iter()
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// A stable, UUID-shaped identifier derived from the system ids.
fn uuid_from(seed: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    seed.hash(&mut hasher);
    let a = hasher.finish();
    "rackproof".hash(&mut hasher);
    let b = hasher.finish();
    let hex = format!("{a:016x}{b:016x}");
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// The emulator as an axum router (no socket): every route, the fault layer and auth.
pub fn app(emulator: Emulator) -> Router {
    let routes = Router::new()
        .route("/redfish", get(handlers::versions))
        .route("/redfish/", get(handlers::versions))
        .route("/redfish/v1", get(handlers::service_root))
        .route("/redfish/v1/", get(handlers::service_root))
        .route("/redfish/v1/$metadata", get(handlers::metadata))
        .route("/redfish/v1/odata", get(handlers::odata))
        .route("/redfish/v1/Systems", get(handlers::systems))
        .route(
            "/redfish/v1/Systems/{id}",
            get(handlers::get_system).patch(handlers::patch_system),
        )
        .route(
            "/redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset",
            post(handlers::reset),
        )
        .route("/redfish/v1/Chassis", get(handlers::chassis_collection))
        .route("/redfish/v1/Chassis/{id}", get(handlers::chassis))
        .route("/redfish/v1/Managers", get(handlers::managers))
        .route("/redfish/v1/Managers/{id}", get(handlers::manager))
        .route("/redfish/v1/SessionService", get(handlers::session_service))
        .route(
            "/redfish/v1/SessionService/Sessions",
            get(handlers::sessions).post(handlers::login),
        )
        .route(
            "/redfish/v1/SessionService/Sessions/{id}",
            get(handlers::get_session).delete(handlers::logout),
        )
        .route("/redfish/v1/AccountService", get(handlers::account_service))
        .route(
            "/redfish/v1/AccountService/Accounts",
            get(handlers::accounts),
        )
        .route(
            "/redfish/v1/AccountService/Accounts/{id}",
            get(handlers::account),
        )
        .route("/redfish/v1/TaskService", get(handlers::task_service))
        .route("/redfish/v1/TaskService/Tasks", get(handlers::tasks))
        .route("/redfish/v1/TaskService/Tasks/{id}", get(handlers::task))
        .route(
            "/redfish/v1/TaskService/TaskMonitors/{id}",
            get(handlers::task_monitor),
        )
        .fallback(handlers::not_found);
    routes
        .layer(middleware::from_fn_with_state(
            emulator.clone(),
            authenticate,
        ))
        .layer(middleware::from_fn_with_state(
            emulator.clone(),
            inject_faults,
        ))
        .layer(middleware::from_fn(odata_headers))
        .layer(middleware::from_fn_with_state(
            emulator.clone(),
            in_request_span,
        ))
        .with_state(emulator)
}

/// Handles the request in a `bmc_request{bmc, method, path}` span, so every line logged while
/// answering it names the BMC and the request.
async fn in_request_span(
    State(emulator): State<Emulator>,
    request: Request,
    next: Next,
) -> Response {
    let span = tracing::info_span!(
        "bmc_request",
        bmc = %emulator.inner.name,
        method = %request.method(),
        path = %request.uri().path(),
    );
    next.run(request).instrument(span).await
}

/// Whether a request needs no credentials.
fn is_public(method: &Method, path: &str) -> bool {
    let open = [
        "/redfish",
        "/redfish/",
        "/redfish/v1",
        "/redfish/v1/",
        "/redfish/v1/$metadata",
        "/redfish/v1/odata",
    ];
    (*method == Method::GET && open.contains(&path))
        || (*method == Method::POST
            && path.trim_end_matches('/') == "/redfish/v1/SessionService/Sessions")
}

async fn authenticate(
    State(emulator): State<Emulator>,
    mut request: Request,
    next: Next,
) -> Response {
    if is_public(request.method(), request.uri().path()) {
        return next.run(request).await;
    }
    let clock = &emulator.inner.clock;
    let principal = {
        let mut sessions = lock(&emulator.inner.sessions);
        let headers = request.headers();
        if let Some(token) = headers.get("x-auth-token").and_then(|v| v.to_str().ok()) {
            sessions
                .touch(token, clock)
                .map(|s| Principal::Session { id: s.id })
        } else if let Some(basic) = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        {
            sessions.check_basic(basic).then_some(Principal::Basic)
        } else {
            None
        }
    };
    match principal {
        Some(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        None => RedfishFailure::no_valid_session().into_response(),
    }
}

/// The path of the reset action, whose body the fault layer reads for `ResetType`.
fn is_reset(method: &Method, path: &str) -> bool {
    *method == Method::POST
        && path
            .trim_end_matches('/')
            .ends_with("/Actions/ComputerSystem.Reset")
}

async fn inject_faults(State(emulator): State<Emulator>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let (request, reset_type) = if is_reset(&method, &path) {
        let (parts, body) = request.into_parts();
        let bytes = match axum::body::to_bytes(body, 64 * 1024).await {
            Ok(bytes) => bytes,
            Err(_) => return RedfishFailure::malformed_json().into_response(),
        };
        let reset_type = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| {
                v.get("ResetType")
                    .and_then(|t| t.as_str())
                    .and_then(|t| t.parse::<ResetAction>().ok())
            });
        (Request::from_parts(parts, Body::from(bytes)), reset_type)
    } else {
        (request, None)
    };
    let applied = lock(&emulator.inner.faults).apply(method.as_str(), &path, reset_type);
    let response = apply_faults(&emulator, applied, request, next, is_reset(&method, &path)).await;
    let mut journal = lock(&emulator.inner.journal);
    if journal.len() >= JOURNAL_LIMIT {
        journal.remove(0);
    }
    journal.push(RequestRecord {
        method: method.to_string(),
        path,
        reset_type,
        status: response.status().as_u16(),
    });
    response
}

async fn apply_faults(
    emulator: &Emulator,
    applied: Applied,
    mut request: Request,
    next: Next,
    reset: bool,
) -> Response {
    if applied != Applied::default() {
        tracing::debug!(path = %request.uri().path(), ?applied, "fault rules apply");
    }
    if applied.expire_session
        && let Some(token) = request
            .headers()
            .get("x-auth-token")
            .and_then(|v| v.to_str().ok())
    {
        lock(&emulator.inner.sessions).expire_token(token);
    }
    // A reset under latency completes through a task monitor instead of a slow answer.
    let deferred = reset && applied.status.is_none();
    if !applied.latency.is_zero() && !deferred {
        emulator.inner.clock.sleep(applied.latency).await;
    }
    if let Some(code) = applied.status {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return RedfishFailure::injected(status).into_response();
    }
    request.extensions_mut().insert(applied);
    next.run(request).await
}

async fn odata_headers(request: Request, next: Next) -> Response {
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let mut response = next.run(request).await;
    if response.status() == StatusCode::METHOD_NOT_ALLOWED
        && response.headers().get(http::header::CONTENT_TYPE).is_none()
    {
        let allow = response.headers().get(http::header::ALLOW).cloned();
        response = RedfishFailure::method_not_allowed(&method, &path).into_response();
        if let Some(allow) = allow {
            response.headers_mut().insert(http::header::ALLOW, allow);
        }
    }
    response
        .headers_mut()
        .insert("odata-version", HeaderValue::from_static("4.0"));
    response
}
