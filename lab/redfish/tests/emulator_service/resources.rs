//! The documents (service root, OData metadata, the system), credentials, errors, and resets.

use crate::support::*;

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
