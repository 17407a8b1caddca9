//! The physical backend without hardware: inventory files and their error positions,
//! credentials from the environment and files, reservations (in one process and across
//! processes), dry runs, and unknown nodes.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use jiff::Timestamp;
use rackproof_clock::Clock;
use rackproof_driver::{
    BootControl, BootOverride, BootOverrideMode, BootTarget, Power, PowerState, ResetAction,
};
use rackproof_lab::bmc::{
    BmcAction, CredentialsError, DryRunPower, DryRunSink, resolve_credentials,
};
use rackproof_lab::commands::{
    self, CommandError, DownReport, LabOptions, PowerCommand, PowerReport, UpReport,
};
use rackproof_lab::env::Env;
use rackproof_lab::physical::{InventoryError, InventoryFile, Reservation, ReservationError};
use rackproof_lab::resource::CredentialsRef;
use rackproof_std::error_chain;

const SECRET: &str = "hunter2-top-secret";

fn clock() -> Clock {
    Clock::simulated(Timestamp::from_second(1_700_000_000).unwrap())
}

/// An inventory of two nodes; BMC endpoints on a loopback port where nothing listens.
fn inventory_text(cred_file: &Path) -> String {
    format!(
        r#"nodes:
  - name: rack1-node1
    bmc:
      kind: redfish
      endpoint: https://127.0.0.1:1
      credentials:
        env: {{ usernameVar: RACK1_USER, passwordVar: RACK1_PASSWORD }}
      insecureSkipTlsVerify: true
    console:
      file: {{ path: /var/log/conserver/rack1-node1.log }}
  - name: rack1-node2
    bmc:
      kind: ipmi
      endpoint: 127.0.0.1:1
      credentials:
        file: {{ path: {} }}
    ssh:
      host: 10.0.1.12
      user: root
      keyPath: /etc/rackproof/id_ed25519
      hostKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample
    disks:
      - {{ name: sda, role: boot, path: /dev/sda }}
"#,
        cred_file.display()
    )
}

fn parse(text: &str) -> Result<InventoryFile, InventoryError> {
    InventoryFile::parse(Path::new("/lab/rack1.yaml"), text)
}

