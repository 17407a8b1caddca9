//! The BMC core fed hand-built datagrams: session establishment and its refusals, sequence
//! numbers, integrity, and session limits, without a socket.

use rackproof_clock::Clock;
use rackproof_driver::PowerState;
use rackproof_ipmi::codec::command::{ChassisControl, MachineRequest, Request, SessionRequest};
use rackproof_ipmi::codec::message::{RequestMessage, ResponseMessage};
use rackproof_ipmi::codec::rakp::{
    Algorithms, OpenSessionRequest, OpenSessionResponse, Rakp1, Rakp2, Rakp3, Rakp4, RakpStatus,
};
use rackproof_ipmi::codec::rmcp::{self, AsfMessage};
use rackproof_ipmi::codec::session::{self, PayloadType, SessionPacket, V20Header};
use rackproof_ipmi::crypto::{CipherSuite, Handshake, SUITE_3, SUITE_17, SessionKeys, UserKey};
use rackproof_ipmi::{Bmc, BmcConfig, Credentials, secure};

use crate::common::TestMachine;

const CONSOLE_ID: u32 = 0x1111_2222;

fn bmc(power: PowerState) -> (std::sync::Arc<TestMachine>, Bmc) {
    let machine = TestMachine::new(power);
    let config = BmcConfig::new(Credentials::new("root", "calvin").unwrap());
    let bmc = Bmc::new(machine.shared(), config, Clock::wall());
    (machine, bmc)
}

fn unprotected(payload_type: PayloadType, payload: &[u8]) -> Vec<u8> {
    let header = V20Header {
        payload_type,
        encrypted: false,
        authenticated: false,
        session_id: 0,
        sequence: 0,
    };
    session::encode_v20(&header, payload).unwrap()
}

/// The payload of an unprotected RMCP+ reply of type `expect`.
fn payload_of(reply: &[u8], expect: PayloadType) -> Vec<u8> {
    let (_, body) = rmcp::split(reply).unwrap();
    let SessionPacket::V20(packet) = session::decode(body).unwrap() else {
        panic!("v2.0 reply expected")
    };
    assert_eq!(packet.header.payload_type, expect);
    packet.payload.to_vec()
}

/// Opens a session up to RAKP 2; returns the handshake and the BMC session ID.
async fn challenge(bmc: &Bmc, suite: CipherSuite, user: &str) -> Result<Handshake, RakpStatus> {
    let open = OpenSessionRequest {
        tag: 1,
        max_privilege: 0,
        console_session_id: CONSOLE_ID,
        algorithms: suite.algorithms(),
    };
    let reply = bmc
        .handle_datagram(&unprotected(
            PayloadType::OpenSessionRequest,
            &open.encode(),
        ))
        .await
        .unwrap();
    let response =
        OpenSessionResponse::decode(&payload_of(&reply, PayloadType::OpenSessionResponse)).unwrap();
    let accepted = response.accepted.ok_or(response.status)?;
    let rakp1 = Rakp1 {
        tag: 2,
        bmc_session_id: accepted.bmc_session_id,
        console_random: [0x42; 16],
        role: 0x14,
        username: user.as_bytes().to_vec(),
    };
    let reply = bmc
        .handle_datagram(&unprotected(PayloadType::Rakp1, &rakp1.encode()))
        .await
        .unwrap();
    let rakp2 = Rakp2::decode(&payload_of(&reply, PayloadType::Rakp2)).unwrap();
    let challenge = rakp2.challenge.ok_or(rakp2.status)?;
    Ok(Handshake {
        suite,
        console_session_id: CONSOLE_ID,
        bmc_session_id: accepted.bmc_session_id,
        console_random: rakp1.console_random,
        bmc_random: challenge.bmc_random,
        bmc_guid: challenge.bmc_guid,
        role: rakp1.role,
        username: rakp1.username,
    })
}

/// Sends RAKP 3 with `auth_code`; returns RAKP 4.
async fn rakp3(bmc: &Bmc, handshake: &Handshake, auth_code: Vec<u8>) -> Rakp4 {
    let rakp3 = Rakp3 {
        tag: 3,
        status: RakpStatus::NO_ERRORS,
        bmc_session_id: handshake.bmc_session_id,
        auth_code,
    };
    let reply = bmc
        .handle_datagram(&unprotected(PayloadType::Rakp3, &rakp3.encode()))
        .await
        .unwrap();
    Rakp4::decode(&payload_of(&reply, PayloadType::Rakp4)).unwrap()
}

/// A console with an active session.
struct Console {
    keys: SessionKeys,
    bmc_session_id: u32,
    sequence: u32,
    rq_seq: u8,
}

