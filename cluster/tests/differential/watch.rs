//! Watch event sequences for a series of writes and for pod deletions.

use crate::support::*;

/// The events a watch from `resource_version` delivers, `count` of them, as (type, object).
async fn watch_events(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: &str,
    resource_version: &str,
    count: usize,
) -> Vec<(String, Value)> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, resource);
    let params = WatchParams::default().timeout(30);
    let stream = api
        .watch(&params, resource_version)
        .await
        .expect("watch starts");
    let events: Vec<WatchEvent<DynamicObject>> = stream
        .take(count)
        .try_collect()
        .await
        .expect("watch events arrive");
    events
        .into_iter()
        .map(|event| match event {
            WatchEvent::Added(o) => ("ADDED".to_owned(), serde_json::to_value(o).unwrap()),
            WatchEvent::Modified(o) => ("MODIFIED".to_owned(), serde_json::to_value(o).unwrap()),
            WatchEvent::Deleted(o) => ("DELETED".to_owned(), serde_json::to_value(o).unwrap()),
            WatchEvent::Bookmark(b) => ("BOOKMARK".to_owned(), serde_json::to_value(b).unwrap()),
            WatchEvent::Error(e) => ("ERROR".to_owned(), serde_json::to_value(e).unwrap()),
        })
        .collect()
}

#[tokio::test]
async fn watch_event_sequences_for_a_series_of_writes() {
    let mut pair = Pair::start().await;
    let cms = ns_path("default", "configmaps");
    let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    // Start both watches from the current list resourceVersion, then write.
    let start_e = send(&pair.embedded, &Call::get(&cms)).await.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let start_r = send(&pair.real, &Call::get(&cms)).await.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    pair.expect(
        Call::post(
            &cms,
            json!({ "metadata": { "name": "w1", "labels": { "a": "1" } }, "data": { "k": "1" } }),
        ),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::post(&cms, json!({ "metadata": { "name": "w2" } })),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(
        Call::patch(format!("{cms}/w1"), MERGE, r#"{"data":{"k":"2"}}"#),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::post(
            &cms,
            json!({ "metadata": { "name": "w3", "finalizers": ["rackproof.test/hold"] } }),
        ),
        StatusCode::CREATED,
    )
    .await;
    pair.expect(Call::delete(format!("{cms}/w2"), None), StatusCode::OK)
        .await;
    pair.expect(Call::delete(format!("{cms}/w3"), None), StatusCode::OK)
        .await;
    pair.expect(
        Call::patch(
            format!("{cms}/w3"),
            MERGE,
            r#"{"metadata":{"finalizers":null}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::put(
            format!("{cms}/w1"),
            json!({ "metadata": { "name": "w1" }, "data": { "k": "3" } }),
        ),
        StatusCode::OK,
    )
    .await;
    let count = 8;
    let embedded = watch_events(&pair.embedded, &resource, "default", &start_e, count).await;
    let real = watch_events(&pair.real, &resource, "default", &start_r, count).await;
    let types = |events: &[(String, Value)]| {
        events
            .iter()
            .map(|(t, o)| format!("{t} {}", o["metadata"]["name"].as_str().unwrap_or("?")))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        types(&real),
        [
            "ADDED w1",
            "ADDED w2",
            "MODIFIED w1",
            "ADDED w3",
            "DELETED w2",
            "MODIFIED w3",
            "DELETED w3",
            "MODIFIED w1"
        ]
    );
    assert_eq!(
        types(&embedded),
        types(&real),
        "watch event types and objects in order"
    );
    for (i, ((te, oe), (_, or))) in embedded.iter().zip(&real).enumerate() {
        let e = Reply {
            code: 200,
            body: oe.clone(),
        };
        let r = Reply {
            code: 200,
            body: or.clone(),
        };
        pair.compare(&format!("watch event {i} ({te})"), &e, &r);
    }
    pair.finish().await;
}

#[tokio::test]
async fn watch_events_of_pod_deletions() {
    let mut pair = Pair::start().await;
    pair.expect(
        Call::post(NODES, node("node-a", json!({}))),
        StatusCode::CREATED,
    )
    .await;
    let pods = ns_path("default", "pods");
    let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
    let start_e = send(&pair.embedded, &Call::get(&pods)).await.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let start_r = send(&pair.real, &Call::get(&pods)).await.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    pair.expect(Call::post(&pods, pod("unbound", None)), StatusCode::CREATED)
        .await;
    pair.expect(
        Call::post(&pods, pod("bound", Some("node-a"))),
        StatusCode::CREATED,
    )
    .await;
    // Deleted at once (unbound), gracefully then at once (bound).
    pair.expect(
        Call::delete(format!("{pods}/unbound"), None),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::delete(
            format!("{pods}/bound"),
            Some(json!({ "gracePeriodSeconds": 30 })),
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::delete(
            format!("{pods}/bound"),
            Some(json!({ "gracePeriodSeconds": 0 })),
        ),
        StatusCode::OK,
    )
    .await;
    let count = 7;
    let embedded = watch_events(&pair.embedded, &resource, "default", &start_e, count).await;
    let real = watch_events(&pair.real, &resource, "default", &start_r, count).await;
    let types = |events: &[(String, Value)]| {
        events
            .iter()
            .map(|(t, o)| format!("{t} {}", o["metadata"]["name"].as_str().unwrap_or("?")))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        types(&real),
        [
            "ADDED unbound",
            "ADDED bound",
            "MODIFIED unbound",
            "DELETED unbound",
            "MODIFIED bound",
            "MODIFIED bound",
            "DELETED bound"
        ]
    );
    assert_eq!(
        types(&embedded),
        types(&real),
        "watch event types and objects in order"
    );
    for (i, ((te, oe), (_, or))) in embedded.iter().zip(&real).enumerate() {
        let e = Reply {
            code: 200,
            body: oe.clone(),
        };
        let r = Reply {
            code: 200,
            body: or.clone(),
        };
        pair.compare(&format!("watch event {i} ({te})"), &e, &r);
    }
    pair.finish().await;
}
