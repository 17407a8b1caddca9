//! BMC clients from node descriptions: a [`BmcDescription`] (Redfish or IPMI, endpoint, TLS
//! policy, credentials reference) becomes a [`SharedMachine`] — the Redfish client or the native
//! IPMI client behind the driver traits. Emulated and physical nodes go through this same code:
//! an emulator in front of a sim, QEMU or libvirt machine is just another endpoint.
//!
//! 1. [`resolve_credentials`] reads the credentials from the environment or a file (never from
//!    the inventory itself); errors name the variable or file, never the secret.
//! 2. [`connect`] builds the client: Redfish discovers the service and logs in at once (so a bad
//!    endpoint or password shows here); IPMI resolves the address and opens its session on the
//!    first call.
//! 3. [`DryRunPower`] stands in for the client in dry-run mode: it records and prints each BMC
//!    action instead of taking it.

mod credentials;
mod dry_run;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use rackproof_clock::Clock;
use rackproof_driver::SharedMachine;
use rackproof_redfish::{Endpoint, RedfishClient, RedfishError, TlsPolicy};

pub use self::credentials::{BmcCredentials, CredentialsError, resolve_credentials};
pub use self::dry_run::{BmcAction, DryRunPower, DryRunSink};
use crate::env::Env;
use crate::resource::{BmcDescription, BmcKind, NodeDescription};

/// The default IPMI-over-LAN port.
pub const IPMI_PORT: u16 = 623;

/// Knobs for the BMC clients (the defaults suit real BMCs).
#[derive(Debug, Clone, Default)]
pub struct BmcOptions {
    pub redfish: rackproof_redfish::ClientOptions,
    pub ipmi: rackproof_ipmi::ClientOptions,
}

/// A BMC client that could not be built. Messages name the node and endpoint, never secrets.
#[derive(Debug, thiserror::Error)]
pub enum BmcError {
    #[error("node {node}: no bmc in the inventory")]
    NoBmc { node: String },
    #[error("node {node}: resolve BMC credentials")]
    Credentials {
        node: String,
        #[source]
        source: CredentialsError,
    },
    #[error("node {node}: read the BMC CA bundle {}", path.display())]
    CaRead {
        node: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("node {node}: connect to redfish BMC {endpoint}")]
    Redfish {
        node: String,
        endpoint: String,
        #[source]
        source: RedfishError,
    },
    #[error("node {node}: credentials for ipmi BMC {endpoint}")]
    IpmiCredentials {
        node: String,
        endpoint: String,
        #[source]
        source: rackproof_ipmi::CredentialsError,
    },
    #[error("node {node}: ipmi endpoint {endpoint:?}: {problem}")]
    IpmiEndpoint {
        node: String,
        endpoint: String,
        problem: String,
    },
    #[error("node {node}: resolve ipmi BMC {endpoint}")]
    Resolve {
        node: String,
        endpoint: String,
        #[source]
        source: std::io::Error,
    },
}

/// `kind endpoint`, e.g. `redfish https://10.0.0.11`, for messages.
pub fn describe(bmc: &BmcDescription) -> String {
    let kind = match bmc.kind {
        BmcKind::Redfish => "redfish",
        BmcKind::Ipmi => "ipmi",
    };
    format!("{kind} {}", bmc.endpoint)
}

/// Resolves `node`'s credentials in `env` and connects to its BMC.
pub async fn connect_node(
    node: &NodeDescription,
    env: &Env,
    options: &BmcOptions,
    clock: Clock,
) -> Result<SharedMachine, BmcError> {
    let bmc = node.bmc.as_ref().ok_or_else(|| BmcError::NoBmc {
        node: node.name.clone(),
    })?;
    let credentials =
        resolve_credentials(&bmc.credentials, env).map_err(|source| BmcError::Credentials {
            node: node.name.clone(),
            source,
        })?;
    connect(&node.name, bmc, credentials, options, clock).await
}

/// Builds the client for `bmc` (see the module docs).
pub async fn connect(
    node: &str,
    bmc: &BmcDescription,
    credentials: BmcCredentials,
    options: &BmcOptions,
    clock: Clock,
) -> Result<SharedMachine, BmcError> {
    match bmc.kind {
        BmcKind::Redfish => {
            let tls = match (&bmc.ca_path, bmc.insecure_skip_tls_verify) {
                (_, true) => TlsPolicy::InsecureSkipVerify,
                (Some(path), false) => TlsPolicy::CustomCa {
                    pem: std::fs::read_to_string(path).map_err(|source| BmcError::CaRead {
                        node: node.to_owned(),
                        path: path.clone(),
                        source,
                    })?,
                },
                (None, false) => TlsPolicy::Verify,
            };
            let endpoint = Endpoint::new(&bmc.endpoint).with_tls(tls);
            let client = RedfishClient::connect(
                &endpoint,
                rackproof_redfish::Credentials::new(credentials.username(), credentials.password()),
                options.redfish.clone(),
                clock,
            )
            .await
            .map_err(|source| BmcError::Redfish {
                node: node.to_owned(),
                endpoint: bmc.endpoint.clone(),
                source,
            })?;
            Ok(Arc::new(client))
        }
        BmcKind::Ipmi => {
            let ipmi_credentials =
                rackproof_ipmi::Credentials::new(credentials.username(), credentials.password())
                    .map_err(|source| BmcError::IpmiCredentials {
                        node: node.to_owned(),
                        endpoint: bmc.endpoint.clone(),
                        source,
                    })?;
            let addr = resolve_ipmi(node, &bmc.endpoint).await?;
            Ok(Arc::new(rackproof_ipmi::IpmiClient::with_options(
                addr,
                ipmi_credentials,
                options.ipmi.clone(),
                clock,
            )))
        }
    }
}

/// `host`, `host:port`, `ip`, `[ipv6]:port` → one socket address.
async fn resolve_ipmi(node: &str, endpoint: &str) -> Result<SocketAddr, BmcError> {
    let (host, port) = split_host_port(endpoint).map_err(|problem| BmcError::IpmiEndpoint {
        node: node.to_owned(),
        endpoint: endpoint.to_owned(),
        problem: problem.to_owned(),
    })?;
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let resolve_err = |source| BmcError::Resolve {
        node: node.to_owned(),
        endpoint: endpoint.to_owned(),
        source,
    };
    let mut addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(resolve_err)?;
    addrs.next().ok_or_else(|| {
        resolve_err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no address",
        ))
    })
}

fn split_host_port(endpoint: &str) -> Result<(&str, u16), &'static str> {
    if endpoint.parse::<IpAddr>().is_ok() {
        return Ok((endpoint, IPMI_PORT));
    }
    let (host, port) = if let Some(rest) = endpoint.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("unclosed '['")?;
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return Err("expected `[address]:port`"),
        }
    } else {
        match endpoint.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (endpoint, None),
        }
    };
    if host.is_empty() {
        return Err("no host");
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or("the port must be a number from 1 to 65535")?,
        None => IPMI_PORT,
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipmi_endpoints_split_into_host_and_port() {
        assert_eq!(split_host_port("10.0.0.1"), Ok(("10.0.0.1", 623)));
        assert_eq!(split_host_port("bmc1:6230"), Ok(("bmc1", 6230)));
        assert_eq!(split_host_port("::1"), Ok(("::1", 623)));
        assert_eq!(split_host_port("[::1]:700"), Ok(("::1", 700)));
        assert!(split_host_port("bmc1:x").is_err());
        assert!(split_host_port("bmc1:0").is_err());
        assert!(split_host_port(":623").is_err());
    }
}
