//! Integration tests of the WorkerPool controller against the embedded API server, in virtual
//! time: validation, rendering of the MachineDeployment and the OSC Secret, and the status.

mod support;

use std::time::Duration;

use inplace_api::crd::{MachineDeploymentStrategyType, WorkerPool};
use inplace_api::keys::{
    CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED, LABEL_SELECTED_FOR_UPDATE, LABEL_UPDATE_RESULT,
    LABEL_WORKER_POOL,
};
use inplace_api::pool::ResolvedPool;
use inplace_api::strategy::OrchestrationType;
use inplace_orchestrator::Config;
use inplace_orchestrator::deployment::{CONDITION_HALTED, REASON_HALTED, template_hash};
use inplace_orchestrator::workerpool::{
    ANNOTATION_ACCEPTED_SPEC, CONDITION_VALID, osc_secret_name,
};
use kube::ResourceExt;
use serde_json::json;
use support::Lab;
use support::pool::{IMAGE_SERVER, OSC_NS, pool};

const POOL: &str = "pool-a";

fn config() -> Config {
    Config {
        image_server_url: IMAGE_SERVER.to_owned(),
        ..Lab::config()
    }
}

fn pending(pool: &WorkerPool) -> (Vec<String>, Vec<String>) {
    let lists = pool
        .status
        .as_ref()
        .and_then(|s| s.in_place_updates.as_ref())
        .and_then(|u| u.pending_worker_updates.clone());
    lists
        .map(|l| (l.auto_in_place_update, l.manual_in_place_update))
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn pool_renders_machine_deployment_and_osc_secret() {
    let lab = Lab::new().await;
    let _orchestrator = lab.start_orchestrator(config());
    lab.create_catalog().await;
    lab.create_pool(pool(POOL, "AutoInPlaceUpdate")).await;
    let (wp, md) = lab.wait_pool_rendered(POOL).await;

    // The MachineDeployment: same name, the pool's namespace, controlled by the pool.
    assert_eq!(md.namespace().as_deref(), Some(support::NS));
    assert!(
        md.owner_references()
            .iter()
            .any(|o| o.kind == "WorkerPool" && o.name == POOL && o.controller == Some(true))
    );
    assert_eq!(md.spec.replicas, 3, "replicas = minimum");
    let strategy = &md.spec.strategy;
    assert_eq!(
        strategy.type_,
        Some(MachineDeploymentStrategyType::InPlaceUpdate)
    );
    let in_place = strategy.in_place_update.clone().unwrap();
    assert_eq!(in_place.orchestration_type, Some(OrchestrationType::Auto));
    assert_eq!(
        in_place.max_unavailable,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    let template = &md.spec.template;
    assert_eq!(
        template
            .metadata
            .labels
            .get(LABEL_WORKER_POOL)
            .map(String::as_str),
        Some(POOL)
    );
    assert_eq!(template.spec.drain_timeout.as_deref(), Some("2h"));
    assert_eq!(
        template.spec.in_place_update_timeout.as_deref(),
        Some("10m")
    );
    assert_eq!(template.spec.max_evict_retries, Some(3));
    let node_labels = &template
        .spec
        .node_template
        .as_ref()
        .unwrap()
        .metadata
        .labels;
    assert_eq!(
        node_labels.get(LABEL_WORKER_POOL).map(String::as_str),
        Some(POOL)
    );

    // The OSC Secret: the name callers compute, the OS version and the OS-update command.
    let resolved = ResolvedPool::resolve(&wp.spec, &config().control_plane_version).unwrap();
    let expected_name = osc_secret_name(POOL, &resolved);
    let (secret, osc) = lab.osc(POOL).await;
    assert_eq!(secret.name_any(), expected_name);
    assert_eq!(secret.namespace().as_deref(), Some(OSC_NS));
    let status = wp.status.clone().unwrap();
    assert_eq!(
        status.node_agent_secret_name.as_deref(),
        Some(expected_name.as_str())
    );
    assert_eq!(osc.spec.pool, POOL);
    let updates = osc.spec.in_place_updates.clone().unwrap();
    assert_eq!(updates.operating_system_version, "1630.0.0");
    assert_eq!(updates.kubelet.version, "1.29.0");
    let os_update = osc.os_update().unwrap();
    assert_eq!(os_update.command, "/opt/rackproof/bin/rackproof-agent");
    assert_eq!(
        os_update.args,
        [
            "os-update",
            "--version",
            "1630.0.0",
            "--image-server",
            IMAGE_SERVER
        ]
    );

    // Status: accepted, a current hash, nothing pending.
    assert_eq!(status.observed_generation, wp.metadata.generation);
    assert!(status.current_hash.is_some());
    assert_eq!(pending(&wp), (vec![], vec![]));
    let valid = lab.pool_condition(POOL, CONDITION_VALID).await.unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("True", "SpecAccepted")
    );
    assert!(wp.annotations().contains_key(ANNOTATION_ACCEPTED_SPEC));
    assert!(
        lab.pool_condition(POOL, CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED)
            .await
            .is_none(),
        "only Manual pools carry it"
    );
}

#[tokio::test(start_paused = true)]
async fn os_version_change_updates_the_osc_in_place_and_rolls_a_new_template() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(config());
    lab.create_catalog().await;
    lab.create_pool(pool(POOL, "AutoInPlaceUpdate")).await;
    let (before_pool, before_md) = lab.wait_pool_rendered(POOL).await;
    lab.wait_running(3).await;
    let (before_secret, _) = lab.osc(POOL).await;
    let machines_before: Vec<String> = lab.machines().await.iter().map(|m| m.name_any()).collect();

    lab.patch_pool(
        POOL,
        json!({ "spec": { "machine": { "image": { "version": "1631.0.0" } } } }),
    )
    .await;
    let (during, md) = lab.wait_pool_rendered(POOL).await;
    let (secret, osc) = lab.osc(POOL).await;
    assert_eq!(
        secret.name_any(),
        before_secret.name_any(),
        "the in-place pool hash keeps the Secret name"
    );
    assert_ne!(secret.resource_version(), before_secret.resource_version());
    assert_eq!(
        osc.spec.in_place_updates.unwrap().operating_system_version,
        "1631.0.0"
    );
    assert_eq!(
        osc.status
            .unwrap()
            .in_place_updates
            .unwrap()
            .os_update
            .unwrap()
            .args[2],
        "1631.0.0"
    );
    assert_ne!(
        template_hash(&md.spec.template),
        template_hash(&before_md.spec.template),
        "a new template hash"
    );
    assert_ne!(
        md.spec.template.spec.class,
        before_md.spec.template.spec.class
    );
    assert_eq!(
        pending(&during),
        (vec![POOL.to_owned()], vec![]),
        "pending while the rollout runs"
    );
    assert_eq!(
        during.status.as_ref().unwrap().current_hash,
        before_pool.status.as_ref().unwrap().current_hash
    );

    let class = md.spec.template.spec.class.clone().unwrap().name;
    lab.wait_rolled_out(&class, 3, Duration::from_secs(3600))
        .await;
    let done = lab
        .wait_for(
            "the pool to report the update done",
            Duration::from_secs(120),
            || async {
                let wp = lab.pool(POOL).await;
                (pending(&wp) == (vec![], vec![])).then_some(wp)
            },
        )
        .await;
    assert_ne!(
        done.status.unwrap().current_hash,
        before_pool.status.unwrap().current_hash
    );
    let mut machines_after: Vec<String> =
        lab.machines().await.iter().map(|m| m.name_any()).collect();
    machines_after.sort();
    let mut machines_before = machines_before;
    machines_before.sort();
    assert_eq!(
        machines_before, machines_after,
        "updated in place: the same machines"
    );
    assert_eq!(lab.events_with_reason("UpdateCompleted").await.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn refused_changes_set_the_condition_and_leave_rendered_objects_untouched() {
    let lab = Lab::new().await;
    let _orchestrator = lab.start_orchestrator(config());
    lab.create_catalog().await;
    lab.create_pool(pool(POOL, "AutoInPlaceUpdate")).await;
    let (_, md) = lab.wait_pool_rendered(POOL).await;
    let (secret, _) = lab.osc(POOL).await;
    let md_version = md.resource_version();

    // An image name change on an in-place pool.
    lab.patch_pool(POOL, json!({ "spec": { "machine": { "image": { "name": "suse-chost", "version": "15.3.20220818" } } } })).await;
    let (refused, _) = lab.wait_pool_rendered(POOL).await;
    let valid = lab.pool_condition(POOL, CONDITION_VALID).await.unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "ImmutableForInPlace")
    );
    assert!(
        valid.message.contains("spec.machine.image.name"),
        "{}",
        valid.message
    );
    assert!(
        valid.message.contains("restore the old value"),
        "the fix is given: {}",
        valid.message
    );
    assert_eq!(valid.observed_generation, refused.metadata.generation);
    lab.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(
        lab.events_with_reason("SpecRefused").await.len(),
        1,
        "one Event per refused generation"
    );
    assert_eq!(
        lab.deployment(POOL).await.resource_version(),
        md_version,
        "the MachineDeployment is untouched"
    );
    let (now_secret, osc) = lab.osc(POOL).await;
    assert_eq!(
        now_secret.resource_version(),
        secret.resource_version(),
        "the OSC Secret is untouched"
    );
    assert_eq!(
        osc.spec.in_place_updates.unwrap().operating_system_version,
        "1630.0.0"
    );

    // A Kubernetes minor-version skip (1.29 → 1.31) with the image restored.
    lab.patch_pool(
        POOL,
        json!({ "spec": { "machine": { "image": { "name": "gardenlinux", "version": "1630.0.0" } }, "kubernetes": { "version": "1.31.1" } } }),
    )
    .await;
    lab.wait_pool_rendered(POOL).await;
    let valid = lab.pool_condition(POOL, CONDITION_VALID).await.unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "MinorVersionSkip")
    );
    assert!(
        valid.message.contains("spec.kubernetes.version")
            && valid.message.contains("update to 1.30.x first"),
        "{}",
        valid.message
    );
    assert_eq!(lab.deployment(POOL).await.resource_version(), md_version);

    // A valid change is accepted again.
    lab.patch_pool(
        POOL,
        json!({ "spec": { "kubernetes": { "version": "1.30.4" } } }),
    )
    .await;
    lab.wait_pool_rendered(POOL).await;
    let valid = lab.pool_condition(POOL, CONDITION_VALID).await.unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("True", "SpecAccepted")
    );
    let (_, osc) = lab.osc(POOL).await;
    assert_eq!(osc.spec.in_place_updates.unwrap().kubelet.version, "1.30.4");
}

