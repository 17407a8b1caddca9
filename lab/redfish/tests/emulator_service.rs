//! The emulator called as a tower service (no socket): status codes, bodies, auth, sessions and
//! every fault effect, in virtual time where time matters.

mod common;

use std::time::Duration;

use axum::body::Body;
use base64::Engine as _;
use common::{PASSWORD, TestMachine, USER};
use http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use rackproof_clock::Clock;
use rackproof_driver::{BootOverrideMode, BootTarget, PowerState, ResetAction};
use rackproof_redfish::{Emulator, FaultEffect, FaultRule, VendorProfile, app};
use serde_json::{Value, json};
use tower::ServiceExt as _;

const RESET: &str = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset";

struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Value,
    text: String,
}

fn basic() -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
    )
}

async fn call(
    emulator: &Emulator,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<Value>,
    extra: &[(&str, &str)],
) -> Answer {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(auth) = auth {
        request = if auth.starts_with("Basic ") {
            request.header("authorization", auth)
        } else {
            request.header("x-auth-token", auth)
        };
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
    let response = app(emulator.clone())
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        body,
        text,
    }
}

async fn get(emulator: &Emulator, path: &str) -> Answer {
    call(emulator, "GET", path, Some(&basic()), None, &[]).await
}

async fn reset(emulator: &Emulator, reset_type: &str) -> Answer {
    call(
        emulator,
        "POST",
        RESET,
        Some(&basic()),
        Some(json!({"ResetType": reset_type})),
        &[],
    )
    .await
}

fn message_id(answer: &Answer) -> String {
    answer.body["error"]["@Message.ExtendedInfo"][0]["MessageId"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn setup(power: PowerState) -> (std::sync::Arc<TestMachine>, Emulator) {
    let machine = TestMachine::new(power);
    let emulator = common::emulator(machine.clone(), Clock::wall());
    (machine, emulator)
}

#[tokio::test]
async fn service_root_and_odata_documents_are_open_and_annotated() {
    let (_, emulator) = setup(PowerState::On);
    let root = call(&emulator, "GET", "/redfish/v1/", None, None, &[]).await;
    assert_eq!(root.status, StatusCode::OK);
    assert_eq!(root.headers["odata-version"], "4.0");
    assert_eq!(root.body["@odata.id"], "/redfish/v1/");
    assert_eq!(root.body["@odata.type"], "#ServiceRoot.v1_11_0.ServiceRoot");
    assert_eq!(
        root.body["@odata.context"],
        "/redfish/v1/$metadata#ServiceRoot.ServiceRoot"
    );
    assert_eq!(
        root.body["Links"]["Sessions"]["@odata.id"],
        "/redfish/v1/SessionService/Sessions"
    );
    assert_eq!(
        call(&emulator, "GET", "/redfish/v1", None, None, &[])
            .await
            .body,
        root.body
    );
    let versions = call(&emulator, "GET", "/redfish", None, None, &[]).await;
    assert_eq!(versions.body, json!({"v1": "/redfish/v1/"}));
    let odata = call(&emulator, "GET", "/redfish/v1/odata", None, None, &[]).await;
    assert_eq!(odata.body["@odata.context"], "/redfish/v1/$metadata");
    assert!(
        odata.body["value"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["url"] == "/redfish/v1/Systems")
    );
}

/// Every resource the service links to answers 200, and `$metadata` references the namespace
/// and version of every `@odata.type` it returns.
#[tokio::test]
async fn metadata_references_every_type_the_service_returns() {
    let (_, emulator) = setup(PowerState::On);
    // A task exists only after a deferred reset; create one so its type is covered too.
    emulator
        .add_fault(FaultRule::latency(Some("POST"), RESET, Duration::from_millis(1)).times(1))
        .unwrap();
    assert_eq!(
        reset(&emulator, "ForceRestart").await.status,
        StatusCode::ACCEPTED
    );
    let metadata = call(&emulator, "GET", "/redfish/v1/$metadata", None, None, &[]).await;
    assert_eq!(metadata.status, StatusCode::OK);
    assert_eq!(metadata.headers["content-type"], "application/xml");
    assert!(metadata.text.starts_with("<?xml"), "{}", metadata.text);
    assert!(metadata.text.contains(
        "<EntityContainer Name=\"Service\" Extends=\"ServiceRoot.v1_11_0.ServiceContainer\"/>"
    ));

    let mut pending = vec!["/redfish/v1/".to_owned()];
    let mut seen = std::collections::BTreeSet::new();
    while let Some(path) = pending.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let answer = get(&emulator, &path).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.text);
        let ty = answer.body["@odata.type"]
            .as_str()
            .unwrap_or_else(|| panic!("{path} has no @odata.type"));
        let ty = ty.trim_start_matches('#');
        let namespace = ty.rsplit_once('.').unwrap().0;
        assert!(
            metadata
                .text
                .contains(&format!("Namespace=\"{namespace}\"")),
            "$metadata lacks {namespace} ({path})"
        );
        assert_eq!(
            answer.body["@odata.id"]
                .as_str()
                .unwrap()
                .trim_end_matches('/'),
            path.trim_end_matches('/')
        );
        collect_links(&answer.body, &mut pending);
    }
    assert!(seen.len() >= 15, "walked only {seen:?}");
}

