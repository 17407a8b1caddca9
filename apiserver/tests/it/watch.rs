//! Watches: replay from a resourceVersion, selector transitions, 410 Gone, bookmarks,
//! timeouts, and resourceVersion continuity under concurrent writers.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use rackproof_apiserver::ApiServer;
use rackproof_clock::Clock;
use serde_json::json;

use crate::{EPOCH, create_pod, server};

fn kind<K>(event: &WatchEvent<K>) -> &'static str {
    match event {
        WatchEvent::Added(_) => "ADDED",
        WatchEvent::Modified(_) => "MODIFIED",
        WatchEvent::Deleted(_) => "DELETED",
        WatchEvent::Bookmark(_) => "BOOKMARK",
        WatchEvent::Error(_) => "ERROR",
    }
}

#[tokio::test(start_paused = true)]
async fn watch_replays_from_a_resource_version_with_selector_transitions() {
    let server = server();
    let client = server.admin_client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let first = create_pod(&client, "a", json!({"app": "web"}), None).await;
    let start = first.metadata.resource_version.unwrap();
    create_pod(&client, "b", json!({"app": "web"}), None).await;
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"x": "1"}}})),
    )
    .await
    .unwrap();
    pods.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})),
    )
    .await
    .unwrap();
    pods.delete("a", &DeleteParams::default()).await.unwrap();

    let params = WatchParams::default()
        .labels("app=web")
        .disable_bookmarks()
        .timeout(10);
    let events: Vec<_> = pods
        .watch(&params, &start)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let seen: Vec<(&str, String)> = events
        .iter()
        .map(|e| {
            let name = match e {
                WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p) => {
                    p.metadata.name.clone().unwrap()
                }
                _ => String::new(),
            };
            (kind(e), name)
        })
        .collect();
    // Deleting a pod stores it with its deletionTimestamp first (MODIFIED), as kube-apiserver.
    assert_eq!(
        seen,
        vec![
            ("ADDED", "b".into()),
            ("MODIFIED", "a".into()),
            ("DELETED", "b".into()),
            ("MODIFIED", "a".into()),
            ("DELETED", "a".into())
        ]
    );

    let from_zero: Vec<_> = pods
        .watch(&WatchParams::default().disable_bookmarks().timeout(5), "0")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        from_zero.iter().map(kind).collect::<Vec<_>>(),
        vec!["ADDED"],
        "a watch from 0 starts with the current objects"
    );
}

#[tokio::test(start_paused = true)]
async fn compacted_resource_versions_are_gone_and_bookmarks_arrive() {
    let server = ApiServer::with_watch_window(Clock::simulated(EPOCH.parse().unwrap()), 3, 7);
    let client = server.admin_client();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let first = maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "m0"}})).unwrap(),
        )
        .await
        .unwrap();
    for i in 1..6 {
        maps.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": format!("m{i}")}})).unwrap(),
        )
        .await
        .unwrap();
    }
    let events: Vec<_> = maps
        .watch(
            &WatchParams::default().timeout(10),
            &first.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    match events.as_slice() {
        [WatchEvent::Error(status)] => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected one 410 error, got {other:?}"),
    }

    let now = server.resource_version().to_string();
    let mut stream = maps
        .watch(&WatchParams::default().timeout(150), &now)
        .await
        .unwrap()
        .boxed();
    let started = server.clock().instant();
    let mut bookmarks = 0;
    while let Some(event) = stream.try_next().await.unwrap() {
        if let WatchEvent::Bookmark(bookmark) = &event {
            assert_eq!(bookmark.metadata.resource_version, now);
            bookmarks += 1;
        }
    }
    assert_eq!(bookmarks, 2, "one bookmark a minute");
    assert!(
        server.clock().since(started) >= Duration::from_secs(150),
        "the watch ended at its timeout"
    );
}

