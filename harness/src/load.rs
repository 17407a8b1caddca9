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

use crate::diagnostic::Diagnostic;
use crate::scenario::{Position, Scenario};
use crate::{validate, yaml_error};

/// The largest scenario file, or included part, the loader reads. Scenarios are a few pages.
const LARGEST_FILE: u64 = 1024 * 1024;

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
    let bytes = read_bounded(path).map_err(|source| LoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    load_bytes(path, &bytes)
}

/// Loads and checks a scenario given the bytes of its file (`path` names it in errors and
/// anchors includes). Bytes that are not UTF-8 are refused at the line and column they are at.
pub fn load_bytes(path: &Path, bytes: &[u8]) -> Result<LoadedScenario, LoadError> {
    if bytes.len() as u64 > LARGEST_FILE {
        let message = format!(
            "the file is {} KiB, larger than any scenario ({} KiB at most)",
            bytes.len() / 1024,
            LARGEST_FILE / 1024
        );
        let diagnostic = Diagnostic::at(path, None, 1, 1, message)
            .with_help("split it into a scenario and parts it `!include`s");
        return Err(LoadError::Invalid(vec![diagnostic]));
    }
    let text = utf8(path, bytes).map_err(|d| LoadError::Invalid(vec![d]))?;
    load_str(path, text)
}

/// Reads a file of at most [`LARGEST_FILE`] bytes.
fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(LARGEST_FILE + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > LARGEST_FILE {
        return Err(std::io::Error::other(format!(
            "it is larger than {} KiB, more than any scenario or part of one",
            LARGEST_FILE / 1024
        )));
    }
    Ok(bytes)
}

/// The text of a file, or a diagnostic at the first byte that is not UTF-8.
fn utf8<'a>(path: &Path, bytes: &'a [u8]) -> Result<&'a str, Diagnostic> {
    std::str::from_utf8(bytes).map_err(|e| {
        let valid = &bytes[..e.valid_up_to()];
        let line_start = valid.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let line = valid.iter().filter(|b| **b == b'\n').count() as u64 + 1;
        let column = String::from_utf8_lossy(&valid[line_start..])
            .chars()
            .count() as u64
            + 1;
        let text = String::from_utf8_lossy(bytes);
        Diagnostic::at(
            path,
            Some(&text),
            line,
            column,
            "the file is not UTF-8 text here",
        )
        .with_help("save the file as UTF-8; scenario files are UTF-8 YAML")
    })
}

/// Loads and checks a scenario given its text (`path` names it in errors and anchors includes).
pub fn load_str(path: &Path, text: &str) -> Result<LoadedScenario, LoadError> {
    let sources = Rc::new(RefCell::new(vec![(path.to_owned(), text.to_owned())]));
    let resolver_sources = Rc::clone(&sources);
    let base = path.parent().map(Path::to_owned).unwrap_or_default();
    let options = serde_saphyr::options! {
        reject_unsupported_tags: true,
        budget: serde_saphyr::budget! {
            max_reader_input_bytes: Some(LARGEST_FILE as usize),
            max_events: 200_000,
            max_nodes: 100_000,
            max_total_scalar_bytes: 4 * LARGEST_FILE as usize,
            max_recorded_anchor_events: 200_000,
            max_recorded_anchor_bytes: 4 * LARGEST_FILE as usize,
            max_inclusion_depth: 8,
        },
    }
    .with_include_resolver(move |request| {
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
        let bytes = read_bounded(&target).map_err(|e| {
            IncludeResolveError::Message(format!("cannot read {}: {e}", target.display()))
        })?;
        let content = utf8(&target, &bytes)
            .map_err(|d| IncludeResolveError::Message(format!("{}: {}", d.location(), d.message)))?
            .to_owned();
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
    let root_is_blank = sources.files.first().is_none_or(|(_, text)| {
        text.lines()
            .all(|line| line.trim().is_empty() || line.trim_start().starts_with('#'))
    });
    let (message, help) = yaml_error::explain(error, root_is_blank);
    // An error about the whole document (an empty file) has no position: its start.
    let at = error
        .location()
        .filter(|l| l.line() > 0 && l.source_id() > 0)
        .map(|l| Position {
            source: l.source_id(),
            line: l.line(),
            column: l.column(),
        })
        .unwrap_or(Position {
            source: 1,
            line: 1,
            column: 1,
        });
    let diagnostic = sources.diagnostic(at, message);
    match help {
        Some(help) => diagnostic.with_help(help),
        None => diagnostic,
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