#[tokio::test(start_paused = true)]
async fn invalid_new_pool_renders_nothing() {
    let lab = Lab::new().await;
    let _orchestrator = lab.start_orchestrator(config());
    lab.create_catalog().await;
    let mut bad = pool(POOL, "AutoInPlaceUpdate");
    bad["spec"]["machine"]["image"]["version"] = json!("1999.0.0");
    lab.create_pool(bad).await;
    let valid = lab
        .wait_for("the refusal", Duration::from_secs(120), || async {
            lab.pool_condition(POOL, CONDITION_VALID).await
        })
        .await;
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "UnknownVersion")
    );
    assert!(
        valid.message.contains("nothing is rendered"),
        "{}",
        valid.message
    );
    lab.clock.sleep(Duration::from_secs(30)).await;
    assert!(lab.deployment_opt(POOL).await.is_none());
    assert!(lab.osc_secrets(POOL).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn manual_pool_waits_for_a_person_and_reports_it() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(config());
    lab.create_catalog().await;
    lab.create_pool(pool(POOL, "ManualInPlaceUpdate")).await;
    let (_, md) = lab.wait_pool_rendered(POOL).await;
    assert_eq!(
        md.spec.strategy.in_place_update.unwrap().orchestration_type,
        Some(OrchestrationType::Manual)
    );
    lab.wait_running(3).await;
    let updated = lab
        .pool_condition(POOL, CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED)
        .await
        .unwrap();
    assert_eq!(updated.status, "True");

    lab.patch_pool(
        POOL,
        json!({ "spec": { "machine": { "image": { "version": "1631.0.0" } } } }),
    )
    .await;
    let (wp, md) = lab.wait_pool_rendered(POOL).await;
    assert_eq!(pending(&wp), (vec![], vec![POOL.to_owned()]));
    let waiting = lab
        .wait_for(
            "ManualInPlaceWorkersUpdated=False",
            Duration::from_secs(120),
            || async {
                lab.pool_condition(POOL, CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED)
                    .await
                    .filter(|c| c.status == "False")
            },
        )
        .await;
    assert_eq!(waiting.reason, "WorkersPendingUpdate");
    // Nobody selects: nothing happens.
    lab.clock.sleep(Duration::from_secs(600)).await;
    assert!(
        lab.nodes()
            .await
            .iter()
            .all(|n| !n.labels().contains_key(LABEL_SELECTED_FOR_UPDATE))
    );
    assert!(
        !lab.pool_condition(POOL, CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED)
            .await
            .unwrap()
            .status
            .eq("True")
    );

    // A person selects every node: the rollout completes and the condition turns True.
    for node in lab.nodes().await {
        lab.label_node(&node.name_any(), LABEL_SELECTED_FOR_UPDATE, Some("true"))
            .await;
    }
    let class = md.spec.template.spec.class.unwrap().name;
    lab.wait_rolled_out(&class, 3, Duration::from_secs(3600))
        .await;
    lab.wait_for(
        "ManualInPlaceWorkersUpdated=True",
        Duration::from_secs(120),
        || async {
            lab.pool_condition(POOL, CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED)
                .await
                .filter(|c| c.status == "True")
        },
    )
    .await;
    assert_eq!(pending(&lab.pool(POOL).await), (vec![], vec![]));
}

