//! Scans of `/proc` for the processes a test must not leave behind (QEMU guests, control-plane
//! components, the children of a killed step).

use std::fmt;

/// A running process.
#[derive(Clone, PartialEq, Eq)]
pub struct Process {
    /// Its PID.
    pub pid: u32,
    /// Its command line, the arguments joined by spaces.
    pub command_line: String,
}

impl fmt::Debug for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} `{}`", self.pid, self.command_line)
    }
}

/// The processes other than this one whose command line contains `needle` (a directory the test
/// owns, `guest=NAME`, an argument only the test uses). Zombies have no command line: they have
/// exited and are not listed.
pub fn processes_mentioning(needle: &str) -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        panic!("/proc is not readable; the process scans need Linux's procfs mounted at /proc");
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let command_line = String::from_utf8_lossy(&cmdline)
            .trim_end_matches('\0')
            .replace('\0', " ");
        if command_line.contains(needle) {
            found.push(Process { pid, command_line });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};

    use super::*;

    #[test]
    fn a_child_is_found_by_an_argument_and_not_after_it_is_reaped() {
        let needle = "2718.28182";
        let mut child = Command::new("sleep")
            .arg(needle)
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep starts (coreutils)");
        // Between fork and exec the child's command line is still this test's: look until the
        // exec shows (bounded; `sleep` execs at once).
        let found = (0..1_000)
            .find_map(|_| {
                let found = processes_mentioning(needle);
                if found.is_empty() {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    None
                } else {
                    Some(found)
                }
            })
            .unwrap_or_default();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].pid, child.id());
        assert_eq!(found[0].command_line, format!("sleep {needle}"));
        assert!(processes_mentioning(needle).is_empty());
    }

    #[test]
    fn this_process_is_never_listed() {
        let own = std::fs::read(format!("/proc/{}/cmdline", std::process::id())).unwrap();
        let first_argument = String::from_utf8_lossy(&own)
            .split('\0')
            .next()
            .unwrap()
            .to_owned();
        assert!(
            processes_mentioning(&first_argument)
                .iter()
                .all(|p| p.pid != std::process::id())
        );
    }
}
