//! The native RMCP+ client for physical (and emulated) BMCs, implementing
//! [`Power`] and [`BootControl`].
//!
//! One session is kept open across calls and re-opened once when the BMC stops answering in it
//! (sessions expire on the BMC after a minute or so without traffic). Every request waits
//! [`ClientOptions::timeout`] per attempt and is sent [`ClientOptions::retries`] more times
//! before failing; a retry may repeat a power action the BMC did carry out, as with ipmitool.
//!
//! Errors name the BMC's address, never the user name or password.

mod connection;

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
use rackproof_clock::Clock;
use rackproof_driver::{
    BootControl, BootOverride, BootTarget, DriverError, Power, PowerState, ResetAction,
};
use tokio::sync::Mutex;

use crate::codec::command::{
    BootFlags, BootOptionResponse, BootParameter, ChassisControl, ChassisStatus, CompletionCode,
    DeviceId, MachineRequest, Privilege, Request,
};
use crate::codec::rakp::RakpStatus;
use crate::credentials::Credentials;
use crate::handler::{boot_flags, boot_override, chassis_control};
use connection::Connection;

/// How the client talks to a BMC.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long to wait for each reply before sending the request again.
    pub timeout: Duration,
    /// How many times to send a request again before giving up.
    pub retries: u32,
    /// A fixed cipher suite (3 or 17); `None` asks the BMC and picks 17 over 3.
    pub cipher_suite: Option<u8>,
    /// The session privilege to work at; power and boot control need Operator.
    pub privilege: Privilege,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(2),
            retries: 2,
            cipher_suite: None,
            privilege: Privilege::Administrator,
        }
    }
}

/// What went wrong talking to a BMC. Messages never carry credentials.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("failed to talk to IPMI BMC {bmc}")]
    Io {
        bmc: SocketAddr,
        source: std::io::Error,
    },
    #[error("IPMI BMC {bmc} did not answer {what} within {}", rackproof_clock::format_duration(*after))]
    NoResponse {
        bmc: SocketAddr,
        what: &'static str,
        after: Duration,
    },
    #[error("IPMI BMC {bmc} sent a malformed reply: {detail}")]
    Protocol { bmc: SocketAddr, detail: String },
    #[error("IPMI BMC {bmc} does not offer IPMI v2.0 (RMCP+)")]
    NoIpmi20 { bmc: SocketAddr },
    #[error("cipher suite {id} is not supported; use 3 or 17")]
    UnsupportedCipherSuite { id: u8 },
    #[error("IPMI BMC {bmc} offers neither cipher suite 17 nor 3")]
    NoCommonCipherSuite { bmc: SocketAddr },
    #[error("IPMI BMC {bmc} refused the session at {stage}: {}", status.describe())]
    SessionRefused {
        bmc: SocketAddr,
        stage: &'static str,
        status: RakpStatus,
    },
    #[error(
        "IPMI BMC {bmc} does not know the configured password (its RAKP 2 proof does not match)"
    )]
    WrongPassword { bmc: SocketAddr },
    #[error(
        "IPMI BMC {bmc} sent a RAKP 4 integrity check value that does not match the session keys"
    )]
    BmcProofInvalid { bmc: SocketAddr },
    #[error("IPMI BMC {bmc} answered {command} with completion code {:#04x} ({})", code.0, code.describe())]
    Completion {
        bmc: SocketAddr,
        command: &'static str,
        code: CompletionCode,
    },
}

/// A client for one BMC.
#[derive(Debug)]
pub struct IpmiClient {
    bmc: SocketAddr,
    credentials: Credentials,
    options: ClientOptions,
    clock: Clock,
    connection: Mutex<Option<Connection>>,
}

impl IpmiClient {
    /// A client for the BMC at `bmc` (port 623 on real hardware). Nothing is sent until the first
    /// call.
    pub fn new(bmc: SocketAddr, credentials: Credentials, clock: Clock) -> Self {
        Self::with_options(bmc, credentials, ClientOptions::default(), clock)
    }

    pub fn with_options(
        bmc: SocketAddr,
        credentials: Credentials,
        options: ClientOptions,
        clock: Clock,
    ) -> Self {
        Self {
            bmc,
            credentials,
            options,
            clock,
            connection: Mutex::new(None),
        }
    }

    /// The BMC's address.
    pub fn bmc(&self) -> SocketAddr {
        self.bmc
    }

