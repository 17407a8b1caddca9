//! Glob matching of `default` patterns against entry ids, as systemd-boot 252's `efi_fnmatch`:
//! `*`, `?`, `[...]` sets with ranges, and `\` escapes; no negated sets; at most 32 nested `*`.

/// Whether `haystack` matches `pattern`. Both are expected case-folded already (systemd-boot
/// lowercases the pattern and the entry ids).
pub fn fnmatch(pattern: &str, haystack: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let h: Vec<char> = haystack.chars().collect();
    matches_at(&p, &h, 32)
}

fn matches_at(p: &[char], h: &[char], depth: u32) -> bool {
    if depth == 0 {
        return false;
    }
    let (mut pi, mut hi) = (0usize, 0usize);
    let pc = |i: usize| p.get(i).copied();
    let hc = |i: usize| h.get(i).copied();
    loop {
        match pc(pi) {
            None => return hc(hi).is_none(),
            Some('\\') => {
                pi += 1;
                match (pc(pi), hc(hi)) {
                    (Some(x), Some(y)) if x == y => {}
                    _ => return false,
                }
            }
            Some('?') => {
                if hc(hi).is_none() {
                    return false;
                }
            }
            Some('*') => {
                while pc(pi) == Some('*') {
                    pi += 1;
                }
                let rest = &p[pi..];
                for start in hi..h.len() {
                    if matches_at(rest, &h[start..], depth - 1) {
                        return true;
                    }
                }
                return rest.is_empty();
            }
            Some('[') => {
                let Some(c) = hc(hi) else { return false };
                let (mut first, mut can_range, mut matched) = (true, true, false);
                loop {
                    pi += 1;
                    let Some(x) = pc(pi) else { return false };
                    if x == '\\' {
                        pi += 1;
                        let Some(e) = pc(pi) else { return false };
                        matched |= e == c;
                        can_range = true;
                        first = false;
                        continue;
                    }
                    if x == ']' && !first {
                        break;
                    }
                    if x == '-' && can_range && !first && pc(pi + 1) != Some(']') {
                        let low = p[pi - 1];
                        pi += 1;
                        if pc(pi) == Some('\\') {
                            pi += 1;
                        }
                        let Some(high) = pc(pi) else { return false };
                        matched |= low <= c && c <= high;
                        can_range = false;
                        first = false;
                        continue;
                    }
                    matched |= x == c;
                    can_range = true;
                    first = false;
                }
                if !matched {
                    return false;
                }
            }
            Some(x) => {
                if hc(hi) != Some(x) {
                    return false;
                }
            }
        }
        pi += 1;
        hi += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::fnmatch;

    #[test]
    fn literals_and_wildcards() {
        assert!(fnmatch("os-1.conf", "os-1.conf"));
        assert!(!fnmatch("os-1.conf", "os-1+3.conf"));
        assert!(fnmatch("os-1*", "os-1+0-3.conf"));
        assert!(fnmatch("*", ""));
        assert!(fnmatch("os-?.conf", "os-2.conf"));
        assert!(!fnmatch("os-?.conf", "os-12.conf"));
        assert!(fnmatch("a*b*c", "aXXbYYc"));
        assert!(!fnmatch("a*b*c", "aXXbYY"));
    }

    #[test]
    fn sets_ranges_and_escapes() {
        assert!(fnmatch("os-[0-9].conf", "os-7.conf"));
        assert!(!fnmatch("os-[0-9].conf", "os-x.conf"));
        assert!(fnmatch("[]a]", "]"));
        assert!(fnmatch("[a-c-f]", "-"));
        assert!(fnmatch("[a-c-f]", "f"));
        assert!(!fnmatch("[a-c-f]", "e"));
        assert!(fnmatch("a\\*", "a*"));
        assert!(!fnmatch("a\\*", "ab"));
        assert!(!fnmatch("a\\", "a"));
        assert!(!fnmatch("[abc", "a"));
    }
}
