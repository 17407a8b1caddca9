//! Random bytes into every decoder and into the BMC: errors, never panics.

use proptest::prelude::*;
use rackproof_clock::Clock;
use rackproof_driver::PowerState;
use rackproof_ipmi::codec::command::{
    AuthCapabilities, BootFlags, BootOptionResponse, ChassisStatus, CipherSuiteRecord, DeviceId,
    Request,
};
use rackproof_ipmi::codec::message::{RequestMessage, ResponseMessage};
use rackproof_ipmi::codec::rakp::{
    OpenSessionRequest, OpenSessionResponse, Rakp1, Rakp2, Rakp3, Rakp4,
};
use rackproof_ipmi::codec::rmcp::{self, AsfMessage};
use rackproof_ipmi::codec::session::{self, SessionPacket};
use rackproof_ipmi::{Bmc, BmcConfig, Credentials};

use crate::common::TestMachine;

fn decode_everything(bytes: &[u8]) {
    if let Ok((_, body)) = rmcp::split(bytes) {
        let _ = AsfMessage::decode(body);
        if let Ok(SessionPacket::V20(packet)) = session::decode(body) {
            for len in [0, 12, 16, 200] {
                let _ = packet.integrity(len);
            }
            let _ = packet.expect_no_trailer();
        }
    }
    let _ = session::decode(bytes);
    let _ = RequestMessage::decode(bytes);
    let _ = ResponseMessage::decode(bytes);
    let _ = OpenSessionRequest::decode(bytes);
    let _ = OpenSessionResponse::decode(bytes);
    let _ = Rakp1::decode(bytes);
    let _ = Rakp2::decode(bytes);
    let _ = Rakp3::decode(bytes);
    let _ = Rakp4::decode(bytes);
    let _ = DeviceId::decode(bytes);
    let _ = ChassisStatus::decode(bytes);
    let _ = AuthCapabilities::decode(bytes);
    let _ = CipherSuiteRecord::decode_all(bytes);
    let _ = BootOptionResponse::decode(bytes);
    let _ = BootFlags::decode(bytes);
    if let [netfn, cmd, data @ ..] = bytes {
        let _ = Request::decode(*netfn, *cmd, data);
    }
}

fn bmc() -> Bmc {
    let machine = TestMachine::new(PowerState::On);
    Bmc::new(
        machine.shared(),
        BmcConfig::new(Credentials::new("u", "p").unwrap()),
        Clock::wall(),
    )
}

proptest! {
    #[test]
    fn random_bytes_never_panic_a_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        decode_everything(&bytes);
    }

    #[test]
    fn random_session_bytes_never_panic_the_bmc(
        auth_type in prop_oneof![Just(0x00u8), Just(0x06u8), any::<u8>()],
        payload_type in prop_oneof![Just(0x00u8), Just(0x10), Just(0x12), Just(0x14), Just(0x40), Just(0xc0), any::<u8>()],
        rest in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        // A valid RMCP header and plausible session bytes, so the fuzz reaches past the first check.
        let mut datagram = rmcp::header(rmcp::RmcpClass::Ipmi).to_vec();
        datagram.push(auth_type);
        datagram.push(payload_type);
        datagram.extend_from_slice(&rest);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let bmc = bmc();
        runtime.block_on(async {
            let _ = bmc.handle_datagram(&datagram).await;
            let _ = bmc.handle_datagram(&rest).await;
        });
    }
}
