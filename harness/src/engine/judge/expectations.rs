//! Tracking a scenario's expectations over the run: each is pending until met or broken, and
//! settled when the run ends.

use std::time::Duration;

use crate::engine::judge::conditions::{Check, describe};
use crate::engine::judge::world::World;
use crate::scenario::Expectation;

/// How an expectation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pending,
    Met { at: Duration },
    Broken { at: Duration, why: String },
}

#[derive(Debug, Clone)]
enum Kind {
    Eventually {
        check: Check,
        within: Duration,
        not_before: Option<Duration>,
    },
    Never {
        check: Check,
    },
    Timed {
        from: Check,
        to: Check,
        at_least: Duration,
        at_most: Duration,
        from_at: Option<Duration>,
    },
}

/// One tracked expectation.
#[derive(Debug, Clone)]
pub struct Tracked {
    pub description: String,
    pub verdict: Verdict,
    kind: Kind,
}

/// All of a scenario's expectations.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    pub items: Vec<Tracked>,
}

impl Expectations {
    /// Compiles the scenario's expectations.
    pub fn new(expectations: &[Expectation]) -> Self {
        let items = expectations
            .iter()
            .map(|e| match e {
                Expectation::Eventually(e) => Tracked {
                    description: match e.not_before {
                        Some(not_before) => format!(
                            "between {not_before} and {}: {}",
                            e.within,
                            describe(&e.that)
                        ),
                        None => format!("within {}: {}", e.within, describe(&e.that)),
                    },
                    verdict: Verdict::Pending,
                    kind: Kind::Eventually {
                        check: Check::new(&e.that),
                        within: e.within.get(),
                        not_before: e.not_before.map(|s| s.get()),
                    },
                },
                Expectation::Never(c) => Tracked {
                    description: format!("never: {}", describe(c)),
                    verdict: Verdict::Pending,
                    kind: Kind::Never {
                        check: Check::new(c),
                    },
                },
                Expectation::Timed(t) => Tracked {
                    description: format!(
                        "{} between {} and {} after {}",
                        describe(&t.to),
                        t.at_least,
                        t.at_most,
                        describe(&t.from)
                    ),
                    verdict: Verdict::Pending,
                    kind: Kind::Timed {
                        from: Check::new(&t.from),
                        to: Check::new(&t.to),
                        at_least: t.at_least.get(),
                        at_most: t.at_most.get(),
                        from_at: None,
                    },
                },
            })
            .collect();
        Self { items }
    }

    /// Looks at the world as of `elapsed` since the start. Returns the descriptions of the
    /// expectations this observation broke.
    pub fn observe(&mut self, world: &World, elapsed: Duration) -> Vec<String> {
        let mut broken = Vec::new();
        for item in &mut self.items {
            if item.verdict != Verdict::Pending {
                continue;
            }
            match &mut item.kind {
                Kind::Eventually {
                    check,
                    within,
                    not_before,
                } => {
                    if elapsed > *within {
                        item.verdict = Verdict::Broken {
                            at: elapsed,
                            why: format!("not observed within {}", fmt(*within)),
                        };
                    } else if check.holds(world) {
                        item.verdict = match *not_before {
                            Some(not_before) if elapsed < not_before => Verdict::Broken {
                                at: elapsed,
                                why: format!("observed already, before {}", fmt(not_before)),
                            },
                            _ => Verdict::Met { at: elapsed },
                        };
                    }
                }
                Kind::Never { check } => {
                    if check.holds(world) {
                        item.verdict = Verdict::Broken {
                            at: elapsed,
                            why: "observed".to_owned(),
                        };
                    }
                }
                Kind::Timed {
                    from,
                    to,
                    at_least,
                    at_most,
                    from_at,
                } => {
                    if from_at.is_none() && from.holds(world) {
                        *from_at = Some(elapsed);
                    }
                    if let Some(start) = *from_at {
                        let since = elapsed.saturating_sub(start);
                        if to.holds(world) {
                            item.verdict = if since < *at_least {
                                Verdict::Broken {
                                    at: elapsed,
                                    why: format!("came after only {}", fmt(since)),
                                }
                            } else if since > *at_most {
                                Verdict::Broken {
                                    at: elapsed,
                                    why: format!("came after {}", fmt(since)),
                                }
                            } else {
                                Verdict::Met { at: elapsed }
                            };
                        } else if since > *at_most {
                            item.verdict = Verdict::Broken {
                                at: elapsed,
                                why: format!("not observed within {}", fmt(*at_most)),
                            };
                        }
                    }
                }
            }
            if let Verdict::Broken { why, .. } = &item.verdict {
                broken.push(format!("{}: {why}", item.description));
            }
        }
        broken
    }

