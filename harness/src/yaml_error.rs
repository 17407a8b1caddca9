//! What the YAML reader's errors mean to a scenario author: a message and a hint in the
//! scenario's terms, instead of the library's advice to its programmer (`set DuplicateKeyPolicy
//! in Options`, `use Option<String>`).

use serde_saphyr::{Error, IncludeResolveError};

use crate::diagnostic::explain_unknown;

/// A message and, where there is one, how to fix it. `root_is_blank` says whether the scenario
/// file has nothing but blanks and comments (the reader then reports the end of the input).
pub(crate) fn explain(error: &Error, root_is_blank: bool) -> (String, Option<String>) {
    match error {
        Error::WithSnippet { error, .. } => explain(error, root_is_blank),
        Error::AliasError { error, .. } => explain(error, root_is_blank),
        Error::Eof { .. } if root_is_blank => (
            "the file is empty".to_owned(),
            Some("a scenario is a mapping with at least `lab`, `images` and `pool`; see docs/scenarios.md".to_owned()),
        ),
        Error::Eof { .. } => (
            "the file ends in the middle of a value".to_owned(),
            Some("close every `[`, `{` and quote that is opened".to_owned()),
        ),
        Error::UnsupportedTag { tag, .. } => (
            format!("unknown YAML tag `{tag}`"),
            Some("the only tag a scenario uses is `!include <file>`; write the value without the tag".to_owned()),
        ),
        Error::DuplicateMappingKey { key: Some(key), .. } => (
            format!("`{key}` is given twice in this mapping"),
            Some("keep one of the two".to_owned()),
        ),
        Error::DuplicateMappingKey { key: None, .. } => (
            "a key is given twice in this mapping".to_owned(),
            Some("keep one of the two".to_owned()),
        ),
        Error::ResolverError { target, error, .. } => (
            format!("cannot include `{target}`: {}", include_problem(error)),
            Some("an include's path is relative to the file that includes it".to_owned()),
        ),
        Error::CyclicInclude { id, .. } => (
            format!("`{id}` includes itself, directly or through other files"),
            Some("break the cycle: a shared part must not include the file that includes it".to_owned()),
        ),
        Error::UnsupportedIncludeForm { .. } => (
            "`!include` takes a file name".to_owned(),
            Some("write `!include parts/file.yaml` (or `file.yaml#anchor`)".to_owned()),
        ),
        Error::MultipleDocuments { .. } => (
            "the file holds more than one YAML document".to_owned(),
            Some("a scenario is one document: remove the `---` separators, or split the file".to_owned()),
        ),
        Error::NullIntoString { .. } => (
            "a value is missing here".to_owned(),
            Some("write the value after the colon, quoted if it could be read as something else".to_owned()),
        ),
        Error::TaggedScalarCannotDeserializeIntoString { .. } | Error::BinaryNotUtf8 { .. } => (
            "this value must be plain text".to_owned(),
            Some("remove the tag in front of it".to_owned()),
        ),
        Error::Budget { breach, .. } => (
            format!("the file is too large or too deeply nested to be a scenario ({breach:?})"),
            Some("a scenario is a few pages of YAML: look for runaway anchors and aliases or a broken indentation".to_owned()),
        ),
        Error::AliasReplayLimitExceeded { .. }
        | Error::AliasExpansionLimitExceeded { .. }
        | Error::AliasReplayStackDepthExceeded { .. }
        | Error::AliasReplayCounterOverflow { .. } => (
            "aliases here expand to more than a scenario can hold".to_owned(),
            Some("use each anchor a few times at most, and never inside itself".to_owned()),
        ),
        other => {
            let bare = other.to_string();
            explain_unknown(strip_position_suffix(&bare))
        }
    }
}

fn include_problem(error: &IncludeResolveError) -> String {
    match error {
        IncludeResolveError::Message(message) => message.clone(),
        IncludeResolveError::Io(error) => error.to_string(),
        IncludeResolveError::SizeLimitExceeded(size, limit) => {
            format!("it is {size} bytes, more than the {limit} bytes left for includes")
        }
        other => format!("{other:?}"),
    }
}

/// serde-saphyr appends " at line N, column M" to bare messages; the diagnostic says it already.
fn strip_position_suffix(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(index) if message[index..].contains(", column ") => &message[..index],
        _ => message,
    }
}