#[tokio::test(start_paused = true)]
async fn change_during_an_update_is_refused_unless_forced() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(config());
    lab.create_catalog().await;
    // Manual: the first update stays in progress until someone selects nodes.
    lab.create_pool(pool(POOL, "ManualInPlaceUpdate")).await;
    lab.wait_pool_rendered(POOL).await;
    lab.wait_running(3).await;
    lab.patch_pool(
        POOL,
        json!({ "spec": { "machine": { "image": { "version": "1631.0.0" } } } }),
    )
    .await;
    lab.wait_pool_rendered(POOL).await;

    lab.patch_pool(
        POOL,
        json!({ "spec": { "machine": { "image": { "version": "1632.0.0" } } } }),
    )
    .await;
    lab.wait_pool_rendered(POOL).await;
    let valid = lab.pool_condition(POOL, CONDITION_VALID).await.unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "UpdateInProgress")
    );
    assert!(
        valid.message.contains("force-in-place-update"),
        "{}",
        valid.message
    );
    let (_, osc) = lab.osc(POOL).await;
    assert_eq!(
        osc.spec.in_place_updates.unwrap().operating_system_version,
        "1631.0.0"
    );

    // The force operation lets the same change through, and is consumed.
    lab.patch_pool(POOL, json!({ "metadata": { "annotations": { "gardener.cloud/operation": "force-in-place-update" } } })).await;
    lab.wait_for("the forced change", Duration::from_secs(120), || async {
        let (_, osc) = lab.osc(POOL).await;
        (osc.spec.in_place_updates.unwrap().operating_system_version == "1632.0.0").then_some(())
    })
    .await;
    let valid = lab.pool_condition(POOL, CONDITION_VALID).await.unwrap();
    assert_eq!(valid.status, "True");
    let wp = lab.pool(POOL).await;
    assert!(
        !wp.annotations().contains_key("gardener.cloud/operation"),
        "the force operation is consumed"
    );
}

