//! `bmc serve` in front of a QEMU node booting the base image of `ci/build-images`: Debian's
//! ipmitool and the Redfish client (through the `power` command and the inventory `bmc serve`
//! writes) power it on, reset it, cycle it and off, and the console file the inventory names shows each
//! boot. Then the server's shutdown leaves no QEMU process.
//!
//! Run with `cargo nextest run -p rackproof-lab --profile ci` (in the `qemu` group). Needs
//! `apt-get install -y ipmitool` and the images (`ci/build-images`); fails saying so otherwise.

mod qemu {
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use rackproof_clock::Clock;
    use rackproof_driver::PowerState;
    use rackproof_lab::commands::{
        self, LabOptions, PowerCommand, PowerReport, ServeKind, ServeOptions,
    };
    use rackproof_lab::env::Env;
    use rackproof_lab::physical::InventoryFile;
    use rackproof_qemu::Images;
    use rackproof_qemu::images::BASE_VERSION;
    use regex::Regex;

    /// One boot through UEFI, systemd-boot and the kernel to the init marker, on a loaded machine.
    const BOOT: Duration = Duration::from_secs(180);

    fn repo() -> PathBuf {
        Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("..")
    }

    fn images() -> Images {
        if let Err(e) = rackproof_qemu::Prerequisites::find() {
            panic!("{e}");
        }
        Images::build(&repo())
            .unwrap_or_else(|e| panic!("{e}\n(build the images with: ci/build-images)"))
    }

    /// `ipmitool -I lanplus` against `port`, the password passed in the environment (`-E`), not
    /// argv. Awaited, not blocking: the emulators answer on this test's runtime.
    async fn ipmitool(port: u16, credentials: &Path, args: &[&str]) -> String {
        let text = std::fs::read_to_string(credentials).unwrap();
        let mut lines = text.lines();
        let (user, password) = (lines.next().unwrap(), lines.next().unwrap());
        let port = port.to_string();
        // QEMU's start (the BMC answers once the process runs) can exceed ipmitool's 1 s default
        // timeout on a loaded machine; a retransmission would repeat the command.
        let out = tokio::process::Command::new("ipmitool")
            .args([
                "-I",
                "lanplus",
                "-H",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                user,
                "-E",
                "-N",
                "30",
                "-R",
                "1",
            ])
            .args(args)
            .env("IPMI_PASSWORD", password)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .unwrap_or_else(|e| {
                panic!("ipmitool is missing ({e}); install it with: apt-get install -y ipmitool")
            });
        assert!(
            out.status.success(),
            "ipmitool {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Lines of the console file matching `pattern`.
    fn count(console: &Path, pattern: &Regex) -> usize {
        std::fs::read_to_string(console)
            .unwrap_or_default()
            .lines()
            .filter(|l| pattern.is_match(l))
            .count()
    }

    /// Waits until the console file has `n` lines matching `pattern`.
    async fn wait_for_count(clock: &Clock, console: &Path, pattern: &Regex, n: usize) {
        let waited = clock
            .timeout(BOOT, async {
                while count(console, pattern) < n {
                    clock.sleep(Duration::from_millis(200)).await;
                }
            })
            .await;
        if waited.is_err() {
            let text = std::fs::read_to_string(console).unwrap_or_default();
            panic!(
                "console {} has {} of {n} lines /{pattern}/:\n{text}",
                console.display(),
                count(console, pattern)
            );
        }
    }

    /// PIDs of processes whose command line mentions `needle`.
    fn processes_mentioning(needle: &str) -> Vec<u32> {
        let mut pids = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == std::process::id() {
                continue;
            }
            if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
                && String::from_utf8_lossy(&cmdline).contains(needle)
            {
                pids.push(pid);
            }
        }
        pids
    }

    #[tokio::test]
    async fn ipmitool_and_redfish_power_a_qemu_node_through_bmc_serve_and_the_console_shows_each_boot()
     {
        let images = images();
        let clock = Clock::wall();
        let dir = tempfile::tempdir().unwrap();
        let nodes = commands::qemu_nodes(&images, 1, &clock).unwrap();
        let node_dir = nodes[0].dir().display().to_string();
        let options = ServeOptions {
            kind: ServeKind::Both,
            bind: "127.0.0.1".parse().unwrap(),
            dir: dir.path().join("bmc"),
            username: "rackproof".into(),
            ssh_host_key: None,
        };
        let server = commands::bmc_serve(nodes, &options, clock.clone())
            .await
            .unwrap();
        let served = &server.nodes[0];
        assert_eq!(served.name, "node-1");
        let ipmi_port = served.ipmi.unwrap().port();
        let console = served.console_file.clone();
        let init = Regex::new(&format!(
            "^rackproof-os {}: init started",
            regex::escape(BASE_VERSION)
        ))
        .unwrap();
        let up = Regex::new(&format!(
            "^rackproof-os {}: up$",
            regex::escape(BASE_VERSION)
        ))
        .unwrap();

        assert_eq!(
            ipmitool(ipmi_port, &served.credentials_file, &["power", "status"])
                .await
                .trim(),
            "Chassis Power is off"
        );
        let on = ipmitool(ipmi_port, &served.credentials_file, &["power", "on"]).await;
        assert!(on.contains("Up/On"), "{on}");
        wait_for_count(&clock, &console, &up, 1).await;
        assert_eq!(
            ipmitool(ipmi_port, &served.credentials_file, &["power", "status"])
                .await
                .trim(),
            "Chassis Power is on"
        );

        // The Redfish side, through the inventory bmc serve wrote (its CA, its credentials file).
        let inventory = InventoryFile::load(server.redfish_inventory.as_ref().unwrap()).unwrap();
        let mut lab = LabOptions::new(
            Env::fixed([("RACKPROOF_LOCK_DIR", dir.path().join("locks"))]),
            clock.clone(),
        );
        lab.bmc.redfish.poll_interval = Duration::from_millis(200);
        let power = async |command| {
            commands::power(&inventory, "node-1", command, &lab)
                .await
                .unwrap()
        };
        assert_eq!(
            power(PowerCommand::Status).await,
            PowerReport::Done {
                command: PowerCommand::Status,
                state: PowerState::On
            }
        );
        power(PowerCommand::Reset).await;
        wait_for_count(&clock, &console, &up, 2).await;
        assert_eq!(count(&console, &init), 2);

        // A power cycle over IPMI: off, then on; one more boot.
        let cycle = ipmitool(ipmi_port, &served.credentials_file, &["power", "cycle"]).await;
        assert!(cycle.contains("Cycle"), "{cycle}");
        wait_for_count(&clock, &console, &up, 3).await;
        assert_eq!(count(&console, &init), 3);

        let off = ipmitool(ipmi_port, &served.credentials_file, &["power", "off"]).await;
        assert!(off.contains("Down/Off"), "{off}");
        assert_eq!(
            power(PowerCommand::Status).await,
            PowerReport::Done {
                command: PowerCommand::Status,
                state: PowerState::Off
            }
        );
        assert_eq!(count(&console, &init), 3);

        server.shutdown().await.unwrap();
        assert!(
            processes_mentioning(&node_dir).is_empty(),
            "a QEMU process of node-1 is still running"
        );
    }
}
