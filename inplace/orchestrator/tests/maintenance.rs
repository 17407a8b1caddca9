//! Integration tests of the maintenance controller against the embedded API server, in virtual
//! time from 2026-01-01T00:00:00Z, with the orchestrator's WorkerPool controller beside it: when
//! a window maintains a pool, which version it picks, what it records, and confined changes.

mod support;

use std::time::Duration;

use inplace_api::crd::{ImageCatalog, WorkerPool};
use inplace_api::keys::ANNOTATION_MAINTENANCE_OPERATION;
use inplace_orchestrator::maintenance::{REASON_KUBERNETES, REASON_MACHINE_IMAGE};
use inplace_orchestrator::workerpool::{ANNOTATION_ACCEPTED_SPEC, CONDITION_SPEC_UPDATE_CONFINED};
use jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use support::Lab;
use support::pool::pool;

const POOL: &str = "pool-a";
/// 1630.0.0 expires one hour into the test, after the pool was accepted on it.
const EXPIRES: &str = "2026-01-01T01:00:00Z";

fn catalog(image_strategy: &str) -> Value {
    json!({
        "apiVersion": "rackproof.dev/v1alpha1",
        "kind": "ImageCatalog",
        "metadata": { "name": "rackproof" },
        "spec": {
            "kubernetes": { "versions": [
                { "version": "1.29.0", "expirationDate": EXPIRES },
                { "version": "1.30.4" },
                { "version": "1.31.1" }
            ] },
            "machineImages": [{ "name": "gardenlinux", "updateStrategy": image_strategy, "versions": [
                { "version": "1630.0.0", "expirationDate": EXPIRES,
                  "inPlaceUpdates": { "supported": true, "minVersionForUpdate": "1443.8.0" } },
                { "version": "1631.0.0", "inPlaceUpdates": { "supported": true, "minVersionForUpdate": "1630.0.0" } },
                { "version": "1700.0.0", "classification": "preview",
                  "inPlaceUpdates": { "supported": true, "minVersionForUpdate": "1630.0.0" } }
            ] }]
        }
    })
}

/// The fixture pool with a 02:00–03:00 UTC window and the given settings.
fn maintained_pool(auto_image: bool, auto_kubernetes: bool, confine: bool) -> Value {
    let mut pool = pool(POOL, "AutoInPlaceUpdate");
    pool["spec"]["maintenance"] = json!({
        "timeWindow": { "begin": "030000+0100", "end": "040000+0100" },
        "autoUpdate": { "machineImageVersion": auto_image, "kubernetesVersion": auto_kubernetes },
        "confineSpecUpdateRollout": confine
    });
    pool
}

async fn start(lab: &Lab, image_strategy: &str, pool: Value) {
    let catalog: ImageCatalog = serde_json::from_value(catalog(image_strategy)).unwrap();
    Api::<ImageCatalog>::all(lab.client.clone())
        .create(&PostParams::default(), &catalog)
        .await
        .unwrap();
    let (client, clock) = (lab.client.clone(), lab.clock.clone());
    tokio::spawn(async move {
        inplace_orchestrator::maintenance::run(client, clock, Lab::config())
            .await
            .expect("maintenance config is valid");
    });
    lab.start_orchestrator(Lab::config());
    lab.create_pool(pool).await;
    lab.wait_pool_rendered(POOL).await;
}

async fn sleep_until(lab: &Lab, at: &str) {
    let at: Timestamp = at.parse().unwrap();
    lab.clock.sleep(lab.clock.until(at)).await;
}

/// Waits for `status.lastMaintenance`, polling from a minute before the first window on.
async fn wait_maintained(lab: &Lab) -> WorkerPool {
    if lab.clock.now() < "2026-01-01T01:59:00Z".parse().unwrap() {
        sleep_until(lab, "2026-01-01T01:59:00Z").await;
    }
    lab.wait_for(
        "the last maintenance",
        Duration::from_secs(30 * 3600),
        || async {
            let pool = lab.pool(POOL).await;
            pool.status.as_ref()?.last_maintenance.as_ref()?;
            Some(pool)
        },
    )
    .await
}

