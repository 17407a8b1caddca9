//! Real-guest tests: the node OS images of `ci/build-images` booted in QEMU (TCG) with OVMF and
//! systemd-boot; checked from the serial console and from the ESP afterwards, which must be
//! exactly what inplace-boot's model of systemd-boot 252 predicts.
//!
//! Run with `cargo nextest run -p rackproof-qemu --profile ci` (they are in the `qemu` group).
//! Each test keeps its node directory (serial.log, qemu.log, disk) under
//! `target/qemu-artifacts/TEST` when it fails, and names it in the failure message.

mod qemu {
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use inplace_boot::{Esp, LoaderVars, MemEsp};
    use rackproof_clock::Clock;
    use rackproof_driver::{BootControl, BootOverride, BootOverrideMode, BootTarget, DriverError, Power, PowerState, ResetAction};
    use rackproof_qemu::images::{BASE_VERSION, NEW_VERSION};
    use rackproof_qemu::{Images, QemuConfig, QemuMachine};
    use regex::Regex;

    /// One boot through UEFI, systemd-boot and the kernel to the init marker, with room for a
    /// loaded CI machine.
    const BOOT: Duration = Duration::from_secs(120);

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn images() -> Images {
        if let Err(e) = rackproof_qemu::Prerequisites::find() {
            panic!("{e}");
        }
        Images::build(&repo()).unwrap_or_else(|e| panic!("{e}\n(build the images with: ci/build-images)"))
    }

    fn re(pattern: &str) -> Regex {
        Regex::new(pattern).unwrap()
    }

    fn marker(version: &str, what: &str) -> Regex {
        re(&format!("^rackproof-os {}: {what}", regex::escape(version)))
    }

    /// A node whose directory survives a failed test.
    struct Node {
        machine: QemuMachine,
        clock: Clock,
        dir: PathBuf,
    }

    impl Node {
        fn new(test: &str, disk: &Path) -> Self {
            let dir = repo().join("target/qemu-artifacts").join(test);
            let _ = std::fs::remove_dir_all(&dir);
            let mut config = QemuConfig::new(test, disk);
            config.work_dir = Some(dir.clone());
            let clock = Clock::wall();
            let machine = QemuMachine::create(config, clock.clone()).unwrap();
            Self { machine, clock, dir }
        }

        async fn wait(&self, mark: rackproof_qemu::Mark, pattern: &Regex) -> String {
            self.wait_boots(mark, pattern, 1).await
        }

        /// Waits for `pattern` allowing `boots` boots' time.
        async fn wait_boots(&self, mark: rackproof_qemu::Mark, pattern: &Regex, boots: u32) -> String {
            match self.machine.console().wait_for_since(&self.clock, mark, pattern, BOOT * boots).await {
                Ok(line) => line.text,
                Err(e) => panic!("{e}; artifacts in {}", self.dir.display()),
            }
        }

