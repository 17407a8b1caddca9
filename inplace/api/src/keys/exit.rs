//! Exit codes of the OS-update command (`status.inPlaceUpdates.osUpdate.command` of the OSC).
//!
//! | code | meaning | agent's reaction |
//! |---|---|---|
//! | 0 | success | reboot into the new version |
//! | 1 | invalid arguments | non-retriable: label the node `failed` |
//! | 2 | system failure | non-retriable: label the node `failed` |
//! | 3 | network problem | retriable: try again after a delay, until the retry budget is spent |
//! | other | unspecified | non-retriable |

/// What the OS-update command's exit code means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OsUpdateExit {
    /// Exit code 0.
    Success,
    /// Exit code 1: the arguments were invalid.
    InvalidArguments,
    /// Exit code 2: the system failed (disk full, image broken, ...).
    SystemFailure,
    /// Exit code 3: a network problem, e.g. the image could not be pulled.
    NetworkProblem,
    /// Any other exit code.
    Unspecified(i32),
}

impl OsUpdateExit {
    /// Interprets an exit code.
    pub fn from_code(code: i32) -> Self {
        match code {
            0 => Self::Success,
            1 => Self::InvalidArguments,
            2 => Self::SystemFailure,
            3 => Self::NetworkProblem,
            other => Self::Unspecified(other),
        }
    }

    /// The exit code.
    pub fn code(self) -> i32 {
        match self {
            Self::Success => 0,
            Self::InvalidArguments => 1,
            Self::SystemFailure => 2,
            Self::NetworkProblem => 3,
            Self::Unspecified(code) => code,
        }
    }

    /// Whether the command succeeded.
    pub fn is_success(self) -> bool {
        self == Self::Success
    }

    /// Whether trying again may help (only network problems).
    pub fn is_retriable(self) -> bool {
        self == Self::NetworkProblem
    }
}

impl std::fmt::Display for OsUpdateExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Success => write!(f, "success (exit code 0)"),
            Self::InvalidArguments => write!(f, "invalid arguments (exit code 1)"),
            Self::SystemFailure => write!(f, "system failure (exit code 2)"),
            Self::NetworkProblem => write!(f, "network problem (exit code 3)"),
            Self::Unspecified(code) => write!(f, "unspecified failure (exit code {code})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_map_to_gep_meanings() {
        assert_eq!(OsUpdateExit::from_code(0), OsUpdateExit::Success);
        assert_eq!(OsUpdateExit::from_code(1), OsUpdateExit::InvalidArguments);
        assert_eq!(OsUpdateExit::from_code(2), OsUpdateExit::SystemFailure);
        assert_eq!(OsUpdateExit::from_code(3), OsUpdateExit::NetworkProblem);
        assert_eq!(OsUpdateExit::from_code(42), OsUpdateExit::Unspecified(42));
        for code in [0, 1, 2, 3, 42, -1] {
            assert_eq!(OsUpdateExit::from_code(code).code(), code);
        }
    }

    #[test]
    fn only_network_problems_are_retriable() {
        assert!(OsUpdateExit::NetworkProblem.is_retriable());
        for exit in [
            OsUpdateExit::Success,
            OsUpdateExit::InvalidArguments,
            OsUpdateExit::SystemFailure,
            OsUpdateExit::Unspecified(9),
        ] {
            assert!(!exit.is_retriable(), "{exit} must not be retriable");
        }
        assert!(OsUpdateExit::Success.is_success());
        assert!(!OsUpdateExit::SystemFailure.is_success());
    }
}