fn accepted_image(pool: &WorkerPool) -> String {
    let accepted: Value =
        serde_json::from_str(&pool.annotations()[ANNOTATION_ACCEPTED_SPEC]).unwrap();
    accepted["machine"]["image"]["version"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn messages(lab: &Lab, reason: &str) -> Vec<(String, String)> {
    lab.events_with_reason(reason)
        .await
        .into_iter()
        .map(|e| (e.type_.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn opted_in_pool_is_updated_at_the_start_of_the_next_window_not_before() {
    let lab = Lab::new().await;
    // 1630 has not expired in this catalog: the update is the opt-in's.
    let mut pool = maintained_pool(true, false, false);
    pool["spec"]["kubernetes"]["version"] = json!("1.30.4");
    start(&lab, "major", pool).await;
    Api::<ImageCatalog>::all(lab.client.clone())
        .patch(
            "rackproof",
            &Default::default(),
            &kube::api::Patch::Json::<()>(
                serde_json::from_value(json!([
                    { "op": "remove", "path": "/spec/machineImages/0/versions/0/expirationDate" }
                ]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();

    sleep_until(&lab, "2026-01-01T01:59:00Z").await;
    let before = lab.pool(POOL).await;
    assert_eq!(before.spec.machine.image.version, "1630.0.0");
    assert!(before.status.unwrap().last_maintenance.is_none());

    let pool = wait_maintained(&lab).await;
    let last = pool
        .status
        .as_ref()
        .unwrap()
        .last_maintenance
        .clone()
        .unwrap();
    assert_eq!(last.state, "Succeeded");
    let begin: Timestamp = "2026-01-01T02:00:00Z".parse().unwrap();
    assert!(
        last.triggered_time.0 >= begin && last.triggered_time.0 < begin + Duration::from_secs(60),
        "triggered at {}",
        last.triggered_time.0
    );
    // The highest version that is no preview.
    assert_eq!(pool.spec.machine.image.version, "1631.0.0");
    let expected = "Worker pool \"pool-a\": Updated image from 'gardenlinux' version '1630.0.0' to version '1631.0.0'. Reason: Automatic update of the machine image version is configured (image update strategy: major)";
    assert_eq!(
        last.description,
        format!("All maintenance operations successful. {expected}")
    );
    assert_eq!(
        messages(&lab, REASON_MACHINE_IMAGE).await,
        [("Normal".to_owned(), format!("{expected}."))]
    );
    // The WorkerPool controller takes the change.
    lab.wait_for(
        "the update to be accepted",
        Duration::from_secs(60),
        || async { (accepted_image(&lab.pool(POOL).await) == "1631.0.0").then_some(()) },
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn expired_versions_are_forced_in_a_pool_that_opted_out_kubernetes_one_minor_only() {
    let lab = Lab::new().await;
    start(&lab, "major", maintained_pool(false, false, false)).await;
    let pool = wait_maintained(&lab).await;
    let last = pool
        .status
        .as_ref()
        .unwrap()
        .last_maintenance
        .clone()
        .unwrap();
    assert_eq!(last.state, "Succeeded", "{last:?}");
    assert_eq!(pool.spec.machine.image.version, "1631.0.0");
    // 1.29 is expired with no newer 1.29 patch: 1.30, not the newest (1.31).
    assert_eq!(pool.spec.kubernetes_version(), Some("1.30.4"));
    let image = messages(&lab, REASON_MACHINE_IMAGE).await;
    assert!(
        image[0].1.ends_with("Reason: Machine image version expired - force update required (image update strategy: major)."),
        "{image:?}"
    );
    assert_eq!(
        messages(&lab, REASON_KUBERNETES).await,
        [(
            "Normal".to_owned(),
            "Worker pool \"pool-a\": Updated Kubernetes version '1.29.0' to version '1.30.4'. Reason: Kubernetes version expired - force update required.".to_owned()
        )]
    );
}

#[tokio::test(start_paused = true)]
async fn unreachable_target_is_failed_and_touches_nothing() {
    let lab = Lab::new().await;
    // updateStrategy patch: 1631 is out of reach for the expired 1630.0.0.
    let mut pool = maintained_pool(false, false, false);
    pool["spec"]["kubernetes"]["version"] = json!("1.30.4");
    start(&lab, "patch", pool).await;
    let pool = wait_maintained(&lab).await;
    let last = pool
        .status
        .as_ref()
        .unwrap()
        .last_maintenance
        .clone()
        .unwrap();
    assert_eq!(last.state, "Failed");
    assert_eq!(
        last.description,
        "(0/1) maintenance operations successful: Worker pool pool-a: 'gardenlinux' machine image version maintenance failed. Reason for update: machine image version expired"
    );
    assert_eq!(
        last.failure_reason.as_deref(),
        Some(
            "Worker pool pool-a: either the machine image 'gardenlinux' is reaching end of life and migration to another machine image is required or there is a misconfiguration in the image catalog (higher versions: 1631.0.0 is outside updateStrategy patch, 1700.0.0 is a preview)"
        )
    );
    assert_eq!(pool.spec.machine.image.version, "1630.0.0");
    let events = messages(&lab, REASON_MACHINE_IMAGE).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, "Warning");
}

#[tokio::test(start_paused = true)]
async fn confined_spec_change_waits_for_the_window() {
    let lab = Lab::new().await;
    let mut pool = maintained_pool(false, false, true);
    pool["spec"]["kubernetes"]["version"] = json!("1.30.4");
    start(&lab, "major", pool).await;
    sleep_until(&lab, "2026-01-01T00:10:00Z").await;
    lab.patch_pool(
        POOL,
        json!({ "spec": { "machine": { "image": { "version": "1631.0.0" } } } }),
    )
    .await;
    sleep_until(&lab, "2026-01-01T01:59:00Z").await;
    let waiting = lab.pool(POOL).await;
    assert_eq!(accepted_image(&waiting), "1630.0.0");
    let confined = lab
        .pool_condition(POOL, CONDITION_SPEC_UPDATE_CONFINED)
        .await
        .expect("the confined condition");
    assert_eq!(confined.status, "True");
    assert!(
        confined.message.contains("2026-01-01T02:00:00Z"),
        "{}",
        confined.message
    );

    sleep_until(&lab, "2026-01-01T02:00:30Z").await;
    let taken = lab.pool(POOL).await;
    assert_eq!(accepted_image(&taken), "1631.0.0");
    assert!(
        lab.pool_condition(POOL, CONDITION_SPEC_UPDATE_CONFINED)
            .await
            .is_none()
    );
}

#[tokio::test(start_paused = true)]
async fn operation_annotation_runs_in_the_window_and_is_removed() {
    let lab = Lab::new().await;
    let mut pool = maintained_pool(false, false, false);
    pool["spec"]["kubernetes"]["version"] = json!("1.30.4");
    pool["spec"]["machine"]["image"]["version"] = json!("1631.0.0");
    pool["metadata"]["annotations"] =
        json!({ ANNOTATION_MAINTENANCE_OPERATION: "rotate-ca-start" });
    start(&lab, "major", pool).await;

    sleep_until(&lab, "2026-01-01T01:59:00Z").await;
    let before = lab.pool(POOL).await;
    assert!(
        before
            .annotations()
            .contains_key(ANNOTATION_MAINTENANCE_OPERATION)
    );
    assert!(before.spec.credentials_rotation.is_none());

    let pool = wait_maintained(&lab).await;
    assert!(
        !pool
            .annotations()
            .contains_key(ANNOTATION_MAINTENANCE_OPERATION)
    );
    let started = pool
        .spec
        .credentials_rotation
        .as_ref()
        .and_then(|r| r.ca_initiated())
        .expect("the CA rotation was initiated");
    assert!(
        started >= "2026-01-01T02:00:00Z".parse().unwrap(),
        "{started}"
    );
    assert!(
        pool.spec
            .credentials_rotation
            .unwrap()
            .service_account_key
            .is_none()
    );
    assert_eq!(
        pool.status.unwrap().last_maintenance.unwrap().state,
        "Succeeded"
    );
}

#[tokio::test(start_paused = true)]
async fn work_starts_at_most_fifteen_minutes_before_the_window_ends() {
    let lab = Lab::new().await;
    let mut pool = maintained_pool(false, false, false);
    pool["spec"]["kubernetes"]["version"] = json!("1.30.4");
    pool["spec"]["maintenance"]["timeWindow"] =
        json!({ "begin": "000000+0000", "end": "010000+0000" });
    pool["spec"]["machine"]["image"]["version"] = json!("1631.0.0");
    // Created at 00:45, in the last 15 minutes of the window: the next window (tomorrow) works.
    sleep_until(&lab, "2026-01-01T00:45:00Z").await;
    start(&lab, "major", pool).await;
    sleep_until(&lab, "2026-01-01T23:59:00Z").await;
    assert!(
        lab.pool(POOL)
            .await
            .status
            .unwrap()
            .last_maintenance
            .is_none()
    );
    let pool = wait_maintained(&lab).await;
    let triggered = pool
        .status
        .unwrap()
        .last_maintenance
        .unwrap()
        .triggered_time
        .0;
    assert!(
        triggered >= "2026-01-02T00:00:00Z".parse().unwrap(),
        "{triggered}"
    );
}