#[tokio::test(start_paused = true)]
async fn mcm_setting_change_reaches_the_machines_without_a_rollout() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(config());
    lab.create_catalog().await;
    lab.create_pool(pool(POOL, "AutoInPlaceUpdate")).await;
    lab.wait_pool_rendered(POOL).await;
    lab.wait_running(3).await;
    let sets_before: Vec<String> = lab.sets().await.iter().map(|s| s.name_any()).collect();

    lab.patch_pool(POOL, json!({ "spec": { "machineControllerManager": { "machineDrainTimeout": "30m", "maxEvictRetries": 5 } } })).await;
    lab.wait_for(
        "the machines to get the new settings",
        Duration::from_secs(120),
        || async {
            let machines = lab.machines().await;
            machines
                .iter()
                .all(|m| {
                    m.spec.drain_timeout.as_deref() == Some("30m")
                        && m.spec.max_evict_retries == Some(5)
                })
                .then_some(())
        },
    )
    .await;
    lab.clock.sleep(Duration::from_secs(60)).await;
    let sets_after: Vec<String> = lab.sets().await.iter().map(|s| s.name_any()).collect();
    assert_eq!(
        sets_before, sets_after,
        "no new MachineSet for a settings change"
    );
    assert!(
        lab.nodes()
            .await
            .iter()
            .all(|n| !n.labels().contains_key(LABEL_SELECTED_FOR_UPDATE)),
        "no node selected"
    );
    let wp = lab.pool(POOL).await;
    assert_eq!(
        pending(&wp),
        (vec![], vec![]),
        "a settings change is no in-place update"
    );
}

