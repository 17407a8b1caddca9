//! Custom resources: defaulting and pruning, and schemas kube-apiserver rejects.

use crate::support::*;

#[tokio::test]
async fn custom_resources_with_defaulting_and_pruning() {
    let mut pair = Pair::start().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": "widgets.rackproof.test" },
        "spec": {
            "group": "rackproof.test",
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": { "type": "object", "properties": {
                            "size": { "type": "integer", "default": 3, "minimum": 1 },
                            "mode": { "type": "string", "default": "Auto", "enum": ["Auto", "Manual"] },
                            "free": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                        } },
                        "status": { "type": "object", "properties": { "ready": { "type": "boolean" } } },
                    },
                } },
            }],
        },
    });
    pair.expect(
        Call::post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            crd,
        ),
        StatusCode::CREATED,
    )
    .await;
    let widgets = "/apis/rackproof.test/v1/namespaces/default/widgets";
    // kube-apiserver serves the new resource after a moment: wait until a list answers.
    for client in [pair.embedded.clone(), pair.real.clone()] {
        let mut ready = false;
        for _ in 0..100 {
            if send(&client, &Call::get(widgets)).await.code == 200 {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(ready, "the custom resource is served within 10 s");
    }
    let widget = json!({ "apiVersion": "rackproof.test/v1", "kind": "Widget", "metadata": { "name": "w" }, "spec": { "mode": "Manual", "unknown": 1, "free": { "kept": true } }, "extra": "pruned" });
    pair.expect(Call::post(widgets, widget), StatusCode::CREATED)
        .await;
    pair.expect(Call::get(format!("{widgets}/w")), StatusCode::OK)
        .await;
    pair.expect(
        Call::patch(
            format!("{widgets}/w/status"),
            MERGE,
            r#"{"status":{"ready":true,"junk":1}}"#,
        ),
        StatusCode::OK,
    )
    .await;
    pair.expect(
        Call::patch(format!("{widgets}/w"), MERGE, r#"{"spec":{"size":null}}"#),
        StatusCode::OK,
    )
    .await;
    let invalid = json!({ "apiVersion": "rackproof.test/v1", "kind": "Widget", "metadata": { "name": "bad" }, "spec": { "size": 0, "mode": "Sometimes" } });
    pair.expect(
        Call::post(widgets, invalid),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(Call::get(widgets), StatusCode::OK).await;
    pair.finish().await;
}

/// A CRD named `gadgets.rackproof.test` whose versions have the given schemas (None: no schema).
fn gadget_crd(schemas: &[Option<Value>]) -> Value {
    let versions: Vec<Value> = schemas
        .iter()
        .enumerate()
        .map(|(i, schema)| {
            let mut version =
                json!({ "name": format!("v{}", i + 1), "served": true, "storage": i == 0 });
            if let Some(schema) = schema {
                version["schema"] = json!({ "openAPIV3Schema": schema });
            }
            version
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": "gadgets.rackproof.test" },
        "spec": { "group": "rackproof.test", "scope": "Namespaced", "names": { "plural": "gadgets", "kind": "Gadget" }, "versions": versions },
    })
}

#[tokio::test]
async fn crds_with_bad_schemas_are_rejected() {
    let mut pair = Pair::start().await;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=All";
    let object = |properties: Value| json!({ "type": "object", "properties": properties });
    let invalid = [
        object(json!({ "a": { "tpye": "string" } })),
        object(json!({ "a": { "type": "strin" } })),
        object(json!({ "a": { "type": "null" } })),
        json!({ "type": "string" }),
        json!({ "properties": { "a": { "type": "string" } } }),
        json!({ "type": "object", "$schema": "x" }),
        json!({ "type": "object", "additionalProperties": { "type": "string" } }),
        json!({ "type": "object", "definitions": { "x": { "type": "string" } } }),
        object(
            json!({ "a": { "type": "array", "uniqueItems": true, "items": { "type": "string" } } }),
        ),
        object(json!({ "a": { "$ref": "#/definitions/x" } })),
        object(json!({ "a": { "type": "array", "items": [{ "type": "string" }] } })),
        object(json!({ "a": { "type": "array" } })),
        object(
            json!({ "a": { "type": "object", "properties": { "b": { "type": "string" } }, "additionalProperties": { "type": "string" } } }),
        ),
        object(
            json!({ "metadata": { "type": "object", "properties": { "labels": { "type": "object" } } } }),
        ),
        object(json!({ "metadata": { "type": "object", "default": {} } })),
        object(
            json!({ "a": { "type": "string", "anyOf": [{ "type": "string", "description": "d" }] } }),
        ),
        object(json!({ "a": { "type": "object", "default": { "x": 1 } } })),
        object(json!({ "a": { "type": "string", "pattern": "(" } })),
        object(json!({ "a": { "type": "string", "x-kubernetes-list-type": "set" } })),
        object(
            json!({ "a": { "type": "array", "x-kubernetes-list-type": "map", "items": { "type": "object", "properties": { "k": { "type": "string" } } }, "x-kubernetes-list-map-keys": ["k", "z"] } }),
        ),
        object(
            json!({ "a": { "x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true } }),
        ),
        object(json!({ "a": { "type": "string", "x-kubernetes-preserve-unknown-fields": false } })),
        json!({ "type": "object", "anyOf": [{ "properties": { "b": { "maxLength": 1 } } }] }),
    ];
    for schema in invalid {
        pair.expect(
            Call::post(crds, gadget_crd(&[Some(schema)])),
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    let undecodable = [
        object(json!([{ "a": 1 }])),
        object(json!({ "a": { "x-kubernetes-int-or-string": "yes" } })),
        json!({ "type": "object", "required": "a" }),
        json!({ "type": "object", "required": [1] }),
        object(json!({ "a": { "type": ["string"] } })),
        object(json!({ "a": "string" })),
    ];
    for schema in undecodable {
        pair.expect(
            Call::post(crds, gadget_crd(&[Some(schema)])),
            StatusCode::BAD_REQUEST,
        )
        .await;
    }
    // Differing schemas are reported per version; missing ones are required.
    let good = json!({ "type": "object" });
    pair.expect(
        Call::post(
            crds,
            gadget_crd(&[Some(good.clone()), Some(json!({ "type": "string" }))]),
        ),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(
        Call::post(crds, gadget_crd(&[Some(good), None])),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.expect(
        Call::post(crds, gadget_crd(&[None])),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    pair.finish().await;
}
