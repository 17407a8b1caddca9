//! Server-side printing (`as=Table`): the columns kube-apiserver prints for built-in kinds, a
//! CRD's `additionalPrinterColumns`, and what each row carries.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::crd::{widget_crd, widget_resource};
use crate::server;

const KUBECTL_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

async fn get_table(client: &Client, uri: &str) -> (u16, Value) {
    let request = http::Request::builder()
        .method("GET")
        .uri(uri)
        .header("accept", KUBECTL_ACCEPT)
        .body(kube::client::Body::from(Vec::new()))
        .expect("request");
    let response = client.send(request).await.expect("response");
    let status = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("body")
        .to_bytes();
    (status, serde_json::from_slice(&bytes).expect("JSON"))
}

fn column_names(table: &Value) -> Vec<&str> {
    table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn crd_printer_columns_print_their_json_paths() {
    let server = server();
    let client = server.admin_client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = serde_json::to_value(widget_crd()).unwrap();
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Mode", "type": "string", "jsonPath": ".spec.mode", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]);
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).unwrap(),
    )
    .await
    .unwrap();
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource());
    widgets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w1"}, "spec": {"size": 3}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let (status, table) =
        get_table(&client, "/apis/example.com/v1/namespaces/default/widgets").await;
    assert_eq!(status, 200, "{table}");
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(column_names(&table), ["Name", "Size", "Mode", "Age"]);
    assert_eq!(table["columnDefinitions"][2]["priority"], 1);
    assert_eq!(table["rows"][0]["cells"], json!(["w1", 3, "auto", "0s"]));
    assert_eq!(
        table["rows"][0]["object"]["kind"], "PartialObjectMetadata",
        "rows carry the metadata by default"
    );
    assert_eq!(table["rows"][0]["object"]["metadata"]["name"], "w1");

    let (_, one) = get_table(
        &client,
        "/apis/example.com/v1/namespaces/default/widgets/w1?includeObject=None",
    )
    .await;
    assert_eq!(one["rows"].as_array().unwrap().len(), 1);
    assert!(one["rows"][0].get("object").is_none(), "{one}");
    let (status, _) = get_table(
        &client,
        "/apis/example.com/v1/namespaces/default/widgets?includeObject=Everything",
    )
    .await;
    assert_eq!(status, 400);
}

#[tokio::test(start_paused = true)]
async fn a_crd_without_printer_columns_prints_name_and_age() {
    let server = server();
    let client = server.admin_client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource());
    widgets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w1"}, "spec": {"size": 3}}))
            .unwrap(),
        )
        .await
        .unwrap();
    tokio::time::advance(std::time::Duration::from_secs(125)).await;
    let (_, table) = get_table(&client, "/apis/example.com/v1/namespaces/default/widgets").await;
    assert_eq!(column_names(&table), ["Name", "Age"]);
    assert_eq!(table["rows"][0]["cells"], json!(["w1", "2m5s"]));
}

#[tokio::test(start_paused = true)]
async fn events_print_their_object_and_reason() {
    let server = server();
    let client = server.admin_client();
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    events
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "e1"},
                "involvedObject": {"kind": "Node", "name": "n1"},
                "reason": "RolloutHalted", "message": "2 nodes failed", "type": "Warning",
                "source": {"component": "inplace-orchestrator"},
                "firstTimestamp": crate::EPOCH, "lastTimestamp": crate::EPOCH, "count": 2
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let (_, table) = get_table(&client, "/api/v1/namespaces/default/events").await;
    assert_eq!(
        &column_names(&table)[..4],
        ["Last Seen", "Type", "Reason", "Object"]
    );
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[1], "Warning");
    assert_eq!(cells[2], "RolloutHalted");
    assert_eq!(cells[3], "node/n1");
    assert_eq!(cells[5], "inplace-orchestrator");
    assert_eq!(cells[6], "2 nodes failed");
    assert_eq!(cells[8], "2");
}

#[tokio::test(start_paused = true)]
async fn other_kinds_print_the_default_columns_and_plain_clients_get_json() {
    let server = server();
    let client = server.admin_client();
    let (_, table) = get_table(&client, "/apis/apps/v1/namespaces/default/statefulsets").await;
    assert_eq!(column_names(&table), ["Name", "Created At"]);
    let (status, list) = crate::raw(&client, "GET", "/api/v1/nodes", "", Vec::new()).await;
    assert_eq!((status, list["kind"].as_str()), (200, Some("NodeList")));
}
