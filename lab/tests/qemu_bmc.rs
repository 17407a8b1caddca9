//! `bmc serve` in front of a QEMU node booting the base image of `ci/build-images`: Debian's
//! ipmitool and the Redfish client (through the `power` command and the inventory `bmc serve`
//! writes) power it on, reset it, cycle it and off, and the console file the inventory names shows each
//! boot. Then the server's shutdown leaves no QEMU process.
//!
//! Run with `cargo nextest run -p rackproof-lab --profile ci` (in the `qemu` group). Needs
//! `apt-get install -y ipmitool` and the images (`ci/build-images`); fails saying so otherwise.

mod qemu {
    use std::path::Path;
    use std::time::Duration;

    use rackproof_clock::Clock;
    use rackproof_driver::PowerState;
    use rackproof_lab::commands::{
        self, LabOptions, PowerCommand, PowerReport, ServeKind, ServeOptions,
    };
    use rackproof_lab::env::Env;
    use rackproof_lab::physical::InventoryFile;
    use rackproof_qemu::images::BASE_VERSION;
    use rackproof_test_support::ipmitool::Ipmitool;
    use rackproof_test_support::node_images;
    use rackproof_test_support::processes::processes_mentioning;
    use regex::Regex;

    /// One boot through UEFI, systemd-boot and the kernel to the init marker, on a loaded machine.
    const BOOT: Duration = Duration::from_secs(180);

    /// ipmitool as the user `bmc serve` wrote into `credentials` (user, then password). QEMU's
    /// start (the BMC answers once the process runs) can exceed a 1 s request timeout on a loaded
    /// machine.
    fn ipmitool(port: u16, credentials: &Path) -> Ipmitool {
        let text = std::fs::read_to_string(credentials).unwrap();
        let mut lines = text.lines();
        let (user, password) = (lines.next().unwrap(), lines.next().unwrap());
        Ipmitool::lanplus(port, user, password).request_timeout(30)
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

    #[tokio::test]
    async fn ipmitool_and_redfish_power_a_qemu_node_through_bmc_serve_and_the_console_shows_each_boot()
     {
        let images = node_images();
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
        let ipmi = ipmitool(served.ipmi.unwrap().port(), &served.credentials_file);
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
            ipmi.stdout(&["power", "status"]).await.trim(),
            "Chassis Power is off"
        );
        let on = ipmi.stdout(&["power", "on"]).await;
        assert!(on.contains("Up/On"), "{on}");
        wait_for_count(&clock, &console, &up, 1).await;
        assert_eq!(
            ipmi.stdout(&["power", "status"]).await.trim(),
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
        let cycle = ipmi.stdout(&["power", "cycle"]).await;
        assert!(cycle.contains("Cycle"), "{cycle}");
        wait_for_count(&clock, &console, &up, 3).await;
        assert_eq!(count(&console, &init), 3);

        let off = ipmi.stdout(&["power", "off"]).await;
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
        let left = processes_mentioning(&node_dir);
        assert!(
            left.is_empty(),
            "a QEMU process of node-1 is still running: {left:?}"
        );
    }
}