#[tokio::test(start_paused = true)]
async fn control_plane_version_comes_from_the_config_and_bounds_the_pool_version() {
    let lab = Lab::new().await;
    // The cluster reports a newer version than the configured control plane: it must not matter.
    let reported = lab.client.apiserver_version().await.unwrap();
    assert_eq!(
        (reported.major.as_str(), reported.minor.as_str()),
        ("1", "35")
    );
    let config = Config {
        control_plane_version: inplace_api::version::KubeVersion::parse("1.30.4").unwrap(),
        ..config()
    };
    let _orchestrator = lab.start_orchestrator(config);
    lab.create_catalog().await;

    // A pool naming 1.31.1 (in the catalog, below what the cluster reports, above the setting).
    let mut above = pool(POOL, "AutoInPlaceUpdate");
    above["spec"]["kubernetes"]["version"] = json!("1.31.1");
    lab.create_pool(above).await;
    let valid = lab
        .wait_for("the refusal", Duration::from_secs(120), || async {
            lab.pool_condition(POOL, CONDITION_VALID).await
        })
        .await;
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "AboveControlPlane")
    );
    assert!(
        valid.message.contains("1.31.1") && valid.message.contains("1.30.4"),
        "{}",
        valid.message
    );
    lab.clock.sleep(Duration::from_secs(30)).await;
    assert!(
        lab.deployment_opt(POOL).await.is_none(),
        "nothing is rendered from a refused pool"
    );
    assert!(lab.osc_secrets(POOL).await.is_empty());
    assert_eq!(lab.events_with_reason("SpecRefused").await.len(), 1);

    // A pool that names no version inherits the configured one, not the cluster's.
    let mut inherit = pool("pool-b", "AutoInPlaceUpdate");
    inherit["spec"]["kubernetes"] = json!({});
    lab.create_pool(inherit).await;
    lab.wait_pool_rendered("pool-b").await;
    let valid = lab.pool_condition("pool-b", CONDITION_VALID).await.unwrap();
    assert_eq!(valid.status, "True", "{}", valid.message);
    let (_, osc) = lab.osc("pool-b").await;
    assert_eq!(osc.spec.in_place_updates.unwrap().kubelet.version, "1.30.4");
}

