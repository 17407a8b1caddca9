//! Runs against an existing cluster (`cluster: {kubeconfig: PATH}`): a `local` control plane
//! started outside the run (with kube-controller-manager signing certificates, as a real cluster
//! does), reached through its admin kubeconfig. After a pass, a failure, a refused clash, a
//! `rackproof run` stopped by SIGTERM and one killed with SIGKILL (swept by the next run), nothing
//! the runs made is left, and what was there before is untouched; QEMU guests (`qemu::`) update
//! there too, with certificates the cluster signed. Needs the local control plane
//! (`ci/install-local-control-plane`):
//! without it these tests fail with that command.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use rackproof_cluster::local::{ControllerManagerOptions, LocalControlPlane, LocalOptions, User};
use rackproof_harness::engine::{self, Verdict};
use rackproof_harness::load::{LoadedScenario, load_str};
use rackproof_harness::scenario::{Backend, Cluster};
use serde_json::json;

/// Two simulated nodes that boot in seconds (the run is on the wall clock), one update.
const SCENARIO: &str = r#"lab: { nodes: 2, bootTiming: { firmware: 1s, loader: 1s, kernel: 1s } }
images:
  - version: "1.0.0"
  - version: "1.1.0"
settle: 0s
timeout: 10m
pool: { strategy: AutoInPlaceUpdate, os: "1.0.0", kubernetes: "1.34.2" }
workloads:
  - pods: { name: web, perNode: 1 }
steps:
  - update: { os: "1.1.0" }
  - waitUntil: { until: rolloutComplete, within: 5m }
"#;

/// The label every object a run makes carries.
const MANAGED: &str = "app.kubernetes.io/managed-by=rackproof";

/// A control plane started outside the runs, and the runtime its processes' owner lives on.
struct Outside {
    plane: Option<LocalControlPlane>,
    runtime: tokio::runtime::Runtime,
    kubeconfig: PathBuf,
    client: Client,
}

