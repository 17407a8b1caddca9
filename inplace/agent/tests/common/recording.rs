//! A client that logs the requests it sends, for tests that check what a component asks the API.

use std::sync::{Arc, Mutex};

/// `client`, writing "METHOD path?query" of every request it sends into `log`.
pub(crate) fn recording(client: kube::Client, log: Arc<Mutex<Vec<String>>>) -> kube::Client {
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let client = client.clone();
        log.lock()
            .unwrap()
            .push(format!("{} {}", request.method(), request.uri()));
        async move { client.send(request).await }
    });
    kube::Client::new(service, "default")
}
