//! A child process that leads a process group of its own, so one signal reaches everything it
//! started. The group is signalled only while its leader is un-reaped: once the leader has been
//! waited for, its id may belong to another process (and so another group), so nothing signals
//! it again. When the leader exits, what is left of its group is killed before the leader is
//! reaped, so no member outlives it unnoticed. While it runs, the leader is listed in the
//! process's record of children, which the next run sweeps should this one be killed outright.

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus};
use std::sync::{Mutex, MutexGuard};

use rackproof_std::LockExt;
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

/// A running group leader. Dropping it kills the group and reaps the leader.
#[derive(Debug)]
pub(crate) struct GroupLeader {
    /// `None` once the leader was reaped.
    child: Mutex<Option<Child>>,
}

impl GroupLeader {
    /// Starts `command` as the leader of a new process group.
    pub(crate) fn spawn(mut command: Command) -> std::io::Result<Self> {
        command.process_group(0);
        let child = command.spawn()?;
        if let Some(record) = rackproof_reap::record() {
            record.add_group(child.id());
        }
        Ok(Self {
            child: Mutex::new(Some(child)),
        })
    }

    /// The leader's pid (also its group's id), while it is un-reaped.
    pub(crate) fn id(&self) -> Option<u32> {
        self.lock().as_ref().map(Child::id)
    }

    /// SIGKILLs the whole group if the leader is un-reaped; whether it did.
    pub(crate) fn kill_group(&self) -> bool {
        let child = self.lock();
        child.as_ref().is_some_and(signal_group)
    }

    /// If the leader has exited: kills what is left of its group, reaps the leader and returns
    /// how it ended. `Ok(None)` while it runs, and after it was reaped.
    pub(crate) fn try_finish(&self) -> std::io::Result<Option<ExitStatus>> {
        let mut slot = self.lock();
        let Some(child) = slot.as_mut() else {
            return Ok(None);
        };
        let pid = Pid::from_child(child);
        // WNOWAIT: the leader stays a zombie, so its id (and group id) stays ours until we reap.
        let exited = rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
        )?;
        if exited.is_none() {
            return Ok(None);
        }
        signal_group(child);
        let status = child.wait()?;
        forget(child);
        *slot = None;
        Ok(Some(status))
    }

    /// Kills the group and reaps the leader; how the leader ended, if it was still ours.
    pub(crate) fn kill(&self) -> Option<ExitStatus> {
        let mut slot = self.lock();
        let mut child = slot.take()?;
        signal_group(&child);
        let status = child.wait().ok();
        forget(&child);
        status
    }

    fn lock(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.locked()
    }
}

impl Drop for GroupLeader {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Takes a reaped leader off the process's record of children (`rackproof_reap`).
fn forget(child: &Child) {
    if let Some(record) = rackproof_reap::record() {
        record.remove(child.id());
    }
}

/// SIGKILL to the group `child` leads; the caller holds the leader un-reaped.
fn signal_group(child: &Child) -> bool {
    rustix::process::kill_process_group(Pid::from_child(child), Signal::KILL).is_ok()
}

#[cfg(test)]
mod tests {
    /// Whether `pid` ends (or has ended) within 10 s.
    fn ends(pid: i32) -> bool {
        rackproof_reap::ends_within(pid.unsigned_abs(), std::time::Duration::from_secs(10))
    }

    use super::*;

    fn shell(script: &str) -> Command {
        let mut command = Command::new("sh");
        command
            .args(["-c", script])
            .stdout(std::process::Stdio::piped());
        command
    }

    /// The first line the leader prints (a pid).
    fn first_line(leader: &GroupLeader) -> i32 {
        use std::io::BufRead as _;
        let mut slot = leader.lock();
        let out = slot.as_mut().unwrap().stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(out).read_line(&mut line).unwrap();
        line.trim().parse().unwrap()
    }

    #[test]
    fn a_leader_that_exits_takes_its_group_with_it_and_is_never_signalled_after_reaping() {
        // The leader starts a member of its group, prints its pid, and exits.
        let leader =
            GroupLeader::spawn(shell("sleep 300 >/dev/null & echo $!; exec 1>&-; exit 7")).unwrap();
        let member = first_line(&leader);
        let pid = Pid::from_raw(i32::try_from(leader.id().unwrap()).unwrap()).unwrap();
        // Block until the leader has exited, leaving it un-reaped.
        rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        )
        .unwrap();
        let status = leader.try_finish().unwrap().unwrap();
        let member_survived = !ends(member);
        if member_survived {
            let _ = rustix::process::kill_process(Pid::from_raw(member).unwrap(), Signal::KILL);
        }
        assert_eq!(status.code(), Some(7));
        assert!(!member_survived, "the member {member} outlived its leader");
        assert_eq!(leader.id(), None);
        assert!(
            !leader.kill_group(),
            "a reaped leader's group id may be another's: it is not signalled"
        );
    }

    #[test]
    fn dropping_a_running_leader_kills_its_whole_group() {
        let leader = GroupLeader::spawn(shell("sleep 300 >/dev/null & echo $!; wait")).unwrap();
        let member = first_line(&leader);
        let pid = i32::try_from(leader.id().unwrap()).unwrap();
        drop(leader);
        let (leader_ran, member_ran) = (!ends(pid), !ends(member));
        for pid in [pid, member] {
            let _ = rustix::process::kill_process(Pid::from_raw(pid).unwrap(), Signal::KILL);
        }
        assert!(!leader_ran && !member_ran, "{leader_ran} {member_ran}");
    }
}
