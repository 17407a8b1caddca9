//! What a scenario asks of a backend and a cluster: what they cannot do for it, whether it runs
//! on virtual time, how many nodes its pool has, and which programs it runs outside the process.

use crate::engine::lab::images;
use crate::scenario::{Backend, Cluster, FaultAction, Implementation, Pool, Scenario, Step};

/// What `backend` cannot do for this scenario, one sentence each (empty: it can run).
pub fn unsupported(scenario: &Scenario, backend: Backend) -> Vec<String> {
    let name = backend.as_str();
    let mut problems = Vec::new();
    match &scenario.cluster {
        Cluster::Embedded | Cluster::Local | Cluster::Kubeconfig(_) => {}
        Cluster::Kind => problems.push("`cluster: kind`: Rackproof does not create kind clusters (kind needs a Docker daemon and node images from a container registry); create one yourself and run on it through its kubeconfig (`kind get kubeconfig --name NAME > FILE`, then `cluster: { kubeconfig: FILE }` or `--cluster kubeconfig=FILE`), or use `cluster: local` (a real kube-apiserver and kube-controller-manager on this machine)".to_owned()),
    }
    if let Implementation::Command(_) = &scenario.components.agent {
        problems.push(format!(
            "the agent runs inside each node's OS (on sim Rackproof's own, on qemu the one built into the node images by ci/build-images); an external agent command cannot replace it (backend {name})"
        ));
    }
    if let Some(start) = scenario.clock.start
        && !on_virtual_time(scenario, backend)
    {
        problems.push(format!(
            "`clock.start` ({start}) sets where virtual time starts; a run on backend {name} against this cluster is on the wall clock, which no scenario can move (run it on backend sim against the embedded cluster, or remove `clock`)"
        ));
    }
    if scenario.components.agent == Implementation::Off {
        problems.push(format!("the {name} backend's nodes run the builtin agent; `agent: off` leaves them without a kubelet"));
    }
    match backend {
        Backend::Sim => {}
        Backend::Qemu => {
            problems.extend(boot_timing_unsupported(scenario));
            problems.extend(images::unsupported(scenario));
        }
        Backend::Libvirt => {
            if !cfg!(feature = "libvirt") {
                problems.push(
                    "this rackproof was built without libvirt: build it with `--features rackproof-harness/libvirt` (needs Debian's libvirt-dev and pkg-config)"
                        .to_owned(),
                );
            }
            problems.extend(boot_timing_unsupported(scenario));
            problems.extend(images::unsupported(scenario));
            if fault_actions(scenario).any(|a| matches!(a, FaultAction::Partition(_))) {
                problems.push("network partitions need QEMU's set_link, and a libvirt domain's user-mode NIC is outside libvirt's devices (backend qemu)".to_owned());
            }
        }
        Backend::Physical => {
            problems.extend(boot_timing_unsupported(scenario));
            problems.extend(images::unsupported(scenario));
            for action in fault_actions(scenario) {
                match action {
                    FaultAction::Partition(p) => problems.push(format!("a network partition of {} needs QEMU's set_link; a rack server's switch port is outside Rackproof's reach (backend qemu)", p.node.value)),
                    FaultAction::Bmc(_) => problems.push("BMC quirks are injected through the emulators of backends sim and qemu; a rack server's BMC is real".to_owned()),
                    _ => {}
                }
            }
        }
    }
    problems
}

/// `lab.bootTiming` sets the stages of simulated machines' boots; a guest boots in its own time.
fn boot_timing_unsupported(scenario: &Scenario) -> Option<String> {
    scenario.lab.boot_timing.is_some().then(|| "`lab.bootTiming` sets simulated machines' boot stages; a guest or rack server boots in the time it takes (remove it, or run on backend sim)".to_owned())
}

/// Every fault action of the scenario: its faults' and its `fault` steps'.
fn fault_actions(scenario: &Scenario) -> impl Iterator<Item = &FaultAction> {
    scenario
        .faults
        .iter()
        .map(|f| &f.action)
        .chain(scenario.steps.iter().filter_map(|s| match s {
            Step::Fault(a) => Some(a),
            _ => None,
        }))
}

/// Whether a run of `scenario` on `backend` runs on virtual time: `sim` with the embedded API
/// server, unless a component is an external program (a process outside the run, kube-apiserver
/// among them, cannot follow a virtual clock, so such a run simulates its machines on the wall
/// clock).
pub fn on_virtual_time(scenario: &Scenario, backend: Backend) -> bool {
    backend == Backend::Sim
        && scenario.cluster == Cluster::Embedded
        && !runs_external_components(scenario)
}

/// Whether a component is an external program.
fn runs_external_components(scenario: &Scenario) -> bool {
    [
        &scenario.components.orchestrator,
        &scenario.components.watchdog,
    ]
    .into_iter()
    .any(|i| matches!(i, Implementation::Command(_)))
}

/// Every command line the scenario runs outside the process: `run` steps and external components.
pub(super) fn outside_commands(scenario: &Scenario) -> Vec<&[String]> {
    let components = [
        &scenario.components.orchestrator,
        &scenario.components.watchdog,
    ]
    .into_iter()
    .filter_map(|i| match i {
        Implementation::Command(argv) => Some(argv.as_slice()),
        _ => None,
    });
    let steps = scenario.steps.iter().filter_map(|s| match s {
        Step::Run(run) => Some(run.command.as_slice()),
        _ => None,
    });
    components.chain(steps).collect()
}

/// A pool's size: its `size`, else every lab node.
pub fn pool_size(scenario: &Scenario, pool: &Pool) -> u32 {
    pool.size
        .unwrap_or_else(|| u32::try_from(scenario.lab.node_names().len()).unwrap_or(u32::MAX))
}
