//! `/healthz`, `/livez` and `/readyz` as kube-apiserver serves them: plain text `ok`, one named
//! check at `/<endpoint>/<check>`, `?verbose` for the list of checks and the verdict, and
//! `?exclude=<check>` (repeatable) to leave a check out.
//!
//! The checks are the ones that can fail in this server: `ping` (it answers), `log` (as
//! kube-apiserver has it; this server's logging cannot block) and `store` (the object store took
//! the request's lock, so writes can proceed). An unknown check name is 404, an unknown
//! exclusion is reported at the end of a verbose answer, as kube-apiserver does.

use crate::error::ApiError;

/// Which endpoint was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Healthz,
    Livez,
    Readyz,
}

impl Endpoint {
    pub(crate) fn from_path(segment: &str) -> Option<Self> {
        match segment {
            "healthz" => Some(Self::Healthz),
            "livez" => Some(Self::Livez),
            "readyz" => Some(Self::Readyz),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Healthz => "healthz",
            Self::Livez => "livez",
            Self::Readyz => "readyz",
        }
    }
}

/// The checks, in the order a verbose answer lists them.
const CHECKS: &[&str] = &["ping", "log", "store"];

/// A parsed health request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HealthRequest {
    pub(crate) endpoint: Endpoint,
    /// `/<endpoint>/<check>`: that check alone.
    pub(crate) check: Option<String>,
    pub(crate) verbose: bool,
    pub(crate) exclude: Vec<String>,
}

/// The answer body (every check of this server passes while it answers at all).
pub(crate) fn answer(request: &HealthRequest) -> Result<String, ApiError> {
    if let Some(check) = &request.check {
        return if CHECKS.contains(&check.as_str()) {
            Ok("ok".to_owned())
        } else {
            Err(ApiError::path_not_found(&format!(
                "/{}/{check}",
                request.endpoint.name()
            )))
        };
    }
    if !request.verbose {
        return Ok("ok".to_owned());
    }
    let mut body = String::new();
    for check in CHECKS {
        if request.exclude.iter().any(|e| e == check) {
            body.push_str(&format!("[+]{check} excluded: ok\n"));
        } else {
            body.push_str(&format!("[+]{check} ok\n"));
        }
    }
    let unknown: Vec<&str> = request
        .exclude
        .iter()
        .map(String::as_str)
        .filter(|e| !CHECKS.contains(e))
        .collect();
    if !unknown.is_empty() {
        body.push_str(&format!(
            "warn: some health checks cannot be excluded: no matches for {}\n",
            unknown
                .iter()
                .map(|e| format!("{e:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    body.push_str(&format!("{} check passed\n", request.endpoint.name()));
    Ok(body)
}