#[tokio::test(start_paused = true)]
async fn halted_rollout_is_reported_in_the_pool_status() {
    let lab = Lab::new().await;
    let _doubles = lab.start_doubles();
    let _orchestrator = lab.start_orchestrator(config());
    lab.create_catalog().await;
    lab.create_pool(pool(POOL, "AutoInPlaceUpdate")).await;
    lab.wait_pool_rendered(POOL).await;
    lab.wait_running(3).await;
    for node in lab.nodes().await {
        lab.outcomes.lock().unwrap().insert(
            node.name_any(),
            support::Outcome::Fail("new slot did not boot: rolled back".into()),
        );
    }
    lab.patch_pool(
        POOL,
        json!({ "spec": { "machine": { "image": { "version": "1631.0.0" } } } }),
    )
    .await;
    // maxUnavailable 1: the first failure halts the rollout, and the pool says so.
    let halted = lab
        .wait_for(
            "the pool to report the halt",
            Duration::from_secs(1800),
            || async {
                lab.pool_condition(POOL, CONDITION_HALTED)
                    .await
                    .filter(|c| c.status == "True")
            },
        )
        .await;
    assert_eq!(halted.reason, REASON_HALTED);
    assert!(
        halted
            .message
            .contains("1 failed node(s) reached maxUnavailable 1"),
        "{}",
        halted.message
    );
    assert_eq!(
        pending(&lab.pool(POOL).await),
        (vec![POOL.to_owned()], vec![]),
        "the update is still pending"
    );
    let failed = lab
        .nodes()
        .await
        .into_iter()
        .filter(|n| n.labels().get(LABEL_UPDATE_RESULT).map(String::as_str) == Some("failed"))
        .count();
    assert_eq!(failed, 1);

    // A person fixes the cause and removes the mark: the pool reports the rollout proceeding.
    lab.outcomes.lock().unwrap().clear();
    let marked = lab
        .nodes()
        .await
        .into_iter()
        .find(|n| n.labels().contains_key(LABEL_UPDATE_RESULT))
        .unwrap()
        .name_any();
    lab.label_node(&marked, LABEL_UPDATE_RESULT, None).await;
    lab.wait_for(
        "the pool to report the update done",
        Duration::from_secs(3600),
        || async {
            let wp = lab.pool(POOL).await;
            (pending(&wp) == (vec![], vec![])).then_some(())
        },
    )
    .await;
    let condition = lab.pool_condition(POOL, CONDITION_HALTED).await.unwrap();
    assert_eq!(condition.status, "False", "{}", condition.message);
}

/// Restarts the orchestrator with the control plane at `version` (how a control-plane upgrade
/// reaches it) and waits until the pool's `Valid` condition has `reason`.
async fn upgrade_control_plane(
    lab: &Lab,
    running: tokio::task::JoinHandle<()>,
    version: &str,
    pool: &str,
    reason: &str,
) -> (
    tokio::task::JoinHandle<()>,
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition,
) {
    running.abort();
    let _ = running.await;
    let config = Config {
        control_plane_version: inplace_api::version::KubeVersion::parse(version).unwrap(),
        ..config()
    };
    let restarted = lab.start_orchestrator(config);
    let valid = lab
        .wait_for(
            "the pool to be judged under the new control plane",
            Duration::from_secs(120),
            || async {
                lab.pool_condition(pool, CONDITION_VALID)
                    .await
                    .filter(|c| c.reason == reason)
            },
        )
        .await;
    (restarted, valid)
}

fn inheriting_pool(name: &str, strategy: &str) -> serde_json::Value {
    let mut spec = pool(name, strategy);
    spec["spec"]["kubernetes"] = json!({});
    spec
}

