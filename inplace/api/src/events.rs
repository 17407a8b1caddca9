//! Kubernetes Events (core/v1) for the controllers (orchestrator, watchdog), stamped with the
//! component's [`Clock`] so simulated runs carry simulated times (kube-runtime's recorder reads
//! the wall clock).

use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::PostParams;
use kube::{Client, Resource};
use rackproof_clock::Clock;

/// Publishes Events for one component; failures are logged, never fatal.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    clock: Clock,
    component: &'static str,
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Normal,
    Warning,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("component", &self.component)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    pub fn new(client: Client, clock: Clock, component: &'static str) -> Self {
        Self {
            client,
            clock,
            component,
        }
    }

    /// Publishes an Event about `object`, and logs it (the component's own account of what it did,
    /// for an operator reading its log).
    pub async fn publish(&self, object: &ObjectReference, kind: Kind, reason: &str, message: &str) {
        log(object, kind, reason, message);
        let namespace = object
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let now = self.clock.now();
        let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let name = format!(
            "{}.{:x}{:04x}",
            object.name.as_deref().unwrap_or("object"),
            now.as_nanosecond(),
            sequence & 0xffff
        );
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            involved_object: object.clone(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            type_: Some(match kind {
                Kind::Normal => "Normal".to_owned(),
                Kind::Warning => "Warning".to_owned(),
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            count: Some(1),
            reporting_component: Some(self.component.to_owned()),
            reporting_instance: Some(self.component.to_owned()),
            action: Some(reason.to_owned()),
            source: Some(EventSource {
                component: Some(self.component.to_owned()),
                host: None,
            }),
            ..Default::default()
        };
        // The reply is not kept: it is skipped over, not decoded into an Event.
        let url = Event::url_path(&(), Some(&namespace));
        let request = serde_json::to_vec(&event)
            .map_err(kube::Error::SerdeError)
            .and_then(|body| {
                kube::core::Request::new(url)
                    .create(&PostParams::default(), body)
                    .map_err(kube::Error::BuildRequest)
            });
        let published = match request {
            Ok(request) => self
                .client
                .request::<serde::de::IgnoredAny>(request)
                .await
                .map(drop),
            Err(error) => Err(error),
        };
        if let Err(error) = published {
            tracing::warn!(%error, reason, "failed to publish event");
        }
    }
}

/// Logs an Event as the component's own line: `Machine/workers-0 reason=Cordoned: message`.
fn log(object: &ObjectReference, kind: Kind, reason: &str, message: &str) {
    let shown = format_args!(
        "{}/{}",
        object.kind.as_deref().unwrap_or("object"),
        object.name.as_deref().unwrap_or("-")
    );
    match kind {
        Kind::Normal => tracing::info!(object = %shown, reason, "{message}"),
        Kind::Warning => tracing::warn!(object = %shown, reason, "{message}"),
    }
}