#[test]
fn inventory_syntax_errors_point_at_file_line_column() {
    let text = inventory_text(Path::new("/etc/rackproof/node2.cred"));
    assert_eq!(parse(&text).unwrap().inventory.nodes.len(), 2);

    let inline = text.replace(
        "      insecureSkipTlsVerify: true\n",
        "      password: hunter2\n",
    );
    let err = parse(&inline).unwrap_err();
    assert!(matches!(err, InventoryError::Syntax { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.starts_with("/lab/rack1.yaml:8:7: "), "{message}");
    assert!(message.contains("unknown field `password`"), "{message}");
    assert!(!message.contains(" at line "), "{message}");

    let bad_kind = text.replace("kind: ipmi", "kind: ilo");
    let message = parse(&bad_kind).unwrap_err().to_string();
    assert!(message.starts_with("/lab/rack1.yaml:13:13: "), "{message}");
    assert!(message.contains("ilo"), "{message}");
}

#[test]
fn inventory_semantic_errors_point_at_the_node() {
    let text = inventory_text(Path::new("/etc/rackproof/node2.cred"));
    let bad_endpoint = text.replace("https://127.0.0.1:1", "127.0.0.1:443");
    let err = parse(&bad_endpoint).unwrap_err();
    assert!(matches!(err, InventoryError::Invalid { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with("/lab/rack1.yaml:2:5: node \"rack1-node1\": "),
        "{message}"
    );
    assert!(message.contains("must start with https://"), "{message}");

    let relative = inventory_text(Path::new("node2.cred"));
    let message = parse(&relative).unwrap_err().to_string();
    assert!(
        message.starts_with("/lab/rack1.yaml:11:5: node \"rack1-node2\": "),
        "{message}"
    );
    assert!(
        message.contains("credentials file node2.cred must be an absolute path"),
        "{message}"
    );

    let twice = text.replace("rack1-node2", "rack1-node1");
    let message = parse(&twice).unwrap_err().to_string();
    assert_eq!(
        message,
        "/lab/rack1.yaml:11:5: node \"rack1-node1\" is listed twice (first at /lab/rack1.yaml:2:5)"
    );
}

#[test]
fn a_missing_inventory_file_is_named() {
    let err = InventoryFile::load(Path::new("/nonexistent/rack.yaml")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot read inventory /nonexistent/rack.yaml"
    );
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn credentials_come_from_environment_variables() {
    let reference = CredentialsRef::Env {
        username_var: "BMC_USER".into(),
        password_var: "BMC_PASS".into(),
    };
    let env = Env::fixed([("BMC_USER", "admin"), ("BMC_PASS", SECRET)]);
    let credentials = resolve_credentials(&reference, &env).unwrap();
    assert_eq!(credentials.username(), "admin");
    let debug = format!("{credentials:?}");
    assert!(
        debug.contains("admin") && !debug.contains(SECRET),
        "{debug}"
    );

    let missing =
        resolve_credentials(&reference, &Env::fixed([("BMC_USER", "admin")])).unwrap_err();
    assert!(matches!(missing, CredentialsError::EnvMissing { .. }));
    assert_eq!(
        missing.to_string(),
        "environment variable BMC_PASS (the BMC password) is not set"
    );

    let empty = resolve_credentials(
        &reference,
        &Env::fixed([("BMC_USER", SECRET), ("BMC_PASS", "")]),
    )
    .unwrap_err();
    assert_eq!(
        empty.to_string(),
        "environment variable BMC_PASS (the BMC password) is empty"
    );
}

#[test]
fn credentials_come_from_a_file_and_errors_never_show_its_content() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.cred", &format!("admin\n{SECRET}\n"));
    let credentials = resolve_credentials(
        &CredentialsRef::File { path: good },
        &Env::fixed::<&str, &str>([]),
    )
    .unwrap();
    assert_eq!(credentials.username(), "admin");

    let cases = [
        (
            write(dir.path(), "one-line.cred", &format!("{SECRET}\n")),
            "must have two lines",
        ),
        (
            write(
                dir.path(),
                "three.cred",
                &format!("admin\n{SECRET}\n{SECRET}\n"),
            ),
            "more than two lines",
        ),
        (
            write(dir.path(), "no-user.cred", &format!("\n{SECRET}\n")),
            "first line (the user name) is empty",
        ),
        (
            dir.path().join("absent.cred"),
            "cannot read BMC credentials file",
        ),
    ];
    for (path, expected) in cases {
        let err = resolve_credentials(
            &CredentialsRef::File { path: path.clone() },
            &Env::fixed::<&str, &str>([]),
        )
        .unwrap_err();
        let text = error_chain(&err);
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains(expected), "{text}");
        assert!(!text.contains(SECRET), "{text}");
    }
}

fn options(lock_dir: &Path) -> LabOptions {
    let env = Env::fixed([
        ("RACKPROOF_LOCK_DIR", lock_dir.as_os_str()),
        ("RACK1_USER", "admin".as_ref()),
        ("RACK1_PASSWORD", SECRET.as_ref()),
    ]);
    LabOptions {
        dry_run: Some(DryRunSink::Quiet),
        ..LabOptions::new(env, clock())
    }
}

#[test]
fn two_reservations_of_one_node_conflict_and_drop_releases() {
    let dir = tempfile::tempdir().unwrap();
    let first = Reservation::acquire(dir.path(), "rack1-node1", &clock()).unwrap();
    let record = std::fs::read_to_string(first.path()).unwrap();
    assert!(
        record.contains(&format!("pid: {}", std::process::id())),
        "{record}"
    );
    assert!(record.contains("command: "), "{record}");

    let err = Reservation::acquire(dir.path(), "rack1-node1", &clock()).unwrap_err();
    let ReservationError::Held { holder, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(holder.pid, Some(std::process::id()));
    let message = err.to_string();
    assert!(
        message.starts_with(&format!(
            "node rack1-node1 is reserved by pid {} (",
            std::process::id()
        )),
        "{message}"
    );
    assert!(message.contains("rack1-node1.lock"), "{message}");

    // Another node is free; taking several is all or nothing.
    let err =
        Reservation::acquire_all(dir.path(), ["rack1-node2", "rack1-node1"], &clock()).unwrap_err();
    assert!(
        matches!(err, ReservationError::Held { ref node, .. } if node == "rack1-node1"),
        "{err:?}"
    );
    let second = Reservation::acquire(dir.path(), "rack1-node2", &clock()).unwrap();
    drop(second);

    drop(first);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("rack1-node1.lock")).unwrap(),
        ""
    );
    let again = Reservation::acquire(dir.path(), "rack1-node1", &clock()).unwrap();
    assert_eq!(again.node(), "rack1-node1");
}

/// A child process; killed and reaped on every exit path.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_reservation_held_by_another_process_is_refused_until_it_exits() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("rack1-node1.lock");
    // flock(1) from util-linux holds the lock on fd 9, which `sleep` inherits through exec.
    let script = r#"exec 9<>"$1"; flock -xn 9 || exit 3; printf 'pid: %s\ncommand: sleep-holder\n' $$ >&9; echo held; exec sleep 60"#;
    let child = Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(&lock)
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh and flock (Debian util-linux) are needed: apt-get install -y util-linux");
    let mut child = ChildGuard(child);
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "held\n", "the child could not take the lock");

    let err = Reservation::acquire(dir.path(), "rack1-node1", &clock()).unwrap_err();
    let ReservationError::Held { holder, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(holder.pid, Some(child.0.id()));
    assert_eq!(holder.command.as_deref(), Some("sleep-holder"));
    assert!(
        err.to_string()
            .contains(&format!("reserved by pid {} (sleep-holder)", child.0.id())),
        "{err}"
    );

    drop(child);
    let reservation = Reservation::acquire(dir.path(), "rack1-node1", &clock()).unwrap();
    let record = std::fs::read_to_string(reservation.path()).unwrap();
    assert!(
        record.starts_with(&format!("pid: {}\n", std::process::id())),
        "{record}"
    );
}

#[tokio::test]
async fn dry_run_records_the_exact_actions_and_contacts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cred = write(dir.path(), "node2.cred", &format!("admin\n{SECRET}\n"));
    let inventory = parse(&inventory_text(&cred)).unwrap();
    let options = options(dir.path());
    // A dry run takes no reservation, so a held node is no obstacle.
    let _held = Reservation::acquire(dir.path(), "rack1-node1", &clock()).unwrap();

    let report = commands::power(&inventory, "rack1-node1", PowerCommand::Cycle, &options)
        .await
        .unwrap();
    assert_eq!(
        report,
        PowerReport::DryRun {
            actions: vec![BmcAction::Reset(ResetAction::PowerCycle)]
        }
    );
    let report = commands::power(&inventory, "rack1-node2", PowerCommand::Status, &options)
        .await
        .unwrap();
    assert_eq!(report, PowerReport::DryRun { actions: vec![] });

    let up = commands::up(&inventory, &["rack1-node1".into()], &options)
        .await
        .unwrap();
    assert_eq!(up.len(), 1);
    assert_eq!(
        up[0].result.as_ref().unwrap(),
        &UpReport::DryRun {
            actions: vec![BmcAction::ReadPowerState, BmcAction::Reset(ResetAction::On)]
        }
    );

    let down = commands::down(&inventory, &[], &options).await.unwrap();
    let nodes: Vec<&str> = down.iter().map(|o| o.node.as_str()).collect();
    assert_eq!(nodes, ["rack1-node1", "rack1-node2"]);
    for outcome in &down {
        assert_eq!(
            outcome.result.as_ref().unwrap(),
            &DownReport::DryRun {
                actions: vec![
                    BmcAction::ReadPowerState,
                    BmcAction::Reset(ResetAction::ForceOff)
                ]
            }
        );
    }

    // Dry runs still check that the credentials resolve.
    let no_password = LabOptions {
        env: Env::fixed([("RACK1_USER", "admin")]),
        ..options.clone()
    };
    let err = commands::power(&inventory, "rack1-node1", PowerCommand::Off, &no_password)
        .await
        .unwrap_err();
    let text = error_chain(&err);
    assert!(
        text.contains("node rack1-node1: resolve BMC credentials"),
        "{text}"
    );
    assert!(text.contains("RACK1_PASSWORD"), "{text}");
}

