//! Calling the emulator as a tower service and reading its answers.

pub(crate) use std::time::Duration;

pub(crate) use crate::common;
pub(crate) use crate::common::{PASSWORD, TestMachine, USER};
pub(crate) use axum::body::Body;
pub(crate) use base64::Engine as _;
pub(crate) use http::{Request, StatusCode};
pub(crate) use http_body_util::BodyExt as _;
pub(crate) use rackproof_clock::Clock;
pub(crate) use rackproof_driver::{BootOverrideMode, BootTarget, PowerState, ResetAction};
pub(crate) use rackproof_redfish::{Emulator, FaultEffect, FaultRule, VendorProfile, app};
pub(crate) use serde_json::{Value, json};
pub(crate) use tower::ServiceExt as _;

pub(crate) const RESET: &str = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset";

pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Value,
    pub(crate) text: String,
}

pub(crate) fn basic() -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
    )
}

pub(crate) async fn call(
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

pub(crate) async fn get(emulator: &Emulator, path: &str) -> Answer {
    call(emulator, "GET", path, Some(&basic()), None, &[]).await
}

pub(crate) async fn reset(emulator: &Emulator, reset_type: &str) -> Answer {
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

pub(crate) fn message_id(answer: &Answer) -> String {
    answer.body["error"]["@Message.ExtendedInfo"][0]["MessageId"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn setup(power: PowerState) -> (std::sync::Arc<TestMachine>, Emulator) {
    let machine = TestMachine::new(power);
    let emulator = common::emulator(machine.clone(), Clock::wall());
    (machine, emulator)
}
