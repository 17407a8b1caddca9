//! What a run leaves running when it is killed outright (SIGKILL, a crash): none of its drop
//! guards run then, so two mechanisms cover its children.
//!
//! 1. [`dying_with_parent`] starts a program through `setpriv --pdeathsig KILL` (util-linux; no
//!    unsafe `pre_exec` needed): the kernel SIGKILLs the child when the *thread* that started it
//!    ends. Start such children from a thread that lives as long as they should (a tokio worker
//!    or the thread running the runtime), never from a blocking-pool thread, which ends after an
//!    idle period.
//! 2. [`Record`]: each process keeps one file in a directory ([`default_dir`]) named after itself
//!    (pid and start time) that lists the children it started (pid and start time), and whether
//!    a child leads a process group of its own. [`sweep`], at the next start, kills the listed
//!    children of every record whose owner is gone and removes the record. A child whose start
//!    time differs from the recorded one is another process that got the same pid, and is left
//!    alone; so is a record whose owner still runs. A group leader's whole group is killed: while
//!    the leader runs (its start time matches), and after it is gone while no process has its pid
//!    (the kernel hands out no pid still in use as a group's id, so what is left of that group
//!    is the leader's). A pid reused by another process leaves the group alone.
//!
//! 3. [`owned_tempdir`]: a temporary directory (kubeconfigs, a control plane's certificates and
//!    etcd data, QEMU node disks) whose [`OWNER_FILE`] names the process that made it;
//!    [`sweep_dirs`] removes those whose owner is gone. Directories without an owner file are
//!    left alone.
//!
//! [`start_time`], [`owner_line`] and [`owner_gone`] are the owner test all three share.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use rackproof_std::LockExt;
use rustix::process::{Pid, Signal};

/// A process's start time in clock ticks since boot (field 22 of `/proc/PID/stat`).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command (field 2) is in parentheses and may hold spaces; field 3 follows its `) `.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    rest.split(' ').nth(22 - 3)?.parse().ok()
}

/// This process as an owner: `PID STARTTIME\n`; `None` without a readable start time.
pub fn owner_line() -> Option<String> {
    let pid = std::process::id();
    start_time(pid).map(|start| format!("{pid} {start}\n"))
}

/// Whether the owner `PID STARTTIME` names is gone (no such process, or another one with that
/// pid); `false` when the text is not an owner line.
pub fn owner_gone(text: &str) -> bool {
    let mut parts = text.split_whitespace();
    match (
        parts.next().and_then(|p| p.parse::<u32>().ok()),
        parts.next().and_then(|s| s.parse::<u64>().ok()),
    ) {
        (Some(pid), Some(start)) => start_time(pid) != Some(start),
        _ => false,
    }
}

/// `program` started through `setpriv --pdeathsig KILL --`, so the kernel kills it when the
/// thread that spawned it ends (see the module docs). The child keeps the pid `setpriv` had.
pub fn dying_with_parent(program: impl AsRef<OsStr>) -> std::process::Command {
    let mut command = std::process::Command::new("setpriv");
    command.args(["--pdeathsig", "KILL", "--"]).arg(program);
    command
}

/// The directory of this machine's records: `$TMPDIR/rackproof-owned`.
pub fn default_dir() -> PathBuf {
    std::env::temp_dir().join("rackproof-owned")
}

const SUFFIX: &str = ".children";

/// The word after a child's pid and start time when it leads a process group of its own.
const GROUP: &str = "group";

/// A recorded child: its start time, and whether it leads a process group of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Child {
    start: u64,
    leads_group: bool,
}

/// One process's record of the children it started.
#[derive(Debug)]
pub struct Record {
    path: PathBuf,
    children: Mutex<BTreeMap<u32, Child>>,
}

