//! Power cuts at every write of a slot install and at the loader's rename; power stopping the guest.

use crate::support::*;

/// An agent that installs 2.0.0 once on its first start and reboots.
#[derive(Debug, Default)]
struct Updater {
    attempted: AtomicBool,
}

impl GuestOs for Updater {
    fn services(&self) -> &'static [&'static str] {
        &["updater"]
    }

    fn start(&self, _service: &str, ctx: GuestContext) -> GuestTask {
        let first = !self.attempted.swap(true, Ordering::SeqCst);
        Box::pin(async move {
            if !first {
                return;
            }
            let artifact = Catalog::new()
                .with("2.0.0", Behaviour::Boots)
                .artifact("2.0.0")
                .unwrap();
            let stem = artifact.stem();
            let new = artifact.new_entry(&stem);
            let esp: &dyn Esp = ctx.esp.as_ref();
            let result = make_room(esp, install_size(&new), Some(&ctx.booted_entry))
                .and_then(|_| install_entry(esp, &new, Some(&ctx.booted_entry)));
            if result.is_ok() {
                ctx.machine.reboot();
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_power_cut_at_any_write_of_a_slot_install_leaves_a_bootable_esp() {
    for cut in 0..6u64 {
        let updater = Arc::new(Updater::default());
        let m = SimMachine::builder("node-1", clock())
            .catalog(catalog())
            .installed("1.0.0")
            .guest(updater.clone())
            .build()
            .unwrap();
        let ctl = control(&m);
        m.cut_power_after_esp_writes(cut);
        assert_eq!(
            ctl.power_on_and_wait_until_up(WaitOptions::default())
                .await
                .unwrap(),
            "1.0.0"
        );
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(
            m.power_state().await.unwrap(),
            PowerState::Off,
            "cut at write {cut}"
        );
        assert!(
            m.console_history()
                .contains(&"firmware: power lost".to_owned())
        );

        let version = ctl
            .power_on_and_wait_until_up(WaitOptions::default())
            .await
            .unwrap();
        assert!(
            version == "1.0.0" || version == "2.0.0",
            "cut at write {cut}: {version}"
        );
        // Whatever the loader picks next has an intact kernel.
        let record = boot(m.esp(), &mut LoaderVars::default()).unwrap().unwrap();
        let kernel = m
            .esp()
            .read(&record.entry.conf.loader_path().unwrap())
            .unwrap();
        assert!(
            kernel.starts_with(b"rackproof-sim-kernel "),
            "cut at write {cut}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_loader_counter_rename_can_be_cut_too() {
    let m = machine(None);
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    install_version(&m, "2.0.0");
    m.reset(ResetAction::ForceOff).await.unwrap();
    m.cut_power_at_next_esp_write();
    m.reset(ResetAction::On).await.unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(m.power_state().await.unwrap(), PowerState::Off);
    assert_eq!(
        entries(&m),
        ["rackproof-1.0.0.conf", "rackproof-2.0.0+3.conf"],
        "the rename did not happen"
    );
    assert_eq!(
        ctl.power_on_and_wait_until_up(WaitOptions::default())
            .await
            .unwrap(),
        "2.0.0"
    );
}

#[tokio::test(start_paused = true)]
async fn power_off_and_reset_stop_the_guest() {
    let rec = Arc::new(Recorder::default());
    let m = machine(Some(rec.clone()));
    let ctl = control(&m);
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    m.reset(ResetAction::ForceRestart).await.unwrap();
    tokio::task::yield_now().await;
    assert_eq!(
        rec.running.load(Ordering::SeqCst),
        0,
        "reset kills the agent"
    );
    ctl.power_on_and_wait_until_up(WaitOptions::default())
        .await
        .unwrap();
    assert_eq!(rec.running.load(Ordering::SeqCst), 1);
    m.reset(ResetAction::ForceOff).await.unwrap();
    tokio::task::yield_now().await;
    assert_eq!(
        rec.running.load(Ordering::SeqCst),
        0,
        "power-off kills the agent"
    );
    assert_eq!(rec.starts.lock().unwrap().len(), 2);
}
