//! JSON bodies of the emulator's resources: pure functions from machine state to Redfish
//! payloads, each with `@odata.id`, `@odata.type` and `@odata.context`.

use rackproof_driver::{BootOverride, BootOverrideMode, BootTarget, PowerState, ResetAction};
use serde_json::{Map, Value, json};

use super::csdl::{self, RedfishType};
use super::tasks::Task;

/// The one manager (the BMC) that manages every system.
pub(crate) const MANAGER_ID: &str = "BMC";
/// The one account.
pub(crate) const ACCOUNT_ID: &str = "1";

/// A resource with its identity annotations filled in.
fn resource(ty: RedfishType, id: &str, mut body: Value) -> Value {
    let mut out = Map::new();
    out.insert("@odata.id".into(), id.into());
    out.insert("@odata.type".into(), ty.odata_type().into());
    out.insert("@odata.context".into(), ty.odata_context().into());
    if let Value::Object(fields) = body.take() {
        out.extend(fields);
    }
    Value::Object(out)
}

fn link(uri: &str) -> Value {
    json!({"@odata.id": uri})
}

/// A resource collection of `members` (URIs).
pub(crate) fn collection(ty: RedfishType, uri: &str, name: &str, members: &[String]) -> Value {
    resource(
        ty,
        uri,
        json!({
            "Name": name,
            "Members@odata.count": members.len(),
            "Members": members.iter().map(|m| link(m)).collect::<Vec<_>>(),
        }),
    )
}

pub(crate) fn redfish_versions() -> Value {
    json!({"v1": "/redfish/v1/"})
}

pub(crate) fn service_root(uuid: &str) -> Value {
    resource(
        csdl::SERVICE_ROOT,
        "/redfish/v1/",
        json!({
            "Id": "RootService",
            "Name": "Root Service",
            "RedfishVersion": "1.15.0",
            "UUID": uuid,
            "Vendor": "Rackproof",
            "Product": "Rackproof Redfish emulator",
            "Systems": link("/redfish/v1/Systems"),
            "Chassis": link("/redfish/v1/Chassis"),
            "Managers": link("/redfish/v1/Managers"),
            "SessionService": link("/redfish/v1/SessionService"),
            "AccountService": link("/redfish/v1/AccountService"),
            "TaskService": link("/redfish/v1/TaskService"),
            "Links": {"Sessions": link("/redfish/v1/SessionService/Sessions")},
        }),
    )
}

pub(crate) fn system_uri(id: &str) -> String {
    format!("/redfish/v1/Systems/{id}")
}

pub(crate) fn chassis_uri(id: &str) -> String {
    format!("/redfish/v1/Chassis/{id}")
}

pub(crate) fn reset_target(id: &str) -> String {
    format!("/redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset")
}

fn mode_str(mode: BootOverrideMode) -> &'static str {
    match mode {
        BootOverrideMode::Disabled => "Disabled",
        BootOverrideMode::Once => "Once",
        BootOverrideMode::Continuous => "Continuous",
    }
}

pub(crate) fn parse_mode(text: &str) -> Option<BootOverrideMode> {
    [
        BootOverrideMode::Disabled,
        BootOverrideMode::Once,
        BootOverrideMode::Continuous,
    ]
    .into_iter()
    .find(|m| mode_str(*m) == text)
}

fn status(power: PowerState) -> Value {
    let state = if power == PowerState::Off {
        "StandbyOffline"
    } else {
        "Enabled"
    };
    json!({"State": state, "Health": "OK"})
}

/// A ComputerSystem, without `@odata.etag` (see [`with_etag`]).
pub(crate) fn system(
    id: &str,
    power: PowerState,
    boot: BootOverride,
    allowed: &[ResetAction],
) -> Value {
    resource(
        csdl::SYSTEM,
        &system_uri(id),
        json!({
            "Id": id,
            "Name": format!("Rackproof machine {id}"),
            "SystemType": "Physical",
            "Manufacturer": "Rackproof",
            "Model": "Emulated",
            "PowerState": power.to_string(),
            "Status": status(power),
            "Boot": {
                "BootSourceOverrideEnabled": mode_str(boot.mode),
                "BootSourceOverrideEnabled@Redfish.AllowableValues": ["Disabled", "Once", "Continuous"],
                "BootSourceOverrideTarget": boot.target.as_str(),
                "BootSourceOverrideTarget@Redfish.AllowableValues":
                    BootTarget::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
                "BootSourceOverrideMode": "UEFI",
            },
            "Actions": {
                "#ComputerSystem.Reset": {
                    "target": reset_target(id),
                    "ResetType@Redfish.AllowableValues": allowed.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
                }
            },
            "Links": {
                "Chassis": [link(&chassis_uri(id))],
                "ManagedBy": [link(&format!("/redfish/v1/Managers/{MANAGER_ID}"))],
            },
        }),
    )
}

/// Adds `@odata.etag` (a weak tag over the body's content) and returns the tag.
pub(crate) fn with_etag(body: &mut Value) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    body.to_string().hash(&mut hasher);
    let etag = format!("W/\"{:016x}\"", hasher.finish());
    if let Value::Object(fields) = body {
        fields.insert("@odata.etag".into(), etag.clone().into());
    }
    etag
}

