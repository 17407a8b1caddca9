//! The emulator's axum handlers: each parses its request into a typed action, runs it against the
//! machine or the emulator's state, and renders the Redfish answer.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, extract::Request};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use rackproof_driver::{BootOverride, DriverError, PowerState, ResetAction, SharedMachine};
use serde_json::Value;

use super::errors::RedfishFailure;
use super::faults::Applied;
use super::{Emulator, csdl, lock, resources};

type Answer = Result<Response, RedfishFailure>;

fn json_response(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

fn ok(body: Value) -> Answer {
    Ok(json_response(StatusCode::OK, body))
}

fn machine_failure(err: &DriverError) -> RedfishFailure {
    RedfishFailure::internal(&err.to_string())
}

fn find(emulator: &Emulator, id: &str, uri: String) -> Result<SharedMachine, RedfishFailure> {
    emulator
        .system(id)
        .cloned()
        .ok_or_else(|| RedfishFailure::not_found(&uri))
}

pub(super) async fn versions() -> Json<Value> {
    Json(resources::redfish_versions())
}

pub(super) async fn service_root(State(emulator): State<Emulator>) -> Json<Value> {
    Json(resources::service_root(&emulator.inner.uuid))
}

pub(super) async fn metadata() -> Response {
    (
        [(header::CONTENT_TYPE, "application/xml")],
        csdl::metadata_document(),
    )
        .into_response()
}

pub(super) async fn odata() -> Json<Value> {
    Json(csdl::service_document())
}

pub(super) async fn not_found(request: Request) -> RedfishFailure {
    RedfishFailure::not_found(request.uri().path())
}

pub(super) async fn systems(State(emulator): State<Emulator>) -> Json<Value> {
    let members: Vec<String> = emulator
        .system_ids()
        .iter()
        .map(|id| resources::system_uri(id))
        .collect();
    Json(resources::collection(
        csdl::SYSTEMS,
        "/redfish/v1/Systems",
        "Computer System Collection",
        &members,
    ))
}

/// The system's body with its ETag.
async fn system_body(id: &str, machine: &SharedMachine) -> Result<(Value, String), RedfishFailure> {
    let power = machine
        .power_state()
        .await
        .map_err(|e| machine_failure(&e))?;
    let boot = machine
        .boot_override()
        .await
        .map_err(|e| machine_failure(&e))?;
    let mut body = resources::system(id, power, boot, &machine.allowed_resets());
    let etag = resources::with_etag(&mut body);
    Ok((body, etag))
}

fn with_etag_header(mut response: Response, etag: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

pub(super) async fn get_system(State(emulator): State<Emulator>, Path(id): Path<String>) -> Answer {
    let machine = find(&emulator, &id, resources::system_uri(&id))?;
    let (body, etag) = system_body(&id, &machine).await?;
    Ok(with_etag_header(json_response(StatusCode::OK, body), &etag))
}

/// A PATCH of the system: only `Boot.BootSourceOverrideEnabled` and `Boot.BootSourceOverrideTarget`
/// are writable.
fn parse_boot_patch(body: &[u8], current: BootOverride) -> Result<BootOverride, RedfishFailure> {
    let value: Value =
        serde_json::from_slice(body).map_err(|_| RedfishFailure::malformed_json())?;
    let Value::Object(fields) = value else {
        return Err(RedfishFailure::malformed_json());
    };
    let mut setting = current;
    for (key, value) in fields {
        if key != "Boot" {
            return Err(RedfishFailure::property_not_writable(&key));
        }
        let Value::Object(boot) = value else {
            return Err(RedfishFailure::property_value_not_in_list(
                &value.to_string(),
                "Boot",
            ));
        };
        for (key, value) in boot {
            let text = value.as_str().unwrap_or_default();
            match key.as_str() {
                "BootSourceOverrideEnabled" => {
                    setting.mode = resources::parse_mode(text).ok_or_else(|| {
                        RedfishFailure::property_value_not_in_list(
                            &value.to_string(),
                            "BootSourceOverrideEnabled",
                        )
                    })?;
                }
                "BootSourceOverrideTarget" => {
                    setting.target = text.parse().map_err(|_| {
                        RedfishFailure::property_value_not_in_list(
                            &value.to_string(),
                            "BootSourceOverrideTarget",
                        )
                    })?;
                }
                other => {
                    return Err(RedfishFailure::property_not_writable(&format!(
                        "Boot/{other}"
                    )));
                }
            }
        }
    }
    Ok(setting)
}

pub(super) async fn patch_system(
    State(emulator): State<Emulator>,
    Path(id): Path<String>,
    applied: Option<Extension<Applied>>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let machine = find(&emulator, &id, resources::system_uri(&id))?;
    let current = machine
        .boot_override()
        .await
        .map_err(|e| machine_failure(&e))?;
    let setting = parse_boot_patch(&body, current)?;
    if let Some(wanted) = headers.get(header::IF_MATCH).and_then(|v| v.to_str().ok()) {
        let (_, etag) = system_body(&id, &machine).await?;
        if wanted.trim() != "*" && !wanted.split(',').any(|tag| tag.trim() == etag) {
            return Err(RedfishFailure::precondition_failed());
        }
    }
    if applied.is_some_and(|Extension(a)| a.ignore) {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    machine
        .set_boot_override(setting)
        .await
        .map_err(|e| machine_failure(&e))?;
    let (body, etag) = system_body(&id, &machine).await?;
    Ok(with_etag_header(json_response(StatusCode::OK, body), &etag))
}

const RESET_ACTION: &str = "ComputerSystem.Reset";

fn parse_reset(body: &[u8], allowed: &[ResetAction]) -> Result<ResetAction, RedfishFailure> {
    let value: Value =
        serde_json::from_slice(body).map_err(|_| RedfishFailure::malformed_json())?;
    let Some(requested) = value
        .as_object()
        .ok_or_else(RedfishFailure::malformed_json)?
        .get("ResetType")
    else {
        return Err(RedfishFailure::parameter_missing(RESET_ACTION, "ResetType"));
    };
    let text = requested.as_str().unwrap_or_default();
    match text.parse::<ResetAction>() {
        Ok(action) if allowed.contains(&action) => Ok(action),
        _ => Err(RedfishFailure::value_not_in_list(
            requested.as_str().unwrap_or(&requested.to_string()),
            "ResetType",
            RESET_ACTION,
        )),
    }
}

fn reset_failure(err: &DriverError) -> RedfishFailure {
    match err {
        DriverError::Unsupported { action, .. } => {
            RedfishFailure::value_not_in_list(action, "ResetType", RESET_ACTION)
        }
        other => machine_failure(other),
    }
}

pub(super) async fn reset(
    State(emulator): State<Emulator>,
    Path(id): Path<String>,
    applied: Option<Extension<Applied>>,
    body: Bytes,
) -> Answer {
    let machine = find(&emulator, &id, resources::reset_target(&id))?;
    let action = parse_reset(&body, &machine.allowed_resets())?;
    let applied = applied.map(|Extension(a)| a).unwrap_or_default();
    let restart = matches!(
        action,
        ResetAction::ForceRestart | ResetAction::GracefulRestart | ResetAction::PowerCycle
    );
    if applied.refuse_unless_off && restart {
        let power = machine
            .power_state()
            .await
            .map_err(|e| machine_failure(&e))?;
        if power != PowerState::Off {
            return Err(RedfishFailure::power_off_required(&id));
        }
    }
    if applied.ignore {
        tracing::info!(system = %id, %action, "fault: reset accepted and ignored");
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    if !applied.latency.is_zero() {
        return Ok(deferred_reset(
            &emulator,
            id,
            machine,
            action,
            applied.latency,
        ));
    }
    machine.reset(action).await.map_err(|e| reset_failure(&e))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Starts a task that performs the reset after `delay` and answers 202 with its monitor.
fn deferred_reset(
    emulator: &Emulator,
    id: String,
    machine: SharedMachine,
    action: ResetAction,
    delay: std::time::Duration,
) -> Response {
    let clock = emulator.inner.clock.clone();
    let task = lock(&emulator.inner.tasks).start(format!("Reset {id} ({action})"), clock.now());
    let body = resources::task(&task);
    let monitor = resources::task_monitor_uri(&task.id);
    let task_id = task.id.clone();
    let state = emulator.clone();
    tokio::spawn(async move {
        clock.sleep(delay).await;
        let outcome = machine.reset(action).await.map_err(|e| reset_failure(&e));
        lock(&state.inner.tasks).finish(&task_id, outcome, clock.now());
    });
    let mut response = json_response(StatusCode::ACCEPTED, body);
    let headers = response.headers_mut();
    if let Ok(location) = HeaderValue::from_str(&monitor) {
        headers.insert(header::LOCATION, location);
    }
    headers.insert(
        header::RETRY_AFTER,
        HeaderValue::from(delay.as_secs().max(1)),
    );
    response
}

pub(super) async fn task_monitor(
    State(emulator): State<Emulator>,
    Path(id): Path<String>,
    request: Request,
) -> Answer {
    let task = lock(&emulator.inner.tasks)
        .get(&id)
        .ok_or_else(|| RedfishFailure::not_found(request.uri().path()))?;
    match (task.state, &task.failure) {
        (super::tasks::TaskState::Running, _) => {
            let mut response = json_response(StatusCode::ACCEPTED, resources::task(&task));
            if let Ok(location) = HeaderValue::from_str(request.uri().path()) {
                response.headers_mut().insert(header::LOCATION, location);
            }
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(1u64));
            Ok(response)
        }
        (_, Some(failure)) => Err(failure.clone()),
        (_, None) => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

pub(super) async fn task_service(State(emulator): State<Emulator>) -> Json<Value> {
    Json(resources::task_service(emulator.inner.clock.now()))
}

pub(super) async fn tasks(State(emulator): State<Emulator>) -> Json<Value> {
    let members: Vec<String> = lock(&emulator.inner.tasks)
        .ids()
        .iter()
        .map(|id| resources::task_uri(id))
        .collect();
    Json(resources::collection(
        csdl::TASKS,
        "/redfish/v1/TaskService/Tasks",
        "Task Collection",
        &members,
    ))
}

pub(super) async fn task(State(emulator): State<Emulator>, Path(id): Path<String>) -> Answer {
    let task = lock(&emulator.inner.tasks)
        .get(&id)
        .ok_or_else(|| RedfishFailure::not_found(&resources::task_uri(&id)))?;
    ok(resources::task(&task))
}

pub(super) async fn chassis_collection(State(emulator): State<Emulator>) -> Json<Value> {
    let members: Vec<String> = emulator
        .system_ids()
        .iter()
        .map(|id| resources::chassis_uri(id))
        .collect();
    Json(resources::collection(
        csdl::CHASSIS_COLLECTION,
        "/redfish/v1/Chassis",
        "Chassis Collection",
        &members,
    ))
}

pub(super) async fn chassis(State(emulator): State<Emulator>, Path(id): Path<String>) -> Answer {
    let machine = find(&emulator, &id, resources::chassis_uri(&id))?;
    let power = machine
        .power_state()
        .await
        .map_err(|e| machine_failure(&e))?;
    ok(resources::chassis(&id, power))
}

pub(super) async fn managers() -> Json<Value> {
    let members = vec![format!("/redfish/v1/Managers/{}", resources::MANAGER_ID)];
    Json(resources::collection(
        csdl::MANAGERS,
        "/redfish/v1/Managers",
        "Manager Collection",
        &members,
    ))
}

pub(super) async fn manager(State(emulator): State<Emulator>, Path(id): Path<String>) -> Answer {
    if id != resources::MANAGER_ID {
        return Err(RedfishFailure::not_found(&format!(
            "/redfish/v1/Managers/{id}"
        )));
    }
    ok(resources::manager(
        &emulator.system_ids(),
        &emulator.inner.uuid,
    ))
}

pub(super) async fn session_service(State(emulator): State<Emulator>) -> Json<Value> {
    let timeout = lock(&emulator.inner.sessions).timeout().as_secs();
    Json(resources::session_service(timeout))
}

pub(super) async fn sessions(State(emulator): State<Emulator>) -> Json<Value> {
    let ids = lock(&emulator.inner.sessions).ids(&emulator.inner.clock);
    let members: Vec<String> = ids.iter().map(|id| resources::session_uri(id)).collect();
    Json(resources::collection(
        csdl::SESSIONS,
        "/redfish/v1/SessionService/Sessions",
        "Session Collection",
        &members,
    ))
}

/// `POST /redfish/v1/SessionService/Sessions` with `UserName` and `Password`.
pub(super) async fn login(State(emulator): State<Emulator>, body: Bytes) -> Answer {
    let value: Value =
        serde_json::from_slice(&body).map_err(|_| RedfishFailure::malformed_json())?;
    let field = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_owned);
    let (Some(user), Some(password)) = (field("UserName"), field("Password")) else {
        let missing = if field("UserName").is_none() {
            "UserName"
        } else {
            "Password"
        };
        return Err(RedfishFailure::parameter_missing(
            "Session creation",
            missing,
        ));
    };
    let mut sessions = lock(&emulator.inner.sessions);
    if !sessions.credentials_match(&user, &password) {
        return Err(RedfishFailure::no_valid_session());
    }
    let session = sessions.create(&emulator.inner.clock);
    drop(sessions);
    tracing::debug!(session = %session.id, "session created");
    let location = resources::session_uri(&session.id);
    let mut response = json_response(
        StatusCode::CREATED,
        resources::session(&session.id, &session.user),
    );
    let headers = response.headers_mut();
    if let (Ok(token), Ok(location)) = (
        HeaderValue::from_str(&session.token),
        HeaderValue::from_str(&location),
    ) {
        headers.insert("x-auth-token", token);
        headers.insert(header::LOCATION, location);
    }
    Ok(response)
}

pub(super) async fn get_session(
    State(emulator): State<Emulator>,
    Path(id): Path<String>,
) -> Answer {
    let session = lock(&emulator.inner.sessions)
        .get(&id, &emulator.inner.clock)
        .ok_or_else(|| RedfishFailure::not_found(&resources::session_uri(&id)))?;
    ok(resources::session(&session.id, &session.user))
}

pub(super) async fn logout(State(emulator): State<Emulator>, Path(id): Path<String>) -> Answer {
    if lock(&emulator.inner.sessions).delete(&id) {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(RedfishFailure::not_found(&resources::session_uri(&id)))
    }
}

pub(super) async fn account_service() -> Json<Value> {
    Json(resources::account_service())
}

pub(super) async fn accounts() -> Json<Value> {
    let members = vec![format!(
        "/redfish/v1/AccountService/Accounts/{}",
        resources::ACCOUNT_ID
    )];
    Json(resources::collection(
        csdl::ACCOUNTS,
        "/redfish/v1/AccountService/Accounts",
        "Accounts Collection",
        &members,
    ))
}

pub(super) async fn account(State(emulator): State<Emulator>, Path(id): Path<String>) -> Answer {
    if id != resources::ACCOUNT_ID {
        return Err(RedfishFailure::not_found(&format!(
            "/redfish/v1/AccountService/Accounts/{id}"
        )));
    }
    let user = lock(&emulator.inner.sessions).username().to_owned();
    ok(resources::account(&user))
}