fn collect_links(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            for (key, value) in fields {
                match (key.as_str(), value) {
                    ("@odata.id", Value::String(uri)) if !uri.contains('#') => {
                        out.push(uri.clone())
                    }
                    _ => collect_links(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_links(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn requests_without_valid_credentials_get_401() {
    let (_, emulator) = setup(PowerState::On);
    let none = call(&emulator, "GET", "/redfish/v1/Systems/1", None, None, &[]).await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    assert!(
        none.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic")
    );
    assert_eq!(message_id(&none), "Base.1.16.NoValidSession");
    let wrong = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:nope"))
    );
    assert_eq!(
        call(
            &emulator,
            "GET",
            "/redfish/v1/Systems",
            Some(&wrong),
            None,
            &[]
        )
        .await
        .status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        call(
            &emulator,
            "GET",
            "/redfish/v1/Systems",
            Some("not-a-token"),
            None,
            &[]
        )
        .await
        .status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get(&emulator, "/redfish/v1/Systems").await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn unknown_resources_are_404_and_wrong_methods_405_with_redfish_errors() {
    let (_, emulator) = setup(PowerState::On);
    let missing = get(&emulator, "/redfish/v1/Systems/nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(message_id(&missing), "Base.1.16.ResourceMissingAtURI");
    assert_eq!(
        get(&emulator, "/redfish/v1/Nothing/Here").await.status,
        StatusCode::NOT_FOUND
    );
    let wrong = call(
        &emulator,
        "DELETE",
        "/redfish/v1/Systems/1",
        Some(&basic()),
        None,
        &[],
    )
    .await;
    assert_eq!(wrong.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        wrong.headers["allow"].to_str().unwrap().contains("PATCH"),
        "{:?}",
        wrong.headers
    );
    assert_eq!(message_id(&wrong), "Base.1.16.OperationNotAllowed");
    assert_eq!(wrong.headers["odata-version"], "4.0");
}

#[tokio::test]
async fn system_advertises_the_machines_resets_and_boot_values() {
    let machine = TestMachine::with_allowed(
        PowerState::Off,
        vec![ResetAction::On, ResetAction::ForceOff],
    );
    let emulator = common::emulator(machine, Clock::wall());
    let system = get(&emulator, "/redfish/v1/Systems/1").await;
    assert_eq!(system.body["PowerState"], "Off");
    let action = &system.body["Actions"]["#ComputerSystem.Reset"];
    assert_eq!(action["target"], RESET);
    assert_eq!(
        action["ResetType@Redfish.AllowableValues"],
        json!(["On", "ForceOff"])
    );
    assert_eq!(
        system.body["Boot"]["BootSourceOverrideTarget@Redfish.AllowableValues"],
        json!(["None", "Pxe", "Hdd", "Cd", "UefiHttp"])
    );
    assert_eq!(
        system.headers["etag"].to_str().unwrap(),
        system.body["@odata.etag"].as_str().unwrap()
    );
}

#[tokio::test]
async fn bad_reset_requests_are_400_and_good_ones_204() {
    let machine = TestMachine::with_allowed(
        PowerState::Off,
        vec![ResetAction::On, ResetAction::ForceOff],
    );
    let emulator = common::emulator(machine.clone(), Clock::wall());
    let unknown = reset(&emulator, "Reboot").await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST, "{}", unknown.text);
    assert_eq!(
        message_id(&unknown),
        "Base.1.16.ActionParameterValueNotInList"
    );
    assert_eq!(
        unknown.body["error"]["@Message.ExtendedInfo"][0]["MessageArgs"],
        json!(["Reboot", "ResetType", "ComputerSystem.Reset"])
    );
    assert_eq!(
        reset(&emulator, "Nmi").await.status,
        StatusCode::BAD_REQUEST,
        "not among the machine's allowed resets"
    );
    let missing = call(
        &emulator,
        "POST",
        RESET,
        Some(&basic()),
        Some(json!({})),
        &[],
    )
    .await;
    assert_eq!(message_id(&missing), "Base.1.16.ActionParameterMissing");
    let malformed = call(&emulator, "POST", RESET, Some(&basic()), None, &[]).await;
    assert_eq!(
        (malformed.status, message_id(&malformed).as_str()),
        (StatusCode::BAD_REQUEST, "Base.1.16.MalformedJSON")
    );
    assert!(machine.snapshot().resets.is_empty());
    assert_eq!(reset(&emulator, "On").await.status, StatusCode::NO_CONTENT);
    assert_eq!(machine.snapshot().power, PowerState::On);
}

#[tokio::test]
async fn sessions_are_created_used_listed_and_deleted() {
    let (_, emulator) = setup(PowerState::On);
    let login = call(
        &emulator,
        "POST",
        "/redfish/v1/SessionService/Sessions",
        None,
        Some(json!({"UserName": USER, "Password": PASSWORD})),
        &[],
    )
    .await;
    assert_eq!(login.status, StatusCode::CREATED);
    let token = login.headers["x-auth-token"].to_str().unwrap().to_owned();
    let location = login.headers["location"].to_str().unwrap().to_owned();
    assert_eq!(location, "/redfish/v1/SessionService/Sessions/1");
    assert_eq!(login.body["@odata.id"], location.as_str());
    assert_eq!(login.body["Password"], Value::Null);
    let listed = call(
        &emulator,
        "GET",
        "/redfish/v1/SessionService/Sessions",
        Some(&token),
        None,
        &[],
    )
    .await;
    assert_eq!(listed.body["Members@odata.count"], 1);
    assert_eq!(
        call(&emulator, "DELETE", &location, Some(&token), None, &[])
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        call(
            &emulator,
            "GET",
            "/redfish/v1/Systems",
            Some(&token),
            None,
            &[]
        )
        .await
        .status,
        StatusCode::UNAUTHORIZED
    );
    let wrong = call(
        &emulator,
        "POST",
        "/redfish/v1/SessionService/Sessions",
        None,
        Some(json!({"UserName": USER, "Password": "x"})),
        &[],
    )
    .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(!wrong.text.contains(PASSWORD));
    assert_eq!(emulator.session_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn idle_sessions_expire_in_virtual_time() {
    let machine = TestMachine::new(PowerState::On);
    let clock = Clock::simulated(jiff::Timestamp::UNIX_EPOCH);
    let emulator = common::emulator(machine, clock.clone());
    let login = call(
        &emulator,
        "POST",
        "/redfish/v1/SessionService/Sessions",
        None,
        Some(json!({"UserName": USER, "Password": PASSWORD})),
        &[],
    )
    .await;
    let token = login.headers["x-auth-token"].to_str().unwrap().to_owned();
    clock.sleep(Duration::from_secs(1799)).await;
    assert_eq!(
        call(
            &emulator,
            "GET",
            "/redfish/v1/Systems",
            Some(&token),
            None,
            &[]
        )
        .await
        .status,
        StatusCode::OK
    );
    clock.sleep(Duration::from_secs(1800)).await;
    assert_eq!(
        call(
            &emulator,
            "GET",
            "/redfish/v1/Systems",
            Some(&token),
            None,
            &[]
        )
        .await
        .status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn boot_override_patch_honours_if_match() {
    let (machine, emulator) = setup(PowerState::On);
    let system = get(&emulator, "/redfish/v1/Systems/1").await;
    let etag = system.headers["etag"].to_str().unwrap().to_owned();
    let patch =
        json!({"Boot": {"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Pxe"}});
    let stale = call(
        &emulator,
        "PATCH",
        "/redfish/v1/Systems/1",
        Some(&basic()),
        Some(patch.clone()),
        &[("if-match", "W/\"0\"")],
    )
    .await;
    assert_eq!(
        (stale.status, message_id(&stale).as_str()),
        (
            StatusCode::PRECONDITION_FAILED,
            "Base.1.16.PreconditionFailed"
        )
    );
    assert_eq!(machine.snapshot().boot.mode, BootOverrideMode::Disabled);
    let done = call(
        &emulator,
        "PATCH",
        "/redfish/v1/Systems/1",
        Some(&basic()),
        Some(patch),
        &[("if-match", &etag)],
    )
    .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    assert_eq!(done.body["Boot"]["BootSourceOverrideTarget"], "Pxe");
    assert_ne!(
        done.headers["etag"].to_str().unwrap(),
        etag,
        "the ETag changes with the content"
    );
    let boot = machine.snapshot().boot;
    assert_eq!(
        (boot.mode, boot.target),
        (BootOverrideMode::Once, BootTarget::Pxe)
    );
    let bad = call(
        &emulator,
        "PATCH",
        "/redfish/v1/Systems/1",
        Some(&basic()),
        Some(json!({"Boot": {"BootSourceOverrideTarget": "Floppy"}})),
        &[],
    )
    .await;
    assert_eq!(
        (bad.status, message_id(&bad).as_str()),
        (StatusCode::BAD_REQUEST, "Base.1.16.PropertyValueNotInList")
    );
    let readonly = call(
        &emulator,
        "PATCH",
        "/redfish/v1/Systems/1",
        Some(&basic()),
        Some(json!({"PowerState": "Off"})),
        &[],
    )
    .await;
    assert_eq!(
        (readonly.status, message_id(&readonly).as_str()),
        (StatusCode::BAD_REQUEST, "Base.1.16.PropertyNotWritable")
    );
}

#[tokio::test]
async fn status_faults_apply_a_bounded_number_of_times() {
    let (_, emulator) = setup(PowerState::On);
    emulator
        .add_fault(FaultRule::status("GET", "/redfish/v1/Systems/*", 503).times(2))
        .unwrap();
    for _ in 0..2 {
        let answer = get(&emulator, "/redfish/v1/Systems/1").await;
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            message_id(&answer),
            "Base.1.16.ServiceTemporarilyUnavailable"
        );
        assert_eq!(answer.headers["retry-after"], "1");
    }
    assert_eq!(
        get(&emulator, "/redfish/v1/Systems/1").await.status,
        StatusCode::OK
    );
    assert!(emulator.faults().is_empty());
    let id = emulator
        .add_fault(FaultRule::status("POST", RESET, 500))
        .unwrap();
    assert_eq!(
        reset(&emulator, "On").await.status,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert!(emulator.remove_fault(id));
    assert_eq!(reset(&emulator, "On").await.status, StatusCode::NO_CONTENT);
    let statuses: Vec<u16> = emulator.journal().iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![503, 503, 200, 500, 204]);
}

#[tokio::test(start_paused = true)]
async fn latency_delays_answers_in_virtual_time() {
    let machine = TestMachine::new(PowerState::On);
    let clock = Clock::simulated(jiff::Timestamp::UNIX_EPOCH);
    let emulator = common::emulator(machine, clock.clone());
    emulator
        .add_fault(
            FaultRule::latency(
                Some("GET"),
                "/redfish/v1/Chassis/*",
                Duration::from_secs(3600),
            )
            .times(1),
        )
        .unwrap();
    let start = clock.instant();
    assert_eq!(
        get(&emulator, "/redfish/v1/Chassis/1").await.status,
        StatusCode::OK
    );
    assert!(clock.since(start) >= Duration::from_secs(3600));
    let again = clock.instant();
    assert_eq!(
        get(&emulator, "/redfish/v1/Chassis/1").await.status,
        StatusCode::OK
    );
    assert!(
        clock.since(again) < Duration::from_secs(1),
        "the rule applied once only"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reset_under_latency_completes_through_a_task_monitor() {
    let machine = TestMachine::new(PowerState::Off);
    let clock = Clock::simulated(jiff::Timestamp::UNIX_EPOCH);
    let emulator = common::emulator(machine.clone(), clock.clone());
    emulator
        .add_fault(FaultRule::latency(
            Some("POST"),
            RESET,
            Duration::from_secs(30),
        ))
        .unwrap();
    let accepted = reset(&emulator, "On").await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let monitor = accepted.headers["location"].to_str().unwrap().to_owned();
    assert_eq!(monitor, "/redfish/v1/TaskService/TaskMonitors/1");
    assert_eq!(accepted.body["TaskState"], "Running");
    assert_eq!(
        machine.snapshot().power,
        PowerState::Off,
        "nothing happens before the delay"
    );
    assert_eq!(get(&emulator, &monitor).await.status, StatusCode::ACCEPTED);
    clock.sleep(Duration::from_secs(31)).await;
    assert_eq!(
        get(&emulator, &monitor).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(machine.snapshot().power, PowerState::On);
    let task = get(&emulator, "/redfish/v1/TaskService/Tasks/1").await;
    assert_eq!(task.body["TaskState"], "Completed");
    assert_eq!(task.body["EndTime"], "1970-01-01T00:00:30+00:00");
    // A reset the machine refuses ends the task in Exception, and the monitor reports the error.
    assert_eq!(
        reset(&emulator, "ForceOff").await.status,
        StatusCode::ACCEPTED
    );
    clock.sleep(Duration::from_secs(31)).await;
    assert_eq!(reset(&emulator, "Nmi").await.status, StatusCode::ACCEPTED);
    clock.sleep(Duration::from_secs(31)).await;
    let failed = get(&emulator, "/redfish/v1/TaskService/TaskMonitors/3").await;
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        get(&emulator, "/redfish/v1/TaskService/Tasks/3").await.body["TaskState"],
        "Exception"
    );
}

#[tokio::test]
async fn ignored_actions_are_accepted_and_do_nothing() {
    let (machine, emulator) = setup(PowerState::Off);
    emulator
        .add_fault(
            FaultRule::ignore_action("POST", RESET)
                .for_reset_type(ResetAction::On)
                .times(1),
        )
        .unwrap();
    assert_eq!(reset(&emulator, "On").await.status, StatusCode::NO_CONTENT);
    assert_eq!(machine.snapshot().power, PowerState::Off);
    assert!(machine.snapshot().resets.is_empty());
    assert_eq!(reset(&emulator, "On").await.status, StatusCode::NO_CONTENT);
    assert_eq!(machine.snapshot().power, PowerState::On);
    emulator
        .add_fault(FaultRule::ignore_action("PATCH", "/redfish/v1/Systems/1").times(1))
        .unwrap();
    let patch = json!({"Boot": {"BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideTarget": "Cd"}});
    assert_eq!(
        call(
            &emulator,
            "PATCH",
            "/redfish/v1/Systems/1",
            Some(&basic()),
            Some(patch),
            &[]
        )
        .await
        .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(machine.snapshot().boot.mode, BootOverrideMode::Disabled);
}

#[tokio::test]
async fn expired_sessions_fail_with_401() {
    let (_, emulator) = setup(PowerState::On);
    let login = call(
        &emulator,
        "POST",
        "/redfish/v1/SessionService/Sessions",
        None,
        Some(json!({"UserName": USER, "Password": PASSWORD})),
        &[],
    )
    .await;
    let token = login.headers["x-auth-token"].to_str().unwrap().to_owned();
    emulator
        .add_fault(FaultRule::expire_session("/redfish/v1/Systems").times(1))
        .unwrap();
    assert_eq!(
        call(
            &emulator,
            "GET",
            "/redfish/v1/Systems",
            Some(&token),
            None,
            &[]
        )
        .await
        .status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(emulator.session_count(), 0);
}

#[tokio::test]
async fn reset_refused_until_off_profile_answers_409_while_on() {
    let (machine, emulator) = setup(PowerState::On);
    emulator.apply_profile(VendorProfile::ResetRefusedUntilOff);
    let refused = reset(&emulator, "PowerCycle").await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(
        message_id(&refused),
        "Base.1.16.ChassisPowerStateOffRequired"
    );
    assert_eq!(
        reset(&emulator, "ForceOff").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        reset(&emulator, "PowerCycle").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        machine.snapshot().resets,
        vec![ResetAction::ForceOff, ResetAction::PowerCycle]
    );
    assert_eq!(
        emulator.faults().len(),
        1,
        "the profile's rule is unbounded"
    );
}

#[tokio::test(start_paused = true)]
async fn slow_profile_delays_every_request_and_defers_resets() {
    let machine = TestMachine::new(PowerState::On);
    let clock = Clock::simulated(jiff::Timestamp::UNIX_EPOCH);
    let emulator = common::emulator(machine, clock.clone());
    emulator.apply_profile(VendorProfile::Slow);
    let start = clock.instant();
    assert_eq!(
        get(&emulator, "/redfish/v1/Systems/1").await.status,
        StatusCode::OK
    );
    assert!(clock.since(start) >= Duration::from_secs(2));
    assert_eq!(
        reset(&emulator, "ForceRestart").await.status,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        emulator.faults()[0].1.effect,
        FaultEffect::Latency {
            delay: Duration::from_secs(2)
        }
    );
}

#[tokio::test]
async fn ignores_first_power_on_profile_ignores_exactly_one_on() {
    let (machine, emulator) = setup(PowerState::Off);
    emulator.apply_profile(VendorProfile::IgnoresFirstPowerOn);
    assert_eq!(
        reset(&emulator, "ForceOff").await.status,
        StatusCode::NO_CONTENT,
        "other resets are unaffected"
    );
    assert_eq!(reset(&emulator, "On").await.status, StatusCode::NO_CONTENT);
    assert_eq!(machine.snapshot().power, PowerState::Off);
    assert_eq!(reset(&emulator, "On").await.status, StatusCode::NO_CONTENT);
    assert_eq!(machine.snapshot().power, PowerState::On);
    let journal = emulator.journal();
    assert_eq!(
        journal
            .iter()
            .filter(|r| r.reset_type == Some(ResetAction::On))
            .count(),
        2
    );
}

#[tokio::test]
async fn emulator_refuses_bad_configurations() {
    let machine = TestMachine::new(PowerState::On);
    let mut config =
        rackproof_redfish::EmulatorConfig::single(machine.clone(), USER, PASSWORD, Clock::wall());
    config.systems.push(("1".into(), machine.clone()));
    assert!(
        Emulator::new(config.clone())
            .unwrap_err()
            .to_string()
            .contains("appears twice")
    );
    config.systems = vec![("a/b".into(), machine)];
    assert!(
        Emulator::new(config.clone())
            .unwrap_err()
            .to_string()
            .contains("must be non-empty")
    );
    config.systems.clear();
    assert!(Emulator::new(config.clone()).is_err());
    assert!(!format!("{config:?}").contains(PASSWORD));
}
