//! A hostile BMC on 127.0.0.1: its service root names paths on another host, and it redirects
//! requests there. The client must send neither the password nor its session token to that
//! other host.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rackproof_clock::Clock;
use rackproof_redfish::{ClientOptions, Credentials, Endpoint, RedfishClient, RetryPolicy};
use serde_json::json;

const PASSWORD: &str = "hostile-test-password-9c2e";
const TOKEN: &str = "hostile-test-session-token-41d7";

/// What a server saw: `METHOD path` and every header value, per request.
type Journal = Arc<Mutex<Vec<String>>>;

fn record(journal: &Journal, request: &Request) {
    let mut line = format!("{} {}", request.method(), request.uri());
    for (name, value) in request.headers() {
        line.push_str(&format!(" {name}={}", value.to_str().unwrap_or("?")));
    }
    journal.lock().unwrap().push(line);
}

async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// A server that answers everything with 201 and a session token, and records what it got.
async fn thief() -> (SocketAddr, Journal) {
    let journal = Journal::default();
    let router = Router::new()
        .fallback(
            |State(journal): State<Journal>, request: Request| async move {
                record(&journal, &request);
                let mut headers = HeaderMap::new();
                headers.insert("x-auth-token", "stolen".parse().unwrap());
                (StatusCode::CREATED, headers, "{}")
            },
        )
        .with_state(journal.clone());
    (serve(router).await, journal)
}

/// How the hostile BMC points at the thief.
#[derive(Clone, Copy)]
enum Hostility {
    /// The service root's sessions and systems links are absolute URLs on the thief.
    AbsoluteLinks,
    /// The login is redirected (307, body and method kept) to the thief.
    RedirectLogin,
    /// The login works; reading the systems collection is redirected to the thief.
    RedirectAfterLogin,
}

#[derive(Clone)]
struct Bmc {
    thief: SocketAddr,
    hostility: Hostility,
    journal: Journal,
}

async fn bmc_handler(State(bmc): State<Bmc>, request: Request) -> Response {
    record(&bmc.journal, &request);
    let thief = format!("http://{}", bmc.thief);
    let redirect = |to: String| (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to)]);
    match (request.method().as_str(), request.uri().path()) {
        ("GET", "/redfish/v1/" | "/redfish/v1") => {
            let (sessions, systems) = match bmc.hostility {
                Hostility::AbsoluteLinks => (
                    format!("{thief}/redfish/v1/SessionService/Sessions"),
                    format!("{thief}/redfish/v1/Systems"),
                ),
                _ => (
                    "/redfish/v1/SessionService/Sessions".to_owned(),
                    "/redfish/v1/Systems".to_owned(),
                ),
            };
            axum::Json(json!({"Systems": {"@odata.id": systems},
                "Links": {"Sessions": {"@odata.id": sessions}}}))
            .into_response()
        }
        ("POST", "/redfish/v1/SessionService/Sessions") => match bmc.hostility {
            Hostility::RedirectLogin => {
                redirect(format!("{thief}/redfish/v1/SessionService/Sessions")).into_response()
            }
            _ => (
                StatusCode::CREATED,
                [("x-auth-token", TOKEN)],
                axum::Json(json!({})),
            )
                .into_response(),
        },
        ("GET", "/redfish/v1/Systems") => {
            redirect(format!("{thief}/redfish/v1/Systems")).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn hostile_bmc(hostility: Hostility) -> (String, Journal, Journal) {
    let (thief, stolen) = thief().await;
    let bmc = Bmc {
        thief,
        hostility,
        journal: Journal::default(),
    };
    let journal = bmc.journal.clone();
    let router = Router::new().fallback(bmc_handler).with_state(bmc);
    let addr = serve(router).await;
    (format!("http://{addr}"), journal, stolen)
}

fn options() -> ClientOptions {
    ClientOptions {
        retry: RetryPolicy {
            attempts: 1,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(5),
        },
        request_timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    }
}

async fn connect(url: &str) -> Result<RedfishClient, rackproof_redfish::RedfishError> {
    RedfishClient::connect(
        &Endpoint::new(url),
        Credentials::new("admin", PASSWORD),
        options(),
        Clock::wall(),
    )
    .await
}

fn assert_nothing_reached(stolen: &Journal) {
    let stolen = stolen.lock().unwrap();
    assert!(
        stolen.is_empty(),
        "the client sent requests to another host: {stolen:#?}"
    );
}

#[tokio::test]
async fn absolute_links_in_the_service_root_are_refused_before_the_password_leaves() {
    let (url, _journal, stolen) = hostile_bmc(Hostility::AbsoluteLinks).await;
    let err = connect(&url).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("not on the BMC"), "{text}");
    assert!(
        text.contains("/redfish/v1/SessionService/Sessions"),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");
    assert_nothing_reached(&stolen);
}

#[tokio::test]
async fn a_redirected_login_is_not_followed() {
    let (url, journal, stolen) = hostile_bmc(Hostility::RedirectLogin).await;
    let err = connect(&url).await.unwrap_err();
    assert_eq!(err.status(), Some(307), "{err}");
    assert_nothing_reached(&stolen);
    assert!(
        journal
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.starts_with("POST ")),
        "the login went to the BMC itself"
    );
}

#[tokio::test]
async fn a_redirect_after_login_does_not_carry_the_session_token_away() {
    let (url, journal, stolen) = hostile_bmc(Hostility::RedirectAfterLogin).await;
    let err = connect(&url).await.unwrap_err();
    assert_eq!(err.status(), Some(307), "{err}");
    assert_nothing_reached(&stolen);
    assert!(
        journal
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.starts_with("GET /redfish/v1/Systems") && r.contains(TOKEN)),
        "the systems request went to the BMC with the token"
    );
}
