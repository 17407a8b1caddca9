//! Kubernetes for the components' tests: the embedded API server in virtual time with
//! Rackproof's CRDs installed ([`simulated_cluster`]), and a client that injects faults between
//! a component and that server ([`faults`]).

pub mod faults;

use inplace_api::crd::crds;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use rackproof_apiserver::ApiServer;
use rackproof_clock::Clock;

/// The moment every simulated cluster starts at.
pub const EPOCH: &str = "2026-01-01T00:00:00Z";

/// A fresh embedded API server on a simulated clock starting at [`EPOCH`], its admin client, and
/// the clock; every CRD of `inplace_api::crd` is installed.
pub async fn simulated_cluster() -> (ApiServer, Client, Clock) {
    let clock = Clock::simulated(EPOCH.parse().expect("EPOCH is a timestamp"));
    let server = ApiServer::new(clock.clone());
    let client = server.admin_client();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds() {
        api.create(&PostParams::default(), &crd)
            .await
            .expect("install CRD");
    }
    (server, client, clock)
}
