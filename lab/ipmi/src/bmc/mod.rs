//! The BMC core: one datagram in, at most one datagram out. It owns the RMCP+ session table
//! and hands machine commands to the transport-free [`CommandHandler`]; the UDP server in
//! [`crate::emulator`] only moves bytes.
//!
//! Session establishment, as the BMC runs it:
//!
//! 1. Open Session Request: the proposed algorithms must form cipher suite 3 or 17 (else status
//!    "no cipher suite match"); a session ID is allocated.
//! 2. RAKP 1: the user name must be the configured one (else "unauthorized name", session
//!    dropped) and the requested role no higher than granted; RAKP 2 carries the BMC's random
//!    number, GUID and proof of the password.
//! 3. RAKP 3: the console's proof must match the password (else "invalid integrity check
//!    value", session dropped); a console that found our RAKP 2 proof wrong (a wrong password
//!    on its side) reports that status and the session is dropped. RAKP 4 carries the integrity
//!    check value, and the session becomes active at User privilege.
//! 4. Active: every packet must be authenticated and encrypted with the session keys and carry a
//!    fresh sequence number; anything else is dropped silently, as BMCs do.
//!
//! Malformed datagrams never produce a reply, never panic, and never disturb other sessions.
//! Each machine command runs in a `bmc_request{bmc, command}` span ([`BmcConfig::name`] is
//! `bmc`), so the lines logged while executing it name the BMC and the command.

mod sessions;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_driver::SharedMachine;
use rackproof_std::LockExt;
use tracing::Instrument;

use crate::codec::command::{
    AuthCapabilities, CIPHER_SUITE_CHUNK, CURRENT_CHANNEL, CipherSuiteRecord, CompletionCode,
    DeviceId, LAN_CHANNEL, MachineRequest, Privilege, Request, SessionRequest,
};
use crate::codec::message::{RequestMessage, ResponseMessage};
use crate::codec::rakp::{
    AcceptedSession, OpenSessionRequest, OpenSessionResponse, Rakp1, Rakp2, Rakp2Challenge, Rakp3,
    Rakp4, RakpStatus,
};
use crate::codec::rmcp::{self, AsfMessage, RmcpClass};
use crate::codec::session::{self, PayloadType, SessionPacket, V15Packet, V20Header, V20Packet};
use crate::credentials::Credentials;
use crate::crypto::{CipherSuite, Handshake, SUPPORTED_SUITES, SessionKeys};
use crate::handler::{CommandHandler, DEFAULT_DEVICE_ID};
use crate::secure::{self, SequenceWindow};
use sessions::{Active, Session, Sessions, Stage};

/// How a BMC presents itself and whom it lets in.
#[derive(Debug, Clone)]
pub struct BmcConfig {
    /// What log lines call this BMC (the `bmc` of their `bmc_request` spans): the lab node it
    /// belongs to.
    pub name: String,
    /// The one user this BMC knows; it holds Administrator privilege.
    pub credentials: Credentials,
    pub device_id: DeviceId,
    /// The BMC GUID sent in RAKP 2.
    pub guid: [u8; 16],
    /// Sessions idle for longer are dropped (IPMI's customary 60 s).
    pub session_timeout: Duration,
    /// Open Session requests beyond this many sessions get "insufficient resources".
    pub max_sessions: usize,
}

impl BmcConfig {
    /// Defaults for everything but the user: named `bmc` (set [`BmcConfig::name`] to the node's
    /// name), a random GUID, 60 s session timeout, 16 sessions.
    pub fn new(credentials: Credentials) -> Self {
        Self {
            name: "bmc".to_owned(),
            credentials,
            device_id: DEFAULT_DEVICE_ID,
            guid: rand::random(),
            session_timeout: Duration::from_secs(60),
            max_sessions: 16,
        }
    }
}

/// The BMC: session layer plus command handler, without transport.
#[derive(Debug)]
pub struct Bmc {
    config: BmcConfig,
    handler: CommandHandler,
    clock: Clock,
    sessions: Mutex<Sessions>,
}

/// What the session layer decided under its lock.
enum Decision {
    Reply(ResponseMessage),
    Machine(RequestMessage, MachineRequest),
}

impl Bmc {
    pub fn new(machine: SharedMachine, config: BmcConfig, clock: Clock) -> Self {
        let handler = CommandHandler::new(machine, config.device_id);
        Self {
            config,
            handler,
            clock,
            sessions: Mutex::new(Sessions::default()),
        }
    }

