//! kube::runtime's watcher, reflector and Controller run unchanged against the server.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

use crate::server;

#[derive(Debug, thiserror::Error)]
#[error("failed to annotate config map")]
struct ReconcileError(#[source] kube::Error);

async fn reconcile(
    map: Arc<ConfigMap>,
    api: Arc<Api<ConfigMap>>,
) -> Result<Action, ReconcileError> {
    let name = map.metadata.name.clone().unwrap_or_default();
    if map
        .metadata
        .annotations
        .as_ref()
        .is_none_or(|a| !a.contains_key("reconciled"))
    {
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"reconciled": "yes"}}})),
        )
        .await
        .map_err(ReconcileError)?;
    }
    Ok(Action::await_change())
}

fn error_policy(
    _map: Arc<ConfigMap>,
    _error: &ReconcileError,
    _api: Arc<Api<ConfigMap>>,
) -> Action {
    Action::requeue(Duration::from_secs(5))
}

/// Runs a reflector and a Controller against `client`, creates five config maps and waits (in
/// steps of `step`) until every one is reconciled and cached. Returns the store and the tasks.
pub(crate) async fn converge(
    client: kube::Client,
    step: Duration,
) -> (
    reflector::Store<ConfigMap>,
    Vec<tokio::task::JoinHandle<()>>,
) {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (reader, writer) = reflector::store();
    let reflect = reflector(writer, watcher(maps.clone(), watcher::Config::default()))
        .applied_objects()
        .for_each(|_| async {});
    let reflect = tokio::spawn(reflect);
    let controller = Controller::new(maps.clone(), watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(maps.clone()))
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);

    for i in 0..5 {
        maps.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": format!("m{i}")}})).unwrap(),
        )
        .await
        .unwrap();
    }
    let mut annotated = 0;
    for _ in 0..600 {
        tokio::time::sleep(step).await;
        let list = maps.list(&ListParams::default()).await.unwrap();
        annotated = list
            .items
            .iter()
            .filter(|m| {
                m.metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key("reconciled"))
            })
            .count();
        if annotated == 5
            && reader
                .state()
                .iter()
                .filter(|m| m.metadata.annotations.is_some())
                .count()
                == 5
        {
            break;
        }
    }
    assert_eq!(annotated, 5, "the controller reconciled every object");
    assert_eq!(reader.state().len(), 5);
    assert!(reader.state().iter().all(|m| {
        m.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a["reconciled"] == "yes")
    }));
    (reader, vec![reflect, controller])
}

#[tokio::test(start_paused = true)]
async fn reflector_and_controller_run_unchanged() {
    let server = server();
    let client = server.admin_client();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (reader, tasks) = converge(client, Duration::from_secs(1)).await;

    // Watches end at their timeout (290 s for kube's watcher) and restart without losing state.
    tokio::time::sleep(Duration::from_secs(900)).await;
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "late"}})).unwrap(),
    )
    .await
    .unwrap();
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if reader.state().len() == 6
            && maps
                .get("late")
                .await
                .unwrap()
                .metadata
                .annotations
                .is_some()
        {
            break;
        }
    }
    assert_eq!(reader.state().len(), 6);
    assert!(
        maps.get("late")
            .await
            .unwrap()
            .metadata
            .annotations
            .is_some()
    );
    for task in tasks {
        task.abort();
    }
}

#[tokio::test(start_paused = true)]
async fn streaming_list_watchers_get_initial_events_then_changes() {
    let server = server();
    let client = server.admin_client();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "before"}})).unwrap(),
    )
    .await
    .unwrap();
    let (reader, writer) = reflector::store();
    let config = watcher::Config::default().streaming_lists();
    let task = tokio::spawn(
        reflector(writer, watcher(maps.clone(), config))
            .applied_objects()
            .for_each(|_| async {}),
    );
    reader.wait_until_ready().await.unwrap();
    assert_eq!(reader.state().len(), 1);
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "after"}})).unwrap(),
    )
    .await
    .unwrap();
    for _ in 0..30 {
        if reader.state().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(reader.state().len(), 2);
    task.abort();
}
