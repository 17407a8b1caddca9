//! A run's artifacts folder: `result.json` (verdict, failures, expectations), `timeline.json`,
//! `report.html` (self-contained) and `console/<node>.log`.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::run::RunResult;
use crate::report::{ReportInput, render};

/// A failed write of an artifact.
#[derive(Debug, thiserror::Error)]
#[error("failed to write {path}")]
pub struct ArtifactError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

fn write(path: PathBuf, contents: impl AsRef<[u8]>) -> Result<(), ArtifactError> {
    std::fs::write(&path, contents).map_err(|source| ArtifactError { path, source })
}

/// Writes the artifacts of `result` (scenario `name` on `backend`) into `dir`, created if needed.
/// Returns the report's path.
pub fn write_all(dir: &Path, name: &str, backend: &str, result: &RunResult) -> Result<PathBuf, ArtifactError> {
    let console_dir = dir.join("console");
    std::fs::create_dir_all(&console_dir).map_err(|source| ArtifactError { path: console_dir.clone(), source })?;
    let elapsed_ms = u64::try_from(result.elapsed.as_millis()).unwrap_or(u64::MAX);
    let summary = json!({
        "scenario": name,
        "backend": backend,
        "verdict": result.verdict.as_str(),
        "elapsedMs": elapsed_ms,
        "failures": result.failures,
        "expectations": result.expectations.iter().map(|(what, how)| json!({"expectation": what, "outcome": how})).collect::<Vec<_>>(),
    });
    write(dir.join("result.json"), serde_json::to_vec_pretty(&summary).unwrap_or_default())?;
    write(dir.join("timeline.json"), serde_json::to_vec_pretty(&result.timeline).unwrap_or_default())?;
    for (node, lines) in &result.consoles {
        let mut text = lines.join("\n");
        text.push('\n');
        write(console_dir.join(format!("{node}.log")), text)?;
    }
    let report = render(&ReportInput {
        scenario: name,
        backend,
        verdict: result.verdict.as_str(),
        nodes: &result.nodes,
        max_unavailable: result.max_unavailable,
        duration_ms: elapsed_ms,
        failures: &result.failures,
        timeline: &result.timeline,
    });
    let path = dir.join("report.html");
    write(path.clone(), report)?;
    Ok(path)
}
