//! Referee tests: the real `kubectl` against the HTTPS server. The apply/explain, label/cordon
//! and drain tests run twice: with the kubectl on PATH and with Debian bookworm's kubectl 1.20
//! (which reads `/openapi/v2` as gnostic protobuf where newer ones read OpenAPI v3).

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::io::AsyncBufReadExt;

use rackproof_apiserver::{ApiServer, HttpsServer, User};
use rackproof_clock::Clock;

/// kubectl from PATH; fails the test with the install command when it is missing.
fn kubectl_binary() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!("kubectl is missing: install it with `apt-get install -y kubernetes-client`")
        })
}

/// Debian bookworm's kubectl 1.20 (`kubernetes-client`), unpacked by `ci/setup` under
/// `${RACKPROOF_CACHE:-$HOME/.cache/rackproof}/kubectl-1.20`; fails the test with the commands
/// that fetch it when it is missing.
fn kubectl_1_20() -> PathBuf {
    let cache = match std::env::var_os("RACKPROOF_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/rackproof"),
    };
    let root = cache.join("kubectl-1.20");
    let binary = root.join("usr/bin/kubectl");
    assert!(
        binary.is_file(),
        "kubectl 1.20 is missing at {}: run `ci/setup`, or fetch it alone with `mkdir -p {root}.dl && (cd {root}.dl && apt-get download kubernetes-client) && dpkg-deb -x {root}.dl/*.deb {root}`",
        binary.display(),
        root = root.display()
    );
    binary
}

/// Which kubectl a test runs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Which {
    /// The one on PATH.
    Path,
    /// Debian bookworm's 1.20, from the cache.
    V1_20,
}

impl Which {
    fn binary(self) -> PathBuf {
        match self {
            Which::Path => kubectl_binary(),
            Which::V1_20 => kubectl_1_20(),
        }
    }
}

pub(crate) struct Kubectl {
    pub(crate) server: ApiServer,
    binary: PathBuf,
    _https: HttpsServer,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Kubectl {
    /// The server and the kubectl on PATH.
    pub(crate) async fn start() -> Self {
        Self::start_with(Which::Path).await
    }

    pub(crate) async fn start_with(which: Which) -> Self {
        let binary = which.binary();
        let server = ApiServer::new(Clock::wall());
        let https = server
            .serve_https("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        https.write_kubeconfig(&kubeconfig, &User::admin()).unwrap();
        Self {
            server,
            binary,
            _https: https,
            kubeconfig,
            _dir: dir,
        }
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.binary);
        command
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self._dir.path())
            .kill_on_drop(true);
        command
    }

    pub(crate) async fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        use tokio::io::AsyncWriteExt;
        let mut command = self.command(args);
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn().expect("kubectl starts");
        let mut input = child.stdin.take().expect("stdin");
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).await.unwrap();
        }
        drop(input);
        tokio::time::timeout(
            std::time::Duration::from_secs(120),
            child.wait_with_output(),
        )
        .await
        .expect("kubectl finishes in time")
        .unwrap()
    }

    /// Runs kubectl and returns stdout, failing the test (with stderr) if it fails.
    pub(crate) async fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, None).await
    }

    pub(crate) async fn ok_with(&self, args: &[&str], stdin: Option<&str>) -> String {
        let output = self.run(args, stdin).await;
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

async fn node(client: &kube::Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
        )
        .await
        .unwrap();
}

