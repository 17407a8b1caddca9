//! Sessions: created, used, listed, deleted and expired; the boot override's If-Match.

use crate::support::*;

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