impl Outside {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let options = LocalOptions::default().with_controller_manager(ControllerManagerOptions {
            node_monitor_period: Duration::from_secs(1),
            node_monitor_grace_period: Duration::from_secs(8),
            sign_certificates: true,
            // A real cluster's ReplicaSet controller adopts the run's workload pods.
            more_controllers: vec!["replicaset".to_owned()],
            ..ControllerManagerOptions::default()
        });
        let plane = runtime
            .block_on(LocalControlPlane::start(options))
            .unwrap_or_else(|e| panic!("{}", rackproof_std::error_chain(&e)));
        let kubeconfig = plane.kubeconfig(&User::Admin).unwrap();
        let client = plane.client();
        Self {
            plane: Some(plane),
            runtime,
            kubeconfig,
            client,
        }
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Objects that were there before the runs: a Node, a namespace with a ConfigMap.
    fn bystanders(&self) -> BTreeMap<String, String> {
        self.block_on(async {
            let nodes: Api<Node> = Api::all(self.client.clone());
            let node: Node = serde_json::from_value(
                json!({"metadata": {"name": "bystander", "labels": {"team": "theirs"}}}),
            )
            .unwrap();
            let _ = nodes.create(&PostParams::default(), &node).await;
            let namespaces: Api<Namespace> = Api::all(self.client.clone());
            let namespace: Namespace =
                serde_json::from_value(json!({"metadata": {"name": "bystander"}})).unwrap();
            let _ = namespaces.create(&PostParams::default(), &namespace).await;
            let maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), "bystander");
            let map: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": "keep"}, "data": {"a": "b"}}))
                    .unwrap();
            let _ = maps.create(&PostParams::default(), &map).await;
        });
        self.versions()
    }

    /// What identifies the bystanders: the Node's uid and labels (kube-controller-manager's node
    /// lifecycle writes its taints and conditions), the ConfigMap's resource version.
    fn versions(&self) -> BTreeMap<String, String> {
        self.block_on(async {
            let node = Api::<Node>::all(self.client.clone())
                .get("bystander")
                .await
                .unwrap();
            let map = Api::<ConfigMap>::namespaced(self.client.clone(), "bystander")
                .get("keep")
                .await
                .unwrap();
            BTreeMap::from([
                (
                    "node".to_owned(),
                    format!("{:?} {:?}", node.uid(), node.labels()),
                ),
                ("configmap".to_owned(), map.resource_version().unwrap()),
            ])
        })
    }

    /// What a run left: objects labelled as Rackproof's, the run's namespaces, its Nodes, node
    /// Leases and CRDs. Waits up to a minute for deletions in progress (a namespace's contents).
    fn leftovers(&self) -> Vec<String> {
        let clock = rackproof_clock::Clock::wall();
        let started = clock.instant();
        loop {
            let left = self.block_on(self.list_leftovers());
            if left.is_empty() || clock.since(started) > Duration::from_secs(90) {
                return left;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    async fn list_leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        let labelled = ListParams::default().labels(MANAGED);
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        for ns in namespaces.list(&ListParams::default()).await.unwrap() {
            let name = ns.name_any();
            if ns.labels().contains_key("rackproof.dev/run")
                || ["rackproof", "apps"].contains(&name.as_str())
            {
                left.push(format!("namespace {name}"));
            }
        }
        for node in Api::<Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
        {
            if node.name_any() != "bystander" {
                left.push(format!("node {}", node.name_any()));
            }
        }
        for lease in Api::<Lease>::namespaced(self.client.clone(), "kube-node-lease")
            .list(&ListParams::default())
            .await
            .unwrap()
        {
            left.push(format!("node lease {}", lease.name_any()));
        }
        for crd in Api::<CustomResourceDefinition>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
        {
            left.push(format!("CRD {}", crd.name_any()));
        }
        let csrs: Api<k8s_openapi::api::certificates::v1::CertificateSigningRequest> =
            Api::all(self.client.clone());
        for csr in csrs.list(&labelled).await.unwrap() {
            left.push(format!("CSR {}", csr.name_any()));
        }
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(self.client.clone(), "default");
        for event in events.list(&ListParams::default()).await.unwrap() {
            if event.involved_object.name.as_deref() != Some("bystander") {
                left.push(format!("event {}", event.name_any()));
            }
        }
        left
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        if let Some(plane) = self.plane.take() {
            let _ = self.runtime.block_on(plane.shutdown());
        }
    }
}

/// The last entries of a run's timeline, for a failure message.
fn timeline_tail(result: &engine::RunResult) -> String {
    let entries = &result.timeline.entries;
    entries[entries.len().saturating_sub(30)..]
        .iter()
        .map(|e| format!("{:?} {}", e.node, e.text))
        .collect::<Vec<_>>()
        .join("\n")
}

fn scenario(outside: &Outside, extra: &str) -> LoadedScenario {
    let mut loaded = load_str(
        Path::new("existing-cluster.yaml"),
        &format!("{SCENARIO}{extra}"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    loaded.scenario.cluster = Cluster::Kubeconfig(outside.kubeconfig.clone());
    loaded
}

#[test]
fn a_run_leaves_nothing_behind_after_a_pass_and_after_a_failure() {
    let outside = Outside::start();
    let before = outside.bystanders();

    let passed = engine::run_scenario(&scenario(&outside, ""), Backend::Sim).unwrap();
    assert_eq!(
        passed.verdict,
        Verdict::Passed,
        "{:?}\n{}",
        passed.failures,
        timeline_tail(&passed)
    );
    assert_eq!(outside.leftovers(), Vec::<String>::new(), "after the pass");
    assert_eq!(outside.versions(), before, "the bystanders are untouched");

    let failing = scenario(
        &outside,
        "expect:\n  - eventually: { that: { node: { name: node-2, is: failed } }, within: 20s }\n",
    );
    let failed = engine::run_scenario(&failing, Backend::Sim).unwrap();
    assert_eq!(failed.verdict, Verdict::Failed, "{:?}", failed.failures);
    assert_eq!(
        outside.leftovers(),
        Vec::<String>::new(),
        "after the failure"
    );
    assert_eq!(outside.versions(), before, "the bystanders are untouched");
}

#[test]
fn a_node_name_taken_by_an_object_the_run_does_not_own_is_refused_touching_nothing() {
    let outside = Outside::start();
    let taken = outside.block_on(async {
        let nodes: Api<Node> = Api::all(outside.client.clone());
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "node-2"}})).unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap()
    });

    let result = engine::run_scenario(&scenario(&outside, ""), Backend::Sim).unwrap();
    assert_eq!(result.verdict, Verdict::LabFailed, "{:?}", result.failures);
    let message = result.failures.join("\n");
    assert!(
        message.contains("Node node-2") && message.contains("not made by Rackproof"),
        "{message}"
    );
    let left = outside.block_on(outside.list_leftovers());
    assert_eq!(
        left,
        vec!["node node-2".to_owned()],
        "nothing else was made"
    );
    let now = outside.block_on(async {
        Api::<Node>::all(outside.client.clone())
            .get("node-2")
            .await
            .unwrap()
    });
    assert_eq!(
        (now.uid(), now.labels()),
        (taken.uid(), taken.labels()),
        "node-2 untouched"
    );
}

/// A `rackproof run --cluster kubeconfig=…` child, killed (SIGKILL) and reaped when dropped, so
/// it never outlives the test.
struct Child {
    process: std::process::Child,
    log: PathBuf,
}