async fn ready_pod(
    client: &kube::Client,
    name: &str,
    labels: serde_json::Value,
    node: &str,
    owner: Option<serde_json::Value>,
) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut pod = crate::pod_json(name, labels, Some(node));
    pod.metadata.owner_references = owner.map(|o| vec![serde_json::from_value(o).unwrap()]);
    if name.ends_with("scratch") {
        pod.spec.as_mut().unwrap().volumes = Some(vec![
            serde_json::from_value(json!({"name": "tmp", "emptyDir": {}})).unwrap(),
        ]);
    }
    pods.create(&PostParams::default(), &pod).await.unwrap();
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_the_server_columns() {
    get_prints_the_server_columns(Which::Path).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_the_server_columns_1_20() {
    get_prints_the_server_columns(Which::V1_20).await;
}

/// `kubectl get` asks for a server-side Table: nodes and pods print kube-apiserver's columns,
/// `-o wide` adds the priority-1 ones.
async fn get_prints_the_server_columns(which: Which) {
    let k = Kubectl::start_with(which).await;
    let client = k.server.admin_client();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {
                "name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}],
                "nodeInfo": {"kubeletVersion": "v1.31.4", "osImage": "Rackproof 1.1.0",
                    "kernelVersion": "6.1.0-28-amd64", "containerRuntimeVersion": "none",
                    "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": "",
                    "operatingSystem": "linux", "architecture": "amd64"}}})),
        )
        .await
        .unwrap();
    let plain = k.ok(&["get", "nodes"]).await;
    let header: Vec<&str> = plain.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{plain}"
    );
    let row: Vec<&str> = plain.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        (row[0], row[1], row[2], row[4]),
        ("n1", "Ready", "worker", "v1.31.4"),
        "{plain}"
    );
    let wide = k.ok(&["get", "nodes", "-o", "wide"]).await;
    for expected in [
        "INTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "10.0.0.7",
        "Rackproof 1.1.0",
        "6.1.0-28-amd64",
    ] {
        assert!(wide.contains(expected), "{expected} missing:\n{wide}");
    }
    assert_eq!(
        k.ok(&["auth", "can-i", "delete", "nodes"]).await.trim(),
        "yes",
        "an administrator may"
    );
    k.ok(&["cordon", "n1"]).await;
    assert!(
        k.ok(&["get", "node", "n1"])
            .await
            .contains("Ready,SchedulingDisabled"),
        "a cordoned node says so"
    );

    ready_pod(&client, "web", json!({"app": "web"}), "n1", None).await;
    let pods = k.ok(&["get", "pods", "-o", "wide"]).await;
    let header: Vec<&str> = pods.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        &header[..6],
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP"],
        "{pods}"
    );
    let row: Vec<&str> = pods.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        (row[0], row[1], row[2]),
        ("web", "0/1", "Running"),
        "{pods}"
    );
    assert!(pods.contains("n1"), "the node column: {pods}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_describe_label_annotate_cordon_scale() {
    get_describe_label_annotate_cordon_scale(Which::Path).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_describe_label_annotate_cordon_scale_1_20() {
    get_describe_label_annotate_cordon_scale(Which::V1_20).await;
}

async fn get_describe_label_annotate_cordon_scale(which: Which) {
    let k = Kubectl::start_with(which).await;
    let client = k.server.admin_client();
    node(&client, "n1").await;
    ready_pod(&client, "web", json!({"app": "web"}), "n1", None).await;
    assert!(k.ok(&["get", "nodes"]).await.contains("n1"));
    let pod: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "pod", "web", "-o", "json"]).await).unwrap();
    assert_eq!(pod["spec"]["nodeName"], "n1");
    assert!(k.ok(&["describe", "node", "n1"]).await.contains("Name:"));
    assert!(k.ok(&["describe", "pod", "web"]).await.contains("n1"));
    k.ok(&["label", "node", "n1", "pool=blue"]).await;
    k.ok(&["annotate", "pod", "web", "note=hello"]).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    assert_eq!(
        nodes.get("n1").await.unwrap().metadata.labels.unwrap()["pool"],
        "blue"
    );
    assert_eq!(
        pods.get("web").await.unwrap().metadata.annotations.unwrap()["note"],
        "hello"
    );
    assert!(
        k.ok(&["get", "nodes", "-l", "pool in (blue)", "-o", "name"])
            .await
            .contains("node/n1")
    );
    k.ok(&["cordon", "n1"]).await;
    assert_eq!(
        nodes.get("n1").await.unwrap().spec.unwrap().unschedulable,
        Some(true)
    );
    k.ok(&["uncordon", "n1"]).await;
    assert_ne!(
        nodes.get("n1").await.unwrap().spec.unwrap().unschedulable,
        Some(true)
    );

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}}))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    k.ok(&["scale", "deployment", "d", "--replicas=3"]).await;
    assert_eq!(
        deployments.get("d").await.unwrap().spec.unwrap().replicas,
        Some(3)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drain_waits_for_the_budget() {
    drain_waits_for_the_budget(Which::Path).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drain_waits_for_the_budget_1_20() {
    drain_waits_for_the_budget(Which::V1_20).await;
}

async fn drain_waits_for_the_budget(which: Which) {
    let k = Kubectl::start_with(which).await;
    let client = k.server.admin_client();
    node(&client, "n1").await;
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let ds: DaemonSet = serde_json::from_value(json!({"metadata": {"name": "agent"}, "spec": {"selector": {"matchLabels": {"app": "agent"}},
        "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}}))
    .unwrap();
    let ds = sets.create(&PostParams::default(), &ds).await.unwrap();
    let owner = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": ds.metadata.uid.unwrap(), "controller": true});
    ready_pod(
        &client,
        "agent-n1",
        json!({"app": "agent"}),
        "n1",
        Some(owner),
    )
    .await;
    let rs_owner = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "uid": "0b5c3a9e-0000-4000-8000-000000000001", "controller": true});
    ready_pod(
        &client,
        "web-1",
        json!({"app": "web"}),
        "n1",
        Some(rs_owner.clone()),
    )
    .await;
    ready_pod(
        &client,
        "web-2-scratch",
        json!({"app": "web"}),
        "n1",
        Some(rs_owner),
    )
    .await;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})).unwrap();
    budgets.create(&PostParams::default(), &pdb).await.unwrap();

    // A kubelet stand-in confirms the deletion of terminating pods on n1.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let kubelet = {
        let pods = pods.clone();
        tokio::spawn(async move {
            loop {
                for pod in pods
                    .list(&ListParams::default().fields("spec.nodeName=n1"))
                    .await
                    .unwrap()
                {
                    if pod.metadata.deletion_timestamp.is_some() {
                        let _ = pods
                            .delete(
                                &pod.metadata.name.unwrap(),
                                &DeleteParams {
                                    grace_period_seconds: Some(0),
                                    ..Default::default()
                                },
                            )
                            .await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let mut drain = k
        .command(&[
            "drain",
            "n1",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=90s",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let blocked = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(
        blocked
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count(),
        2,
        "the budget blocks every eviction"
    );
    assert_eq!(drain.try_wait().unwrap(), None, "drain is still waiting");
    budgets
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minAvailable": 0}})),
        )
        .await
        .unwrap();
    let output = tokio::time::timeout(Duration::from_secs(60), async {
        let status = drain.wait().await.unwrap();
        let mut stderr = String::new();
        tokio::io::AsyncReadExt::read_to_string(drain.stderr.as_mut().unwrap(), &mut stderr)
            .await
            .unwrap();
        (status, stderr)
    })
    .await
    .expect("drain finishes once the budget allows");
    kubelet.abort();
    assert!(output.0.success(), "drain failed: {}", output.1);
    assert!(
        output.1.contains("disruption budget"),
        "drain reported the blocked evictions: {}",
        output.1
    );
    let left: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();
    assert_eq!(left, vec!["agent-n1"], "only the DaemonSet pod stays");
    let nodes: Api<Node> = Api::all(client.clone());
    assert_eq!(
        nodes.get("n1").await.unwrap().spec.unwrap().unschedulable,
        Some(true)
    );
}

const CRD_YAML: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the widget should be.
            properties:
              size: {type: integer, description: How big the widget is.}
              color: {type: string, default: blue}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_and_explains_custom_resources() {
    applies_and_explains_custom_resources(Which::Path).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_and_explains_custom_resources_1_20() {
    applies_and_explains_custom_resources(Which::V1_20).await;
}

async fn applies_and_explains_custom_resources(which: Which) {
    let k = Kubectl::start_with(which).await;
    k.ok_with(&["apply", "-f", "-"], Some(CRD_YAML)).await;
    let widget =
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n";
    assert!(
        k.ok_with(&["apply", "-f", "-"], Some(widget))
            .await
            .contains("widget.example.com/w1 created")
    );
    let fetched: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "wd", "w1", "-o", "json"]).await).unwrap();
    assert_eq!(fetched["spec"], json!({"size": 3, "color": "blue"}));
    assert!(
        k.ok_with(
            &["apply", "-f", "-"],
            Some(&widget.replace("size: 3", "size: 5"))
        )
        .await
        .contains("configured")
    );
    let fetched: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "widget", "w1", "-o", "json"]).await).unwrap();
    assert_eq!(fetched["spec"]["size"], 5);
    let bad = k
        .run(
            &["apply", "-f", "-"],
            Some(&widget.replace("size: 3", "size: 3\n  sise: 4")),
        )
        .await;
    assert!(
        !bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("sise"),
        "strict field validation rejects typos"
    );
    k.ok_with(
        &["apply", "--server-side", "-f", "-"],
        Some(&widget.replace("w1", "w2")),
    )
    .await;
    assert!(
        k.ok(&["get", "widgets", "-o", "name"])
            .await
            .contains("widget.example.com/w2")
    );
    let explained = k.ok(&["explain", "widgets.spec.size"]).await;
    assert!(explained.contains("How big the widget is"), "{explained}");
    let explained = k.ok(&["explain", "pods.spec.containers.image"]).await;
    assert!(
        explained.contains("image") && explained.contains("Container image name"),
        "{explained}"
    );
    // Validation of a built-in kind: client-side (kubectl 1.20, from /openapi/v2) or server-side.
    let typo = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: typo\nspec:\n  containers:\n  - name: c\n    image: i:1\n    imagee: i:2\n";
    let bad = k.run(&["create", "-f", "-"], Some(typo)).await;
    assert!(
        !bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("imagee"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    k.ok_with(
        &["create", "-f", "-"],
        Some(&typo.replace("    imagee: i:2\n", "")),
    )
    .await;
    // Client-side apply of a built-in kind: a strategic merge patch built from the published
    // merge keys, so dropping a container from the file removes it (and only it).
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      containers:\n      - {name: a, image: 'a:1'}\n      - {name: b, image: 'b:1'}\n";
    k.ok_with(&["apply", "-f", "-"], Some(deployment)).await;
    k.ok_with(
        &["apply", "-f", "-"],
        Some(
            &deployment
                .replace("      - {name: a, image: 'a:1'}\n", "")
                .replace("b:1", "b:2"),
        ),
    )
    .await;
    let fetched: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "deployment", "d", "-o", "json"]).await).unwrap();
    let containers: Vec<(&str, &str)> = fetched["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default(),
                c["image"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(containers, vec![("b", "b:2")]);
    k.ok(&["delete", "widget", "w1"]).await;
    assert!(!k.ok(&["get", "widgets", "-o", "name"]).await.contains("w1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_streams_changes() {
    let k = Kubectl::start().await;
    let client = k.server.admin_client();
    let mut watch = k
        .command(&["get", "configmaps", "-w", "-o", "name"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let seen = tokio::time::timeout(Duration::from_secs(60), async {
        let mut seen = Vec::new();
        let mut created = 0;
        while seen.len() < 3 {
            if created < 3 {
                tokio::time::sleep(Duration::from_millis(500)).await;
                maps.create(
                    &PostParams::default(),
                    &serde_json::from_value(json!({"metadata": {"name": format!("cm{created}")}}))
                        .unwrap(),
                )
                .await
                .unwrap();
                created += 1;
            }
            if let Ok(Ok(Some(line))) =
                tokio::time::timeout(Duration::from_millis(100), lines.next_line()).await
            {
                seen.push(line);
            }
        }
        seen
    })
    .await
    .expect("kubectl get -w prints each new object");
    assert_eq!(
        seen,
        vec!["configmap/cm0", "configmap/cm1", "configmap/cm2"]
    );
    watch.kill().await.unwrap();
}