    /// Sends `request` in a session (opening one if needed, re-opening once if the BMC stopped
    /// answering in the old one); returns the response data, or the completion code as an error.
    async fn call(&self, request: Request, what: &'static str) -> Result<Vec<u8>, ClientError> {
        let mut guard = self.connection.lock().await;
        if guard.is_none() {
            *guard = Some(Connection::connect(self.bmc).await?);
        }
        let connection = guard.as_mut().ok_or(ClientError::Protocol {
            bmc: self.bmc,
            detail: "no connection".to_owned(),
        })?;
        let mut reopened = false;
        loop {
            if !connection.has_session() {
                connection
                    .open_session(&self.credentials, &self.options, &self.clock)
                    .await?;
                reopened = true;
            }
            match connection
                .request(&self.options, &self.clock, &request, what)
                .await
            {
                Ok((0, data)) => return Ok(data),
                Ok((code, _)) => {
                    return Err(ClientError::Completion {
                        bmc: self.bmc,
                        command: what,
                        code: CompletionCode(code),
                    });
                }
                Err(ClientError::NoResponse { .. }) if !reopened => {
                    tracing::debug!(bmc = %self.bmc, "IPMI session went quiet; opening a new one");
                    connection.forget_session();
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Checks that the BMC answers an ASF presence ping and supports IPMI.
    pub async fn ping(&self) -> Result<bool, ClientError> {
        use crate::codec::rmcp::AsfMessage;
        let socket = tokio::net::UdpSocket::bind(if self.bmc.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        })
        .await
        .map_err(|source| ClientError::Io {
            bmc: self.bmc,
            source,
        })?;
        socket
            .connect(self.bmc)
            .await
            .map_err(|source| ClientError::Io {
                bmc: self.bmc,
                source,
            })?;
        let tag = rand::random();
        let mut buffer = [0u8; 512];
        for _ in 0..=self.options.retries {
            socket
                .send(&AsfMessage::Ping { tag }.encode())
                .await
                .map_err(|source| ClientError::Io {
                    bmc: self.bmc,
                    source,
                })?;
            let deadline = self.clock.instant() + self.options.timeout;
            loop {
                let remaining = deadline.saturating_duration_since(self.clock.instant());
                let Ok(Ok(len)) = self
                    .clock
                    .timeout(remaining, socket.recv(&mut buffer))
                    .await
                else {
                    break;
                };
                let Ok((crate::codec::rmcp::RmcpClass::Asf, body)) =
                    crate::codec::rmcp::split(&buffer[..len])
                else {
                    continue;
                };
                if let Ok(AsfMessage::Pong {
                    tag: got,
                    ipmi_supported,
                }) = AsfMessage::decode(body)
                    && got == tag
                {
                    return Ok(ipmi_supported);
                }
            }
        }
        Err(ClientError::NoResponse {
            bmc: self.bmc,
            what: "ASF presence ping",
            after: self.options.timeout * (self.options.retries + 1),
        })
    }

    /// Get Device ID (what `ipmitool mc info` shows).
    pub async fn device_id(&self) -> Result<DeviceId, ClientError> {
        let data = self
            .call(
                Request::Machine(MachineRequest::GetDeviceId),
                "Get Device ID",
            )
            .await?;
        DeviceId::decode(&data).map_err(|e| ClientError::Protocol {
            bmc: self.bmc,
            detail: e.to_string(),
        })
    }

    /// Get Chassis Status.
    pub async fn chassis_status(&self) -> Result<ChassisStatus, ClientError> {
        let data = self
            .call(
                Request::Machine(MachineRequest::GetChassisStatus),
                "Get Chassis Status",
            )
            .await?;
        ChassisStatus::decode(&data).map_err(|e| ClientError::Protocol {
            bmc: self.bmc,
            detail: e.to_string(),
        })
    }

    /// Chassis Control.
    pub async fn chassis_control(&self, control: ChassisControl) -> Result<(), ClientError> {
        self.call(
            Request::Machine(MachineRequest::ChassisControl(control)),
            "Chassis Control",
        )
        .await
        .map(drop)
    }

    /// The boot flags (boot option parameter 5).
    pub async fn boot_flags(&self) -> Result<BootFlags, ClientError> {
        let request = Request::Machine(MachineRequest::GetSystemBootOptions {
            parameter: BootParameter::BOOT_FLAGS,
            set_selector: 0,
            block_selector: 0,
        });
        let data = self.call(request, "Get System Boot Options").await?;
        let protocol = |detail: String| ClientError::Protocol {
            bmc: self.bmc,
            detail,
        };
        let option = BootOptionResponse::decode(&data).map_err(|e| protocol(e.to_string()))?;
        if option.parameter != BootParameter::BOOT_FLAGS {
            return Err(protocol(format!(
                "asked for boot option 5, got {}",
                option.parameter
            )));
        }
        BootFlags::decode(&option.data).map_err(|e| protocol(e.to_string()))
    }

    /// Sets the boot flags inside a set-in-progress bracket, as ipmitool does.
    pub async fn set_boot_flags(&self, flags: BootFlags) -> Result<(), ClientError> {
        let set = |parameter| Request::Machine(MachineRequest::SetSystemBootOptions(parameter));
        // The lock is advisory: a BMC that lacks it or holds a stale one still takes the flags.
        if let Err(error) = self
            .call(
                set(BootParameter::SetInProgress(1)),
                "Set System Boot Options",
            )
            .await
        {
            tracing::debug!(%error, "set-in-progress refused; setting boot flags anyway");
        }
        let result = self
            .call(
                set(BootParameter::BootFlags(flags)),
                "Set System Boot Options",
            )
            .await;
        if let Err(error) = self
            .call(
                set(BootParameter::SetInProgress(0)),
                "Set System Boot Options",
            )
            .await
        {
            tracing::debug!(%error, "set-complete refused");
        }
        result.map(drop)
    }

    /// Closes the session, if one is open.
    pub async fn close(&self) {
        let mut guard = self.connection.lock().await;
        if let Some(connection) = guard.as_mut() {
            connection.close_session(&self.options, &self.clock).await;
        }
    }

    fn target(&self) -> String {
        format!("IPMI BMC {}", self.bmc)
    }

    fn driver_error(&self, action: &str, error: ClientError) -> DriverError {
        match &error {
            ClientError::Completion { code, .. }
                if *code == CompletionCode::INVALID_DATA_FIELD
                    || *code == CompletionCode::INVALID_COMMAND =>
            {
                DriverError::Unsupported {
                    action: action.to_owned(),
                    target: self.target(),
                }
            }
            ClientError::Completion { code, .. }
                if *code == CompletionCode::NOT_SUPPORTED_IN_PRESENT_STATE =>
            {
                DriverError::Refused {
                    action: action.to_owned(),
                    target: self.target(),
                    reason: code.describe().to_owned(),
                }
            }
            _ => DriverError::Failed {
                target: self.target(),
                message: action.to_owned(),
                source: Some(Box::new(error)),
            },
        }
    }
}

/// The reset actions IPMI's Chassis Control expresses.
const ALLOWED_RESETS: [ResetAction; 6] = [
    ResetAction::On,
    ResetAction::ForceOff,
    ResetAction::GracefulShutdown,
    ResetAction::ForceRestart,
    ResetAction::PowerCycle,
    ResetAction::Nmi,
];

#[async_trait]
impl Power for IpmiClient {
    async fn power_state(&self) -> Result<PowerState, DriverError> {
        let status = self
            .chassis_status()
            .await
            .map_err(|e| self.driver_error("power status", e))?;
        Ok(if status.power_on {
            PowerState::On
        } else {
            PowerState::Off
        })
    }

    async fn reset(&self, action: ResetAction) -> Result<(), DriverError> {
        let Some(control) = chassis_control(action) else {
            return Err(DriverError::Unsupported {
                action: action.to_string(),
                target: self.target(),
            });
        };
        if action == ResetAction::On && self.power_state().await? == PowerState::On {
            return Ok(());
        }
        self.chassis_control(control)
            .await
            .map_err(|e| self.driver_error(action.as_str(), e))
    }

    fn allowed_resets(&self) -> Vec<ResetAction> {
        ALLOWED_RESETS.to_vec()
    }
}

#[async_trait]
impl BootControl for IpmiClient {
    async fn boot_override(&self) -> Result<BootOverride, DriverError> {
        let flags = self
            .boot_flags()
            .await
            .map_err(|e| self.driver_error("get boot override", e))?;
        boot_override(&flags).map_err(|_| DriverError::Failed {
            target: self.target(),
            message: format!(
                "boot device {:?} has no boot override equivalent",
                flags.device
            ),
            source: None,
        })
    }

    async fn set_boot_override(&self, setting: BootOverride) -> Result<(), DriverError> {
        if setting.target == BootTarget::UefiHttp {
            return Err(DriverError::Unsupported {
                action: "boot override UefiHttp".to_owned(),
                target: self.target(),
            });
        }
        self.set_boot_flags(boot_flags(setting))
            .await
            .map_err(|e| self.driver_error("set boot override", e))
    }
}
