//! What a pool renders: the MachineDeployment and the OSC Secret, a new template for a new OS
//! version, and MCM settings that reach the machines without a rollout.

use kube::ResourceExt;
use std::time::Duration;

use inplace_api::crd::MachineDeploymentStrategyType;
use inplace_api::keys::{
    CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED, LABEL_SELECTED_FOR_UPDATE, LABEL_WORKER_POOL,
};
use inplace_api::pool::ResolvedPool;
use inplace_api::strategy::OrchestrationType;
use inplace_orchestrator::deployment::template_hash;
use inplace_orchestrator::workerpool::{
    ANNOTATION_ACCEPTED_SPEC, CONDITION_VALID, osc_secret_name,
};
use serde_json::json;

use crate::support::Lab;
use crate::support::pool::{IMAGE_SERVER, OSC_NS, pool};
use crate::{POOL, config, pending};

#[tokio::test(start_paused = true)]
async fn pool_renders_machine_deployment_and_osc_secret() {
    let lab = Lab::new().await;
    let _orchestrator = lab.start_orchestrator(config());
    lab.create_catalog().await;
    lab.create_pool(pool(POOL, "AutoInPlaceUpdate")).await;
    let (wp, md) = lab.wait_pool_rendered(POOL).await;

    // The MachineDeployment: same name, the pool's namespace, controlled by the pool.
    assert_eq!(md.namespace().as_deref(), Some(crate::support::NS));
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
