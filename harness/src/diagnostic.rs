//! Errors in scenario files, pointing at `file:line:column` with the offending line, the allowed
//! values and a "did you mean" where one is close.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file it is in (the scenario, or a file it includes).
    pub file: PathBuf,
    /// 1-based line and column; 0 when unknown.
    pub line: u64,
    pub column: u64,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
    /// The offending line with a caret under the column, when the file text is known.
    pub snippet: Option<String>,
}

impl Diagnostic {
    /// A diagnostic at `file:line:column`, with the snippet taken from `text`.
    pub fn at(
        file: &Path,
        text: Option<&str>,
        line: u64,
        column: u64,
        message: impl Into<String>,
    ) -> Self {
        let snippet = text.and_then(|t| snippet(t, line, column));
        Self {
            file: file.to_owned(),
            line,
            column,
            message: message.into(),
            help: None,
            snippet,
        }
    }

    /// Adds a hint on how to fix it.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// `file:line:column`.
    pub fn location(&self) -> String {
        if self.line == 0 {
            self.file.display().to_string()
        } else {
            format!("{}:{}:{}", self.file.display(), self.line, self.column)
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location(), self.message)?;
        if let Some(snippet) = &self.snippet {
            write!(f, "\n{snippet}")?;
        }
        if let Some(help) = &self.help {
            write!(f, "\n  = help: {help}")?;
        }
        Ok(())
    }
}

fn snippet(text: &str, line: u64, column: u64) -> Option<String> {
    let index = usize::try_from(line.checked_sub(1)?).ok()?;
    let source_line = text.lines().nth(index)?;
    let gutter = line.to_string();
    let pad = " ".repeat(gutter.len());
    let caret_at = usize::try_from(column.saturating_sub(1)).unwrap_or(0);
    let indent: String = source_line
        .chars()
        .take(caret_at)
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    Some(format!(
        "{pad} |\n{gutter} | {source_line}\n{pad} | {indent}^"
    ))
}

/// A "did you mean" hint for `given` among `allowed`, when one is close enough to be a typo.
pub fn did_you_mean<'a>(
    given: &str,
    allowed: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    allowed
        .into_iter()
        .map(|candidate| {
            (
                strsim::jaro_winkler(&given.to_lowercase(), &candidate.to_lowercase()),
                candidate,
            )
        })
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// Turns serde's "unknown field `x`, expected one of a, b" into a message and a help line that
/// names the closest allowed value.
pub fn explain_unknown(message: &str) -> (String, Option<String>) {
    let Some(captures) = unknown_pattern().captures(message) else {
        return (message.to_owned(), None);
    };
    let what = &captures[1];
    let given = &captures[2];
    let allowed: Vec<&str> = captures[3]
        .split(',')
        .map(|s| s.trim().trim_matches('`').trim())
        .filter(|s| !s.is_empty())
        .collect();
    let kind = if what == "field" { "field" } else { "value" };
    let message = format!("unknown {kind} `{given}`");
    let listed = allowed
        .iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let help = match did_you_mean(given, allowed.iter().copied()) {
        Some(close) => format!("did you mean `{close}`? allowed: {listed}"),
        None => format!("allowed: {listed}"),
    };
    (message, Some(help))
}

fn unknown_pattern() -> &'static regex::Regex {
    static PATTERN: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| {
        regex::Regex::new(r"unknown (field|variant) `([^`]*)`, expected (?:one of )?(.+?)(?: at line \d+, column \d+)?$")
            .expect("the pattern is valid")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_closest_allowed_value() {
        let (message, help) = explain_unknown(
            "unknown variant `updat`, expected one of update, wait at line 6, column 5",
        );
        assert_eq!(message, "unknown value `updat`");
        assert_eq!(
            help.as_deref(),
            Some("did you mean `update`? allowed: `update`, `wait`")
        );
    }

    #[test]
    fn lists_allowed_values_when_nothing_is_close() {
        let (message, help) =
            explain_unknown("unknown field `zzz`, expected one of `backend`, `nodes`");
        assert_eq!(message, "unknown field `zzz`");
        assert_eq!(help.as_deref(), Some("allowed: `backend`, `nodes`"));
    }

    #[test]
    fn renders_location_snippet_and_help() {
        let text = "lab:\n  nodez: 4\n";
        let d = Diagnostic::at(
            Path::new("s.yaml"),
            Some(text),
            2,
            3,
            "unknown field `nodez`",
        )
        .with_help("did you mean `nodes`?");
        assert_eq!(
            d.to_string(),
            "s.yaml:2:3: unknown field `nodez`\n  |\n2 |   nodez: 4\n  |   ^\n  = help: did you mean `nodes`?"
        );
    }
}
