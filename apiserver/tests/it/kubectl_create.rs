//! Referee tests: the objects kubectl builds itself (`kubectl create <kind>`, sent as protobuf),
//! Services and `kubectl cluster-info`, with the kubectl on PATH and with kubectl 1.20.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::Api;

use crate::kubectl::{Kubectl, Which};

#[tokio::test]
async fn kubectl_create_makes_each_kind_it_builds() {
    create_makes_each_kind_it_builds(Which::Path).await;
}

#[tokio::test]
async fn kubectl_create_makes_each_kind_it_builds_1_20() {
    create_makes_each_kind_it_builds(Which::V1_20).await;
}

async fn create_makes_each_kind_it_builds(which: Which) {
    let k = Kubectl::start_with(which).await;
    let client = k.server.admin_client();
    k.ok(&["create", "namespace", "lab"]).await;
    k.ok(&[
        "-n",
        "lab",
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=fast",
    ])
    .await;
    k.ok(&[
        "-n",
        "lab",
        "create",
        "secret",
        "generic",
        "token",
        "--from-literal=key=s3cret",
    ])
    .await;
    k.ok(&["-n", "lab", "create", "serviceaccount", "robot"])
        .await;
    k.ok(&[
        "-n",
        "lab",
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=2",
        "--port=80",
    ])
    .await;
    k.ok(&[
        "-n",
        "lab",
        "create",
        "service",
        "clusterip",
        "web",
        "--tcp=80:8080",
    ])
    .await;
    if matches!(which, Which::Path) {
        // kubectl 1.20 makes policy/v1beta1 budgets, which this server does not serve.
        k.ok(&[
            "-n",
            "lab",
            "create",
            "pdb",
            "web",
            "--selector=app=web",
            "--min-available=1",
        ])
        .await;
        let pdb = Api::<PodDisruptionBudget>::namespaced(client.clone(), "lab")
            .get("web")
            .await
            .unwrap();
        let spec = pdb.spec.unwrap();
        assert_eq!(spec.min_available, Some(IntOrString::Int(1)));
        let labels = spec.selector.unwrap().match_labels.unwrap();
        assert_eq!(labels["app"], "web");
    }

    let namespace = Api::<Namespace>::all(client.clone())
        .get("lab")
        .await
        .unwrap();
    assert_eq!(namespace.status.unwrap().phase.as_deref(), Some("Active"));
    let settings = Api::<ConfigMap>::namespaced(client.clone(), "lab")
        .get("settings")
        .await
        .unwrap();
    assert_eq!(settings.data.unwrap()["mode"], "fast");
    let token = Api::<Secret>::namespaced(client.clone(), "lab")
        .get("token")
        .await
        .unwrap();
    assert_eq!(token.data.unwrap()["key"].0, b"s3cret");
    assert_eq!(token.type_.as_deref(), Some("Opaque"));
    Api::<ServiceAccount>::namespaced(client.clone(), "lab")
        .get("robot")
        .await
        .unwrap();
    let web = Api::<Deployment>::namespaced(client.clone(), "lab")
        .get("web")
        .await
        .unwrap();
    let spec = web.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let container = &spec.template.spec.unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some("nginx:1.27"));
    assert_eq!(container.ports.as_ref().unwrap()[0].container_port, 80);
    let service = Api::<Service>::namespaced(client.clone(), "lab")
        .get("web")
        .await
        .unwrap();
    let spec = service.spec.unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.0.0.2"));
    let port = &spec.ports.unwrap()[0];
    assert_eq!(port.port, 80);
    assert_eq!(port.target_port, Some(IntOrString::Int(8080)));
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
}

#[tokio::test]
async fn kubectl_get_services_and_cluster_info() {
    get_services_and_cluster_info(Which::Path).await;
}

#[tokio::test]
async fn kubectl_get_services_and_cluster_info_1_20() {
    get_services_and_cluster_info(Which::V1_20).await;
}

async fn get_services_and_cluster_info(which: Which) {
    let k = Kubectl::start_with(which).await;
    k.ok(&["create", "service", "nodeport", "door", "--tcp=80:8080"])
        .await;
    let table = k.ok(&["get", "services", "-o", "wide"]).await;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE",
            "SELECTOR"
        ],
        "{table}"
    );
    let row = |name: &str| rows.iter().find(|r| r[0] == name).expect(name).clone();
    let door = row("door");
    assert_eq!(
        door[1..5],
        ["NodePort", "10.0.0.2", "<none>", "80:30000/TCP"],
        "{table}"
    );
    assert_eq!(door[6], "app=door", "{table}");
    let kubernetes = row("kubernetes");
    assert_eq!(
        kubernetes[1..5],
        ["ClusterIP", "10.0.0.1", "<none>", "443/TCP"],
        "{table}"
    );

    let colored = k.ok(&["cluster-info"]).await;
    let info = strip_colors(&colored);
    assert!(
        info.contains("is running at https://127.0.0.1:"),
        "kubectl cluster-info printed: {info}"
    );
}

/// `text` without its ANSI colour sequences (`ESC [ ... m`), which `kubectl cluster-info` prints.
fn strip_colors(text: &str) -> String {
    let mut plain = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| *c == 'm');
        } else {
            plain.push(c);
        }
    }
    plain
}
