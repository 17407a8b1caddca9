//! Refused pools and changes: the condition says why, and nothing rendered changes.

use kube::ResourceExt;
use std::time::Duration;

use inplace_orchestrator::workerpool::CONDITION_VALID;
use serde_json::json;

use crate::support::Lab;
use crate::support::pool::pool;
use crate::{POOL, config};

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