    /// The number of sessions that completed RAKP and are still open.
    pub fn active_sessions(&self) -> usize {
        self.sessions().active()
    }

    /// Every session, including those still in the RAKP handshake.
    pub fn sessions_including_handshakes(&self) -> usize {
        self.sessions().len()
    }

    fn sessions(&self) -> MutexGuard<'_, Sessions> {
        let mut sessions = self.sessions.locked();
        sessions.expire(self.clock.instant(), self.config.session_timeout);
        sessions
    }

    /// Handles one datagram and returns the reply to send, if any.
    pub async fn handle_datagram(&self, datagram: &[u8]) -> Option<Vec<u8>> {
        let (class, body) = rmcp::split(datagram)
            .map_err(|e| tracing::debug!(error = %e, "dropping datagram"))
            .ok()?;
        match class {
            RmcpClass::Asf => match AsfMessage::decode(body) {
                Ok(AsfMessage::Ping { tag }) => Some(
                    AsfMessage::Pong {
                        tag,
                        ipmi_supported: true,
                    }
                    .encode(),
                ),
                Ok(AsfMessage::Pong { .. }) => None,
                Err(error) => {
                    tracing::debug!(%error, "dropping ASF message");
                    None
                }
            },
            RmcpClass::Ipmi => match session::decode(body) {
                Ok(SessionPacket::V15(packet)) => self.v15(&packet),
                Ok(SessionPacket::V20(packet)) => self.v20(&packet).await,
                Err(error) => {
                    tracing::debug!(%error, "dropping IPMI datagram");
                    None
                }
            },
        }
    }

    /// IPMI v1.5 without a session: only the pre-session discovery commands.
    fn v15(&self, packet: &V15Packet<'_>) -> Option<Vec<u8>> {
        if packet.session_id != 0 {
            return None;
        }
        let request = RequestMessage::decode(packet.message).ok()?;
        let response = self.presession(&request);
        session::encode_v15(0, 0, &response.encode()).ok()
    }

    async fn v20(&self, packet: &V20Packet<'_>) -> Option<Vec<u8>> {
        let header = &packet.header;
        if header.session_id == 0 {
            if header.authenticated || header.encrypted || packet.expect_no_trailer().is_err() {
                return None;
            }
            return match header.payload_type {
                PayloadType::Ipmi => {
                    let request = RequestMessage::decode(packet.payload).ok()?;
                    let response = self.presession(&request);
                    unprotected(PayloadType::Ipmi, &response.encode())
                }
                PayloadType::OpenSessionRequest => self.open_session(packet.payload),
                PayloadType::Rakp1 => self.rakp1(packet.payload),
                PayloadType::Rakp3 => self.rakp3(packet.payload),
                _ => None,
            };
        }
        if header.payload_type != PayloadType::Ipmi {
            return None;
        }
        self.in_session(packet).await
    }

    /// Answers a request outside any session.
    fn presession(&self, request: &RequestMessage) -> ResponseMessage {
        match Request::decode(request.netfn, request.cmd, &request.data) {
            Ok(Request::Session(
                query @ (SessionRequest::GetChannelAuthCapabilities { .. }
                | SessionRequest::GetChannelCipherSuites { .. }),
            )) => match channel_query(&query) {
                Ok(data) => request.respond(CompletionCode::OK.0, data),
                Err(code) => request.respond(code.0, vec![]),
            },
            Ok(_) => request.respond(CompletionCode::INSUFFICIENT_PRIVILEGE.0, vec![]),
            Err(error) => request.respond(error.completion_code().0, vec![]),
        }
    }

    fn open_session(&self, payload: &[u8]) -> Option<Vec<u8>> {
        let request = OpenSessionRequest::decode(payload)
            .map_err(|e| tracing::debug!(error = %e, "dropping Open Session Request"))
            .ok()?;
        let refuse = |status: RakpStatus| {
            tracing::debug!(status = status.describe(), "refusing Open Session Request");
            let response = OpenSessionResponse {
                tag: request.tag,
                status,
                max_privilege: 0,
                console_session_id: request.console_session_id,
                accepted: None,
            };
            unprotected(PayloadType::OpenSessionResponse, &response.encode())
        };
        let Some(suite) = CipherSuite::from_algorithms(&request.algorithms) else {
            return refuse(RakpStatus::NO_CIPHER_SUITE_MATCH);
        };
        let max_privilege = match request.max_privilege {
            0 => Privilege::Administrator,
            code => match Privilege::from_code(code) {
                Some(p) if p <= Privilege::Administrator => p,
                _ => return refuse(RakpStatus::INVALID_ROLE),
            },
        };
        let mut sessions = self.sessions();
        if sessions.len() >= self.config.max_sessions {
            return refuse(RakpStatus::INSUFFICIENT_RESOURCES);
        }
        let bmc_session_id = sessions.unused_id();
        sessions.insert(
            bmc_session_id,
            Session {
                console_session_id: request.console_session_id,
                suite,
                max_privilege,
                last_activity: self.clock.instant(),
                stage: Stage::Opened,
            },
        );
        let response = OpenSessionResponse {
            tag: request.tag,
            status: RakpStatus::NO_ERRORS,
            max_privilege: max_privilege.code(),
            console_session_id: request.console_session_id,
            accepted: Some(AcceptedSession {
                bmc_session_id,
                algorithms: suite.algorithms(),
            }),
        };
        unprotected(PayloadType::OpenSessionResponse, &response.encode())
    }

    fn rakp1(&self, payload: &[u8]) -> Option<Vec<u8>> {
        let mut sessions = self.sessions();
        let (rakp1, session) = match Rakp1::decode(payload) {
            Ok(rakp1) => {
                let session = sessions.get_mut(rakp1.bmc_session_id);
                (rakp1, session)
            }
            Err(error) => {
                tracing::debug!(%error, "refusing RAKP 1");
                let status = if payload.len() > 27
                    && usize::from(payload[27]) > crate::codec::rakp::MAX_USERNAME_LEN
                {
                    RakpStatus::INVALID_NAME_LENGTH
                } else {
                    RakpStatus::ILLEGAL_PARAMETER
                };
                let tag = *payload.first()?;
                let bmc_session_id = u32::from_le_bytes(payload.get(4..8)?.try_into().ok()?);
                let console_session_id = sessions
                    .get_mut(bmc_session_id)
                    .map_or(0, |s| s.console_session_id);
                sessions.remove(bmc_session_id);
                return rakp2_error(tag, status, console_session_id);
            }
        };
        let Some(session) = session else {
            return rakp2_error(rakp1.tag, RakpStatus::INVALID_SESSION_ID, 0);
        };
        if matches!(session.stage, Stage::Active(_)) {
            return None;
        }
        let console_session_id = session.console_session_id;
        let refusal = match Privilege::from_code(rakp1.role & 0x0f) {
            None | Some(Privilege::Oem) => Some(RakpStatus::INVALID_ROLE),
            Some(p) if p > session.max_privilege => Some(RakpStatus::UNAUTHORIZED_ROLE),
            Some(_) if rakp1.username != self.config.credentials.username() => {
                Some(RakpStatus::UNAUTHORIZED_NAME)
            }
            Some(_) => None,
        };
        if let Some(status) = refusal {
            tracing::info!(status = status.describe(), "IPMI login refused");
            sessions.remove(rakp1.bmc_session_id);
            return rakp2_error(rakp1.tag, status, console_session_id);
        }
        let limit = Privilege::from_code(rakp1.role & 0x0f)?;
        let handshake = Handshake {
            suite: session.suite,
            console_session_id,
            bmc_session_id: rakp1.bmc_session_id,
            console_random: rakp1.console_random,
            bmc_random: rand::random(),
            bmc_guid: self.config.guid,
            role: rakp1.role,
            username: rakp1.username.clone(),
        };
        let challenge = Rakp2Challenge {
            bmc_random: handshake.bmc_random,
            bmc_guid: handshake.bmc_guid,
            auth_code: handshake.rakp2_auth_code(&self.config.credentials.user_key()),
        };
        session.stage = Stage::Challenged { handshake, limit };
        session.last_activity = self.clock.instant();
        let rakp2 = Rakp2 {
            tag: rakp1.tag,
            status: RakpStatus::NO_ERRORS,
            console_session_id,
            challenge: Some(challenge),
        };
        unprotected(PayloadType::Rakp2, &rakp2.encode())
    }

    fn rakp3(&self, payload: &[u8]) -> Option<Vec<u8>> {
        let rakp3 = Rakp3::decode(payload)
            .map_err(|e| tracing::debug!(error = %e, "dropping RAKP 3"))
            .ok()?;
        let mut sessions = self.sessions();
        let reply = |status: RakpStatus, console_session_id: u32, icv: Vec<u8>| {
            let rakp4 = Rakp4 {
                tag: rakp3.tag,
                status,
                console_session_id,
                integrity_check_value: icv,
            };
            unprotected(PayloadType::Rakp4, &rakp4.encode())
        };
        let Some(session) = sessions.get_mut(rakp3.bmc_session_id) else {
            return reply(RakpStatus::INVALID_SESSION_ID, 0, vec![]);
        };
        let console_session_id = session.console_session_id;
        let Stage::Challenged { handshake, limit } = &session.stage else {
            return reply(RakpStatus::INVALID_SESSION_ID, console_session_id, vec![]);
        };
        let key = self.config.credentials.user_key();
        if rakp3.status != RakpStatus::NO_ERRORS {
            // The console rejected our RAKP 2 (its password differs from ours); it waits for
            // nothing, but a reply lets it finish at once.
            tracing::info!(
                status = rakp3.status.describe(),
                "IPMI console aborted the login"
            );
            sessions.remove(rakp3.bmc_session_id);
            return reply(rakp3.status, console_session_id, vec![]);
        }
        if !handshake.verify_rakp3(&key, &rakp3.auth_code) {
            tracing::info!("IPMI login refused: RAKP 3 proof does not match the password");
            sessions.remove(rakp3.bmc_session_id);
            return reply(
                RakpStatus::INVALID_INTEGRITY_CHECK_VALUE,
                console_session_id,
                vec![],
            );
        }
        let sik = handshake.session_integrity_key(&key);
        let icv = handshake.rakp4_icv(&sik);
        let limit = *limit;
        let keys = SessionKeys::derive(session.suite, &sik);
        session.stage = Stage::Active(Active {
            keys,
            privilege: limit.min(Privilege::User),
            limit,
            inbound: SequenceWindow::default(),
            outbound: 0,
        });
        session.last_activity = self.clock.instant();
        tracing::debug!(
            session = format_args!("{:#010x}", rakp3.bmc_session_id),
            suite = session.suite.id,
            "IPMI session active"
        );
        reply(RakpStatus::NO_ERRORS, console_session_id, icv)
    }

    async fn in_session(&self, packet: &V20Packet<'_>) -> Option<Vec<u8>> {
        let bmc_session_id = packet.header.session_id;
        let decision = {
            let mut sessions = self.sessions();
            let session = sessions.get_mut(bmc_session_id)?;
            let Stage::Active(active) = &mut session.stage else {
                return None;
            };
            let plaintext = secure::open(&active.keys, packet)
                .map_err(|e| tracing::debug!(error = %e, "dropping IPMI session packet"))
                .ok()?;
            if !active.inbound.accept(packet.header.sequence) {
                tracing::debug!(
                    sequence = packet.header.sequence,
                    "dropping IPMI packet outside the sequence window"
                );
                return None;
            }
            session.last_activity = self.clock.instant();
            let request = RequestMessage::decode(&plaintext).ok()?;
            let privilege = active.privilege;
            match Request::decode(request.netfn, request.cmd, &request.data) {
                Err(error) => Decision::Reply(request.respond(error.completion_code().0, vec![])),
                Ok(Request::Machine(command)) if command.required_privilege() > privilege => {
                    Decision::Reply(
                        request.respond(CompletionCode::INSUFFICIENT_PRIVILEGE.0, vec![]),
                    )
                }
                Ok(Request::Machine(command)) => Decision::Machine(request, command),
                Ok(Request::Session(SessionRequest::CloseSession { session_id })) => {
                    let code = if session_id == bmc_session_id {
                        CompletionCode::OK
                    } else if privilege == Privilege::Administrator && sessions.contains(session_id)
                    {
                        sessions.remove(session_id);
                        CompletionCode::OK
                    } else {
                        CompletionCode::INVALID_SESSION_ID
                    };
                    let response = request.respond(code.0, vec![]);
                    let datagram = self.seal_reply(&mut sessions, bmc_session_id, &response);
                    if code == CompletionCode::OK && session_id == bmc_session_id {
                        sessions.remove(bmc_session_id);
                        tracing::debug!(
                            session = format_args!("{bmc_session_id:#010x}"),
                            "IPMI session closed"
                        );
                    }
                    return datagram;
                }
                Ok(Request::Session(SessionRequest::SetSessionPrivilegeLevel { requested })) => {
                    match requested {
                        None => Decision::Reply(request.respond(0, vec![privilege.code()])),
                        Some(level) if level > active.limit => Decision::Reply(
                            request.respond(CompletionCode::PRIVILEGE_EXCEEDS_LIMIT.0, vec![]),
                        ),
                        Some(level) => {
                            active.privilege = level;
                            Decision::Reply(request.respond(0, vec![level.code()]))
                        }
                    }
                }
                Ok(Request::Session(query)) => Decision::Reply(match channel_query(&query) {
                    Ok(data) => request.respond(0, data),
                    Err(code) => request.respond(code.0, vec![]),
                }),
            }
        };
        let response = match decision {
            Decision::Reply(response) => response,
            Decision::Machine(request, command) => {
                let span = tracing::info_span!(
                    "bmc_request",
                    bmc = %self.config.name,
                    command = ?command,
                );
                match self.handler.handle(&command).instrument(span).await {
                    Ok(response) => request.respond(0, response.encode()),
                    Err(code) => request.respond(code.0, vec![]),
                }
            }
        };
        let mut sessions = self.sessions();
        self.seal_reply(&mut sessions, bmc_session_id, &response)
    }

    fn seal_reply(
        &self,
        sessions: &mut Sessions,
        bmc_session_id: u32,
        response: &ResponseMessage,
    ) -> Option<Vec<u8>> {
        let session = sessions.get_mut(bmc_session_id)?;
        let console_session_id = session.console_session_id;
        let Stage::Active(active) = &mut session.stage else {
            return None;
        };
        let sequence = active.next_outbound();
        secure::seal(
            &active.keys,
            PayloadType::Ipmi,
            console_session_id,
            sequence,
            &response.encode(),
            rand::random(),
        )
        .ok()
    }
}

