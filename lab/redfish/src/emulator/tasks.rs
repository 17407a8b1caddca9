//! Task monitors for deferred actions.
//!
//! When a latency fault matches a `ComputerSystem.Reset`, the emulator:
//!
//! 1. creates a task in state `Running` and answers `202 Accepted` with `Location:` the task
//!    monitor (`/redfish/v1/TaskService/TaskMonitors/{id}`), `Retry-After`, and the Task body;
//! 2. after the delay (on the emulator's clock) performs the reset and records the outcome;
//! 3. answers `GET` on the monitor with `202` and the Task while running, then with the
//!    operation's own response: `204` on success, or the Redfish error the action produced.
//!
//! The Task resource itself lives at `/redfish/v1/TaskService/Tasks/{id}`.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::errors::RedfishFailure;

/// The state of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskState {
    Running,
    Completed,
    Exception,
}

impl TaskState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Running => "Running",
            Self::Completed => "Completed",
            Self::Exception => "Exception",
        }
    }
}

/// One task.
#[derive(Debug, Clone)]
pub(crate) struct Task {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) state: TaskState,
    pub(crate) start: Timestamp,
    pub(crate) end: Option<Timestamp>,
    pub(crate) failure: Option<RedfishFailure>,
}

/// Every task since the emulator started (a lab run creates few).
#[derive(Debug, Default)]
pub(crate) struct TaskStore {
    next_id: u64,
    tasks: BTreeMap<u64, Task>,
}

impl TaskStore {
    pub(crate) fn start(&mut self, name: String, now: Timestamp) -> Task {
        self.next_id += 1;
        let task = Task {
            id: self.next_id.to_string(),
            name,
            state: TaskState::Running,
            start: now,
            end: None,
            failure: None,
        };
        self.tasks.insert(self.next_id, task.clone());
        task
    }

    pub(crate) fn finish(&mut self, id: &str, outcome: Result<(), RedfishFailure>, now: Timestamp) {
        let Some(task) = id.parse().ok().and_then(|n: u64| self.tasks.get_mut(&n)) else {
            return;
        };
        task.end = Some(now);
        match outcome {
            Ok(()) => task.state = TaskState::Completed,
            Err(failure) => {
                task.state = TaskState::Exception;
                task.failure = Some(failure);
            }
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<Task> {
        id.parse()
            .ok()
            .and_then(|n: u64| self.tasks.get(&n))
            .cloned()
    }

    pub(crate) fn ids(&self) -> Vec<String> {
        self.tasks.values().map(|t| t.id.clone()).collect()
    }
}