impl Record {
    /// The record of this process in `dir` (created if missing), empty.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        let pid = std::process::id();
        let start = start_time(pid)
            .ok_or_else(|| std::io::Error::other("this process's start time is unreadable"))?;
        std::fs::create_dir_all(dir)?;
        let record = Self {
            path: dir.join(format!("{pid}-{start}{SUFFIX}")),
            children: Mutex::default(),
        };
        record.write(&BTreeMap::new())?;
        Ok(record)
    }

    /// Adds child `pid` (with its start time); a child already gone is not recorded.
    pub fn add(&self, pid: u32) {
        self.insert(pid, false);
    }

    /// Adds child `pid`, the leader of a process group of its own (`setpgid(0, 0)`): a sweep
    /// kills its whole group, also after the leader has gone.
    pub fn add_group(&self, pid: u32) {
        self.insert(pid, true);
    }

    fn insert(&self, pid: u32, leads_group: bool) {
        let Some(start) = start_time(pid) else {
            return;
        };
        let mut children = self.lock();
        children.insert(pid, Child { start, leads_group });
        self.write_logged(&children);
    }

    /// Removes child `pid` (it was stopped and reaped).
    pub fn remove(&self, pid: u32) {
        let mut children = self.lock();
        if children.remove(&pid).is_some() {
            self.write_logged(&children);
        }
    }

    /// The record's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, Child>> {
        self.children.locked()
    }

    fn write_logged(&self, children: &BTreeMap<u32, Child>) {
        if let Err(error) = self.write(children) {
            tracing::warn!(path = %self.path.display(), %error, "failed to update the record of child processes");
        }
    }

    fn write(&self, children: &BTreeMap<u32, Child>) -> std::io::Result<()> {
        let text: String = children
            .iter()
            .map(|(pid, child)| match child.leads_group {
                true => format!("{pid} {} {GROUP}\n", child.start),
                false => format!("{pid} {}\n", child.start),
            })
            .collect();
        let temp = self.path.with_extension("tmp");
        std::fs::write(&temp, text)?;
        std::fs::rename(&temp, &self.path)
    }
}

/// This process's record in [`default_dir`], opened on first use; `None` (logged once) when it
/// cannot be written.
pub fn record() -> Option<&'static Record> {
    static RECORD: OnceLock<Option<Record>> = OnceLock::new();
    RECORD
        .get_or_init(|| match Record::open(&default_dir()) {
            Ok(record) => Some(record),
            Err(error) => {
                tracing::warn!(dir = %default_dir().display(), %error, "cannot record child processes; a killed run's children will not be swept");
                None
            }
        })
        .as_ref()
}

/// The file in an [`owned_tempdir`] that names its owner (`PID STARTTIME`).
pub const OWNER_FILE: &str = "owner";

/// A temporary directory in `$TMPDIR` named `<prefix>` and six random characters, mode 0700,
/// removed when dropped, whose [`OWNER_FILE`] names this process, so that [`sweep_dirs`] removes
/// it should this process be killed outright. Without a readable start time of its own the
/// directory names no owner and is never swept (a wrong owner line would get a live directory
/// removed).
pub fn owned_tempdir(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix(prefix).tempdir()?;
    if let Some(line) = owner_line() {
        std::fs::write(dir.path().join(OWNER_FILE), line)?;
    }
    Ok(dir)
}

/// Marks an existing directory `dir` as this process's, as [`owned_tempdir`] does.
pub fn own_dir(dir: &Path) -> std::io::Result<()> {
    match owner_line() {
        Some(line) => std::fs::write(dir.join(OWNER_FILE), line),
        None => Ok(()),
    }
}

/// Removes the directories in `parent` whose names start with `prefix` and whose
/// [`OWNER_FILE`] names a process that is gone; returns how many.
pub fn sweep_dirs(parent: &Path, prefix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let candidate = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(prefix))
            && entry.file_type().is_ok_and(|t| t.is_dir());
        if candidate
            && std::fs::read_to_string(path.join(OWNER_FILE)).is_ok_and(|text| owner_gone(&text))
            && std::fs::remove_dir_all(&path).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// What [`sweep`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Records of gone owners removed.
    pub records: usize,
    /// Children of theirs killed.
    pub killed: usize,
}

