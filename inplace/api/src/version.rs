//! Kubernetes versions (`1.27.3`) and machine image versions (`1443.8.0`, `1631.0`,
//! `15.3.20220818`), parsed and compared numerically.

use std::cmp::Ordering;
use std::fmt;

/// A malformed version string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} version {text:?}: {why}")]
pub struct VersionError {
    kind: &'static str,
    text: String,
    why: &'static str,
}

/// A Kubernetes version `MAJOR.MINOR.PATCH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    /// Major version.
    pub major: u64,
    /// Minor version.
    pub minor: u64,
    /// Patch version.
    pub patch: u64,
}

impl KubeVersion {
    /// Parses `MAJOR.MINOR.PATCH` (decimal numbers, no prefix, no suffix).
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let err = |why| VersionError {
            kind: "kubernetes",
            text: text.to_owned(),
            why,
        };
        let parts = parse_numbers(text).map_err(err)?;
        match parts[..] {
            [major, minor, patch] => Ok(Self {
                major,
                minor,
                patch,
            }),
            _ => Err(err("write it as MAJOR.MINOR.PATCH, e.g. 1.27.3")),
        }
    }

    /// How many minor versions `self` is ahead of `other` (negative when behind); versions of
    /// different majors are treated as far apart.
    pub fn minors_ahead_of(&self, other: &KubeVersion) -> i64 {
        if self.major != other.major {
            return if self.major > other.major {
                i64::MAX / 2
            } else {
                i64::MIN / 2
            };
        }
        self.minor as i64 - other.minor as i64
    }

    /// `MAJOR.MINOR`.
    pub fn major_minor(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    /// Whether the two versions differ only in the patch number.
    pub fn same_minor(&self, other: &KubeVersion) -> bool {
        self.major == other.major && self.minor == other.minor
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A machine image version: dotted decimal numbers, compared numerically with missing trailing
/// parts read as zero (`1631.0` equals `1631.0.0`). Keeps the text it was parsed from.
#[derive(Debug, Clone)]
pub struct ImageVersion {
    text: String,
    parts: Vec<u64>,
}

impl ImageVersion {
    /// Parses one to four dot-separated decimal numbers.
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let parts = parse_numbers(text).map_err(|why| VersionError {
            kind: "machine image",
            text: text.to_owned(),
            why,
        })?;
        if parts.len() > 4 {
            return Err(VersionError {
                kind: "machine image",
                text: text.to_owned(),
                why: "at most four dot-separated numbers are allowed",
            });
        }
        Ok(Self {
            text: text.to_owned(),
            parts,
        })
    }

    /// The text it was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The numbers without trailing zeros, the canonical form used for hashing.
    pub fn canonical(&self) -> String {
        let mut parts = self.parts.clone();
        while parts.len() > 1 && parts.last() == Some(&0) {
            parts.pop();
        }
        parts
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The `index`th number (0 = major, 1 = minor, 2 = patch), zero where absent.
    pub fn part(&self, index: usize) -> u64 {
        self.parts.get(index).copied().unwrap_or(0)
    }
}

impl PartialEq for ImageVersion {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ImageVersion {}

impl PartialOrd for ImageVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ImageVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        let len = self.parts.len().max(other.parts.len());
        (0..len)
            .map(|i| self.part(i).cmp(&other.part(i)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

impl fmt::Display for ImageVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn parse_numbers(text: &str) -> Result<Vec<u64>, &'static str> {
    if text.is_empty() {
        return Err("it is empty");
    }
    text.split('.')
        .map(|part| {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                Err("each part must be a decimal number")
            } else {
                part.parse::<u64>().map_err(|_| "a part is too large")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_versions_parse_and_compare() {
        let v = KubeVersion::parse("1.27.4").unwrap();
        assert_eq!(
            v,
            KubeVersion {
                major: 1,
                minor: 27,
                patch: 4
            }
        );
        assert!(KubeVersion::parse("1.26.8").unwrap() < v);
        assert_eq!(v.minors_ahead_of(&KubeVersion::parse("1.25.0").unwrap()), 2);
        assert_eq!(v.major_minor(), "1.27");
        assert!(v.same_minor(&KubeVersion::parse("1.27.0").unwrap()));
        for bad in ["", "1.27", "v1.27.3", "1.27.3-rc.1", "1..3", "1.27.3.4"] {
            assert!(KubeVersion::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn image_versions_compare_numerically_with_zero_padding() {
        let v = |s| ImageVersion::parse(s).unwrap();
        assert_eq!(v("1631.0"), v("1631.0.0"));
        assert!(v("1443.8.0") > v("1312.3.0"));
        assert!(v("1443.10.0") > v("1443.9.0"));
        assert!(v("15.3.20221118") > v("15.3.20220818"));
        assert_eq!(v("1631.0.0").canonical(), "1631");
        assert_eq!(v("1631.0").as_str(), "1631.0");
        assert!(ImageVersion::parse("1.2.3.4.5").is_err());
        assert!(ImageVersion::parse("1.x").is_err());
    }

    #[test]
    fn version_errors_name_the_text() {
        let err = KubeVersion::parse("1.27").unwrap_err().to_string();
        assert!(
            err.contains("\"1.27\"") && err.contains("MAJOR.MINOR.PATCH"),
            "{err}"
        );
    }
}
