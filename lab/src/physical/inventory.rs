//! Loading an inventory file: YAML through serde-saphyr with unknown keys refused, then the
//! checks serde can't make; every error points at `file:line:column`. Also node lookup, which
//! refuses names the inventory does not list and suggests the closest one.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_saphyr::Spanned;

use crate::resource::{Inventory, NodeDescription, ResourceError};

/// An inventory read from a file.
#[derive(Debug, Clone)]
pub struct InventoryFile {
    pub path: PathBuf,
    pub inventory: Inventory,
}

/// An inventory file that can't be used.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("cannot read inventory {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{location}: {message}")]
    Syntax { location: String, message: String },
    #[error("{location}: node {node:?}: {problem}")]
    Invalid {
        location: String,
        node: String,
        problem: String,
    },
    #[error("{location}: node {node:?} is listed twice (first at {first})")]
    Duplicate {
        location: String,
        node: String,
        first: String,
    },
}

/// A node name the inventory does not list.
#[derive(Debug, thiserror::Error)]
#[error("node {node:?} is not in inventory {}{}", inventory.display(), hint(suggestion.as_deref(), known))]
pub struct UnknownNode {
    pub node: String,
    pub inventory: PathBuf,
    /// The closest listed name, when one is close enough to be a typo.
    pub suggestion: Option<String>,
    pub known: Vec<String>,
}

fn hint(suggestion: Option<&str>, known: &[String]) -> String {
    match suggestion {
        Some(s) => format!("; did you mean {s:?}?"),
        None if known.is_empty() => "; it lists no nodes".to_owned(),
        None => format!("; it lists {}", known.join(", ")),
    }
}

/// Where each node's mapping starts.
#[derive(Deserialize)]
struct Positions {
    #[serde(default)]
    nodes: Vec<Spanned<IgnoredAny>>,
}

impl InventoryFile {
    /// Reads and checks the inventory at `path`.
    pub fn load(path: &Path) -> Result<Self, InventoryError> {
        let text = std::fs::read_to_string(path).map_err(|source| InventoryError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and checks `text` as if read from `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, InventoryError> {
        let at = |line: u64, column: u64| format!("{}:{line}:{column}", path.display());
        let syntax = |error: serde_saphyr::Error| {
            let message = error.without_snippet().to_string();
            let message = strip_position_suffix(&message).to_owned();
            let location = match error.location() {
                Some(l) => at(l.line(), l.column()),
                None => path.display().to_string(),
            };
            InventoryError::Syntax { location, message }
        };
        let inventory: Inventory = serde_saphyr::from_str(text).map_err(syntax)?;
        let positions: Positions = serde_saphyr::from_str(text).map_err(syntax)?;
        if let Some(Err(error)) = inventory.harness.as_ref().map(|h| h.validate()) {
            return Err(InventoryError::Syntax {
                location: path.display().to_string(),
                message: error.to_string(),
            });
        }
        let node_at = |index: usize| match positions.nodes.get(index) {
            Some(s) => at(s.referenced.line(), s.referenced.column()),
            None => path.display().to_string(),
        };
        for (index, node) in inventory.nodes.iter().enumerate() {
            if let Err(error) = node.validate() {
                let problem = match error {
                    ResourceError::Invalid { problem, .. } => problem,
                    other => other.to_string(),
                };
                return Err(InventoryError::Invalid {
                    location: node_at(index),
                    node: node.name.clone(),
                    problem,
                });
            }
            if let Some(first) = inventory.nodes[..index]
                .iter()
                .position(|n| n.name == node.name)
            {
                return Err(InventoryError::Duplicate {
                    location: node_at(index),
                    node: node.name.clone(),
                    first: node_at(first),
                });
            }
        }
        for warning in inventory.warnings() {
            tracing::warn!("{}: {warning}", path.display());
        }
        Ok(Self {
            path: path.to_owned(),
            inventory,
        })
    }

    /// The node called `name`, or an error with the closest listed name.
    pub fn node(&self, name: &str) -> Result<&NodeDescription, UnknownNode> {
        self.inventory.node(name).ok_or_else(|| self.unknown(name))
    }

    /// The nodes called `names`, in that order; every node when `names` is empty.
    pub fn select(&self, names: &[String]) -> Result<Vec<&NodeDescription>, UnknownNode> {
        if names.is_empty() {
            return Ok(self.inventory.nodes.iter().collect());
        }
        let mut selected: Vec<&NodeDescription> = Vec::new();
        for name in names {
            let node = self.node(name)?;
            if !selected.iter().any(|n| n.name == node.name) {
                selected.push(node);
            }
        }
        Ok(selected)
    }

    fn unknown(&self, name: &str) -> UnknownNode {
        let known: Vec<String> = self
            .inventory
            .nodes
            .iter()
            .map(|n| n.name.clone())
            .collect();
        let suggestion = known
            .iter()
            .map(|k| (strsim::jaro_winkler(name, k), k))
            .filter(|(score, _)| *score >= 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, k)| k.clone());
        UnknownNode {
            node: name.to_owned(),
            inventory: self.path.clone(),
            suggestion,
            known,
        }
    }
}

/// serde-saphyr appends " at line N, column M"; the location says it already.
fn strip_position_suffix(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(index) if message[index..].contains(", column ") => &message[..index],
        _ => message,
    }
}