/// Kills the recorded children of every record in `dir` whose owner is gone (only those whose
/// start time still matches) and removes those records. Records of live owners are left alone.
pub fn sweep(dir: &Path) -> Swept {
    let mut swept = Swept::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return swept;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name.to_str().and_then(|n| n.strip_suffix(SUFFIX)) else {
            continue;
        };
        if !owner_gone(&owner.replacen('-', " ", 1)) {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            let (Some(pid), Some(start)) = (
                parts.next().and_then(|p| p.parse::<u32>().ok()),
                parts.next().and_then(|s| s.parse::<u64>().ok()),
            ) else {
                continue;
            };
            let leads_group = parts.next() == Some(GROUP);
            if kill_child(pid, Child { start, leads_group }) {
                swept.killed += 1;
            }
        }
        if std::fs::remove_file(entry.path()).is_ok() {
            swept.records += 1;
        }
    }
    swept
}

/// SIGKILLs a dead owner's child `pid` as recorded: the process, or its whole group; whether a
/// signal was delivered.
fn kill_child(pid: u32, child: Child) -> bool {
    let Some(target) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    let now = start_time(pid);
    match (child.leads_group, now == Some(child.start)) {
        (false, true) => rustix::process::kill_process(target, Signal::KILL).is_ok(),
        (false, false) => false,
        // The leader runs, or no process has its pid: what carries its group id is its group.
        (true, true) => rustix::process::kill_process_group(target, Signal::KILL).is_ok(),
        (true, false) if now.is_none() => {
            rustix::process::kill_process_group(target, Signal::KILL).is_ok()
        }
        // The pid was reused by another process, which may lead a group of that id.
        (true, false) => false,
    }
}

