//! Faults: waiting for a fault's trigger (a time, a node state, a console line, the Nth boot)
//! and firing it on the simulated lab or the components.

use std::time::Duration;

use regex::Regex;
use rackproof_driver::{Power, PowerState};
use rackproof_lab::console::ConsoleSource;

use super::run::Ctx;
use super::sim_lab::next_line;
use super::sim_nodes;
use super::timeline::EntryKind;
use crate::scenario::{Component, Fault, FaultAction, PowerAction, PowerCutPoint, Trigger};

/// How long a power cut may take to happen once armed (the update reaching that point).
const POWER_CUT_WAIT: Duration = Duration::from_secs(24 * 3600);

/// Waits for the fault's trigger, then fires it. Runs as its own task.
pub async fn arm(ctx: &Ctx, fault: &Fault) {
    if !triggered(ctx, &fault.when).await {
        return;
    }
    fire(ctx, &fault.action).await;
}

async fn triggered(ctx: &Ctx, trigger: &Trigger) -> bool {
    match trigger {
        Trigger::After(span) => {
            ctx.shared.clock().sleep(span.get()).await;
            true
        }
        Trigger::NodeReaches(event) => {
            let (node, state) = (event.node.value.clone(), event.state);
            ctx.shared.wait_until(Duration::MAX, move |judge| judge.node_is(&node, state)).await
        }
        Trigger::Console(console) => {
            let Ok(pattern) = Regex::new(&console.matches) else { return false };
            let Some(node) = ctx.lab.node(&console.node.value) else { return false };
            let (_, mut lines) = node.machine.subscribe();
            while let Some(line) = next_line(&mut lines).await {
                if pattern.is_match(&line.text) {
                    return true;
                }
            }
            false
        }
        Trigger::Boot(boot) => {
            let Some(node) = ctx.lab.node(&boot.node.value) else { return false };
            let (_, mut lines) = node.machine.subscribe();
            let wanted = u64::from(boot.count);
            loop {
                if node.machine.boots() >= wanted {
                    return true;
                }
                if next_line(&mut lines).await.is_none() {
                    return false;
                }
            }
        }
    }
}

/// Fires a fault now.
pub async fn fire(ctx: &Ctx, action: &FaultAction) {
    let shared = &ctx.shared;
    match action {
        FaultAction::Power(power) => {
            let node = power.node.value.as_str();
            shared.record(Some(node), EntryKind::Fault, format!("power {:?} through the BMC", power.action));
            if power.action == PowerAction::On {
                shared.judge().world.outage.remove(node);
                ctx.lab.power_on_and_wait(node, shared).await;
            } else {
                ctx.lab.power(node, power.action, shared).await;
            }
        }
        FaultAction::BootFailure(failure) => {
            let node = failure.node.value.as_str();
            shared.record(Some(node), EntryKind::Fault, format!("the next OS version installed boots as {:?}", failure.boot));
            let versions: Vec<String> = ctx.scenario.images.iter().map(|i| i.version.value.clone()).collect();
            ctx.lab.break_next_version(node, &sim_nodes::behaviour(&failure.boot), &versions);
        }
        FaultAction::PowerCut(cut) => {
            let node = cut.node.value.as_str();
            let Some(lab_node) = ctx.lab.node(node) else { return };
            shared.record(Some(node), EntryKind::Fault, format!("power will be cut during the {:?}", cut.during));
            match cut.during {
                PowerCutPoint::Download => lab_node.guest.cut_power_at_next_download(),
                PowerCutPoint::SlotWrite => lab_node.machine.cut_power_at_next_esp_write(),
                PowerCutPoint::FirstBoot => {
                    // The loader's first write of the new entry's boot is its counter rename.
                    let (_, mut lines) = lab_node.machine.subscribe();
                    loop {
                        match next_line(&mut lines).await {
                            Some(line) if line.text == "rackproof-os: rebooting" => break,
                            Some(_) => {}
                            None => return,
                        }
                    }
                    lab_node.machine.cut_power_at_next_esp_write();
                }
            }
            let machine = lab_node.machine.clone();
            let off = async {
                loop {
                    if matches!(machine.power_state().await, Ok(PowerState::Off)) {
                        return;
                    }
                    shared.clock().sleep(Duration::from_secs(1)).await;
                }
            };
            if shared.clock().timeout(POWER_CUT_WAIT, off).await.is_err() {
                shared.record(Some(node), EntryKind::Fault, "the armed power cut never happened");
                return;
            }
            shared.record(Some(node), EntryKind::Fault, format!("power lost; back in {}", cut.power_back_after));
            shared.clock().sleep(cut.power_back_after.get()).await;
            shared.record(Some(node), EntryKind::Fault, "power is back");
            ctx.lab.power_on_and_wait(node, shared).await;
        }
        FaultAction::Bmc(bmc) => {
            let node = bmc.node.value.as_str();
            let Some(lab_node) = ctx.lab.node(node) else { return };
            let count = bmc.count.map_or_else(|| "every request".to_owned(), |n| format!("the next {n} requests"));
            shared.record(Some(node), EntryKind::Fault, format!("BMC quirk {:?} for {count}", bmc.quirk));
            lab_node.bmc.add_quirk(&bmc.quirk, bmc.count);
        }
        FaultAction::Partition(partition) => {
            shared.record(Some(&partition.node.value), EntryKind::Fault, "network partitions are not available on sim");
        }
        FaultAction::Kill(kill) => {
            let restart = kill.restart_after.map(|s| s.get());
            let again = kill.restart_after.map_or_else(|| "not restarted".to_owned(), |d| format!("restarted after {d}"));
            match kill.component {
                Component::Agent => {
                    let Some(node) = kill.node.as_ref().and_then(|n| ctx.lab.node(&n.value)) else { return };
                    let name = node.machine.name().to_owned();
                    let killed = node.machine.kill_guest();
                    shared.record(Some(&name), EntryKind::Fault, if killed { format!("agent killed, {again}") } else { "agent kill: no agent was running".to_owned() });
                    if let (true, Some(after)) = (killed, restart) {
                        shared.clock().sleep(after).await;
                        if node.machine.restart_guest() {
                            shared.record(Some(&name), EntryKind::Fault, "agent restarted");
                        }
                    }
                }
                component => {
                    shared.record(None, EntryKind::Fault, format!("{component:?} killed, {again}").to_lowercase());
                    let elapsed = shared.elapsed();
                    ctx.supervisor.lock().unwrap_or_else(|p| p.into_inner()).kill(component, restart, elapsed);
                    ctx.reconcile();
                }
            }
        }
        FaultAction::ImageServer(fault) => {
            let node = fault.node.value.as_str();
            let Some(lab_node) = ctx.lab.node(node) else { return };
            let count = fault.count.map_or_else(|| "every request".to_owned(), |n| format!("the next {n} requests"));
            shared.record(Some(node), EntryKind::Fault, format!("the image server answers {:?} to {count}", fault.answer));
            lab_node.guest.image_server_fault(fault.answer, fault.count);
        }
        FaultAction::NodesDie(nodes) => {
            for node in nodes {
                shared.record(Some(&node.value), EntryKind::Fault, "dies (not under update): power lost");
                shared.judge().world.outage.insert(node.value.clone());
                ctx.lab.power(&node.value, PowerAction::Off, shared).await;
            }
        }
    }
}
