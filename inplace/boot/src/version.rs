//! Version ordering as systemd-boot 252 does it (`strverscmp_improved`): segments of digits or
//! letters, with `~` (pre-release, oldest), `-` (release separator), `^` (patch) and `.` prefixes.
//!
//! Used to order entries by `version` (when every entry has a `sort-key`) and by file name.

use std::cmp::Ordering;

fn is_version_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'~' | b'-' | b'^' | b'.')
}

/// Compares two optional version strings the way systemd-boot does; `Ordering::Greater` means `a`
/// is newer. A missing string sorts before any present one; an empty one compares bytewise.
pub fn compare_versions(a: Option<&str>, b: Option<&str>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) if a.is_empty() || b.is_empty() => a.cmp(b),
        (Some(a), Some(b)) => compare_present(a.as_bytes(), b.as_bytes()),
    }
}

/// Byte at `i`, or 0 past the end (the C code walks NUL-terminated strings).
fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

fn compare_present(a: &[u8], b: &[u8]) -> Ordering {
    let (mut i, mut j) = (0usize, 0usize);
    loop {
        while at(a, i) != 0 && !is_version_char(at(a, i)) {
            i += 1;
        }
        while at(b, j) != 0 && !is_version_char(at(b, j)) {
            j += 1;
        }
        // '~' marks a pre-release: older than anything else.
        if at(a, i) == b'~' || at(b, j) == b'~' {
            let r = (at(a, i) != b'~').cmp(&(at(b, j) != b'~'));
            if r != Ordering::Equal {
                return r;
            }
            i += 1;
            j += 1;
        }
        // One string ended: the longer one is newer.
        if at(a, i) == 0 || at(b, j) == 0 {
            return at(a, i).cmp(&at(b, j));
        }
        for prefix in [b'-', b'^', b'.'] {
            if at(a, i) == prefix || at(b, j) == prefix {
                let r = (at(a, i) != prefix).cmp(&(at(b, j) != prefix));
                if r != Ordering::Equal {
                    return r;
                }
                i += 1;
                j += 1;
            }
        }
        let (ii, jj);
        if at(a, i).is_ascii_digit() || at(b, j).is_ascii_digit() {
            while at(a, i) == b'0' {
                i += 1;
            }
            while at(b, j) == b'0' {
                j += 1;
            }
            let mut x = i;
            while at(a, x).is_ascii_digit() {
                x += 1;
            }
            let mut y = j;
            while at(b, y).is_ascii_digit() {
                y += 1;
            }
            let r = (x - i).cmp(&(y - j));
            if r != Ordering::Equal {
                return r;
            }
            let r = a[i..x].cmp(&b[j..y]);
            if r != Ordering::Equal {
                return r;
            }
            (ii, jj) = (x, y);
        } else {
            let mut x = i;
            while at(a, x).is_ascii_alphabetic() {
                x += 1;
            }
            let mut y = j;
            while at(b, y).is_ascii_alphabetic() {
                y += 1;
            }
            let n = (x - i).min(y - j);
            let r = a[i..i + n].cmp(&b[j..j + n]);
            if r != Ordering::Equal {
                return r;
            }
            let r = (x - i).cmp(&(y - j));
            if r != Ordering::Equal {
                return r;
            }
            (ii, jj) = (x, y);
        }
        i = ii;
        j = jj;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn newer(a: &str, b: &str) -> bool {
        compare_versions(Some(a), Some(b)) == Ordering::Greater
            && compare_versions(Some(b), Some(a)) == Ordering::Less
    }

    #[test]
    fn systemd_documented_order_holds() {
        // The order documented with strverscmp_improved, oldest first.
        let order = [
            "122.1",
            "123~rc1-1",
            "123",
            "123-a",
            "123-a.1",
            "123-1",
            "123-1.1",
            "123^post1",
            "123.a-1",
            "123.1-1",
            "123a-1",
            "124-1",
        ];
        for pair in order.windows(2) {
            assert!(
                newer(pair[1], pair[0]),
                "{} should be newer than {}",
                pair[1],
                pair[0]
            );
        }
    }

    #[test]
    fn numbers_compare_by_value_not_text() {
        assert!(newer("1.10.0", "1.9.3"));
        assert!(newer("os-10", "os-9"));
        assert_eq!(compare_versions(Some("007"), Some("7")), Ordering::Equal);
        assert_eq!(
            compare_versions(Some("123_a"), Some("123a")),
            Ordering::Equal
        );
    }

    #[test]
    fn missing_and_empty_strings() {
        assert_eq!(compare_versions(None, Some("1")), Ordering::Less);
        assert_eq!(compare_versions(Some("1"), None), Ordering::Greater);
        assert_eq!(compare_versions(None, None), Ordering::Equal);
        assert_eq!(compare_versions(Some(""), Some("1")), Ordering::Less);
    }
}
