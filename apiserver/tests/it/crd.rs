//! CustomResourceDefinitions served dynamically: schema defaulting, pruning and validation,
//! status and scale subresources, removal.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::discovery::Discovery;
use serde_json::json;

use crate::{code, raw, server};

pub(crate) fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "minimum": 1},
                        "replicas": {"type": "integer", "default": 1},
                        "mode": {"type": "string", "enum": ["auto", "manual"], "default": "auto"},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}, "phase": {"type": "string"}}}
                }}}
            }]
        }
    }))
    .unwrap()
}

pub(crate) fn widget_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

fn widget(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec})).unwrap()
}

#[tokio::test(start_paused = true)]
async fn custom_resources_are_served_defaulted_pruned_and_validated() {
    let server = server();
    let client = server.admin_client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds
        .create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let conditions = crd.status.unwrap().conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    assert!(discovery.groups().any(|g| g.name() == "example.com"));

    let widgets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource());
    let created = widgets
        .create(
            &PostParams::default(),
            &widget(
                "w",
                json!({"size": 2, "junk": true, "free": {"anything": 1}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        created.data["spec"],
        json!({"size": 2, "free": {"anything": 1}, "replicas": 1, "mode": "auto"})
    );
    assert_eq!(created.metadata.generation, Some(1));

    assert_eq!(
        code(
            widgets
                .create(&PostParams::default(), &widget("bad", json!({"size": 0})))
                .await
        ),
        (422, "Invalid".into())
    );
    assert_eq!(
        code(
            widgets
                .create(
                    &PostParams::default(),
                    &widget("bad", json!({"mode": "auto"}))
                )
                .await
        )
        .0,
        422
    );
    let (status, _) = raw(
        &client,
        "PATCH",
        "/apis/example.com/v1/namespaces/default/widgets/w",
        "application/strategic-merge-patch+json",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(
        status, 415,
        "strategic merge patch is not supported for custom resources"
    );

    let with_status = widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Ready", "replicas": 1}, "spec": {"size": 9}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            with_status.data["status"]["phase"].as_str(),
            with_status.data["spec"]["size"].as_i64()
        ),
        (Some("Ready"), Some(2))
    );
    let main = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ignored"}, "spec": {"size": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            main.data["status"]["phase"].as_str(),
            main.metadata.generation
        ),
        (Some("Ready"), Some(2))
    );

    let scale = widgets.get_scale("w").await.unwrap();
    assert_eq!(
        (scale.spec.unwrap().replicas, scale.status.unwrap().replicas),
        (Some(1), 1)
    );
    widgets
        .patch_scale(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(widgets.get("w").await.unwrap().data["spec"]["replicas"], 4);

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let (status, _) = raw(
        &client,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets",
        "",
        Vec::new(),
    )
    .await;
    assert_eq!(status, 404, "the resource is no longer served");
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    assert_eq!(
        code(widgets.get("w").await).0,
        404,
        "custom resources went with their definition"
    );
}

fn crd_with_schema(schema: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]}})
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// The status code, and each cause as `field: reason`, of creating a CRD with `schema`.
async fn create_crd(client: &kube::Client, schema: serde_json::Value) -> (u16, Vec<String>) {
    let (status, body) = raw(
        client,
        "POST",
        CRDS,
        "application/json",
        crd_with_schema(schema).to_string().into_bytes(),
    )
    .await;
    let causes = body["details"]["causes"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| {
                    format!(
                        "{}: {}",
                        c["field"].as_str().unwrap_or("?"),
                        c["reason"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (status, causes)
}

/// `/openapi/v2` in `accept`'s encoding: the status code.
async fn openapi_v2(client: &kube::Client, accept: &str) -> u16 {
    let request = http::Request::get("/openapi/v2")
        .header("Accept", accept)
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    client.send(request).await.unwrap().status().as_u16()
}

const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

#[tokio::test(start_paused = true)]
async fn crds_with_bad_schemas_are_rejected_as_kube_apiserver_rejects_them() {
    let client = server().admin_client();
    let root = "spec.validation.openAPIV3Schema";
    for (schema, expected) in [
        (
            json!({"type": "object", "properties": {"a": {"tpye": "string"}}}),
            vec![format!("{root}.properties[a].type: FieldValueRequired")],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "strin"}}}),
            vec![format!("{root}.properties[a].type: FieldValueNotSupported")],
        ),
        (
            json!({"type": "string"}),
            vec![format!("{root}.type: FieldValueInvalid")],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}}),
            vec![format!(
                "{root}.properties[a].uniqueItems: FieldValueForbidden"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"$ref": "#/definitions/x"}}}),
            vec![format!("{root}.properties[a].$ref: FieldValueForbidden")],
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}),
            vec![format!("{root}.properties[metadata]: FieldValueForbidden")],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}, "additionalProperties": {"type": "string"}}}}),
            vec![format!(
                "{root}.properties[a].additionalProperties: FieldValueForbidden"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}}),
            vec![format!("{root}.properties[a].items: FieldValueForbidden")],
        ),
    ] {
        assert_eq!(
            create_crd(&client, schema.clone()).await,
            (422, expected),
            "{schema}"
        );
    }
    for schema in [
        json!({"type": "object", "properties": [{"a": 1}]}),
        json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": "yes"}}}),
        json!({"type": "object", "required": "a"}),
        json!({"type": "object", "required": [1]}),
    ] {
        assert_eq!(
            create_crd(&client, schema.clone()).await,
            (400, vec![]),
            "{schema}"
        );
    }
    let (status, causes) = raw(&client, "POST", CRDS, "application/json", {
        let mut crd = crd_with_schema(json!({}));
        crd["spec"]["versions"][0]
            .as_object_mut()
            .unwrap()
            .remove("schema");
        crd.to_string().into_bytes()
    })
    .await;
    assert_eq!(
        (status, causes["details"]["causes"][0]["field"].as_str()),
        (422, Some("spec.versions[0].schema.openAPIV3Schema"))
    );
    assert_eq!(
        openapi_v2(&client, PROTOBUF).await,
        200,
        "nothing rejected reached the document"
    );
}

#[tokio::test(start_paused = true)]
async fn accepted_schemas_lose_unknown_keywords_and_keep_openapi_serving() {
    let client = server().admin_client();
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "xml": {"name": "x"}, "discriminator": 1, "readOnly": "no", "properties": {
        "size": {"type": "integer", "nullable": true, "anyOf": [{"minimum": 1}]},
        "port": {"x-kubernetes-int-or-string": true},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    }}}});
    let (status, body) = raw(
        &client,
        "POST",
        CRDS,
        "application/json",
        crd_with_schema(schema).to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let spec = &body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(
        (
            spec.get("xml"),
            spec.get("discriminator"),
            spec.get("readOnly")
        ),
        (None, None, None),
        "dropped as kube-apiserver's decoding drops them"
    );
    for accept in [PROTOBUF, "application/json"] {
        assert_eq!(openapi_v2(&client, accept).await, 200, "{accept}");
    }
    let (status, _) = raw(
        &client,
        "GET",
        "/openapi/v3/apis/example.com/v1",
        "",
        Vec::new(),
    )
    .await;
    assert_eq!(status, 200);
}