#[tokio::test]
async fn dry_run_power_prints_each_action_with_node_and_bmc() {
    let dry = DryRunPower::new(
        "rack1-node1",
        "redfish https://10.0.0.11",
        PowerState::Off,
        DryRunSink::Quiet,
    );
    assert_eq!(dry.power_state().await.unwrap(), PowerState::Off);
    dry.reset(ResetAction::On).await.unwrap();
    assert_eq!(dry.power_state().await.unwrap(), PowerState::On);
    let pxe = BootOverride {
        mode: BootOverrideMode::Once,
        target: BootTarget::Pxe,
    };
    dry.set_boot_override(pxe).await.unwrap();
    assert_eq!(dry.boot_override().await.unwrap(), pxe);
    dry.reset(ResetAction::ForceOff).await.unwrap();
    assert_eq!(
        dry.actions(),
        [
            BmcAction::ReadPowerState,
            BmcAction::Reset(ResetAction::On),
            BmcAction::ReadPowerState,
            BmcAction::SetBootOverride(pxe),
            BmcAction::ReadBootOverride,
            BmcAction::Reset(ResetAction::ForceOff),
        ]
    );
    assert_eq!(
        dry.lines()[1],
        "dry-run: node rack1-node1 (redfish https://10.0.0.11): would send reset On"
    );
    assert_eq!(
        dry.lines()[3],
        "dry-run: node rack1-node1 (redfish https://10.0.0.11): would set the boot override to Pxe (Once)"
    );
}

#[tokio::test]
async fn unknown_nodes_are_refused_with_a_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    let inventory = parse(&inventory_text(Path::new("/etc/rackproof/node2.cred"))).unwrap();
    let options = options(dir.path());

    let err = commands::power(&inventory, "rack1-nod1", PowerCommand::On, &options)
        .await
        .unwrap_err();
    assert!(matches!(err, CommandError::UnknownNode(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "node \"rack1-nod1\" is not in inventory /lab/rack1.yaml; did you mean \"rack1-node1\"?"
    );

    // One unknown name among known ones refuses the whole command before anything happens.
    let err = commands::up(&inventory, &["rack1-node1".into(), "web7".into()], &options)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "node \"web7\" is not in inventory /lab/rack1.yaml; it lists rack1-node1, rack1-node2"
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "nothing was reserved"
    );

    let err = commands::console(&inventory, "rack2-node1", &options)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("did you mean \"rack1-node1\"?"),
        "{err}"
    );
}

#[test]
fn power_commands_parse_from_their_names() {
    for command in PowerCommand::ALL {
        assert_eq!(command.as_str().parse::<PowerCommand>().unwrap(), command);
    }
    let err = "reboot".parse::<PowerCommand>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown power command \"reboot\"; use one of on, off, cycle, reset, status"
    );
}
