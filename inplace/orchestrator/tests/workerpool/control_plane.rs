//! The control-plane version: where it comes from, and the pool versions and changes it allows.

use std::time::Duration;

use inplace_orchestrator::Config;
use inplace_orchestrator::workerpool::CONDITION_VALID;
use serde_json::json;

use crate::support::Lab;
use crate::support::pool::pool;
use crate::{POOL, config};

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
