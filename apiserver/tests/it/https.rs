//! The same behaviour over HTTPS with bearer tokens and kubeconfigs.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use rackproof_apiserver::{ApiServer, User};
use rackproof_clock::Clock;

#[tokio::test]
async fn https_serves_kube_clients_with_tokens_and_node_rules() {
    let server = ApiServer::new(Clock::wall());
    let https = server
        .serve_https("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
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
    // A world-readable file already there: the credentials replace it, mode 0600, and nothing
    // else is left behind.
    std::fs::write(&path, "stale").unwrap();
    https.write_kubeconfig(&path, &User::admin()).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&text).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    let from_file = kube::Client::try_from(config).unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(from_file, "default");
    assert_eq!(
        maps.list(&ListParams::default()).await.unwrap().items.len(),
        5
    );

    let kubeconfig = kube::config::Kubeconfig::from_yaml(
        &https
            .kubeconfig(&User::admin())
            .replace("token: ", "token: x"),
    )
    .unwrap();
    let wrong_token = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(wrong_token.clone(), "default");
    assert!(
        matches!(maps.list(&ListParams::default()).await, Err(kube::Error::Api(s)) if s.code == 401)
    );
    assert!(
        wrong_token.apiserver_version().await.is_ok(),
        "/version is public"
    );

    let addr = https.addr();
    drop(https);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "dropping the handle stops serving"
    );
}

/// A client that reaches the server by another name (as a QEMU guest reaches `10.0.2.2`), checked
/// through kubeconfig's `tls-server-name`.
async fn client_naming(https: &rackproof_apiserver::HttpsServer, name: &str) -> kube::Client {
    let text = https.kubeconfig(&User::admin()).replace(
        "    certificate-authority-data:",
        &format!("    tls-server-name: {name}\n    certificate-authority-data:"),
    );
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&text).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn the_certificate_names_the_extra_names_it_was_served_as() {
    let server = ApiServer::new(Clock::wall());
    let also = server
        .serve_https_also_as("127.0.0.1:0".parse().unwrap(), &["apiserver.lab"])
        .await
        .unwrap();
    let maps: Api<ConfigMap> =
        Api::namespaced(client_naming(&also, "apiserver.lab").await, "default");
    assert!(maps.list(&ListParams::default()).await.is_ok());

    let plain = server
        .serve_https("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let maps: Api<ConfigMap> =
        Api::namespaced(client_naming(&plain, "apiserver.lab").await, "default");
    let err = maps.list(&ListParams::default()).await.unwrap_err();
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "a certificate without the name is refused by TLS, got {err}"
    );
}