impl Console {
    async fn login(bmc: &Bmc, suite: CipherSuite) -> Self {
        let handshake = challenge(bmc, suite, "root").await.unwrap();
        let user_key = UserKey::from_password(b"calvin");
        let rakp4 = rakp3(bmc, &handshake, handshake.rakp3_auth_code(&user_key)).await;
        assert_eq!(rakp4.status, RakpStatus::NO_ERRORS);
        let sik = handshake.session_integrity_key(&user_key);
        assert!(handshake.verify_rakp4(&sik, &rakp4.integrity_check_value));
        Self {
            keys: SessionKeys::derive(suite, &sik),
            bmc_session_id: handshake.bmc_session_id,
            sequence: 0,
            rq_seq: 0,
        }
    }

    fn seal(&mut self, request: &Request) -> Vec<u8> {
        self.sequence += 1;
        self.rq_seq = (self.rq_seq + 1) & 0x3f;
        let (netfn, cmd, data) = request.encode();
        let message = RequestMessage::to_bmc(netfn, cmd, self.rq_seq, data).encode();
        secure::seal(
            &self.keys,
            PayloadType::Ipmi,
            self.bmc_session_id,
            self.sequence,
            &message,
            [7; 16],
        )
        .unwrap()
    }

    fn open(&self, reply: &[u8]) -> ResponseMessage {
        let (_, body) = rmcp::split(reply).unwrap();
        let SessionPacket::V20(packet) = session::decode(body).unwrap() else {
            panic!("v2.0 reply expected")
        };
        assert_eq!(
            packet.header.session_id, CONSOLE_ID,
            "replies carry the console's session ID"
        );
        ResponseMessage::decode(&secure::open(&self.keys, &packet).unwrap()).unwrap()
    }
}

#[tokio::test]
async fn presence_ping_gets_a_pong() {
    let (_machine, bmc) = bmc(PowerState::Off);
    let reply = bmc
        .handle_datagram(&AsfMessage::Ping { tag: 0x33 }.encode())
        .await
        .unwrap();
    let (_, body) = rmcp::split(&reply).unwrap();
    assert_eq!(
        AsfMessage::decode(body).unwrap(),
        AsfMessage::Pong {
            tag: 0x33,
            ipmi_supported: true
        }
    );
}

#[tokio::test]
async fn unsupported_algorithms_get_no_cipher_suite_match() {
    let (_machine, bmc) = bmc(PowerState::Off);
    let none = Algorithms {
        authentication: 0,
        integrity: 0,
        confidentiality: 0,
    };
    let open = OpenSessionRequest {
        tag: 9,
        max_privilege: 4,
        console_session_id: CONSOLE_ID,
        algorithms: none,
    };
    let reply = bmc
        .handle_datagram(&unprotected(
            PayloadType::OpenSessionRequest,
            &open.encode(),
        ))
        .await
        .unwrap();
    let response =
        OpenSessionResponse::decode(&payload_of(&reply, PayloadType::OpenSessionResponse)).unwrap();
    assert_eq!(response.status, RakpStatus::NO_CIPHER_SUITE_MATCH);
    assert_eq!((response.tag, response.console_session_id), (9, CONSOLE_ID));
    assert_eq!(bmc.sessions_including_handshakes(), 0);
}

#[tokio::test]
async fn an_unknown_user_gets_unauthorized_name_and_no_session() {
    let (_machine, bmc) = bmc(PowerState::Off);
    assert_eq!(
        challenge(&bmc, SUITE_3, "guest").await.unwrap_err(),
        RakpStatus::UNAUTHORIZED_NAME
    );
    assert_eq!(bmc.sessions_including_handshakes(), 0);
}

#[tokio::test]
async fn a_wrong_rakp3_proof_gets_invalid_integrity_check_value() {
    let (_machine, bmc) = bmc(PowerState::Off);
    for suite in [SUITE_3, SUITE_17] {
        let handshake = challenge(&bmc, suite, "root").await.unwrap();
        let wrong = UserKey::from_password(b"not-calvin");
        let rakp4 = rakp3(&bmc, &handshake, handshake.rakp3_auth_code(&wrong)).await;
        assert_eq!(rakp4.status, RakpStatus::INVALID_INTEGRITY_CHECK_VALUE);
        assert_eq!(bmc.sessions_including_handshakes(), 0, "suite {}", suite.id);
    }
}