/// Answers Get Channel Authentication Capabilities and Get Channel Cipher Suites.
fn channel_query(query: &SessionRequest) -> Result<Vec<u8>, CompletionCode> {
    let check_channel = |channel: u8| {
        if channel == CURRENT_CHANNEL || channel == LAN_CHANNEL {
            Ok(())
        } else {
            Err(CompletionCode::INVALID_DATA_FIELD)
        }
    };
    match *query {
        SessionRequest::GetChannelAuthCapabilities {
            channel,
            v20_extended,
            ..
        } => {
            check_channel(channel)?;
            Ok(AuthCapabilities {
                channel: LAN_CHANNEL,
                v20_extended,
                v15_auth_types: 0,
                // Non-null user names exist.
                login_flags: 0x04,
                supports_v15: false,
                supports_v20: v20_extended,
            }
            .encode())
        }
        SessionRequest::GetChannelCipherSuites {
            channel,
            payload_type,
            by_cipher_suite,
            list_index,
        } => {
            check_channel(channel)?;
            let records: Vec<u8> = match (payload_type, by_cipher_suite) {
                (0, true) => CipherSuiteRecord::encode_all(&SUPPORTED_SUITES.map(|s| s.record())),
                // Listed by algorithm: every supported algorithm number once, tagged by kind.
                (0, false) => vec![0x01, 0x03, 0x41, 0x44, 0x81],
                _ => vec![],
            };
            let start = usize::from(list_index) * CIPHER_SUITE_CHUNK;
            let chunk = records.get(start..).unwrap_or(&[]);
            let mut data = vec![LAN_CHANNEL];
            data.extend_from_slice(&chunk[..chunk.len().min(CIPHER_SUITE_CHUNK)]);
            Ok(data)
        }
        _ => Err(CompletionCode::INVALID_COMMAND),
    }
}

fn unprotected(payload_type: PayloadType, payload: &[u8]) -> Option<Vec<u8>> {
    let header = V20Header {
        payload_type,
        encrypted: false,
        authenticated: false,
        session_id: 0,
        sequence: 0,
    };
    session::encode_v20(&header, payload).ok()
}

fn rakp2_error(tag: u8, status: RakpStatus, console_session_id: u32) -> Option<Vec<u8>> {
    unprotected(
        PayloadType::Rakp2,
        &Rakp2 {
            tag,
            status,
            console_session_id,
            challenge: None,
        }
        .encode(),
    )
}
