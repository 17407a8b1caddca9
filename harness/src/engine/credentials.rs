//! The credentials a run made (bearer tokens, BMC passwords), kept so that everything the run
//! wrote can be checked for them afterwards; they are never printed.

use std::path::{Path, PathBuf};

/// The credentials of one run. `Debug` shows only how many there are.
#[derive(Clone, Default)]
pub struct Credentials(Vec<String>);

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({} redacted)", self.0.len())
    }
}

impl Credentials {
    /// Keeps `values` (empty ones are no secret and are dropped).
    pub fn extend(&mut self, values: impl IntoIterator<Item = String>) {
        self.0.extend(values.into_iter().filter(|v| !v.is_empty()));
        self.0.sort();
        self.0.dedup();
    }

    /// How many credentials the run made.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the run made none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `bytes` contain any of them.
    pub fn found_in(&self, bytes: &[u8]) -> bool {
        self.0
            .iter()
            .any(|c| bytes.windows(c.len()).any(|w| w == c.as_bytes()))
    }

    /// Every file under `dir` (recursively) that contains one of them: what a run must never
    /// write into its artifacts.
    pub fn leaks_under(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut leaks = Vec::new();
        let mut pending = vec![dir.to_owned()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                let path = entry.path();
                if entry.file_type()?.is_dir() {
                    pending.push(path);
                } else if self.found_in(&std::fs::read(&path)?) {
                    leaks.push(path);
                }
            }
        }
        leaks.sort();
        Ok(leaks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_holding_a_credential_anywhere_below_the_directory_is_a_leak_and_debug_hides_them() {
        let mut credentials = Credentials::default();
        credentials.extend(["s3cr3t-token".to_owned(), String::new()]);
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("components")).unwrap();
        std::fs::write(dir.path().join("report.html"), "nothing here").unwrap();
        std::fs::write(
            dir.path().join("components/orchestrator.log"),
            "Authorization: Bearer s3cr3t-token",
        )
        .unwrap();
        assert_eq!(
            credentials.leaks_under(dir.path()).unwrap(),
            [dir.path().join("components/orchestrator.log")]
        );
        assert_eq!(credentials.len(), 1, "empty values are no credential");
        assert!(!format!("{credentials:?}").contains("s3cr3t"));
    }
}
