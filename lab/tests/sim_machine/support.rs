//! A machine with a catalog of versions and a recording guest, on a paused clock.

pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
pub(crate) use std::sync::{Arc, Mutex};
pub(crate) use std::time::Duration;

pub(crate) use inplace_boot::{
    EntryName, Esp, LoaderVars, bless, boot, install_entry, make_room, update::install_size,
};
pub(crate) use jiff::Timestamp;
pub(crate) use rackproof_clock::Clock;
pub(crate) use rackproof_driver::{
    BootControl, BootOverride, BootOverrideMode, BootTarget, Power, PowerState, ResetAction,
};
pub(crate) use rackproof_lab::console::ConsoleSource;
pub(crate) use rackproof_lab::sim::{
    Behaviour, Catalog, GuestContext, GuestOs, GuestTask, Phase, SimMachine,
};
pub(crate) use rackproof_lab::strategy::{BootStage, NodeControl, StrategyError, WaitOptions};

pub(crate) fn clock() -> Clock {
    Clock::simulated(Timestamp::from_second(1_700_000_000).unwrap())
}

pub(crate) fn catalog() -> Catalog {
    Catalog::new()
        .with("1.0.0", Behaviour::Boots)
        .with("2.0.0", Behaviour::Boots)
        .with("2.1.0", Behaviour::PanicsAtBoot)
        .with("3.0.0", Behaviour::HangsAtBoot)
        .with("4.0.0", Behaviour::AgentNeverReports)
        .with("5.0.0", Behaviour::ReportsVersion("1.0.0".into()))
}

/// Counts running guests (a guard decrements on drop, i.e. when the machine aborts the task).
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    pub(crate) running: AtomicUsize,
    pub(crate) starts: Mutex<Vec<(String, String)>>,
}

pub(crate) struct Running(Arc<Recorder>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Debug)]
pub(crate) struct RecGuest(Arc<Recorder>);

/// The recording guest's one service.
pub(crate) const AGENT: &str = "rackproof-agent";

impl GuestOs for RecGuest {
    fn services(&self) -> &'static [&'static str] {
        &[AGENT]
    }

    fn start(&self, _service: &str, ctx: GuestContext) -> GuestTask {
        self.0.starts.lock().unwrap().push((
            ctx.booted_entry.file_name().to_owned(),
            ctx.os_version.clone(),
        ));
        self.0.running.fetch_add(1, Ordering::SeqCst);
        let guard = Running(self.0.clone());
        Box::pin(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        })
    }
}

pub(crate) fn machine(guest: Option<Arc<Recorder>>) -> SimMachine {
    let mut b = SimMachine::builder("node-1", clock())
        .catalog(catalog())
        .installed("1.0.0");
    if let Some(g) = guest {
        b = b.guest(Arc::new(RecGuest(g)));
    }
    b.build().unwrap()
}

pub(crate) fn control(m: &SimMachine) -> NodeControl {
    NodeControl::new("node-1", Arc::new(m.clone()), Arc::new(m.clone()), clock())
}

/// Entry files on the machine's ESP (read from outside: works while the machine is off).
pub(crate) fn entries(m: &SimMachine) -> Vec<String> {
    m.esp()
        .paths()
        .into_iter()
        .filter_map(|p| p.strip_prefix("loader/entries/").map(str::to_owned))
        .collect()
}

/// What the agent's OS-update command does: make room, install with +3.
pub(crate) fn install_version(m: &SimMachine, version: &str) -> EntryName {
    let artifact = m.catalog().artifact(version).unwrap();
    let stem = artifact.stem();
    let new = artifact.new_entry(&stem);
    let booted = m.last_boot().map(|r| r.current_name().clone());
    make_room(m.esp(), install_size(&new), booted.as_ref()).unwrap();
    install_entry(m.esp(), &new, booted.as_ref()).unwrap()
}

/// Lets a minute of virtual time pass.
pub(crate) async fn settle() {
    tokio::time::sleep(Duration::from_secs(60)).await;
}
