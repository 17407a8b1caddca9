//! The POSIX shell snippets the copies run on the node, and the quoting that keeps paths literal.
//!
//! The snippets use only `sh`, `cat`, `wc`, `chmod`, `mv`, `rm` and `test`, which busybox
//! (dropbear node images) and coreutils (physical hosts) both provide.

/// Quotes `text` as one literal shell word: `'...'`, with `'` written as `'\''`.
pub(crate) fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Checks a remote path: non-empty, no NUL, no newline, not ending in `/`.
pub(crate) fn check_remote_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("remote path is empty".to_owned());
    }
    if path.contains('\0') || path.contains('\n') {
        return Err(format!("remote path {path:?} contains a NUL or newline"));
    }
    if path.ends_with('/') {
        return Err(format!(
            "remote path {path:?} names a directory, not a file"
        ));
    }
    Ok(())
}

/// The temporary file an upload to `path` writes first (same directory, so `mv` is a rename).
pub(crate) fn upload_temp_path(path: &str) -> String {
    format!("{path}.rackproof-upload")
}

/// Exit status the upload snippet uses when the received byte count is wrong.
pub(crate) const SHORT_UPLOAD_EXIT: u32 = 75;

/// The upload snippet: receive exactly `len` bytes on stdin into the temp file, set `mode`, rename
/// over `path`. On any failure (including fewer bytes than `len`, which is what a dropped
/// connection delivers: `cat` just sees end of input) it removes the temp file and leaves `path`
/// as it was.
pub(crate) fn upload_script(path: &str, len: u64, mode: u32) -> String {
    let tmp = quote(&upload_temp_path(path));
    let dst = quote(path);
    format!(
        "t={tmp}; umask 077; \
         if ! cat > \"$t\"; then rm -f \"$t\"; exit 1; fi; \
         n=$(wc -c < \"$t\"); \
         if [ $n -ne {len} ]; then rm -f \"$t\"; echo \"received $n of {len} bytes\" >&2; exit {SHORT_UPLOAD_EXIT}; fi; \
         chmod {mode:o} \"$t\" && mv -f \"$t\" {dst} || {{ rm -f \"$t\"; exit 1; }}"
    )
}

/// The download snippet: the file's bytes on stdout, or a message on stderr and a non-zero exit.
pub(crate) fn download_script(path: &str) -> String {
    let src = quote(path);
    format!("if [ -d {src} ]; then echo {src}: is a directory >&2; exit 1; fi; exec cat < {src}")
}

/// Shortens a command for error messages and logs.
pub(crate) fn describe_command(command: &str) -> String {
    const MAX: usize = 80;
    let single_line = command.replace('\n', " ");
    if single_line.chars().count() <= MAX {
        return format!("run {single_line:?}");
    }
    let short: String = single_line.chars().take(MAX).collect();
    format!("run {short:?}...")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_keeps_every_character_literal() {
        assert_eq!(quote("plain"), "'plain'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("$(rm -rf /) `x` \"y\""), "'$(rm -rf /) `x` \"y\"'");
    }

    #[test]
    fn remote_paths_are_checked() {
        assert!(check_remote_path("/var/log/messages").is_ok());
        assert!(check_remote_path("").is_err());
        assert!(check_remote_path("/tmp/a\nb").is_err());
        assert!(check_remote_path("/tmp/").is_err());
    }

    #[test]
    fn upload_script_checks_size_before_renaming() {
        let script = upload_script("/etc/it's", 42, 0o640);
        let check = script.find("-ne 42").unwrap();
        let rename = script.find("mv -f").unwrap();
        assert!(check < rename);
        assert!(script.contains("chmod 640"));
        assert!(script.contains("'/etc/it'\\''s.rackproof-upload'"));
    }

    #[test]
    fn long_commands_are_shortened() {
        let long = "x".repeat(200);
        assert!(describe_command(&long).ends_with("..."));
        assert_eq!(describe_command("uptime"), "run \"uptime\"");
    }
}
