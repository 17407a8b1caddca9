//! `/metrics` in Prometheus' text format, with the names kube-apiserver uses for what this
//! server does: requests by verb, group, resource and code (`apiserver_request_total`), their
//! latency by verb, group and resource (`apiserver_request_duration_seconds`, a histogram, on the
//! server's clock, so virtual time in a simulation), and the watches open now by group and
//! resource (`apiserver_registered_watchers`), and the watches closed because they fell behind
//! (`apiserver_terminated_watchers_total`). Served to administrators only.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rackproof_std::LockExt;

/// Upper bounds of the latency buckets, in seconds (kube-apiserver's, up to 60 s).
const BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// What a request is counted under.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Labels {
    /// kube-apiserver's verb: GET, LIST, WATCH, POST, PUT, PATCH, DELETE, DELETECOLLECTION.
    pub(crate) verb: &'static str,
    pub(crate) group: String,
    /// The resource's plural, empty for discovery, health and other non-resource paths.
    pub(crate) resource: String,
}

#[derive(Debug, Default)]
struct Histogram {
    /// Count per bucket (not cumulative; summed when written).
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

#[derive(Debug, Default)]
struct Counts {
    requests: BTreeMap<(Labels, u16), u64>,
    durations: BTreeMap<Labels, Histogram>,
    watchers: BTreeMap<(String, String), i64>,
    terminated: BTreeMap<(String, String), u64>,
}

/// The server's counters. Cheap to share; every request records into it once.
#[derive(Debug, Default, Clone)]
pub(crate) struct Metrics {
    counts: Arc<Mutex<Counts>>,
}

impl Metrics {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.locked()
    }

    /// Records one finished request.
    pub(crate) fn record(&self, labels: Labels, code: u16, took: Duration) {
        let mut counts = self.counts();
        let seconds = took.as_secs_f64();
        let histogram = counts.durations.entry(labels.clone()).or_default();
        if histogram.buckets.is_empty() {
            histogram.buckets = vec![0; BUCKETS.len()];
        }
        if let Some(bucket) = BUCKETS.iter().position(|bound| seconds <= *bound) {
            histogram.buckets[bucket] += 1;
        }
        histogram.sum += seconds;
        histogram.count += 1;
        *counts.requests.entry((labels, code)).or_default() += 1;
    }

    /// Counts a watch as open until the returned guard is dropped (with its stream).
    pub(crate) fn watching(&self, group: &str, resource: &str) -> WatchGuard {
        let key = (group.to_owned(), resource.to_owned());
        *self.counts().watchers.entry(key.clone()).or_default() += 1;
        WatchGuard {
            metrics: self.clone(),
            key,
        }
    }

    /// Counts a watch closed because it fell behind (see `watch`, step 6).
    pub(crate) fn terminated_watch(&self, group: &str, resource: &str) {
        *self
            .counts()
            .terminated
            .entry((group.to_owned(), resource.to_owned()))
            .or_default() += 1;
    }

    /// The text exposition.
    pub(crate) fn render(&self) -> String {
        let counts = self.counts();
        let mut out = String::new();
        out.push_str("# HELP apiserver_request_total Counter of apiserver requests broken out for each verb, group, resource and HTTP response code.\n");
        out.push_str("# TYPE apiserver_request_total counter\n");
        for ((labels, code), n) in &counts.requests {
            let _ = writeln!(
                out,
                "apiserver_request_total{{code=\"{code}\",{}}} {n}",
                label_text(labels)
            );
        }
        out.push_str("# HELP apiserver_request_duration_seconds Response latency distribution in seconds for each verb, group and resource.\n");
        out.push_str("# TYPE apiserver_request_duration_seconds histogram\n");
        for (labels, histogram) in &counts.durations {
            let text = label_text(labels);
            let mut cumulative = 0;
            for (bound, n) in BUCKETS.iter().zip(&histogram.buckets) {
                cumulative += n;
                let _ = writeln!(
                    out,
                    "apiserver_request_duration_seconds_bucket{{{text},le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_bucket{{{text},le=\"+Inf\"}} {}",
                histogram.count
            );
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_sum{{{text}}} {}",
                histogram.sum
            );
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_count{{{text}}} {}",
                histogram.count
            );
        }
        out.push_str("# HELP apiserver_registered_watchers Number of currently registered watchers for a given resource.\n");
        out.push_str("# TYPE apiserver_registered_watchers gauge\n");
        for ((group, resource), n) in &counts.watchers {
            let _ = writeln!(
                out,
                "apiserver_registered_watchers{{group=\"{}\",resource=\"{}\"}} {n}",
                escape(group),
                escape(resource)
            );
        }
        out.push_str("# HELP apiserver_terminated_watchers_total Counter of watchers closed due to unresponsiveness broken by resource type.\n");
        out.push_str("# TYPE apiserver_terminated_watchers_total counter\n");
        for ((group, resource), n) in &counts.terminated {
            let _ = writeln!(
                out,
                "apiserver_terminated_watchers_total{{group=\"{}\",resource=\"{}\"}} {n}",
                escape(group),
                escape(resource)
            );
        }
        out
    }
}

/// Keeps a watch counted; see [`Metrics::watching`].
#[derive(Debug)]
pub(crate) struct WatchGuard {
    metrics: Metrics,
    key: (String, String),
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        if let Some(n) = self.metrics.counts().watchers.get_mut(&self.key) {
            *n -= 1;
        }
    }
}

fn label_text(labels: &Labels) -> String {
    format!(
        "group=\"{}\",resource=\"{}\",verb=\"{}\"",
        escape(&labels.group),
        escape(&labels.resource),
        labels.verb
    )
}

/// Escapes a label value as the text format requires.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_labels_and_code_with_cumulative_buckets() {
        let metrics = Metrics::default();
        let labels = Labels {
            verb: "GET",
            group: String::new(),
            resource: "nodes".to_owned(),
        };
        metrics.record(labels.clone(), 200, Duration::from_millis(3));
        metrics.record(labels.clone(), 200, Duration::from_millis(30));
        metrics.record(labels, 404, Duration::from_secs(100));
        let text = metrics.render();
        assert!(text.contains(
            "apiserver_request_total{code=\"200\",group=\"\",resource=\"nodes\",verb=\"GET\"} 2\n"
        ));
        assert!(text.contains(
            "apiserver_request_total{code=\"404\",group=\"\",resource=\"nodes\",verb=\"GET\"} 1\n"
        ));
        assert!(text.contains("apiserver_request_duration_seconds_bucket{group=\"\",resource=\"nodes\",verb=\"GET\",le=\"0.005\"} 1\n"));
        assert!(text.contains("apiserver_request_duration_seconds_bucket{group=\"\",resource=\"nodes\",verb=\"GET\",le=\"0.05\"} 2\n"));
        assert!(text.contains("apiserver_request_duration_seconds_bucket{group=\"\",resource=\"nodes\",verb=\"GET\",le=\"+Inf\"} 3\n"));
    }

    #[test]
    fn a_watch_counts_until_its_guard_goes() {
        let metrics = Metrics::default();
        let guard = metrics.watching("coordination.k8s.io", "leases");
        assert!(metrics.render().contains(
            "apiserver_registered_watchers{group=\"coordination.k8s.io\",resource=\"leases\"} 1\n"
        ));
        drop(guard);
        assert!(metrics.render().contains(
            "apiserver_registered_watchers{group=\"coordination.k8s.io\",resource=\"leases\"} 0\n"
        ));
    }
}