pub(crate) fn chassis(id: &str, power: PowerState) -> Value {
    resource(
        csdl::CHASSIS,
        &chassis_uri(id),
        json!({
            "Id": id,
            "Name": format!("Chassis of {id}"),
            "ChassisType": "RackMount",
            "PowerState": power.to_string(),
            "Status": status(power),
            "Links": {
                "ComputerSystems": [link(&system_uri(id))],
                "ManagedBy": [link(&format!("/redfish/v1/Managers/{MANAGER_ID}"))],
            },
        }),
    )
}

pub(crate) fn manager(system_ids: &[String], uuid: &str) -> Value {
    resource(
        csdl::MANAGER,
        &format!("/redfish/v1/Managers/{MANAGER_ID}"),
        json!({
            "Id": MANAGER_ID,
            "Name": "Rackproof emulated BMC",
            "ManagerType": "BMC",
            "Manufacturer": "Rackproof",
            "Model": "Redfish emulator",
            "FirmwareVersion": env!("CARGO_PKG_VERSION"),
            "UUID": uuid,
            "PowerState": "On",
            "Status": {"State": "Enabled", "Health": "OK"},
            "Links": {
                "ManagerForServers": system_ids.iter().map(|id| link(&system_uri(id))).collect::<Vec<_>>(),
                "ManagerForChassis": system_ids.iter().map(|id| link(&chassis_uri(id))).collect::<Vec<_>>(),
            },
        }),
    )
}

pub(crate) fn session_service(timeout_secs: u64) -> Value {
    resource(
        csdl::SESSION_SERVICE,
        "/redfish/v1/SessionService",
        json!({
            "Id": "SessionService",
            "Name": "Session Service",
            "ServiceEnabled": true,
            "SessionTimeout": timeout_secs,
            "Status": {"State": "Enabled", "Health": "OK"},
            "Sessions": link("/redfish/v1/SessionService/Sessions"),
        }),
    )
}

pub(crate) fn session_uri(id: &str) -> String {
    format!("/redfish/v1/SessionService/Sessions/{id}")
}

pub(crate) fn session(id: &str, user: &str) -> Value {
    resource(
        csdl::SESSION,
        &session_uri(id),
        json!({"Id": id, "Name": format!("Session {id}"), "UserName": user, "Password": null, "SessionType": "Redfish"}),
    )
}

pub(crate) fn account_service() -> Value {
    resource(
        csdl::ACCOUNT_SERVICE,
        "/redfish/v1/AccountService",
        json!({
            "Id": "AccountService",
            "Name": "Account Service",
            "ServiceEnabled": true,
            "Status": {"State": "Enabled", "Health": "OK"},
            "Accounts": link("/redfish/v1/AccountService/Accounts"),
        }),
    )
}

pub(crate) fn account(user: &str) -> Value {
    resource(
        csdl::ACCOUNT,
        &format!("/redfish/v1/AccountService/Accounts/{ACCOUNT_ID}"),
        json!({
            "Id": ACCOUNT_ID,
            "Name": "User Account",
            "UserName": user,
            "RoleId": "Administrator",
            "Enabled": true,
            "Locked": false,
            "Password": null,
        }),
    )
}

pub(crate) fn task_service(now: jiff::Timestamp) -> Value {
    resource(
        csdl::TASK_SERVICE,
        "/redfish/v1/TaskService",
        json!({
            "Id": "TaskService",
            "Name": "Task Service",
            "ServiceEnabled": true,
            "DateTime": timestamp(now),
            "CompletedTaskOverWritePolicy": "Oldest",
            "LifeCycleEventOnTaskStateChange": false,
            "Status": {"State": "Enabled", "Health": "OK"},
            "Tasks": link("/redfish/v1/TaskService/Tasks"),
        }),
    )
}

pub(crate) fn task_uri(id: &str) -> String {
    format!("/redfish/v1/TaskService/Tasks/{id}")
}

pub(crate) fn task_monitor_uri(id: &str) -> String {
    format!("/redfish/v1/TaskService/TaskMonitors/{id}")
}

pub(crate) fn task(task: &Task) -> Value {
    let mut body = resource(
        csdl::TASK,
        &task_uri(&task.id),
        json!({
            "Id": task.id,
            "Name": task.name,
            "TaskState": task.state.as_str(),
            "TaskStatus": if task.failure.is_some() { "Critical" } else { "OK" },
            "StartTime": timestamp(task.start),
            "TaskMonitor": task_monitor_uri(&task.id),
            "PercentComplete": if task.end.is_some() { 100 } else { 0 },
            "Messages": task.failure.iter().map(|f| f.body()["error"]["@Message.ExtendedInfo"][0].clone()).collect::<Vec<_>>(),
        }),
    );
    if let (Some(end), Value::Object(fields)) = (task.end, &mut body) {
        fields.insert("EndTime".into(), timestamp(end).into());
    }
    body
}

/// An `Edm.DateTimeOffset` with whole seconds.
fn timestamp(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S+00:00").to_string()
}