        /// Powers off, checks the process is gone, and removes the artifacts (the test passed).
        async fn finish(self) {
            self.machine.reset(ResetAction::ForceOff).await.unwrap();
            assert_eq!(self.machine.power_state().await.unwrap(), PowerState::Off);
            let dir = self.dir.clone();
            drop(self.machine);
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Entry file names on an ESP, sorted.
    fn entries(esp: &dyn Esp) -> Vec<String> {
        let mut names: Vec<String> =
            inplace_boot::entry_files(esp).unwrap().into_iter().map(|(n, _)| n.file_name().to_owned()).collect();
        names.sort();
        names
    }

    /// The loader's files of a real ESP, copied into a model ESP.
    fn model_of(esp: &dyn Esp) -> MemEsp {
        let model = MemEsp::new(1 << 30);
        for dir in ["loader", "loader/entries", "rackproof"] {
            for item in esp.list(dir).unwrap() {
                if !item.is_dir {
                    let path = format!("{dir}/{}", item.name);
                    model.write_file(&path, &esp.read(&path).unwrap()).unwrap();
                }
            }
        }
        model
    }

    /// What the ESP looks like after `boots` boots, per inplace-boot's systemd-boot model.
    fn predict(model: &MemEsp, boots: usize) -> Vec<String> {
        let mut vars = LoaderVars::default();
        for _ in 0..boots {
            inplace_boot::boot(model, &mut vars).unwrap();
        }
        entries(model)
    }

    #[tokio::test]
    async fn boots_the_installed_version_and_starts_the_agent() {
        let images = images();
        let node = Node::new("boots_the_installed_version", &images.disk(BASE_VERSION).unwrap());
        let model = model_of(&node.machine.esp());
        let mark = node.machine.console().mark();
        node.machine.reset(ResetAction::On).await.unwrap();
        node.wait(mark, &marker(BASE_VERSION, "up")).await;
        node.wait(mark, &re(r"^rackproof-agent: started")).await;
        assert_eq!(node.machine.power_state().await.unwrap(), PowerState::On);
        let esp = node.machine.esp();
        node.machine.shutdown().await.unwrap();
        let actual = entries(&esp);
        assert_eq!(actual, [format!("rackproof-{BASE_VERSION}.conf")]);
        assert_eq!(actual, predict(&model, 1));
        node.finish().await;
    }

    #[tokio::test]
    async fn power_actions_through_the_driver_traits_show_on_the_console() {
        let images = images();
        let node = Node::new("power_actions", &images.disk(BASE_VERSION).unwrap());
        let m = &node.machine;
        let booted = marker(BASE_VERSION, "init started");
        let up = marker(BASE_VERSION, "up");
        let start = m.console().mark();
        assert_eq!(m.power_state().await.unwrap(), PowerState::Off);

        m.reset(ResetAction::On).await.unwrap();
        node.wait(start, &up).await;
        m.reset(ResetAction::On).await.unwrap(); // already on: nothing happens
        assert_eq!(m.boots().await, 1);

        let mark = m.console().mark();
        m.reset(ResetAction::ForceRestart).await.unwrap();
        node.wait(mark, &up).await;
        assert_eq!(m.boots().await, 2);

        let mark = m.console().mark();
        m.reset(ResetAction::PowerCycle).await.unwrap();
        node.wait(mark, &up).await;
        assert_eq!(m.boots().await, 3);

        m.reset(ResetAction::Nmi).await.unwrap();
        m.pause().await.unwrap();
        assert_eq!(m.power_state().await.unwrap(), PowerState::Off);
        m.reset(ResetAction::On).await.unwrap();
        assert_eq!(m.power_state().await.unwrap(), PowerState::On);

        m.reset(ResetAction::ForceOff).await.unwrap();
        assert_eq!(m.power_state().await.unwrap(), PowerState::Off);
        m.reset(ResetAction::ForceOff).await.unwrap(); // already off: nothing happens

        let err = m.reset(ResetAction::ForceRestart).await.unwrap_err();
        assert!(matches!(err, DriverError::Refused { .. }), "{err}");
        assert_eq!(m.console().count_since(start, &booted), 3);

        let pxe = BootOverride { mode: BootOverrideMode::Once, target: BootTarget::Pxe };
        let err = m.set_boot_override(pxe).await.unwrap_err();
        assert!(matches!(err, DriverError::Unsupported { .. }), "{err}");
        let hdd = BootOverride { mode: BootOverrideMode::Continuous, target: BootTarget::Hdd };
        m.set_boot_override(hdd).await.unwrap();
        assert_eq!(m.boot_override().await.unwrap(), hdd);
        node.finish().await;
    }

    /// Installs `slot` with a `+3` counter on the stopped node's ESP, boots, waits for `until`
    /// (counting boots with the init marker of every version), stops, and checks the ESP against
    /// the model and against `expected`.
    async fn update(test: &str, slot: &str, until: &Regex, boots: u32, expected: &[String]) -> (Node, usize) {
        let images = images();
        let node = Node::new(test, &images.disk(BASE_VERSION).unwrap());
        let esp = node.machine.esp();
        images.slot(slot).unwrap().install(&esp, Some(3), false).unwrap();
        let model = model_of(&esp);
        let mark = node.machine.console().mark();
        node.machine.reset(ResetAction::On).await.unwrap();
        node.wait_boots(mark, until, boots).await;
        node.machine.shutdown().await.unwrap();
        let boots = node.machine.console().count_since(mark, &re(r"^rackproof-os \S+: init started"));
        let actual = entries(&esp);
        assert_eq!(actual, predict(&model, boots), "ESP differs from the model after {boots} boots");
        assert_eq!(actual, expected);
        (node, boots)
    }

    #[tokio::test]
    async fn an_update_to_a_good_version_boots_it() {
        let (node, boots) = update(
            "update_good",
            NEW_VERSION,
            &re(r"^rackproof-agent: started"),
            1,
            &[format!("rackproof-{BASE_VERSION}.conf"), format!("rackproof-{NEW_VERSION}+2-1.conf")],
        )
        .await;
        assert_eq!(boots, 1);
        let lines = node.machine.console().lines();
        assert!(lines.iter().any(|l| marker(NEW_VERSION, "up").is_match(l)));
        node.finish().await;
    }

    #[tokio::test]
    async fn a_panicking_version_is_tried_three_times_then_the_old_one_boots() {
        let (node, boots) = update(
            "update_panic",
            &format!("{NEW_VERSION}-panic"),
            &marker(BASE_VERSION, "up"),
            4,
            &[format!("rackproof-{BASE_VERSION}.conf"), format!("rackproof-{NEW_VERSION}+0-3.conf")],
        )
        .await;
        assert_eq!(boots, 4);
        let panics = node.machine.console().count_since(rackproof_qemu::Mark::default(), &marker(NEW_VERSION, "panicking"));
        assert_eq!(panics, 3);
        assert_eq!(node.machine.boots().await, 4);
        node.finish().await;
    }

    #[tokio::test]
    async fn a_hanging_version_never_comes_back() {
        let (node, boots) = update(
            "update_hang",
            &format!("{NEW_VERSION}-hang"),
            &marker(NEW_VERSION, "hanging"),
            1,
            &[format!("rackproof-{BASE_VERSION}.conf"), format!("rackproof-{NEW_VERSION}+2-1.conf")],
        )
        .await;
        assert_eq!(boots, 1);
        // Boot it again and give it far longer than a panic-and-fallback takes: still hanging,
        // never rebooted.
        let mark = node.machine.console().mark();
        node.machine.reset(ResetAction::On).await.unwrap();
        node.wait(mark, &marker(NEW_VERSION, "hanging")).await;
        node.clock.sleep(Duration::from_secs(40)).await;
        assert_eq!(node.machine.console().count_since(mark, &re(r"^rackproof-os \S+: init started")), 1);
        assert_eq!(node.machine.power_state().await.unwrap(), PowerState::On);
        node.machine.shutdown().await.unwrap();
        assert_eq!(
            entries(&node.machine.esp()),
            [format!("rackproof-{BASE_VERSION}.conf"), format!("rackproof-{NEW_VERSION}+1-2.conf")]
        );
        node.finish().await;
    }
}
