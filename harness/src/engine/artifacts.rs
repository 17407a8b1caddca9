//! A run's artifacts folder: `result.json` (verdict, failures, expectations), `timeline.json`,
//! `report.html` (self-contained), `console/<node>.log` and, for components run as external
//! programs, `components/<name>.log`.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::json;

use crate::engine::judge::timeline::Timeline;
use crate::engine::run::RunResult;
use crate::report::{ReportInput, render};

/// A failed write of an artifact.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{what} {name:?} cannot name a folder in the artifacts folder: it must be one plain path \
         component (1-100 letters, digits, '-', '_' or '.', not starting with '.')"
    )]
    UnsafeName { what: &'static str, name: String },
}

fn write(path: PathBuf, contents: impl AsRef<[u8]>) -> Result<(), ArtifactError> {
    std::fs::write(&path, contents).map_err(|source| ArtifactError::Write { path, source })
}

/// Whether `name` can be a folder name under the artifacts folder: 1-100 letters, digits, `-`,
/// `_` or `.`, not starting with `.` (so never `.`, `..`, a hidden folder or a path).
pub fn is_plain_component(name: &str) -> bool {
    (1..=100).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The folder of one run, `<root>/<scenario>/<backend>`; refuses names that would leave `root`.
pub fn run_dir(root: &Path, scenario: &str, backend: &str) -> Result<PathBuf, ArtifactError> {
    for (what, name) in [("scenario name", scenario), ("backend", backend)] {
        if !is_plain_component(name) {
            return Err(ArtifactError::UnsafeName {
                what,
                name: name.to_owned(),
            });
        }
    }
    Ok(root.join(scenario).join(backend))
}

/// Writes the artifacts of `result` (scenario `name` on `backend`) into `dir`, created if needed.
/// Returns the report's path.
pub fn write_all(
    dir: &Path,
    name: &str,
    backend: &str,
    result: &RunResult,
) -> Result<PathBuf, ArtifactError> {
    let console_dir = dir.join("console");
    std::fs::create_dir_all(&console_dir).map_err(|source| ArtifactError::Write {
        path: console_dir.clone(),
        source,
    })?;
    let elapsed_ms = u64::try_from(result.elapsed.as_millis()).unwrap_or(u64::MAX);
    let summary = json!({
        "scenario": name,
        "backend": backend,
        "verdict": result.verdict.as_str(),
        "elapsedMs": elapsed_ms,
        "nodes": result.nodes,
        "maxUnavailable": result.max_unavailable,
        "failures": result.failures,
        "expectations": result.expectations.iter().map(|(what, how)| json!({"expectation": what, "outcome": how})).collect::<Vec<_>>(),
    });
    write(
        dir.join("result.json"),
        serde_json::to_vec_pretty(&summary).unwrap_or_default(),
    )?;
    write(
        dir.join("timeline.json"),
        serde_json::to_vec_pretty(&result.timeline).unwrap_or_default(),
    )?;
    write_logs(&console_dir, &result.consoles)?;
    if !result.component_logs.is_empty() {
        let components_dir = dir.join("components");
        std::fs::create_dir_all(&components_dir).map_err(|source| ArtifactError::Write {
            path: components_dir.clone(),
            source,
        })?;
        write_logs(&components_dir, &result.component_logs)?;
    }
    let summary = Summary {
        scenario: name.to_owned(),
        backend: backend.to_owned(),
        verdict: result.verdict.as_str().to_owned(),
        elapsed_ms,
        nodes: result.nodes.clone(),
        max_unavailable: result.max_unavailable,
        failures: result.failures.clone(),
        expectations: Vec::new(),
    };
    write_report(dir, &summary, &result.timeline)
}

/// Writes `<source>.log` into `dir` for each source's lines.
fn write_logs(
    dir: &Path,
    logs: &std::collections::BTreeMap<String, Vec<String>>,
) -> Result<(), ArtifactError> {
    for (source, lines) in logs {
        let mut text = lines.join("\n");
        text.push('\n');
        write(dir.join(format!("{source}.log")), text)?;
    }
    Ok(())
}

fn write_report(
    dir: &Path,
    summary: &Summary,
    timeline: &Timeline,
) -> Result<PathBuf, ArtifactError> {
    let report = render(&ReportInput {
        scenario: &summary.scenario,
        backend: &summary.backend,
        verdict: &summary.verdict,
        nodes: &summary.nodes,
        max_unavailable: summary.max_unavailable,
        duration_ms: summary.elapsed_ms,
        failures: &summary.failures,
        timeline,
    });
    let path = dir.join("report.html");
    write(path.clone(), report)?;
    Ok(path)
}

/// What `result.json` holds.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub scenario: String,
    pub backend: String,
    pub verdict: String,
    pub elapsed_ms: u64,
    pub nodes: Vec<String>,
    pub max_unavailable: u32,
    pub failures: Vec<String>,
    pub expectations: Vec<ExpectationOutcome>,
}

/// One expectation in `result.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct ExpectationOutcome {
    pub expectation: String,
    pub outcome: String,
}

/// A run folder that cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(
        "failed to read {path}; is it a run folder written by `rackproof run` (result.json, timeline.json)?"
    )]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a run's {what}")]
    Parse {
        path: PathBuf,
        what: &'static str,
        source: serde_json::Error,
    },
}

fn read_json<T: serde::de::DeserializeOwned>(
    path: PathBuf,
    what: &'static str,
) -> Result<T, ReadError> {
    let bytes = std::fs::read(&path).map_err(|source| ReadError::Io {
        path: path.clone(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| ReadError::Parse { path, what, source })
}

/// Reads a run folder back and writes its `report.html` again (after a Rackproof upgrade, or
/// from artifacts copied off a CI runner). Returns the summary and the report's path.
pub fn rerender(dir: &Path) -> Result<(Summary, PathBuf), RerenderError> {
    let summary: Summary = read_json(dir.join("result.json"), "result summary")?;
    let timeline: Timeline = read_json(dir.join("timeline.json"), "timeline")?;
    let path = write_report(dir, &summary, &timeline)?;
    Ok((summary, path))
}

/// Why a report could not be written again.
#[derive(Debug, thiserror::Error)]
pub enum RerenderError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Write(#[from] ArtifactError),
}

/// The artifacts folder's name for a run on `backend` against `cluster`.
pub fn run_label(backend: crate::scenario::Backend, cluster: &crate::scenario::Cluster) -> String {
    match cluster {
        crate::scenario::Cluster::Embedded => backend.as_str().to_owned(),
        crate::scenario::Cluster::Local => format!("{}-local", backend.as_str()),
        crate::scenario::Cluster::Kind => format!("{}-kind", backend.as_str()),
        crate::scenario::Cluster::Kubeconfig(_) => format!("{}-kubeconfig", backend.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::run_dir;

    #[test]
    fn run_folders_stay_inside_the_artifacts_folder() {
        let root = Path::new("/artifacts");
        assert_eq!(
            run_dir(root, "auto-happy-path", "sim").unwrap(),
            Path::new("/artifacts/auto-happy-path/sim")
        );
        for bad in ["..", "../x", "a/b", "/etc", ".", ""] {
            let err = run_dir(root, bad, "sim").unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{bad:?}: {err}");
            assert!(err.contains("one plain path component"), "{bad:?}: {err}");
        }
    }
}
