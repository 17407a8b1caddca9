//! Every request and response round-trips; malformed data gets the completion code a BMC
//! answers with.

use super::*;

fn every_request() -> Vec<Request> {
    let mut requests = vec![
        Request::Session(SessionRequest::GetChannelAuthCapabilities {
            channel: CURRENT_CHANNEL,
            v20_extended: true,
            privilege: Privilege::Administrator,
        }),
        Request::Session(SessionRequest::GetChannelCipherSuites {
            channel: CURRENT_CHANNEL,
            payload_type: 0,
            by_cipher_suite: true,
            list_index: 2,
        }),
        Request::Session(SessionRequest::SetSessionPrivilegeLevel {
            requested: Some(Privilege::Operator),
        }),
        Request::Session(SessionRequest::SetSessionPrivilegeLevel { requested: None }),
        Request::Session(SessionRequest::CloseSession {
            session_id: 0xdead_beef,
        }),
        Request::Machine(MachineRequest::GetDeviceId),
        Request::Machine(MachineRequest::GetChassisStatus),
        Request::Machine(MachineRequest::GetSystemBootOptions {
            parameter: 5,
            set_selector: 0,
            block_selector: 0,
        }),
        Request::Machine(MachineRequest::SetSystemBootOptions(
            BootParameter::SetInProgress(1),
        )),
        Request::Machine(MachineRequest::SetSystemBootOptions(
            BootParameter::BootInfoAcknowledge { mask: 1, flags: 1 },
        )),
        Request::Machine(MachineRequest::SetSystemBootOptions(
            BootParameter::BootFlags(BootFlags {
                valid: true,
                persistent: true,
                efi: true,
                device: BootDevice::Pxe,
            }),
        )),
    ];
    for code in 0..=5 {
        requests.push(Request::Machine(MachineRequest::ChassisControl(
            ChassisControl::from_code(code).unwrap(),
        )));
    }
    requests
}

#[test]
fn every_request_round_trips() {
    for request in every_request() {
        let (net_fn, command, data) = request.encode();
        assert_eq!(Request::decode(net_fn, command, &data).unwrap(), request);
    }
}

#[test]
fn ipmitool_bootdev_pxe_decodes_as_pxe_for_the_next_boot() {
    // `chassis bootdev pxe` sends parameter 5 with 80 04 00 00 00.
    let request = Request::decode(netfn::CHASSIS, 0x08, &[0x05, 0x80, 0x04, 0, 0, 0]).unwrap();
    let Request::Machine(MachineRequest::SetSystemBootOptions(BootParameter::BootFlags(flags))) =
        request
    else {
        panic!("boot flags expected, got {request:?}");
    };
    assert_eq!(
        flags,
        BootFlags {
            valid: true,
            persistent: false,
            efi: false,
            device: BootDevice::Pxe
        }
    );
}

#[test]
fn bad_requests_map_to_completion_codes() {
    let code = |net_fn, command, data: &[u8]| {
        Request::decode(net_fn, command, data)
            .unwrap_err()
            .completion_code()
    };
    assert_eq!(code(netfn::APP, 0x99, &[]), CompletionCode::INVALID_COMMAND);
    assert_eq!(
        code(netfn::CHASSIS, cmd::CHASSIS_CONTROL, &[]),
        CompletionCode::REQUEST_LENGTH_INVALID
    );
    assert_eq!(
        code(netfn::CHASSIS, cmd::CHASSIS_CONTROL, &[9]),
        CompletionCode::INVALID_DATA_FIELD
    );
    assert_eq!(
        code(netfn::CHASSIS, cmd::SET_SYSTEM_BOOT_OPTIONS, &[0x07, 1]),
        CompletionCode::PARAMETER_NOT_SUPPORTED
    );
    assert_eq!(
        code(netfn::CHASSIS, cmd::SET_SYSTEM_BOOT_OPTIONS, &[0x05, 0x80]),
        CompletionCode::REQUEST_LENGTH_INVALID
    );
    assert_eq!(
        code(
            netfn::APP,
            cmd::GET_CHANNEL_AUTH_CAPABILITIES,
            &[0x8e, 0x09]
        ),
        CompletionCode::INVALID_DATA_FIELD
    );
}

#[test]
fn responses_round_trip() {
    let id = DeviceId {
        device_id: 0x20,
        device_revision: 1,
        provides_sdrs: false,
        firmware_major: 1,
        firmware_minor_bcd: 0x02,
        ipmi_version: 0x02,
        additional_support: 0x01,
        manufacturer_id: 0x0a_bcde,
        product_id: 0x1234,
        aux_firmware: [1, 2, 3, 4],
    };
    assert_eq!(DeviceId::decode(&id.encode()).unwrap(), id);
    let status = ChassisStatus {
        power_on: true,
        power_restore_policy: 1,
        last_power_event: 0x10,
        misc: 0,
    };
    assert_eq!(ChassisStatus::decode(&status.encode()).unwrap(), status);
    let caps = AuthCapabilities {
        channel: 1,
        v20_extended: true,
        v15_auth_types: 0,
        login_flags: 0x04,
        supports_v15: false,
        supports_v20: true,
    };
    assert_eq!(AuthCapabilities::decode(&caps.encode()).unwrap(), caps);
    let records = vec![
        CipherSuiteRecord {
            id: 17,
            authentication: 3,
            integrity: 4,
            confidentiality: 1,
        },
        CipherSuiteRecord {
            id: 3,
            authentication: 1,
            integrity: 1,
            confidentiality: 1,
        },
    ];
    assert_eq!(
        CipherSuiteRecord::decode_all(&CipherSuiteRecord::encode_all(&records)).unwrap(),
        records
    );
    let option = BootOptionResponse {
        parameter: 5,
        invalid: false,
        data: vec![0x80, 0x04, 0, 0, 0],
    };
    assert_eq!(
        BootOptionResponse::decode(&option.encode()).unwrap(),
        option
    );
}

#[test]
fn short_responses_are_errors() {
    assert!(DeviceId::decode(&[0; 10]).is_err());
    assert!(ChassisStatus::decode(&[1, 0]).is_err());
    assert!(AuthCapabilities::decode(&[1]).is_err());
    assert!(CipherSuiteRecord::decode_all(&[0xc0, 17, 3]).is_err());
    assert!(CipherSuiteRecord::decode_all(&[0x42]).is_err());
    assert!(BootOptionResponse::decode(&[1]).is_err());
}
