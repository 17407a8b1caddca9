//! Loading scenario files: YAML with `!include`, deserialized into the model, then checked for
//! meaning (`validate`). Every error is a [`Diagnostic`] at `file:line:column`.
//!
//! Sharing parts between scenarios uses the YAML `!include` tag, resolved relative to the file
//! that contains it:
//!
//! ```yaml
//! lab: !include common/four-sim-nodes.yaml      # a whole value from another file
//! pool:
//!   <<: !include common/pool.yaml               # merged, then overridden below
//!   maxUnavailable: 2
//! ```

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde_saphyr::{IncludeResolveError, InputSource, ResolvedInclude};

use crate::diagnostic::{Diagnostic, explain_unknown};
use crate::scenario::{Position, Scenario};
use crate::validate;

/// A scenario file, loaded and checked.
#[derive(Debug, Clone)]
pub struct LoadedScenario {
    /// The scenario file.
    pub path: PathBuf,
    /// Its name (the `name` field, or the file name without `.yaml`).
    pub name: String,
    /// The model.
    pub scenario: Scenario,
    /// The files it was read from, to point at positions.
    pub sources: Sources,
}

/// The files a scenario was read from: source id 1 is the scenario, 2.. its includes in the order
/// they were resolved (serde-saphyr numbers sources that way).
#[derive(Debug, Clone, Default)]
pub struct Sources {
    files: Vec<(PathBuf, String)>,
}

impl Sources {
    fn file(&self, source: u32) -> Option<&(PathBuf, String)> {
        let index = usize::try_from(source.checked_sub(1)?).ok()?;
        self.files.get(index)
    }

    /// A diagnostic at a position recorded during loading.
    pub fn diagnostic(&self, at: Position, message: impl Into<String>) -> Diagnostic {
        match self.file(at.source) {
            Some((path, text)) => Diagnostic::at(path, Some(text), at.line, at.column, message),
            None => {
                let path = self
                    .files
                    .first()
                    .map(|(p, _)| p.clone())
                    .unwrap_or_default();
                Diagnostic::at(&path, None, 0, 0, message)
            }
        }
    }

    /// The scenario file itself.
    pub fn root(&self) -> &Path {
        self.files
            .first()
            .map(|(p, _)| p.as_path())
            .unwrap_or(Path::new(""))
    }
}

/// Why a scenario could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("error: failed to read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", render(.0))]
    Invalid(Vec<Diagnostic>),
}

fn render(diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(|d| format!("error: {d}"))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Loads and checks one scenario file.
pub fn load(path: &Path) -> Result<LoadedScenario, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    load_str(path, &text)
}

/// Loads and checks a scenario given its text (`path` names it in errors and anchors includes).
pub fn load_str(path: &Path, text: &str) -> Result<LoadedScenario, LoadError> {
    let sources = Rc::new(RefCell::new(vec![(path.to_owned(), text.to_owned())]));
    let resolver_sources = Rc::clone(&sources);
    let base = path.parent().map(Path::to_owned).unwrap_or_default();
    let options = serde_saphyr::options! {}.with_include_resolver(move |request| {
        let including_dir = request
            .from_id
            .map(|id| {
                Path::new(id)
                    .parent()
                    .map(Path::to_owned)
                    .unwrap_or_default()
            })
            .unwrap_or_else(|| base.clone());
        let (file, anchor) = match request.spec.split_once('#') {
            Some((file, anchor)) => (file, Some(anchor.to_owned())),
            None => (request.spec, None),
        };
        let target = including_dir.join(file);
        let content = std::fs::read_to_string(&target).map_err(|e| {
            IncludeResolveError::Message(format!(
                "failed to read included file {}: {e}",
                target.display()
            ))
        })?;
        resolver_sources
            .borrow_mut()
            .push((target.clone(), content.clone()));
        let id = target.to_string_lossy().into_owned();
        let source = match anchor {
            Some(anchor) => InputSource::AnchoredText {
                text: content,
                anchor,
            },
            None => InputSource::Text(content),
        };
        Ok(ResolvedInclude::new(id.clone(), id, source))
    });
    let parsed: Result<Scenario, _> = serde_saphyr::from_str_with_options(text, options);
    let sources = Sources {
        files: sources.borrow().clone(),
    };
    let scenario = parsed.map_err(|e| LoadError::Invalid(vec![syntax_diagnostic(&sources, &e)]))?;
    let name = scenario.name.as_deref().cloned().unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "scenario".to_owned())
    });
    let loaded = LoadedScenario {
        path: path.to_owned(),
        name,
        scenario,
        sources,
    };
    let problems = validate::check(&loaded);
    if problems.is_empty() {
        Ok(loaded)
    } else {
        Err(LoadError::Invalid(problems))
    }
}

fn syntax_diagnostic(sources: &Sources, error: &serde_saphyr::Error) -> Diagnostic {
    let bare = error.without_snippet().to_string();
    let bare = strip_position_suffix(&bare);
    let (message, help) = explain_unknown(bare);
    let at = error
        .location()
        .map(|l| Position {
            source: l.source_id(),
            line: l.line(),
            column: l.column(),
        })
        .unwrap_or_default();
    let diagnostic = sources.diagnostic(at, message);
    match help {
        Some(help) => diagnostic.with_help(help),
        None => diagnostic,
    }
}

/// serde-saphyr appends " at line N, column M" to bare messages; the diagnostic says it already.
fn strip_position_suffix(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(index) if message[index..].contains(", column ") => &message[..index],
        _ => message,
    }
}

/// Finds scenario files: each path is a file, or a directory whose `*.yaml` files (not in
/// subdirectories, which hold shared parts) are scenarios. Sorted by path.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut found = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries = std::fs::read_dir(path).map_err(|source| LoadError::Read {
                path: path.clone(),
                source,
            })?;
            for entry in entries {
                let entry = entry.map_err(|source| LoadError::Read {
                    path: path.clone(),
                    source,
                })?;
                let file = entry.path();
                if file.is_file() && file.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                    found.push(file);
                }
            }
        } else if path.exists() {
            found.push(path.clone());
        } else {
            return Err(LoadError::Read {
                path: path.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such file or directory",
                ),
            });
        }
    }
    found.sort();
    Ok(found)
}