    /// Settles what is still pending when the run ends at `elapsed`: a `never` that never
    /// happened is met; an `eventually` or `timed` still waiting is broken.
    pub fn finish(&mut self, elapsed: Duration) {
        for item in &mut self.items {
            if item.verdict != Verdict::Pending {
                continue;
            }
            item.verdict = match &item.kind {
                Kind::Never { .. } => Verdict::Met { at: elapsed },
                Kind::Eventually { .. } => Verdict::Broken {
                    at: elapsed,
                    why: "the run ended before it was observed".into(),
                },
                Kind::Timed { from_at: None, .. } => Verdict::Broken {
                    at: elapsed,
                    why: "its starting condition was never observed".into(),
                },
                Kind::Timed { .. } => Verdict::Broken {
                    at: elapsed,
                    why: "the run ended before it was observed".into(),
                },
            };
        }
    }

    /// Whether the longest `eventually`/`timed` limit still pending has not passed at `elapsed`.
    pub fn waiting(&self) -> bool {
        self.items
            .iter()
            .any(|i| i.verdict == Verdict::Pending && !matches!(i.kind, Kind::Never { .. }))
    }

    /// The expectations that did not hold.
    pub fn failures(&self) -> Vec<String> {
        self.items
            .iter()
            .filter_map(|i| match &i.verdict {
                Verdict::Broken { at, why } => {
                    Some(format!("at {}: {}: {why}", fmt(*at), i.description))
                }
                _ => None,
            })
            .collect()
    }
}

fn fmt(d: Duration) -> String {
    rackproof_clock::format_duration(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Condition, Eventually, Located, PoolVersion, Span};

    fn on_os(os: &str) -> World {
        let mut world = World::default();
        let mut pool = crate::engine::judge::world::PoolState::default();
        pool.view.os = Some(os.to_owned());
        world.pools.insert("workers".to_owned(), pool);
        world
    }

    fn moved_between(not_before: u64, within: u64) -> Expectations {
        Expectations::new(&[Expectation::Eventually(Eventually {
            that: Located::new(Condition::PoolVersion(PoolVersion {
                os: Some(Located::new("1.1.0".to_owned())),
                kubernetes: None,
            })),
            within: Span(Duration::from_secs(within)),
            not_before: Some(Span(Duration::from_secs(not_before))),
        })])
    }

    #[test]
    fn not_before_breaks_an_eventually_that_holds_too_early() {
        let mut early = moved_between(3600, 3660);
        early.observe(&on_os("1.0.0"), Duration::from_secs(10));
        let broken = early.observe(&on_os("1.1.0"), Duration::from_secs(3599));
        assert_eq!(
            broken,
            ["between 1h and 1h1m: the pool names os 1.1.0: observed already, before 1h"]
        );

        let mut in_time = moved_between(3600, 3660);
        in_time.observe(&on_os("1.0.0"), Duration::from_secs(3599));
        assert!(
            in_time
                .observe(&on_os("1.1.0"), Duration::from_secs(3600))
                .is_empty()
        );
        assert_eq!(
            in_time.items[0].verdict,
            Verdict::Met {
                at: Duration::from_secs(3600)
            }
        );
    }
}
