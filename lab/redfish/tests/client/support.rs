//! Serving the emulator on 127.0.0.1, connecting the client to it, and reading its journal.

pub(crate) use std::sync::Arc;
pub(crate) use std::time::Duration;

pub(crate) use crate::common;
pub(crate) use crate::common::{PASSWORD, TestMachine, USER};
pub(crate) use rackproof_clock::Clock;
pub(crate) use rackproof_driver::{
    BootControl, BootOverride, BootOverrideMode, BootTarget, DriverError, Power, PowerState,
    ResetAction,
};
pub(crate) use rackproof_redfish::emulator::RequestRecord;
pub(crate) use rackproof_redfish::{
    AuthMode, ClientOptions, Credentials, Emulator, EmulatorConfig, Endpoint, FaultRule, Quirks,
    RedfishClient, RedfishError, RetryPolicy, RunningEmulator, TlsPolicy, VendorProfile,
};

pub(crate) const SYSTEM: &str = "/redfish/v1/Systems/1";
pub(crate) const RESET: &str = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset";
pub(crate) const SESSIONS: &str = "/redfish/v1/SessionService/Sessions";

pub(crate) fn options() -> ClientOptions {
    ClientOptions {
        retry: RetryPolicy {
            attempts: 4,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(40),
        },
        poll_interval: Duration::from_millis(10),
        power_on_grace: Duration::from_millis(300),
        request_timeout: Duration::from_secs(10),
        task_timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    }
}

pub(crate) async fn serve(machine: Arc<TestMachine>) -> (Emulator, RunningEmulator) {
    let emulator = common::emulator(machine, Clock::wall());
    let running = emulator
        .serve_https("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (emulator, running)
}

pub(crate) fn endpoint(running: &RunningEmulator) -> Endpoint {
    Endpoint::new(&running.url()).with_tls(TlsPolicy::CustomCa {
        pem: running.ca_pem().unwrap().to_owned(),
    })
}

pub(crate) async fn connect_with(
    running: &RunningEmulator,
    options: ClientOptions,
) -> RedfishClient {
    RedfishClient::connect(
        &endpoint(running),
        Credentials::new(USER, PASSWORD),
        options,
        Clock::wall(),
    )
    .await
    .unwrap()
}

pub(crate) async fn connect(running: &RunningEmulator) -> RedfishClient {
    connect_with(running, options()).await
}

pub(crate) fn count(journal: &[RequestRecord], method: &str, path: &str) -> usize {
    journal
        .iter()
        .filter(|r| r.method == method && r.path == path)
        .count()
}

pub(crate) fn resets(journal: &[RequestRecord]) -> Vec<(ResetAction, u16)> {
    journal
        .iter()
        .filter(|r| r.path == RESET)
        .map(|r| (r.reset_type.unwrap(), r.status))
        .collect()
}
