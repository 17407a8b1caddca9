//! An update blessed in the guest: the embedded API server over HTTPS on the host, the node's
//! agent reaching it as `https://10.0.2.2:PORT`, this test playing the orchestrator.
//!
//! 1. BASE boots with the pool's OSC at BASE: the agent registers its Node, applies the OSC and
//!    persists it on the state partition; the power button stops the node cleanly.
//! 2. NEW is installed on trial (`+3`, as `rackproof-agent os-update` installs it), the OSC moves
//!    to NEW and the Node is `ReadyForUpdate`.
//! 3. NEW boots (`+2-1`): the agent finds the running version equal to the attempted one,
//!    blesses the booted entry and labels the Node `update-result=successful`; its heartbeat
//!    reports NEW.

use std::time::Duration;

use inplace_api::keys;
use inplace_api::osc::secret::encode_secret;
use inplace_api::osc::{
    InPlaceUpdates, InPlaceUpdatesStatus, OperatingSystemConfig, OsUpdate, OscKubelet, OscSpec,
    OscStatus,
};
use k8s_openapi::api::core::v1::{Node as KubeNode, Secret};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use rackproof_apiserver::{ApiServer, User};
use rackproof_driver::{Power as _, ResetAction};
use rackproof_qemu::images::{BASE_VERSION, NEW_VERSION};
use rackproof_qemu::{HOST_ALIAS, NodeIdentity};
use rackproof_test_support::node_images;
use serde_json::json;

use super::{
    BOOT, Node, agent_started, base_blessed, blessed, boot_model, entries, marker, model_of, re,
};

const NODE: &str = "bless";
const POOL: &str = "pool-q";
const NAMESPACE: &str = "kube-system";
const SECRET: &str = "gardener-node-agent-pool-q-0123456789abcdef";
/// The heartbeat's annotation with the running OS version (inplace-agent's `ANNOTATION_OS_VERSION`).
const ANNOTATION_OS_VERSION: &str = "node-agent.rackproof.dev/os-version";
/// The kubelet the node runs and the OSC asks for: the update changes only the OS.
const KUBELET: &str = "1.30.4";

fn osc(version: &str) -> OperatingSystemConfig {
    OperatingSystemConfig::new(
        OscSpec {
            pool: POOL.into(),
            in_place_updates: Some(InPlaceUpdates {
                operating_system_version: version.into(),
                kubelet: OscKubelet {
                    version: KUBELET.into(),
                    cpu_manager_policy: None,
                    eviction_hard: None,
                    kube_reserved: None,
                    system_reserved: None,
                },
                credentials_rotation: None,
            }),
            files: Vec::new(),
        },
        Some(OscStatus {
            in_place_updates: Some(InPlaceUpdatesStatus {
                os_update: Some(OsUpdate {
                    command: "/usr/bin/rackproof-agent".into(),
                    args: vec!["os-update".into(), "--version".into(), version.into()],
                }),
            }),
        }),
    )
}

/// Creates or replaces the pool's OSC Secret; returns the document's checksum.
async fn set_osc(client: &kube::Client, osc: &OperatingSystemConfig) -> String {
    let mut secret = encode_secret(osc, SECRET, NAMESPACE).unwrap();
    let checksum = secret.metadata.annotations.as_ref().unwrap()
        [keys::ANNOTATION_CHECKSUM_DOWNLOADED_OSC]
        .clone();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    match secrets.get_opt(SECRET).await.unwrap() {
        None => {
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .unwrap();
        }
        Some(existing) => {
            secret.metadata.resource_version = existing.metadata.resource_version;
            secrets
                .replace(SECRET, &PostParams::default(), &secret)
                .await
                .unwrap();
        }
    }
    checksum
}