/// Whether process `pid` ends (or has already ended) within `limit`: waits for its pidfd to
/// become readable, the kernel's event for a process's end. A pid that names no process has ended.
pub fn ends_within(pid: u32, limit: Duration) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return true;
    };
    let Ok(fd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) else {
        return true;
    };
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    let limit = rustix::event::Timespec {
        tv_sec: i64::try_from(limit.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(limit.subsec_nanos()),
    };
    rustix::event::poll(&mut fds, Some(&limit)).is_ok_and(|n| n == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead as _;
    use std::process::{Command, Stdio};

    fn kill(pid: u32) {
        let _ = rustix::process::kill_process(
            Pid::from_raw(i32::try_from(pid).unwrap()).unwrap(),
            Signal::KILL,
        );
    }

    /// Writes a record as process `owner` would have: its name, its children.
    fn write_record(dir: &Path, owner: (u32, u64), children: &[(u32, u64)]) -> PathBuf {
        let path = dir.join(format!("{}-{}{SUFFIX}", owner.0, owner.1));
        let text: String = children.iter().map(|(p, s)| format!("{p} {s}\n")).collect();
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_killed_owners_process_tree_is_swept_and_a_live_owners_is_not() {
        let dir = tempfile::tempdir().unwrap();
        // The owner: a shell that starts a child (a stand-in for QEMU or etcd), prints its pid,
        // then waits; it is SIGKILLed, as a harness killed outright would be.
        let mut owner = Command::new("sh")
            .args(["-c", "sleep 300 >/dev/null & echo $!; wait"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(owner.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let child: u32 = line.trim().parse().unwrap();
        let owner_start = start_time(owner.id()).unwrap();
        let child_start = start_time(child).unwrap();
        let dead = write_record(
            dir.path(),
            (owner.id(), owner_start),
            &[(child, child_start)],
        );
        // A live owner's record (this test process) naming a live process: left alone.
        let mut other = Command::new("sleep").arg("300").spawn().unwrap();
        let me = (std::process::id(), start_time(std::process::id()).unwrap());
        let live = write_record(
            dir.path(),
            me,
            &[(other.id(), start_time(other.id()).unwrap())],
        );
        owner.kill().unwrap();
        owner.wait().unwrap();
        assert!(
            !ends_quickly(child),
            "the child runs on after its owner was killed"
        );

        let swept = sweep(dir.path());
        let child_ended = ends_within(child, Duration::from_secs(10));
        let other_ran = start_time(other.id()).is_some();
        kill(child);
        other.kill().unwrap();
        other.wait().unwrap();
        assert!(child_ended, "the dead owner's child {child} was not killed");
        assert!(other_ran, "a live owner's child was killed");
        assert_eq!(
            swept,
            Swept {
                records: 1,
                killed: 1
            }
        );
        assert!(!dead.exists() && live.exists());
    }

    /// A shell leading a process group of its own that starts `sleep 300` in its group, prints
    /// its pid, and exits when its stdin closes: (leader, member pid).
    fn group_with_member() -> (std::process::Child, u32) {
        use std::os::unix::process::CommandExt as _;
        let mut leader = Command::new("sh")
            .args(["-c", "sleep 300 >/dev/null & echo $!; read _"])
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(leader.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        (leader, line.trim().parse().unwrap())
    }

    #[test]
    fn a_dead_owners_group_is_swept_whole_while_its_leader_runs_and_after_it_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let (mut running, running_member) = group_with_member();
        let (mut gone, gone_member) = group_with_member();
        let records: Vec<(u32, u64)> = [running.id(), gone.id()]
            .into_iter()
            .map(|pid| (pid, start_time(pid).unwrap()))
            .collect();
        // The second leader exits and is reaped: no process has its pid; its member runs on.
        drop(gone.stdin.take());
        gone.wait().unwrap();
        let path = dir.path().join(format!("{}-1{SUFFIX}", u32::MAX));
        let text: String = records
            .iter()
            .map(|(pid, start)| format!("{pid} {start} {GROUP}\n"))
            .collect();
        std::fs::write(&path, text).unwrap();

        let swept = sweep(dir.path());
        let ended =
            [running_member, gone_member].map(|pid| ends_within(pid, Duration::from_secs(10)));
        let leader_ended = ends_within(running.id(), Duration::from_secs(10));
        for pid in [running_member, gone_member, running.id()] {
            kill(pid);
        }
        let _ = running.wait();
        assert_eq!(
            ended,
            [true, true],
            "the members (of a running leader, of a gone one) outlived the sweep"
        );
        assert!(leader_ended, "the running leader outlived the sweep");
        assert_eq!(
            swept,
            Swept {
                records: 1,
                killed: 2
            }
        );
    }

    #[test]
    fn a_recorded_group_whose_leaders_pid_names_another_process_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (mut bystander, member) = group_with_member();
        let real = start_time(bystander.id()).unwrap();
        let path = dir.path().join(format!("{}-1{SUFFIX}", u32::MAX));
        std::fs::write(&path, format!("{} {} {GROUP}\n", bystander.id(), real + 1)).unwrap();
        let swept = sweep(dir.path());
        let survived = start_time(member).is_some() && start_time(bystander.id()) == Some(real);
        kill(member);
        bystander.kill().unwrap();
        bystander.wait().unwrap();
        assert!(
            survived,
            "a group of another process with the recorded pid was killed"
        );
        assert_eq!(
            swept,
            Swept {
                records: 1,
                killed: 0
            }
        );
    }

    #[test]
    fn a_group_leader_is_recorded_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let record = Record::open(dir.path()).unwrap();
        let (mut leader, member) = group_with_member();
        let start = start_time(leader.id()).unwrap();
        record.add_group(leader.id());
        let text = std::fs::read_to_string(record.path()).unwrap();
        kill(member);
        leader.kill().unwrap();
        leader.wait().unwrap();
        assert_eq!(text, format!("{} {start} {GROUP}\n", leader.id()));
    }

    #[test]
    fn directories_of_gone_owners_are_swept_and_others_kept() {
        let temp = tempfile::tempdir().unwrap();
        let dir = |name: &str, owner: Option<&str>| {
            let path = temp.path().join(name);
            std::fs::create_dir(&path).unwrap();
            std::fs::write(path.join("token"), "secret").unwrap();
            if let Some(owner) = owner {
                std::fs::write(path.join(OWNER_FILE), owner).unwrap();
            }
        };
        let me = std::process::id();
        dir("rackproof-live-1", Some(&owner_line().unwrap()));
        dir("rackproof-reused-pid-1", Some(&format!("{me} 1\n")));
        dir("rackproof-no-such-pid-1", Some("4294967295 5\n"));
        dir("rackproof-unowned-1", None);
        dir("rackproof-garbled-1", Some("not an owner"));
        dir("someone-else-1", Some("4294967295 5\n"));
        assert_eq!(sweep_dirs(temp.path(), "rackproof-"), 2);
        let mut left: Vec<String> = std::fs::read_dir(temp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "rackproof-garbled-1",
                "rackproof-live-1",
                "rackproof-unowned-1",
                "someone-else-1"
            ]
        );
    }

    #[test]
    fn an_owned_tempdir_names_this_process() {
        let dir = owned_tempdir("rackproof-test-").unwrap();
        let owner = std::fs::read_to_string(dir.path().join(OWNER_FILE)).unwrap();
        assert_eq!(Some(owner), owner_line());
        assert!(!owner_gone(&owner_line().unwrap()));
    }

    /// Whether `pid` has already ended (no waiting).
    fn ends_quickly(pid: u32) -> bool {
        start_time(pid).is_none()
    }

    #[test]
    fn a_recorded_pid_that_now_names_another_process_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut bystander = Command::new("sleep").arg("300").spawn().unwrap();
        let real = start_time(bystander.id()).unwrap();
        // The owner is gone (no process has pid u32::MAX); the recorded start time is not the
        // bystander's, as if the pid had been reused.
        write_record(dir.path(), (u32::MAX, 1), &[(bystander.id(), real + 1)]);
        let swept = sweep(dir.path());
        let survived = start_time(bystander.id()) == Some(real);
        bystander.kill().unwrap();
        bystander.wait().unwrap();
        assert!(survived);
        assert_eq!(
            swept,
            Swept {
                records: 1,
                killed: 0
            }
        );
    }

    #[test]
    fn a_record_follows_its_children() {
        let dir = tempfile::tempdir().unwrap();
        let record = Record::open(dir.path()).unwrap();
        let mut child = Command::new("sleep").arg("300").spawn().unwrap();
        let start = start_time(child.id()).unwrap();
        record.add(child.id());
        let text = std::fs::read_to_string(record.path()).unwrap();
        record.remove(child.id());
        let after = std::fs::read_to_string(record.path()).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(text, format!("{} {start}\n", child.id()));
        assert_eq!(after, "");
        assert_eq!(
            sweep(dir.path()),
            Swept::default(),
            "its owner (this process) runs"
        );
    }

    #[test]
    fn a_child_dying_with_its_parent_outlives_an_idle_spawner_thread_only_while_it_runs() {
        // The spawning thread stays alive (idle) while the child runs; the child only dies when
        // that thread ends.
        let (pid_sender, pid_receiver) = std::sync::mpsc::channel();
        let (end_sender, end_receiver) = std::sync::mpsc::channel::<()>();
        let spawner = std::thread::spawn(move || {
            let child = dying_with_parent("sleep").arg("300").spawn().unwrap();
            pid_sender.send(child.id()).unwrap();
            // Idle until told to end.
            let _ = end_receiver.recv();
            drop(child);
        });
        let pid = pid_receiver.recv().unwrap();
        let idle_survived = !ends_within(pid, Duration::from_secs(1));
        end_sender.send(()).unwrap();
        spawner.join().unwrap();
        let ended = ends_within(pid, Duration::from_secs(10));
        if !ended {
            kill(pid);
        }
        assert!(idle_survived, "the child died while its spawner idled");
        assert!(ended, "the child outlived the thread that started it");
    }
}
