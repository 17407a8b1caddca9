//! The console side of RMCP+: a connected UDP socket, the session handshake, and requests with
//! per-attempt timeouts and retries.
//!
//! Opening a session:
//!
//! 1. Get Channel Authentication Capabilities (IPMI v1.5 framing, as ipmitool does): the BMC
//!    must offer IPMI v2.0.
//! 2. Get Channel Cipher Suites (unless a suite is configured): suite 17 if listed, else 3.
//! 3. Open Session Request with a random console session ID; the BMC must accept exactly the
//!    proposed algorithms.
//! 4. RAKP 1 → RAKP 2: the BMC's proof must match the password; if not, the client reports
//!    "invalid integrity check value" in RAKP 3 (so the BMC drops the session) and fails with
//!    [`ClientError::WrongPassword`].
//! 5. RAKP 3 → RAKP 4: the BMC's integrity check value must match the derived SIK.
//! 6. Set Session Privilege Level to the configured privilege (sessions start at User).

use std::net::SocketAddr;
use std::time::Duration;

use rackproof_clock::Clock;
use tokio::net::UdpSocket;

use super::{ClientError, ClientOptions};
use crate::codec::command::{
    AuthCapabilities, CIPHER_SUITE_CHUNK, CURRENT_CHANNEL, CipherSuiteRecord, Privilege, Request,
    SessionRequest,
};
use crate::codec::message::{RequestMessage, ResponseMessage};
use crate::codec::rakp::{
    OpenSessionRequest, OpenSessionResponse, Rakp1, Rakp2, Rakp3, Rakp4, RakpStatus,
};
use crate::codec::rmcp::{self, RmcpClass};
use crate::codec::session::{self, PayloadType, SessionPacket, V20Header};
use crate::credentials::Credentials;
use crate::crypto::{CipherSuite, Handshake, SUITE_3, SUITE_17, SessionKeys};
use crate::secure::{self, SequenceWindow};

/// The name-only lookup bit of the RAKP 1 role byte.
const NAME_ONLY_LOOKUP: u8 = 0x10;

/// A socket to one BMC and, once opened, a session on it.
#[derive(Debug)]
pub(crate) struct Connection {
    bmc: SocketAddr,
    socket: UdpSocket,
    session: Option<ActiveSession>,
    rq_seq: u8,
    tag: u8,
}

#[derive(Debug)]
struct ActiveSession {
    keys: SessionKeys,
    console_session_id: u32,
    bmc_session_id: u32,
    outbound: u32,
    inbound: SequenceWindow,
}

/// One reply, or "not the reply we wait for".
enum Matched<T> {
    Yes(T),
    No,
}

