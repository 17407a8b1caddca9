//! The key/value line reader systemd-boot uses for `loader.conf` and entry files
//! (`line_get_key_value`): lines end at `\n` or `\r`, blanks and `#` comments are skipped, the key
//! ends at the first space or tab, and a value both starting and ending in `"` loses the quotes.

/// One `key value` line, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyValue<'a> {
    pub(crate) line: usize,
    pub(crate) key: &'a str,
    pub(crate) value: &'a str,
}

/// The key/value lines of `text`; lines with a key but no value are skipped, as the loader does.
pub(crate) fn key_values(text: &str) -> Vec<KeyValue<'_>> {
    let mut out = Vec::new();
    for (index, raw) in text.split(['\n', '\r']).enumerate() {
        let line = raw.trim_matches([' ', '\t']);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(split) = line.find([' ', '\t']) else {
            continue;
        };
        let key = &line[..split];
        let mut value = line[split..].trim_start_matches([' ', '\t']);
        if value.len() >= 2 && value.starts_with('"') && value.ends_with('"') {
            value = &value[1..value.len() - 1];
        } else if value == "\"" {
            // The C code strips the opening quote and the line's last character, the same quote.
            value = "";
        }
        out.push(KeyValue {
            line: index + 1,
            key,
            value,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_like_the_loader() {
        let text = "# comment\n  title   \"Rackproof OS\"  \r\nlonely\n\toptions a=1 b=2\n\n";
        let kv = key_values(text);
        assert_eq!(kv.len(), 2);
        assert_eq!(
            (kv[0].key, kv[0].value, kv[0].line),
            ("title", "Rackproof OS", 2)
        );
        assert_eq!((kv[1].key, kv[1].value), ("options", "a=1 b=2"));
    }
}