#[tokio::test(start_paused = true)]
async fn no_event_is_lost_or_duplicated_under_concurrent_writers() {
    let server = server();
    let client = server.admin_client();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let start = server.resource_version().to_string();
    let watch = maps
        .watch(
            &WatchParams::default().disable_bookmarks().timeout(3600),
            &start,
        )
        .await
        .unwrap()
        .boxed();
    let writers = (0..8).map(|w| {
        let maps = maps.clone();
        tokio::spawn(async move {
            let mut versions = Vec::new();
            for i in 0..25 {
                let name = format!("w{w}-{i}");
                let created = maps
                    .create(
                        &PostParams::default(),
                        &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
                    )
                    .await
                    .unwrap();
                versions.push(created.metadata.resource_version.unwrap());
                let patched = maps
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"data": {"i": i.to_string()}})),
                    )
                    .await
                    .unwrap();
                versions.push(patched.metadata.resource_version.unwrap());
            }
            versions
        })
    });
    let mut written = BTreeSet::new();
    for writer in writers {
        written.extend(
            writer
                .await
                .unwrap()
                .into_iter()
                .map(|v| v.parse::<u64>().unwrap()),
        );
    }
    let events: Vec<WatchEvent<ConfigMap>> = watch.take(written.len()).try_collect().await.unwrap();
    let seen: Vec<u64> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Added(m) | WatchEvent::Modified(m) => m
                .metadata
                .resource_version
                .clone()
                .unwrap()
                .parse()
                .unwrap(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "resourceVersions strictly increase"
    );
    assert_eq!(
        seen.into_iter().collect::<BTreeSet<_>>(),
        written,
        "every write seen exactly once"
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_pinned_to_a_name_sees_only_that_object_however_much_else_changes() {
    // A window of 3 events: a quiet watch pinned to one name must not fall behind the log
    // while other objects of the resource change.
    let server = ApiServer::with_watch_window(Clock::simulated(EPOCH.parse().unwrap()), 3, 7);
    let client = server.admin_client();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in ["mine", "other"] {
        maps.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
        )
        .await
        .unwrap();
    }
    let params = WatchParams::default()
        .fields("metadata.name=mine")
        .disable_bookmarks()
        .timeout(60);
    let mut stream = maps
        .watch(&params, &server.resource_version().to_string())
        .await
        .unwrap()
        .boxed();
    for i in 0..10 {
        maps.patch(
            "other",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"i": i.to_string()}})),
        )
        .await
        .unwrap();
    }
    maps.patch(
        "mine",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "1"}})),
    )
    .await
    .unwrap();
    maps.delete("mine", &DeleteParams::default()).await.unwrap();
    let events: Vec<WatchEvent<ConfigMap>> = (&mut stream).take(2).try_collect().await.unwrap();
    let seen: Vec<(&str, String)> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Modified(m) | WatchEvent::Deleted(m) => {
                (kind(e), m.metadata.name.clone().unwrap())
            }
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("MODIFIED", "mine".to_owned()),
            ("DELETED", "mine".to_owned())
        ]
    );
    assert!(
        stream.try_next().await.unwrap().is_none(),
        "nothing else arrives before the timeout"
    );
}

/// Sends a watch request with `timeoutSeconds` and returns the status code and the response
/// (the body is left unread: a long watch never ends on its own).
async fn watch_with_timeout(
    client: &kube::Client,
    timeout: &str,
) -> http::Response<kube::client::Body> {
    let request = http::Request::get(format!(
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds={timeout}"
    ))
    .body(kube::client::Body::from(Vec::new()))
    .unwrap();
    client
        .send(request)
        .await
        .expect("the server answers instead of dropping the request")
}

#[tokio::test(start_paused = true)]
async fn watch_timeouts_beyond_int64_are_rejected_and_huge_ones_are_clamped() {
    let server = server();
    let client = server.admin_client();

    let response = watch_with_timeout(&client, "18446744073709551615").await;
    assert_eq!(response.status().as_u16(), 400);
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["kind"], "Status");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("timeoutSeconds")),
        "{status}"
    );

    let response = watch_with_timeout(&client, &i64::MAX.to_string()).await;
    assert_eq!(response.status().as_u16(), 200, "a huge timeout is clamped");
    drop(response);

    let started = server.clock().instant();
    let response = watch_with_timeout(&client, "-5").await;
    assert_eq!(response.status().as_u16(), 200);
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert!(body.is_empty(), "a negative timeout ends the watch at once");
    assert_eq!(server.clock().since(started), Duration::ZERO);
}
