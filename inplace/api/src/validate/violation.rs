//! What validation reports: a list of [`Violation`]s, each naming the rule, the field, what is
//! wrong and how to fix it.

use std::fmt;

/// The rule a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// A version, quantity or duration does not parse.
    Malformed,
    /// `minimum` is negative or above `maximum`.
    PoolSize,
    /// `maxSurge` / `maxUnavailable` is neither a non-negative number nor a percentage.
    IntOrPercent,
    /// `maxSurge` and `maxUnavailable` are both zero: an update could never make progress.
    SurgeAndUnavailableZero,
    /// `maxEvictRetries` is negative.
    MaxEvictRetries,
    /// `machineInPlaceUpdateTimeout` / `disableHealthTimeout` set on a rolling pool.
    InPlaceOnlySetting,
    /// The image or Kubernetes version is not in the catalog.
    UnknownVersion,
    /// The image version does not support in-place updates (`inPlaceUpdates.supported`).
    InPlaceNotSupported,
    /// The pool's Kubernetes version is newer than the control plane's.
    AboveControlPlane,
    /// The pool's Kubernetes version is more than two minors below the control plane's.
    ControlPlaneSkew,
    /// A field that can't change for an in-place pool changed.
    ImmutableForInPlace,
    /// A switch between a rolling and an in-place strategy.
    StrategySwitch,
    /// An in-place pool skips a Kubernetes minor version.
    MinorVersionSkip,
    /// A version goes down.
    Downgrade,
    /// The pool's version override was removed while it is more than one minor below the control plane.
    VersionRemovalSkew,
    /// The current image version is below the target's `minVersionForUpdate`, or the target has none.
    MinVersionForUpdate,
    /// The target version is expired.
    Expired,
    /// A new update while one is in progress, without the force-in-place-update operation.
    UpdateInProgress,
    /// The maintenance time window does not parse, or is not 30 minutes to 6 hours long.
    MaintenanceWindow,
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// JSON path of the offending field, e.g. `spec.machine.image.name`.
    pub field: String,
    /// What is wrong.
    pub problem: String,
    /// How to fix it.
    pub fix: String,
}

impl Violation {
    /// A violation.
    pub fn new(
        rule: Rule,
        field: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            rule,
            field: field.to_owned(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}; {}", self.field, self.problem, self.fix)
    }
}

/// Every violation of one validation, in rule-check order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Violations(pub Vec<Violation>);

impl Violations {
    /// Whether some violation breaks `rule`.
    pub fn has(&self, rule: Rule) -> bool {
        self.0.iter().any(|v| v.rule == rule)
    }

    /// The violations of `rule`.
    pub fn of(&self, rule: Rule) -> impl Iterator<Item = &Violation> {
        self.0.iter().filter(move |v| v.rule == rule)
    }

    /// `Ok` when empty.
    pub fn into_result(self) -> Result<(), Violations> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the worker pool is invalid:")?;
        for violation in &self.0 {
            write!(f, "\n  - {violation}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Violations {}
