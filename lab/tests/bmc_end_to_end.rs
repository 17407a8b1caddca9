//! End to end through the `bmc` module: sim machines behind the Redfish and IPMI emulators
//! (`bmc serve` on 127.0.0.1), driven by the `power`, `up`, `down` and `console` commands
//! from the inventories `bmc serve` writes — the same path a rack takes.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use rackproof_clock::Clock;
use rackproof_driver::PowerState;
use rackproof_lab::bmc::{BmcOptions, connect_node};
use rackproof_lab::commands::{
    self, BmcServer, CommandError, DownReport, LabOptions, PowerCommand, PowerReport, ServeKind,
    ServeOptions, UpReport,
};
use rackproof_lab::env::Env;
use rackproof_lab::physical::{InventoryFile, Reservation, ReservationError};
use rackproof_lab::sim::{Behaviour, BootTiming, Catalog, Phase, SimMachine};
use rackproof_lab::strategy::WaitOptions;

fn fast() -> BootTiming {
    let ms = Duration::from_millis;
    BootTiming {
        firmware: ms(20),
        loader: ms(10),
        kernel: ms(20),
        panic_reboot: ms(50),
        shutdown: ms(20),
        cycle_off: ms(20),
    }
}

fn machine(name: &str) -> SimMachine {
    SimMachine::builder(name, Clock::wall())
        .catalog(Catalog::new().with("1.0.0", Behaviour::Boots))
        .installed("1.0.0")
        .timing(fast())
        .build()
        .unwrap()
}

fn options(lock_dir: &Path) -> LabOptions {
    let mut options = LabOptions::new(
        Env::fixed([("RACKPROOF_LOCK_DIR", lock_dir)]),
        Clock::wall(),
    );
    options.bmc.redfish.poll_interval = Duration::from_millis(20);
    options.bmc.redfish.power_on_grace = Duration::from_secs(5);
    options.wait = WaitOptions {
        deadline: Duration::from_secs(30),
        ..WaitOptions::default()
    };
    options.poll_interval = Duration::from_millis(20);
    options
}

async fn serve(machines: Vec<SimMachine>, kind: ServeKind, dir: &Path) -> BmcServer {
    let options = ServeOptions {
        kind,
        bind: "127.0.0.1".parse().unwrap(),
        dir: dir.to_owned(),
        username: "rackproof".into(),
        ssh_host_key: None,
    };
    commands::bmc_serve(machines, &options, Clock::wall())
        .await
        .unwrap()
}

