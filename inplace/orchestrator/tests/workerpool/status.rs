//! The pool's status: a manual pool waiting for a person, a halted rollout.

use kube::ResourceExt;
use std::time::Duration;

use inplace_api::keys::{
    CONDITION_MANUAL_IN_PLACE_WORKERS_UPDATED, LABEL_SELECTED_FOR_UPDATE, LABEL_UPDATE_RESULT,
};
use inplace_api::strategy::OrchestrationType;
use inplace_orchestrator::deployment::{CONDITION_HALTED, REASON_HALTED};
use serde_json::json;

use crate::support::Lab;
use crate::support::pool::pool;
use crate::{POOL, config, pending};

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
            crate::support::Outcome::Fail("new slot did not boot: rolled back".into()),
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
