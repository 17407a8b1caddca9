//! The same behaviour over HTTPS with bearer tokens and kubeconfigs.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use rackproof_apiserver::{ApiServer, User};
use rackproof_clock::Clock;

#[tokio::test]
async fn https_serves_kube_clients_with_tokens_and_node_rules() {
    let server = ApiServer::new(Clock::wall());
    let https = server.serve_https("127.0.0.1:0".parse().unwrap()).await.unwrap();
    assert!(https.addr().ip().is_loopback() && https.addr().port() != 0);
    let admin = https.client(&User::admin()).await.unwrap();
    let node = https.client(&User::node("n1")).await.unwrap();
    crate::nodeauth::node_rules_hold(admin.clone(), node).await;

    let (reader, tasks) = crate::runtime::converge(admin.clone(), Duration::from_millis(50)).await;
    assert_eq!(reader.state().len(), 5);
    for task in tasks {
        task.abort();
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("admin.kubeconfig");
    https.write_kubeconfig(&path, &User::admin()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kube::config::Kubeconfig::from_yaml(&text).unwrap(), &Default::default()).await.unwrap();
    let from_file = kube::Client::try_from(config).unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(from_file, "default");
    assert_eq!(maps.list(&ListParams::default()).await.unwrap().items.len(), 5);

    let kubeconfig = kube::config::Kubeconfig::from_yaml(&https.kubeconfig(&User::admin()).replace("token: ", "token: x")).unwrap();
    let wrong_token = kube::Client::try_from(kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap()).unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(wrong_token.clone(), "default");
    assert!(matches!(maps.list(&ListParams::default()).await, Err(kube::Error::Api(s)) if s.code == 401));
    assert!(wrong_token.apiserver_version().await.is_ok(), "/version is public");

    let addr = https.addr();
    drop(https);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "dropping the handle stops serving");
}
