//! Domains that boot (nextest's `qemu` group): power, boot override, consoles, the BMC emulators
//! and tools in front of them, and sweeping what a killed run left.

use rackproof_test_support::ipmitool::Ipmitool;

use crate::support::*;

/// Marks `machine`'s domain as defined by a process that is gone (no process has pid
/// `u32::MAX`), as a run killed outright leaves its domains.
fn orphan(machine: &LibvirtMachine, dir: &Path) {
    let conn = virt::connect::Connect::open(Some(URI)).unwrap();
    let domain = conn.lookup_domain_by_name(machine.name()).unwrap();
    let element = format!("<node owner='{} 1' dir='{}'/>", u32::MAX, dir.display());
    domain
        .set_metadata(
            virt::sys::VIR_DOMAIN_METADATA_ELEMENT as i32,
            Some(&element),
            Some("rackproof"),
            Some("https://rackproof.dev/libvirt/1"),
            virt::sys::VIR_DOMAIN_AFFECT_CONFIG | virt::sys::VIR_DOMAIN_AFFECT_LIVE,
        )
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_domain_whose_run_is_gone_is_swept_with_its_directory_and_a_live_runs_is_not() {
    let ws = Workspace::new("orphan");
    let config = ws.node("n1");
    let dir = config.dir.clone();
    let left = define(config).await;
    let kept = define(ws.node("n2")).await;
    left.reset(ResetAction::On).await.unwrap();
    orphan(&left, &dir);

    let swept = sweep_orphans(URI).await.unwrap();
    let guests = processes_mentioning(&format!("guest={}", left.name()));
    let kept_state = kept.power_state().await.unwrap();
    // Leftovers of runs killed earlier on this machine may be swept too; this run's others not.
    assert!(swept.iter().any(|name| name == left.name()), "{swept:?}");
    assert!(!swept.iter().any(|name| name == kept.name()), "{swept:?}");
    assert!(
        guests.is_empty(),
        "the swept domain's QEMU still runs: {guests:?}"
    );
    assert!(!dir.exists(), "the swept domain's directory is still there");
    assert_eq!(
        kept_state,
        PowerState::Off,
        "the live run's domain was touched"
    );
    drop(kept);
    assert_gone(&ws.prefix, left.name(), &dir).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn power_on_reset_cycle_and_off_show_on_the_serial_console() {
    let ws = Workspace::new("power");
    let mut config = ws.node("n1");
    let identity = config.dir.join("identity");
    std::fs::write(&identity, "name=n1\n").unwrap();
    config.identity = Some(identity);
    let dir = config.dir.clone();
    let clock = Clock::wall();
    let started = clock.instant();
    let machine = define(config).await;
    machine.reset(ResetAction::On).await.unwrap();
    eprintln!("define + start took {:?}", clock.since(started));
    machine.reset(ResetAction::On).await.unwrap(); // already on: nothing to do
    assert_eq!(machine.power_state().await.unwrap(), PowerState::On);
    let console = machine.console();
    console.wait_for(&bds(), BOOT_TIMEOUT).await.unwrap();

    let mark = console.mark();
    machine.reset(ResetAction::ForceRestart).await.unwrap();
    console
        .wait_for_since(mark, &bds(), BOOT_TIMEOUT)
        .await
        .unwrap();
    machine.reset(ResetAction::Nmi).await.unwrap();

    let mark = console.mark();
    machine.reset(ResetAction::PowerCycle).await.unwrap();
    assert_eq!(machine.power_state().await.unwrap(), PowerState::On);
    console
        .wait_for_since(mark, &bds(), BOOT_TIMEOUT)
        .await
        .unwrap();

    let stopping = clock.instant();
    machine.reset(ResetAction::ForceOff).await.unwrap();
    eprintln!("destroy took {:?}", clock.since(stopping));
    machine
        .wait_for_state(PowerState::Off, STATE_TIMEOUT)
        .await
        .unwrap();
    let name = machine.name().to_owned();
    machine.teardown().await.unwrap();
    assert_gone(&ws.prefix, &name, &dir).await;
}

/// Rackproof's own BMC emulators in front of the domain, as `rackproof lab bmc-serve` puts
/// them in front of sim and QEMU nodes: Debian's ipmitool (lanplus) and rackproof-redfish's
/// client power it on, reset it, cycle it (both protocols; sushy-tools and VirtualBMC have no
/// power cycle) and off, and the serial console shows each boot.
#[tokio::test(flavor = "multi_thread")]
async fn rackproof_emulators_power_the_domain_on_reset_cycle_and_off_over_ipmi_and_redfish() {
    use rackproof_redfish::{
        AuthMode, ClientOptions, Credentials, Emulator, EmulatorConfig, Endpoint, RedfishClient,
    };
    const USER: &str = "lab";
    const PASSWORD: &str = "rackproof-pass"; // IPMI 2.0 passwords are at most 20 bytes
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ws = Workspace::new("ownbmc");
    let config = ws.node("n1");
    let dir = config.dir.clone();
    let clock = Clock::wall();
    let machine = std::sync::Arc::new(define(config).await);
    let ipmi_credentials = rackproof_ipmi::Credentials::new(USER, PASSWORD).unwrap();
    let ipmi =
        rackproof_ipmi::IpmiEmulator::start(machine.clone(), ipmi_credentials, clock.clone())
            .await
            .unwrap();
    let redfish = Emulator::new(EmulatorConfig::single(
        machine.clone(),
        USER,
        PASSWORD,
        clock.clone(),
    ))
    .unwrap();
    let served = redfish
        .serve_http("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let options = ClientOptions {
        auth: AuthMode::Basic,
        poll_interval: Duration::from_millis(200),
        power_on_grace: STATE_TIMEOUT,
        ..ClientOptions::default()
    };
    let client = RedfishClient::connect(
        &Endpoint::new(&served.url()),
        Credentials::new(USER, PASSWORD),
        options,
        clock.clone(),
    )
    .await
    .unwrap();
    // The BMC answers once QEMU runs, which can exceed a 1 s request timeout on a loaded machine.
    let ipmitool = Ipmitool::lanplus(ipmi.local_addr().port(), USER, PASSWORD).request_timeout(30);
    let console = machine.console();

    assert_eq!(
        ipmitool.stdout(&["power", "status"]).await.trim(),
        "Chassis Power is off"
    );
    let mark = console.mark();
    assert!(ipmitool.stdout(&["power", "on"]).await.contains("Up/On"));
    console
        .wait_for_since(mark, &bds(), BOOT_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(client.read_power_state().await.unwrap(), PowerState::On);

    for (how, reset) in [
        ("redfish ForceRestart", None),
        ("ipmitool power cycle", Some("cycle")),
        ("redfish PowerCycle", None),
        ("ipmitool power reset", Some("reset")),
    ] {
        let mark = console.mark();
        match reset {
            Some(action) => {
                ipmitool.stdout(&["power", action]).await;
            }
            None if how.ends_with("ForceRestart") => client
                .reset_system(ResetAction::ForceRestart)
                .await
                .unwrap(),
            None => client.reset_system(ResetAction::PowerCycle).await.unwrap(),
        }
        console
            .wait_for_since(mark, &bds(), BOOT_TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("{how}: no boot on the console: {e}"));
    }

    assert!(
        ipmitool
            .stdout(&["power", "off"])
            .await
            .contains("Down/Off")
    );
    machine
        .wait_for_state(PowerState::Off, STATE_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(
        client
            .wait_for_power_state(&[PowerState::Off], STATE_TIMEOUT)
            .await
            .unwrap(),
        PowerState::Off
    );

    drop(ipmi);
    served.shutdown();
    drop(redfish);
    let name = machine.name().to_owned();
    machine.teardown().await.unwrap();
    assert_gone(&ws.prefix, &name, &dir).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_once_pxe_override_applies_at_the_next_start_and_then_reverts() {
    let ws = Workspace::new("boot");
    let machine = define(ws.node("n1")).await;
    let pxe_once = BootOverride {
        mode: BootOverrideMode::Once,
        target: BootTarget::Pxe,
    };
    machine.set_boot_override(pxe_once).await.unwrap();
    assert_eq!(machine.boot_override().await.unwrap(), pxe_once);
    assert!(machine.defined_xml().await.unwrap().contains("bootindex=1"));
    machine.reset(ResetAction::On).await.unwrap();
    // The network went first: iPXE speaks before the firmware gives up on the devices.
    let pxe = regex::Regex::new("iPXE|PXEv4").unwrap();
    machine
        .console()
        .wait_for(&pxe, BOOT_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(
        machine.boot_override().await.unwrap(),
        BootOverride::default()
    );
    let xml = machine.defined_xml().await.unwrap();
    assert!(
        xml.contains("bootindex=2") && !xml.contains("bootindex=1"),
        "{xml}"
    );
    machine.teardown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bmc_tool_dies_with_the_thread_that_started_it_even_when_nothing_stops_it() {
    use rackproof_libvirt::bmc::{BmcTools, SushyEmulator};
    let ws = Workspace::new("orphan-bmc");
    let machine = define(ws.node("n1")).await;
    let tools = BmcTools::find().unwrap_or_else(|e| panic!("{e}"));
    let (uuid, dir) = (machine.uuid().to_owned(), ws.dir.path().join("sushy"));
    // A thread with a runtime of its own starts the tool and ends without stopping it, as a
    // harness killed outright runs no drop.
    let group = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let sushy = SushyEmulator::start(&tools, URI, &uuid, &dir, &Clock::wall())
                .await
                .unwrap();
            let group = sushy.process_group().unwrap();
            std::mem::forget(sushy);
            group
        })
    })
    .join()
    .unwrap();
    let clock = Clock::wall();
    let started = clock.instant();
    while !group_members(group).is_empty() && clock.since(started) < STATE_TIMEOUT {
        clock.sleep(Duration::from_millis(50)).await;
    }
    let left = group_members(group);
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(
        left.is_empty(),
        "sushy-emulator's group outlived the thread that started it: {left:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sushy_tools_powers_the_domain_on_and_off_over_redfish() {
    use rackproof_libvirt::bmc::{BmcTools, SushyEmulator};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ws = Workspace::new("sushy");
    let machine = define(ws.node("n1")).await;
    let tools = BmcTools::find().unwrap_or_else(|e| panic!("{e}"));
    let clock = Clock::wall();
    let sushy = SushyEmulator::start(
        &tools,
        URI,
        machine.uuid(),
        &ws.dir.path().join("sushy"),
        &clock,
    )
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let state = async || -> String {
        let body: serde_json::Value = http
            .get(sushy.system_url())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["PowerState"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(state().await, "Off");
    for (reset, want, driver_state) in [
        ("On", "On", PowerState::On),
        ("ForceOff", "Off", PowerState::Off),
    ] {
        let response = http
            .post(format!(
                "{}/Actions/ComputerSystem.Reset",
                sushy.system_url()
            ))
            .json(&serde_json::json!({ "ResetType": reset }))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{reset}: {}",
            response.status()
        );
        machine
            .wait_for_state(driver_state, STATE_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(state().await, want);
    }
    let group = sushy.process_group().unwrap();
    sushy.stop().await;
    machine.teardown().await.unwrap();
    assert!(
        group_members(group).is_empty(),
        "sushy-emulator processes left: {:?}",
        group_members(group)
    );
}

/// rackproof-redfish's client (the one that drives rack BMCs) against sushy-tools: discovery,
/// the reset types sushy advertises, boot override, power-state polling. What sushy-tools
/// 2.2.0 does differently from a BMC, pinned here so a change shows up:
/// - it advertises `ForceOn` (not one of the reset types the client uses) and no `PowerCycle`;
/// - libvirt has no one-time boot device: `Once` is stored and reported as `Continuous`, which
///   the client's read-back reports as not applied;
/// - `Pxe` needs a libvirt `<interface>`; the lab's NIC is QEMU's user network on the command
///   line (for `hostfwd`), so sushy answers 500 and names the missing device.
#[tokio::test(flavor = "multi_thread")]
async fn the_redfish_client_drives_the_domain_through_sushy_tools() {
    use rackproof_libvirt::bmc::{BmcTools, SushyEmulator};
    use rackproof_redfish::{
        AuthMode, ClientOptions, Credentials, Endpoint, RedfishClient, RedfishError, RetryPolicy,
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ws = Workspace::new("sushyclient");
    let machine = define(ws.node("n1")).await;
    let tools = BmcTools::find().unwrap_or_else(|e| panic!("{e}"));
    let clock = Clock::wall();
    let sushy = SushyEmulator::start(
        &tools,
        URI,
        machine.uuid(),
        &ws.dir.path().join("sushy"),
        &clock,
    )
    .await
    .unwrap();
    let options = ClientOptions {
        // sushy-tools runs without authentication here; basic credentials are sent and ignored.
        auth: AuthMode::Basic,
        retry: RetryPolicy {
            attempts: 2,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(1),
        },
        poll_interval: Duration::from_millis(200),
        power_on_grace: STATE_TIMEOUT,
        ..ClientOptions::default()
    };
    let endpoint = Endpoint::new(&sushy.base_url()).with_system(machine.uuid());
    let client = RedfishClient::connect(
        &endpoint,
        Credentials::new("lab", "unused"),
        options,
        clock.clone(),
    )
    .await
    .unwrap();

    assert_eq!(
        client.system_path(),
        format!("/redfish/v1/Systems/{}", machine.uuid())
    );
    assert_eq!(
        client.allowed_resets(),
        [
            ResetAction::On,
            ResetAction::ForceOff,
            ResetAction::GracefulShutdown,
            ResetAction::GracefulRestart,
            ResetAction::ForceRestart,
            ResetAction::Nmi
        ]
    );
    let err = client
        .reset_system(ResetAction::PowerCycle)
        .await
        .unwrap_err();
    assert!(matches!(err, RedfishError::NotAllowed { .. }), "{err}");
    assert_eq!(client.read_power_state().await.unwrap(), PowerState::Off);

    let hdd = BootOverride {
        mode: BootOverrideMode::Continuous,
        target: BootTarget::Hdd,
    };
    client.set_boot(hdd).await.unwrap();
    assert_eq!(client.read_boot_override().await.unwrap(), hdd);
    let once = BootOverride {
        mode: BootOverrideMode::Once,
        target: BootTarget::Hdd,
    };
    let err = client.set_boot(once).await.unwrap_err();
    assert!(matches!(err, RedfishError::NotApplied { .. }), "{err}");
    let pxe = BootOverride {
        mode: BootOverrideMode::Continuous,
        target: BootTarget::Pxe,
    };
    let err = client.set_boot(pxe).await.unwrap_err();
    assert_eq!(err.status(), Some(500), "{err}");
    assert!(
        err.to_string()
            .contains("Target libvirt device Pxe does not exist"),
        "{err}"
    );

    let console = machine.console();
    let mark = console.mark();
    client.reset_system(ResetAction::On).await.unwrap();
    assert_eq!(machine.power_state().await.unwrap(), PowerState::On);
    assert_eq!(client.read_power_state().await.unwrap(), PowerState::On);
    console
        .wait_for_since(mark, &bds(), BOOT_TIMEOUT)
        .await
        .unwrap();
    client.reset_system(ResetAction::On).await.unwrap(); // already on: nothing is sent

    let mark = console.mark();
    client
        .reset_system(ResetAction::ForceRestart)
        .await
        .unwrap();
    console
        .wait_for_since(mark, &bds(), BOOT_TIMEOUT)
        .await
        .unwrap();
    client.reset_system(ResetAction::Nmi).await.unwrap();

    client.reset_system(ResetAction::ForceOff).await.unwrap();
    assert_eq!(
        client
            .wait_for_power_state(&[PowerState::Off], STATE_TIMEOUT)
            .await
            .unwrap(),
        PowerState::Off
    );
    assert_eq!(machine.power_state().await.unwrap(), PowerState::Off);
    client.reset_system(ResetAction::ForceOff).await.unwrap(); // already off: nothing is sent

    let group = sushy.process_group().unwrap();
    sushy.stop().await;
    machine.teardown().await.unwrap();
    assert!(
        group_members(group).is_empty(),
        "sushy-emulator processes left: {:?}",
        group_members(group)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn virtualbmc_powers_the_domain_on_and_off_over_ipmi() {
    use rackproof_libvirt::bmc::{BmcTools, VirtualBmc};
    let ws = Workspace::new("vbmc");
    let machine = define(ws.node("n1")).await;
    let tools = BmcTools::find().unwrap_or_else(|e| panic!("{e}"));
    let vbmc_dir: PathBuf = ws.dir.path().join("vbmc");
    let bmc = VirtualBmc::start(&tools, URI, machine.name(), &vbmc_dir, &Clock::wall())
        .await
        .unwrap();
    let ipmitool = |args: &[&str]| {
        let out = std::process::Command::new("ipmitool")
            .args(bmc.ipmitool_args())
            .args(args)
            .output()
            .unwrap_or_else(|e| {
                panic!("ipmitool is missing ({e}); install it with: apt-get install -y ipmitool")
            });
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    assert_eq!(
        ipmitool(&["power", "status"]),
        (true, "Chassis Power is off\n".to_owned())
    );
    assert!(ipmitool(&["power", "on"]).0);
    machine
        .wait_for_state(PowerState::On, STATE_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(
        ipmitool(&["power", "status"]),
        (true, "Chassis Power is on\n".to_owned())
    );
    // VirtualBMC has no power cycle.
    assert!(!ipmitool(&["power", "cycle"]).0);
    assert!(ipmitool(&["power", "off"]).0);
    machine
        .wait_for_state(PowerState::Off, STATE_TIMEOUT)
        .await
        .unwrap();
    let group = bmc.process_group().unwrap();
    assert!(
        group_members(group).len() >= 2,
        "vbmcd runs each BMC as a child process"
    );
    bmc.stop().await;
    machine.teardown().await.unwrap();
    assert!(
        group_members(group).is_empty(),
        "VirtualBMC processes left: {:?}",
        group_members(group)
    );
}
