//! Starting a control plane for a test, and reading its answers.

pub(crate) use std::path::Path;
pub(crate) use std::time::Duration;

pub(crate) use k8s_openapi::api::coordination::v1::Lease;
pub(crate) use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
pub(crate) use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub(crate) use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
pub(crate) use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
pub(crate) use rackproof_clock::Clock;
pub(crate) use rackproof_cluster::local::{
    ControllerManagerOptions, Decision, Error, LocalControlPlane, LocalOptions, NodeAuthorizer,
    User,
};
pub(crate) use rackproof_std::error_chain;
pub(crate) use serde_json::json;

pub(crate) async fn start(options: LocalOptions) -> LocalControlPlane {
    LocalControlPlane::start(options)
        .await
        .unwrap_or_else(|error| panic!("{}", error_chain(&error)))
}

pub(crate) fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

pub(crate) fn process_exists(pid: u32) -> bool {
    // A zombie still has a /proc entry; a reaped process has none.
    Path::new(&format!("/proc/{pid}")).exists()
}

pub(crate) fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}