#[tokio::test(start_paused = true)]
async fn control_plane_change_that_skips_a_minor_is_refused_for_inheriting_in_place_pools() {
    let lab = Lab::new().await;
    let config = Config {
        control_plane_version: inplace_api::version::KubeVersion::parse("1.29.0").unwrap(),
        ..config()
    };
    let orchestrator = lab.start_orchestrator(config);
    lab.create_catalog().await;
    lab.create_pool(inheriting_pool(POOL, "AutoInPlaceUpdate"))
        .await;
    let (_, md) = lab.wait_pool_rendered(POOL).await;

    let (orchestrator, valid) =
        upgrade_control_plane(&lab, orchestrator, "1.31.1", POOL, "MinorVersionSkip").await;
    assert_eq!(valid.status, "False");
    assert!(
        valid.message.contains("1.29.0") && valid.message.contains("1.31.1"),
        "{}",
        valid.message
    );
    lab.clock.sleep(Duration::from_secs(30)).await;
    let (_, osc) = lab.osc(POOL).await;
    assert_eq!(
        osc.spec.in_place_updates.unwrap().kubelet.version,
        "1.29.0",
        "the nodes keep the kubelet of the accepted control plane"
    );
    assert_eq!(
        lab.deployment(POOL).await.spec.template,
        md.spec.template,
        "the MachineDeployment is untouched"
    );

    // One minor at a time is accepted and rendered.
    let (_orchestrator, valid) =
        upgrade_control_plane(&lab, orchestrator, "1.30.4", POOL, "SpecAccepted").await;
    assert_eq!(valid.status, "True");
    lab.wait_for(
        "the new kubelet version",
        Duration::from_secs(120),
        || async {
            let (_, osc) = lab.osc(POOL).await;
            (osc.spec.in_place_updates.unwrap().kubelet.version == "1.30.4").then_some(())
        },
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn control_plane_change_during_an_update_is_refused_for_inheriting_in_place_pools() {
    let lab = Lab::new().await;
    let config = Config {
        control_plane_version: inplace_api::version::KubeVersion::parse("1.29.0").unwrap(),
        ..config()
    };
    let orchestrator = lab.start_orchestrator(config);
    lab.create_catalog().await;
    // Manual, and no machines: the OS update stays in progress.
    lab.create_pool(inheriting_pool(POOL, "ManualInPlaceUpdate"))
        .await;
    lab.wait_pool_rendered(POOL).await;
    lab.patch_pool(
        POOL,
        json!({ "spec": { "machine": { "image": { "version": "1631.0.0" } } } }),
    )
    .await;
    lab.wait_pool_rendered(POOL).await;

    let (_orchestrator, valid) =
        upgrade_control_plane(&lab, orchestrator, "1.30.4", POOL, "UpdateInProgress").await;
    assert_eq!(valid.status, "False");
    assert!(
        valid.message.contains("force-in-place-update"),
        "{}",
        valid.message
    );
    lab.clock.sleep(Duration::from_secs(30)).await;
    let (_, osc) = lab.osc(POOL).await;
    let updates = osc.spec.in_place_updates.unwrap();
    assert_eq!(
        (
            updates.kubelet.version.as_str(),
            updates.operating_system_version.as_str()
        ),
        ("1.29.0", "1631.0.0"),
        "the accepted spec under the accepted control plane stays in force"
    );
}

#[tokio::test(start_paused = true)]
async fn control_plane_change_checks_the_skew_of_pools_with_their_own_version() {
    let lab = Lab::new().await;
    let orchestrator = lab.start_orchestrator(config());
    lab.create_catalog().await;
    lab.create_pool(pool(POOL, "AutoInPlaceUpdate")).await;
    lab.wait_pool_rendered(POOL).await;

    // The pool stays at 1.29.0; a control plane at 1.32 is three minors ahead.
    let (_orchestrator, valid) =
        upgrade_control_plane(&lab, orchestrator, "1.32.0", POOL, "ControlPlaneSkew").await;
    assert_eq!(valid.status, "False");
    assert!(
        valid.message.contains("1.29.0") && valid.message.contains("1.32.0"),
        "{}",
        valid.message
    );
}