async fn wait_for_boots(machine: &SimMachine, boots: u64) {
    for _ in 0..500 {
        if machine.boots() == boots {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "{} booted {} times, not {boots}",
        machine.name(),
        machine.boots()
    );
}

async fn wait_for_phase_up(machine: &SimMachine) {
    for _ in 0..500 {
        if matches!(machine.phase(), Phase::Up { .. }) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} never came up: {:?}", machine.name(), machine.phase());
}

async fn power_commands_drive_the_machine(kind: ServeKind) {
    let dir = tempfile::tempdir().unwrap();
    let node = machine("sim-1");
    let server = serve(vec![node.clone()], kind, dir.path()).await;
    let path = match kind {
        ServeKind::Ipmi => server.ipmi_inventory.clone(),
        _ => server.redfish_inventory.clone(),
    };
    let inventory = InventoryFile::load(&path.unwrap()).unwrap();
    let options = options(&dir.path().join("locks"));
    let power = |command| commands::power(&inventory, "sim-1", command, &options);

    assert_eq!(
        power(PowerCommand::Status).await.unwrap(),
        PowerReport::Done {
            command: PowerCommand::Status,
            state: PowerState::Off
        }
    );
    assert_eq!(
        power(PowerCommand::On).await.unwrap(),
        PowerReport::Done {
            command: PowerCommand::On,
            state: PowerState::On
        }
    );
    wait_for_phase_up(&node).await;
    assert_eq!(node.boots(), 1);
    power(PowerCommand::Reset).await.unwrap();
    wait_for_boots(&node, 2).await;
    wait_for_phase_up(&node).await;
    power(PowerCommand::Cycle).await.unwrap();
    wait_for_boots(&node, 3).await;
    wait_for_phase_up(&node).await;
    assert_eq!(
        power(PowerCommand::Off).await.unwrap(),
        PowerReport::Done {
            command: PowerCommand::Off,
            state: PowerState::Off
        }
    );
    assert_eq!(node.phase(), Phase::Off);
    let history = node.console_history();
    assert_eq!(
        history.last().map(String::as_str),
        Some("firmware: power off"),
        "{history:?}"
    );

    // While another run holds the node, `power` refuses and names the holder.
    let _held = Reservation::acquire(&dir.path().join("locks"), "sim-1", &Clock::wall()).unwrap();
    let err = power(PowerCommand::On).await.unwrap_err();
    assert!(
        matches!(&err, CommandError::Reservation(ReservationError::Held { holder, .. }) if holder.pid == Some(std::process::id())),
        "{err:?}"
    );
    assert_eq!(node.phase(), Phase::Off);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_through_the_redfish_emulator() {
    power_commands_drive_the_machine(ServeKind::Redfish).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_through_the_ipmi_emulator() {
    power_commands_drive_the_machine(ServeKind::Ipmi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_waits_for_the_os_on_the_console_and_down_powers_off() {
    let dir = tempfile::tempdir().unwrap();
    let machines = vec![machine("sim-1"), machine("sim-2")];
    let server = serve(machines.clone(), ServeKind::Both, dir.path()).await;
    let options = options(&dir.path().join("locks"));
    let redfish = InventoryFile::load(server.redfish_inventory.as_ref().unwrap()).unwrap();
    let ipmi = InventoryFile::load(server.ipmi_inventory.as_ref().unwrap()).unwrap();

    let outcomes = commands::up(&redfish, &[], &options).await.unwrap();
    assert_eq!(outcomes.len(), 2);
    for outcome in &outcomes {
        assert_eq!(
            outcome.result.as_ref().unwrap(),
            &UpReport::Up {
                version: "1.0.0".into()
            },
            "{}",
            outcome.node
        );
    }
    for machine in &machines {
        assert!(matches!(machine.phase(), Phase::Up { .. }), "{machine:?}");
    }
    // Already up: nothing to do, the same answer.
    let again = commands::up(&ipmi, &["sim-2".into()], &options)
        .await
        .unwrap();
    assert_eq!(
        again[0].result.as_ref().unwrap(),
        &UpReport::Up {
            version: "1.0.0".into()
        }
    );
    assert_eq!(machines[1].boots(), 1);

    // The console streams the boot from its first line.
    let mut console = commands::console(&redfish, "sim-1", &options)
        .await
        .unwrap();
    assert_eq!(
        console.next_line().await.unwrap().text,
        "firmware: power on"
    );

    let down = commands::down(&ipmi, &["sim-1".into()], &options)
        .await
        .unwrap();
    assert_eq!(
        down[0].result.as_ref().unwrap(),
        &DownReport::Off {
            was: PowerState::On
        }
    );
    assert_eq!(machines[0].phase(), Phase::Off);
    assert!(matches!(machines[1].phase(), Phase::Up { .. }));
    let mut seen = Vec::new();
    while let Some(line) = console.next_line().await {
        seen.push(line.text);
        if seen.last().map(String::as_str) == Some("firmware: power off") {
            break;
        }
    }
    assert!(
        seen.iter().any(|l| l == "rackproof-os 1.0.0: up"),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bmc_serve_writes_private_credentials_and_names_every_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(vec![machine("sim-1")], ServeKind::Both, dir.path()).await;
    let node = &server.nodes[0];
    let mode = std::fs::metadata(&node.credentials_file)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let summary = server.to_string();
    for expected in [
        node.redfish.clone().unwrap(),
        node.ipmi.unwrap().to_string(),
        node.credentials_file.display().to_string(),
        node.redfish_ca_file.as_ref().unwrap().display().to_string(),
        server
            .redfish_inventory
            .as_ref()
            .unwrap()
            .display()
            .to_string(),
        server
            .ipmi_inventory
            .as_ref()
            .unwrap()
            .display()
            .to_string(),
    ] {
        assert!(
            summary.contains(&expected),
            "{expected} missing from:\n{summary}"
        );
    }
    let password = std::fs::read_to_string(&node.credentials_file)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_owned();
    assert!(!summary.contains(&password), "{summary}");

    // A wrong password is refused, and the message does not carry it.
    let inventory = InventoryFile::load(server.redfish_inventory.as_ref().unwrap()).unwrap();
    std::fs::write(&node.credentials_file, "rackproof\nwrong-password-123\n").unwrap();
    let err = connect_node(
        inventory.node("sim-1").unwrap(),
        &Env::fixed::<&str, &str>([]),
        &BmcOptions::default(),
        Clock::wall(),
    )
    .await
    .unwrap_err();
    let text = rackproof_std::error_chain(&err);
    assert!(
        text.starts_with("node sim-1: connect to redfish BMC https://127.0.0.1:"),
        "{text}"
    );
    assert!(
        !text.contains("wrong-password-123") && !text.contains(&password),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_console_streams_until_the_peer_closes() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (go, ready) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt as _;
        let (mut stream, _) = listener.accept().await.unwrap();
        ready.await.unwrap();
        stream
            .write_all(b"old boot\r\nfirmware: power on\r\nsystemd-boot: selected entry a.conf\r\n")
            .await
            .unwrap();
        stream.write_all(b"rackproof-os 2.0.0: up\n").await.unwrap();
    });
    let text = format!(
        "nodes:\n  - name: rack-tcp\n    console:\n      tcp: {{ host: 127.0.0.1, port: {port} }}\n"
    );
    let inventory = InventoryFile::parse(Path::new("/lab/tcp.yaml"), &text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut console = commands::console(&inventory, "rack-tcp", &options(dir.path()))
        .await
        .unwrap();
    go.send(()).unwrap();
    let mut lines = Vec::new();
    while let Some(line) = console.next_line().await {
        lines.push(line.text);
    }
    server.await.unwrap();
    assert_eq!(
        lines,
        [
            "old boot",
            "firmware: power on",
            "systemd-boot: selected entry a.conf",
            "rackproof-os 2.0.0: up"
        ]
    );

    // This node has a console but no BMC: power commands say so.
    let err = commands::power(
        &inventory,
        "rack-tcp",
        PowerCommand::Status,
        &options(dir.path()),
    )
    .await
    .unwrap_err();
    assert_eq!(err.to_string(), "node rack-tcp: no bmc in the inventory");
}