#[tokio::test]
async fn an_active_session_runs_commands_and_refuses_replays_and_tampering() {
    let (machine, bmc) = bmc(PowerState::Off);
    let mut console = Console::login(&bmc, SUITE_17).await;
    assert_eq!(bmc.active_sessions(), 1);

    // Sessions start at User privilege: power control needs Operator.
    let power_up = Request::Machine(MachineRequest::ChassisControl(ChassisControl::PowerUp));
    let reply = bmc.handle_datagram(&console.seal(&power_up)).await.unwrap();
    assert_eq!(console.open(&reply).completion_code, 0xd4);
    assert_eq!(machine.state().power, PowerState::Off);

    let raise = Request::Session(SessionRequest::SetSessionPrivilegeLevel {
        requested: Some(rackproof_ipmi::codec::command::Privilege::Administrator),
    });
    let reply = bmc.handle_datagram(&console.seal(&raise)).await.unwrap();
    assert_eq!(console.open(&reply).data, [4]);

    let datagram = console.seal(&power_up);
    let reply = bmc.handle_datagram(&datagram).await.unwrap();
    assert_eq!(console.open(&reply).completion_code, 0);
    assert_eq!(machine.state().actions.len(), 1);

    assert!(
        bmc.handle_datagram(&datagram).await.is_none(),
        "a replayed packet is dropped"
    );
    let mut tampered = console.seal(&Request::Machine(MachineRequest::ChassisControl(
        ChassisControl::PowerDown,
    )));
    tampered[20] ^= 0x01;
    assert!(
        bmc.handle_datagram(&tampered).await.is_none(),
        "a tampered packet is dropped"
    );
    assert_eq!(machine.state().power, PowerState::On);
    assert_eq!(machine.state().actions.len(), 1);

    let close = Request::Session(SessionRequest::CloseSession {
        session_id: console.bmc_session_id,
    });
    let reply = bmc.handle_datagram(&console.seal(&close)).await.unwrap();
    assert_eq!(console.open(&reply).completion_code, 0);
    assert_eq!(bmc.active_sessions(), 0);
    assert!(
        bmc.handle_datagram(&console.seal(&power_up))
            .await
            .is_none(),
        "a closed session is gone"
    );
}

#[tokio::test]
async fn sessions_beyond_the_limit_get_insufficient_resources() {
    let machine = TestMachine::new(PowerState::Off);
    let mut config = BmcConfig::new(Credentials::new("root", "calvin").unwrap());
    config.max_sessions = 2;
    let bmc = Bmc::new(machine.shared(), config, Clock::wall());
    for _ in 0..2 {
        Console::login(&bmc, SUITE_3).await;
    }
    assert_eq!(
        challenge(&bmc, SUITE_3, "root").await.unwrap_err(),
        RakpStatus::INSUFFICIENT_RESOURCES
    );
}

#[tokio::test(start_paused = true)]
async fn idle_sessions_expire() {
    let (_machine, bmc) = {
        let machine = TestMachine::new(PowerState::Off);
        let config = BmcConfig::new(Credentials::new("root", "calvin").unwrap());
        let bmc = Bmc::new(
            machine.shared(),
            config,
            Clock::simulated(jiff::Timestamp::UNIX_EPOCH),
        );
        (machine, bmc)
    };
    let mut console = Console::login(&bmc, SUITE_3).await;
    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    let status = Request::Machine(MachineRequest::GetChassisStatus);
    assert!(
        bmc.handle_datagram(&console.seal(&status)).await.is_some(),
        "activity within the timeout"
    );
    tokio::time::sleep(std::time::Duration::from_secs(61)).await;
    assert!(
        bmc.handle_datagram(&console.seal(&status)).await.is_none(),
        "expired after 60s idle"
    );
    assert_eq!(bmc.active_sessions(), 0);
}

/// Every line logged while executing a command names the BMC and the command.
#[tokio::test]
async fn log_lines_of_a_command_name_the_bmc_and_the_command() {
    let (logs, _capturing) = rackproof_test_support::logs::capture();
    let machine = TestMachine::new(PowerState::Off);
    let config = BmcConfig {
        name: "node-1".to_owned(),
        ..BmcConfig::new(Credentials::new("root", "calvin").unwrap())
    };
    let bmc = Bmc::new(machine.shared(), config, Clock::wall());
    let mut console = Console::login(&bmc, SUITE_17).await;
    let raise = Request::Session(SessionRequest::SetSessionPrivilegeLevel {
        requested: Some(rackproof_ipmi::codec::command::Privilege::Administrator),
    });
    bmc.handle_datagram(&console.seal(&raise)).await.unwrap();
    let power_up = Request::Machine(MachineRequest::ChassisControl(ChassisControl::PowerUp));
    let reply = bmc.handle_datagram(&console.seal(&power_up)).await.unwrap();
    assert_eq!(console.open(&reply).completion_code, 0);
    let control = logs.line_with("chassis control");
    assert!(
        control.contains("bmc_request{bmc=node-1 command=ChassisControl(PowerUp)}"),
        "{control}"
    );
}