impl Child {
    /// Starts a run of the scenario (with a long sleep at the end, so it is still running when
    /// stopped) in `dir`.
    fn start(outside: &Outside, dir: &Path) -> Self {
        let file = dir.join("existing-cluster.yaml");
        std::fs::write(
            &file,
            format!("{SCENARIO}  - sleep: 10m\n").replace("timeout: 10m", "timeout: 30m"),
        )
        .unwrap();
        let log = dir.join("run.log");
        let process = Command::new(env!("CARGO_BIN_EXE_rackproof"))
            .arg("run")
            .arg(&file)
            .arg("--cluster")
            .arg(format!("kubeconfig={}", outside.kubeconfig.display()))
            .arg("--artifacts")
            .arg(dir.join("artifacts"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Self { process, log }
    }

    /// Waits until the run registered both its Nodes (and 3 s more: the update is under way);
    /// panics with the run's log if it does not within 3 minutes.
    fn wait_midway(&mut self, outside: &Outside) {
        let clock = rackproof_clock::Clock::wall();
        let started = clock.instant();
        loop {
            let nodes = outside.block_on(async {
                Api::<Node>::all(outside.client.clone())
                    .list(&ListParams::default().labels("rackproof.dev/run"))
                    .await
                    .map(|l| l.items.len())
                    .unwrap_or(0)
            });
            if nodes == 2 {
                std::thread::sleep(Duration::from_secs(3));
                return;
            }
            let ended = matches!(self.process.try_wait(), Ok(Some(_)));
            if ended || clock.since(started) > Duration::from_secs(180) {
                panic!("the run never registered its nodes: {}", self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

#[test]
fn a_run_killed_midway_is_swept_by_the_next_which_passes_and_leaves_nothing() {
    let outside = Outside::start();
    let before = outside.bystanders();
    let dir = tempfile::tempdir().unwrap();
    let mut child = Child::start(&outside, dir.path());
    child.wait_midway(&outside);
    drop(child); // SIGKILL: the run cannot clean up.
    assert!(
        !outside.block_on(outside.list_leftovers()).is_empty(),
        "the killed run left its objects"
    );

    let second = engine::run_scenario(&scenario(&outside, ""), Backend::Sim).unwrap();
    assert_eq!(
        second.verdict,
        Verdict::Passed,
        "{:?}\n{}",
        second.failures,
        timeline_tail(&second)
    );
    assert!(
        second
            .timeline
            .entries
            .iter()
            .any(|e| e.text.contains("swept what run") && e.text.contains("left")),
        "the second run says it swept: {:#?}",
        second.timeline.entries.iter().take(10).collect::<Vec<_>>()
    );
    assert_eq!(
        outside.leftovers(),
        Vec::<String>::new(),
        "after the second run"
    );
    assert_eq!(outside.versions(), before, "the bystanders are untouched");
}

#[test]
fn a_run_stopped_by_sigterm_midway_removes_what_it_made_and_exits_143() {
    let outside = Outside::start();
    let before = outside.bystanders();
    let dir = tempfile::tempdir().unwrap();
    let mut child = Child::start(&outside, dir.path());
    child.wait_midway(&outside);
    let pid = rustix::process::Pid::from_child(&child.process);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = child.process.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{}", child.log_tail());
    assert_eq!(
        outside.block_on(outside.list_leftovers()),
        Vec::<String>::new(),
        "the run removed what it made before exiting: {}",
        child.log_tail()
    );
    assert_eq!(outside.versions(), before, "the bystanders are untouched");
}

/// Guests on an existing cluster: QEMU nodes report with certificates the cluster signed, reach a
/// server on this machine's loopback through QEMU's user network (verifying it as 127.0.0.1),
/// and register their Nodes with the run's labels, so the run removes them at its end. Needs QEMU
/// and the node images (`ci/build-images`) besides the control plane.
mod qemu {
    use super::*;

    /// Two QEMU nodes behind Redfish BMCs, updated together (the images' versions).
    const GUESTS: &str = r#"lab: { nodes: 2, bmc: redfish }
images:
  - version: "1.0.0"
  - version: "1.1.0"
timeout: 20m
pool: { strategy: AutoInPlaceUpdate, maxUnavailable: 2, os: "1.0.0", kubernetes: "1.34.2" }
workloads:
  - pods: { name: web, perNode: 1 }
steps:
  - update: { os: "1.1.0" }
  - waitUntil: { until: rolloutComplete, within: 15m }
expect:
  - eventually: { that: { allNodes: { are: updated } }, within: 15m }
"#;

    #[test]
    fn qemu_nodes_update_on_an_existing_cluster_and_the_run_leaves_nothing() {
        let outside = Outside::start();
        let before = outside.bystanders();
        let mut loaded = load_str(Path::new("existing-cluster-qemu.yaml"), GUESTS)
            .unwrap_or_else(|e| panic!("{e}"));
        loaded.scenario.cluster = Cluster::Kubeconfig(outside.kubeconfig.clone());
        let result = engine::run_scenario(&loaded, Backend::Qemu).unwrap();
        assert_eq!(
            result.verdict,
            Verdict::Passed,
            "{:?}\n{}",
            result.failures,
            timeline_tail(&result)
        );
        assert_eq!(
            result.credentials.len(),
            4,
            "the run keeps the two BMC passwords and the two node keys it handed out, to check its artifacts for them"
        );
        let artifacts = tempfile::tempdir().unwrap();
        engine::artifacts::write_all(artifacts.path(), &loaded.name, "qemu", &result).unwrap();
        assert_eq!(
            result.credentials.leaks_under(artifacts.path()).unwrap(),
            Vec::<PathBuf>::new(),
            "no node key in the artifacts"
        );
        assert_eq!(outside.leftovers(), Vec::<String>::new(), "after the run");
        assert_eq!(outside.versions(), before, "the bystanders are untouched");
    }
}