impl Connection {
    pub(crate) async fn connect(bmc: SocketAddr) -> Result<Self, ClientError> {
        let local: SocketAddr = if bmc.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            ([0u16; 8], 0).into()
        };
        let socket = UdpSocket::bind(local)
            .await
            .map_err(|source| ClientError::Io { bmc, source })?;
        socket
            .connect(bmc)
            .await
            .map_err(|source| ClientError::Io { bmc, source })?;
        Ok(Self {
            bmc,
            socket,
            session: None,
            rq_seq: 0,
            tag: 0,
        })
    }

    pub(crate) fn has_session(&self) -> bool {
        self.session.is_some()
    }

    pub(crate) fn forget_session(&mut self) {
        self.session = None;
    }

    fn next_rq_seq(&mut self) -> u8 {
        self.rq_seq = (self.rq_seq + 1) & 0x3f;
        self.rq_seq
    }

    fn next_tag(&mut self) -> u8 {
        self.tag = self.tag.wrapping_add(1);
        self.tag
    }

    /// Sends what `build` makes (rebuilt for every attempt) until `accept` takes a reply.
    async fn exchange<T>(
        &mut self,
        options: &ClientOptions,
        clock: &Clock,
        what: &'static str,
        mut build: impl FnMut(&mut Self) -> Result<Vec<u8>, ClientError>,
        mut accept: impl FnMut(&mut Self, &[u8]) -> Result<Matched<T>, ClientError>,
    ) -> Result<T, ClientError> {
        let attempts = options.retries + 1;
        let mut buffer = vec![0u8; 2048];
        for _ in 0..attempts {
            let datagram = build(self)?;
            self.socket
                .send(&datagram)
                .await
                .map_err(|source| ClientError::Io {
                    bmc: self.bmc,
                    source,
                })?;
            let deadline = clock.instant() + options.timeout;
            loop {
                let remaining = deadline.saturating_duration_since(clock.instant());
                if remaining.is_zero() {
                    break;
                }
                let Ok(received) = clock
                    .timeout(remaining, self.socket.recv(&mut buffer))
                    .await
                else {
                    break;
                };
                let len = match received {
                    Ok(len) => len,
                    // ICMP "port unreachable" from an earlier datagram: keep waiting this attempt.
                    Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                    Err(source) => {
                        return Err(ClientError::Io {
                            bmc: self.bmc,
                            source,
                        });
                    }
                };
                if let Matched::Yes(value) = accept(self, &buffer[..len])? {
                    return Ok(value);
                }
            }
        }
        Err(ClientError::NoResponse {
            bmc: self.bmc,
            what,
            after: options.timeout * attempts,
        })
    }

    /// A request outside any session (v1.5 framing for Get Channel Authentication
    /// Capabilities, v2.0 otherwise); returns the completion code and data.
    async fn presession_request(
        &mut self,
        options: &ClientOptions,
        clock: &Clock,
        request: Request,
        what: &'static str,
    ) -> Result<(u8, Vec<u8>), ClientError> {
        let (netfn, cmd, data) = request.encode();
        let rq_seq = self.next_rq_seq();
        let message = RequestMessage::to_bmc(netfn, cmd, rq_seq, data).encode();
        let v15 = matches!(
            request,
            Request::Session(SessionRequest::GetChannelAuthCapabilities { .. })
        );
        let datagram = if v15 {
            session::encode_v15(0, 0, &message)
        } else {
            let header = V20Header {
                payload_type: PayloadType::Ipmi,
                encrypted: false,
                authenticated: false,
                session_id: 0,
                sequence: 0,
            };
            session::encode_v20(&header, &message)
        }
        .map_err(|e| ClientError::Protocol {
            bmc: self.bmc,
            detail: e.to_string(),
        })?;
        self.exchange(
            options,
            clock,
            what,
            |_| Ok(datagram.clone()),
            |_, reply| {
                let message = match parse_reply(reply) {
                    Some(Reply::V15(message)) => message,
                    Some(Reply::V20 { header, payload })
                        if header.session_id == 0
                            && header.payload_type == PayloadType::Ipmi
                            && !header.encrypted =>
                    {
                        payload
                    }
                    _ => return Ok(Matched::No),
                };
                Ok(match ResponseMessage::decode(&message) {
                    Ok(r) if r.rq_seq == rq_seq && r.cmd == cmd && r.netfn == netfn + 1 => {
                        Matched::Yes((r.completion_code, r.data))
                    }
                    _ => Matched::No,
                })
            },
        )
        .await
    }

    /// Sends an RMCP+ handshake payload and waits for the payload type it expects.
    async fn handshake_step(
        &mut self,
        options: &ClientOptions,
        clock: &Clock,
        payload_type: PayloadType,
        payload: Vec<u8>,
        expect: PayloadType,
        what: &'static str,
    ) -> Result<Vec<u8>, ClientError> {
        let header = V20Header {
            payload_type,
            encrypted: false,
            authenticated: false,
            session_id: 0,
            sequence: 0,
        };
        let datagram =
            session::encode_v20(&header, &payload).map_err(|e| ClientError::Protocol {
                bmc: self.bmc,
                detail: e.to_string(),
            })?;
        self.exchange(
            options,
            clock,
            what,
            |_| Ok(datagram.clone()),
            |_, reply| {
                Ok(match parse_reply(reply) {
                    Some(Reply::V20 { header, payload }) if header.payload_type == expect => {
                        Matched::Yes(payload)
                    }
                    _ => Matched::No,
                })
            },
        )
        .await
    }

    /// Opens a session (see the module docs for the steps).
    pub(crate) async fn open_session(
        &mut self,
        credentials: &Credentials,
        options: &ClientOptions,
        clock: &Clock,
    ) -> Result<(), ClientError> {
        let bmc = self.bmc;
        self.session = None;
        let protocol = |detail: String| ClientError::Protocol { bmc, detail };

        // 1. IPMI v2.0 support.
        let query = Request::Session(SessionRequest::GetChannelAuthCapabilities {
            channel: CURRENT_CHANNEL,
            v20_extended: true,
            privilege: options.privilege,
        });
        let (code, data) = self
            .presession_request(
                options,
                clock,
                query,
                "Get Channel Authentication Capabilities",
            )
            .await?;
        let capabilities = match code {
            0 => AuthCapabilities::decode(&data).map_err(|e| protocol(e.to_string()))?,
            _ => return Err(ClientError::NoIpmi20 { bmc }),
        };
        if !(capabilities.v20_extended && capabilities.supports_v20) {
            return Err(ClientError::NoIpmi20 { bmc });
        }

        // 2. Cipher suite.
        let suite = match options.cipher_suite {
            Some(id) => CipherSuite::by_id(id).ok_or(ClientError::UnsupportedCipherSuite { id })?,
            None => self.negotiate_suite(options, clock).await?,
        };

        // 3. Open Session.
        let console_session_id = loop {
            let id: u32 = rand::random();
            if id != 0 {
                break id;
            }
        };
        let tag = self.next_tag();
        let open = OpenSessionRequest {
            tag,
            max_privilege: 0,
            console_session_id,
            algorithms: suite.algorithms(),
        };
        let reply = self
            .handshake_step(
                options,
                clock,
                PayloadType::OpenSessionRequest,
                open.encode(),
                PayloadType::OpenSessionResponse,
                "Open Session",
            )
            .await?;
        let response = OpenSessionResponse::decode(&reply).map_err(|e| protocol(e.to_string()))?;
        let accepted = match (response.status, response.accepted) {
            (RakpStatus::NO_ERRORS, Some(accepted)) => accepted,
            (status, _) => {
                return Err(ClientError::SessionRefused {
                    bmc,
                    stage: "Open Session",
                    status,
                });
            }
        };
        if accepted.algorithms != suite.algorithms()
            || response.console_session_id != console_session_id
        {
            return Err(protocol(format!(
                "Open Session Response does not confirm cipher suite {}",
                suite.id
            )));
        }

        // 4. RAKP 1 and 2.
        let role = options.privilege.code() | NAME_ONLY_LOOKUP;
        let rakp1 = Rakp1 {
            tag: self.next_tag(),
            bmc_session_id: accepted.bmc_session_id,
            console_random: rand::random(),
            role,
            username: credentials.username().to_vec(),
        };
        let reply = self
            .handshake_step(
                options,
                clock,
                PayloadType::Rakp1,
                rakp1.encode(),
                PayloadType::Rakp2,
                "RAKP 1",
            )
            .await?;
        let rakp2 = Rakp2::decode(&reply).map_err(|e| protocol(e.to_string()))?;
        let challenge = match (rakp2.status, rakp2.challenge) {
            (RakpStatus::NO_ERRORS, Some(challenge)) => challenge,
            (status, _) => {
                return Err(ClientError::SessionRefused {
                    bmc,
                    stage: "RAKP 2",
                    status,
                });
            }
        };
        let handshake = Handshake {
            suite,
            console_session_id,
            bmc_session_id: accepted.bmc_session_id,
            console_random: rakp1.console_random,
            bmc_random: challenge.bmc_random,
            bmc_guid: challenge.bmc_guid,
            role,
            username: rakp1.username.clone(),
        };
        let key = credentials.user_key();
        if !handshake.verify_rakp2(&key, &challenge.auth_code) {
            // Tell the BMC, so it drops the half-open session; no answer is needed.
            let rakp3 = Rakp3 {
                tag: self.next_tag(),
                status: RakpStatus::INVALID_INTEGRITY_CHECK_VALUE,
                bmc_session_id: accepted.bmc_session_id,
                auth_code: vec![],
            };
            let header = V20Header {
                payload_type: PayloadType::Rakp3,
                encrypted: false,
                authenticated: false,
                session_id: 0,
                sequence: 0,
            };
            if let Ok(datagram) = session::encode_v20(&header, &rakp3.encode()) {
                // Best effort: the login has failed either way.
                let _ = self.socket.send(&datagram).await;
            }
            return Err(ClientError::WrongPassword { bmc });
        }

        // 5. RAKP 3 and 4.
        let rakp3 = Rakp3 {
            tag: self.next_tag(),
            status: RakpStatus::NO_ERRORS,
            bmc_session_id: accepted.bmc_session_id,
            auth_code: handshake.rakp3_auth_code(&key),
        };
        let reply = self
            .handshake_step(
                options,
                clock,
                PayloadType::Rakp3,
                rakp3.encode(),
                PayloadType::Rakp4,
                "RAKP 3",
            )
            .await?;
        let rakp4 = Rakp4::decode(&reply).map_err(|e| protocol(e.to_string()))?;
        if rakp4.status != RakpStatus::NO_ERRORS {
            return Err(ClientError::SessionRefused {
                bmc,
                stage: "RAKP 4",
                status: rakp4.status,
            });
        }
        let sik = handshake.session_integrity_key(&key);
        if !handshake.verify_rakp4(&sik, &rakp4.integrity_check_value) {
            return Err(ClientError::BmcProofInvalid { bmc });
        }
        self.session = Some(ActiveSession {
            keys: SessionKeys::derive(suite, &sik),
            console_session_id,
            bmc_session_id: accepted.bmc_session_id,
            outbound: 0,
            inbound: SequenceWindow::default(),
        });
        tracing::debug!(%bmc, suite = suite.id, "IPMI session open");

        // 6. Privilege.
        if options.privilege > Privilege::User {
            let request = Request::Session(SessionRequest::SetSessionPrivilegeLevel {
                requested: Some(options.privilege),
            });
            let (code, _) = self
                .request(options, clock, &request, "Set Session Privilege Level")
                .await?;
            if code != 0 {
                self.session = None;
                return Err(ClientError::Completion {
                    bmc,
                    command: "Set Session Privilege Level",
                    code: crate::codec::command::CompletionCode(code),
                });
            }
        }
        Ok(())
    }

    async fn negotiate_suite(
        &mut self,
        options: &ClientOptions,
        clock: &Clock,
    ) -> Result<CipherSuite, ClientError> {
        let mut records = Vec::new();
        for list_index in 0..64u8 {
            let query = Request::Session(SessionRequest::GetChannelCipherSuites {
                channel: CURRENT_CHANNEL,
                payload_type: 0,
                by_cipher_suite: true,
                list_index,
            });
            let (code, data) = self
                .presession_request(options, clock, query, "Get Channel Cipher Suites")
                .await?;
            if code != 0 || data.is_empty() {
                // Older BMCs lack the command; suite 3 is mandatory in IPMI v2.0.
                return Ok(SUITE_3);
            }
            records.extend_from_slice(&data[1..]);
            if data.len() - 1 < CIPHER_SUITE_CHUNK {
                break;
            }
        }
        let offered =
            CipherSuiteRecord::decode_all(&records).map_err(|e| ClientError::Protocol {
                bmc: self.bmc,
                detail: e.to_string(),
            })?;
        [SUITE_17, SUITE_3]
            .into_iter()
            .find(|suite| offered.contains(&suite.record()))
            .ok_or(ClientError::NoCommonCipherSuite { bmc: self.bmc })
    }

    /// Sends `request` in the open session; returns the completion code and data.
    pub(crate) async fn request(
        &mut self,
        options: &ClientOptions,
        clock: &Clock,
        request: &Request,
        what: &'static str,
    ) -> Result<(u8, Vec<u8>), ClientError> {
        if self.session.is_none() {
            return Err(ClientError::Protocol {
                bmc: self.bmc,
                detail: "no session is open".to_owned(),
            });
        }
        let (netfn, cmd, data) = request.encode();
        let rq_seq = self.next_rq_seq();
        let message = RequestMessage::to_bmc(netfn, cmd, rq_seq, data).encode();
        let bmc = self.bmc;
        self.exchange(
            options,
            clock,
            what,
            |connection| {
                let session = connection.session.as_mut().ok_or(ClientError::Protocol {
                    bmc,
                    detail: "session closed during a request".to_owned(),
                })?;
                session.outbound = session.outbound.wrapping_add(1).max(1);
                secure::seal(
                    &session.keys,
                    PayloadType::Ipmi,
                    session.bmc_session_id,
                    session.outbound,
                    &message,
                    rand::random(),
                )
                .map_err(|e| ClientError::Protocol {
                    bmc,
                    detail: e.to_string(),
                })
            },
            |connection, reply| {
                let Some(session) = connection.session.as_mut() else {
                    return Ok(Matched::No);
                };
                let Ok((class, body)) = rmcp::split(reply) else {
                    return Ok(Matched::No);
                };
                let Ok(SessionPacket::V20(packet)) = session::decode(body) else {
                    return Ok(Matched::No);
                };
                if class != RmcpClass::Ipmi
                    || packet.header.session_id != session.console_session_id
                    || packet.header.payload_type != PayloadType::Ipmi
                {
                    return Ok(Matched::No);
                }
                let Ok(plaintext) = secure::open(&session.keys, &packet) else {
                    return Ok(Matched::No);
                };
                if !session.inbound.accept(packet.header.sequence) {
                    return Ok(Matched::No);
                }
                Ok(match ResponseMessage::decode(&plaintext) {
                    Ok(r) if r.rq_seq == rq_seq && r.cmd == cmd && r.netfn == netfn + 1 => {
                        Matched::Yes((r.completion_code, r.data))
                    }
                    _ => Matched::No,
                })
            },
        )
        .await
    }

    /// Closes the session, if one is open (best effort: one attempt, short wait).
    pub(crate) async fn close_session(&mut self, options: &ClientOptions, clock: &Clock) {
        let Some(session_id) = self.session.as_ref().map(|s| s.bmc_session_id) else {
            return;
        };
        let once = ClientOptions {
            retries: 0,
            timeout: options.timeout.min(Duration::from_secs(1)),
            ..options.clone()
        };
        let request = Request::Session(SessionRequest::CloseSession { session_id });
        if let Err(error) = self.request(&once, clock, &request, "Close Session").await {
            tracing::debug!(%error, "IPMI Close Session got no answer");
        }
        self.session = None;
    }
}

enum Reply {
    V15(Vec<u8>),
    V20 { header: V20Header, payload: Vec<u8> },
}

/// Parses an unprotected reply; `None` for anything else.
fn parse_reply(datagram: &[u8]) -> Option<Reply> {
    let (class, body) = rmcp::split(datagram).ok()?;
    if class != RmcpClass::Ipmi {
        return None;
    }
    match session::decode(body).ok()? {
        SessionPacket::V15(packet) => Some(Reply::V15(packet.message.to_vec())),
        SessionPacket::V20(packet) if !packet.header.authenticated && !packet.header.encrypted => {
            Some(Reply::V20 {
                header: packet.header,
                payload: packet.payload.to_vec(),
            })
        }
        SessionPacket::V20(_) => None,
    }
}