fn annotation<'a>(node: &'a KubeNode, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn label<'a>(node: &'a KubeNode, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// Polls the Node until `done`, for at most one boot's time.
async fn wait_node(
    node: &Node,
    client: &kube::Client,
    what: &str,
    done: impl Fn(&KubeNode) -> bool,
) -> KubeNode {
    let nodes: Api<KubeNode> = Api::all(client.clone());
    let deadline = node.clock.instant() + BOOT;
    loop {
        let current = nodes.get_opt(NODE).await.unwrap();
        if let Some(n) = current.as_ref()
            && done(n)
        {
            return n.clone();
        }
        assert!(
            node.clock.instant() < deadline,
            "Node {NODE}: {what} not seen within {BOOT:?}; last: {:?}; artifacts in {}",
            current.map(|n| (n.metadata.labels, n.metadata.annotations)),
            node.dir.display()
        );
        node.clock.sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test]
async fn an_update_to_a_good_version_is_blessed_by_the_agent_in_the_guest() {
    let images = node_images();
    let clock = rackproof_clock::Clock::wall();
    let server = ApiServer::new(clock);
    let https = server
        .serve_https_also_as("127.0.0.1:0".parse().unwrap(), &[HOST_ALIAS])
        .await
        .unwrap();
    server.bind_node_to_pool(NODE, POOL);
    server.allow_node_secret(POOL, NAMESPACE, SECRET);
    let admin = server.admin_client();
    let base_checksum = set_osc(&admin, &osc(BASE_VERSION)).await;
    let identity = NodeIdentity {
        node: NODE.into(),
        pool: POOL.into(),
        osc_secret: format!("{NAMESPACE}/{SECRET}"),
        api_server: format!("https://{HOST_ALIAS}:{}", https.addr().port()),
        token: server.issue_token(User::node(NODE)),
        ca_pem: https.ca_pem().to_owned(),
        kubelet_version: KUBELET.into(),
        ..NodeIdentity::default()
    };
    let node = Node::with_identity(
        "update_blessed",
        &images.disk(BASE_VERSION).unwrap(),
        Some(identity),
    );
    let applied = re(r"operating system config applied");

    // 1. BASE, OSC at BASE: registered, applied, persisted.
    let mark = node.machine.console().mark();
    node.machine.reset(ResetAction::On).await.unwrap();
    node.wait(mark, &agent_started()).await;
    let registered = wait_node(&node, &admin, "the applied BASE OSC", |n| {
        annotation(n, keys::ANNOTATION_CHECKSUM_APPLIED_OSC) == Some(base_checksum.as_str())
            && annotation(n, ANNOTATION_OS_VERSION) == Some(BASE_VERSION)
    })
    .await;
    assert_eq!(label(&registered, keys::LABEL_WORKER_POOL), Some(POOL));
    node.wait(mark, &applied).await;
    node.power_button(BASE_VERSION).await;

    // 2. NEW on trial, the OSC at NEW, the Node ready for the update.
    let esp = node.machine.esp();
    assert_eq!(entries(&esp), [base_blessed()]);
    images
        .slot(NEW_VERSION)
        .unwrap()
        .install(&esp, Some(3), false)
        .unwrap();
    let model = model_of(&esp);
    let new_checksum = set_osc(&admin, &osc(NEW_VERSION)).await;
    let ready = json!({"status": {"conditions": [{
        "type": keys::CONDITION_IN_PLACE_UPDATE, "status": "True", "reason": keys::REASON_READY_FOR_UPDATE,
        "message": "drained by the test", "lastTransitionTime": "2025-01-01T00:00:00Z",
    }]}});
    Api::<KubeNode>::all(admin.clone())
        .patch_status(NODE, &PatchParams::default(), &Patch::Strategic(&ready))
        .await
        .unwrap();

    // 3. NEW boots; the agent blesses it and reports success.
    let mark = node.machine.console().mark();
    node.machine.reset(ResetAction::On).await.unwrap();
    node.wait(mark, &marker(NEW_VERSION, "up")).await;
    let updated = wait_node(&node, &admin, "update-result=successful on NEW", |n| {
        label(n, keys::LABEL_UPDATE_RESULT) == Some(keys::UPDATE_RESULT_SUCCESSFUL)
            && annotation(n, keys::ANNOTATION_CHECKSUM_APPLIED_OSC) == Some(new_checksum.as_str())
            && annotation(n, ANNOTATION_OS_VERSION) == Some(NEW_VERSION)
    })
    .await;
    assert_eq!(
        annotation(&updated, keys::ANNOTATION_UPDATING_OS_VERSION),
        None
    );
    node.wait(mark, &applied).await;
    node.power_button(NEW_VERSION).await;
    assert_eq!(
        node.machine
            .console()
            .count_since(mark, &re(r"^rackproof-os \S+: init started")),
        1
    );

    // The model: one boot selects NEW and counts it down; the agent's bless removes the counter.
    let records = boot_model(&model, 1);
    assert_eq!(records[0].entry.conf.version.as_deref(), Some(NEW_VERSION));
    inplace_boot::bless(&model, records[0].current_name()).unwrap();
    let actual = entries(&esp);
    assert_eq!(actual, entries(&model));
    assert_eq!(actual, [base_blessed(), blessed(NEW_VERSION)]);
    assert!(!esp.dirty().unwrap());
    node.finish().await;
}
