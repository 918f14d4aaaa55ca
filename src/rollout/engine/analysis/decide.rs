//! What to do about one wave's analysis now, pure: from what git says the
//! wave runs, how its tenants stand on that release, and the wave's run on
//! it (if any).

use crate::crd::{AnalysisPhase, AnalysisRun};

/// What the analysis task knows of one wave at one look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// The release gives the wave checks.
    pub has_checks: bool,
    /// Every tenant of the wave (at least one) is verified on the release,
    /// by a status computed for its current spec.
    pub all_verified: bool,
    /// When the last of them was verified (seconds).
    pub latest_verified: Option<i64>,
    pub run: Option<RunFacts>,
}

/// The wave's run on the release, as its current status says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunFacts {
    pub phase: AnalysisPhase,
    /// When it ended (seconds).
    pub finished_at: Option<i64>,
    pub auto_promote: bool,
    /// Its outcome's commit was made (or git already said so).
    pub acted: bool,
}

impl RunFacts {
    pub fn of(run: &AnalysisRun) -> RunFacts {
        let status = run.current_status();
        RunFacts {
            phase: run.phase(),
            finished_at: status
                .and_then(|s| s.finished_at.as_ref())
                .map(|t| t.0.as_second()),
            auto_promote: run.spec.auto_promote,
            acted: status.is_some_and(|s| s.action.is_some()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Todo {
    Nothing,
    /// Start the wave's run.
    Create,
    /// The run ended without passing and the wave was verified on the
    /// release again since (re-promoted, or fixed by a commit): delete it,
    /// so the next look starts a fresh one.
    Replace,
    /// Measure what is due, and end the run when its outcome is decided.
    Advance,
    /// Passed with `autoPromote`: promote the next wave.
    Promote,
    /// Failed: roll the wave back.
    RollBack,
}

pub fn next(f: &Facts) -> Todo {
    let Some(run) = f.run else {
        return if f.has_checks && f.all_verified {
            Todo::Create
        } else {
            Todo::Nothing
        };
    };
    let verified_since = |end: Option<i64>| {
        f.all_verified
            && f.has_checks
            && matches!((f.latest_verified, end), (Some(v), Some(e)) if v > e)
    };
    match run.phase {
        AnalysisPhase::Running => Todo::Advance,
        AnalysisPhase::Passed if run.auto_promote && !run.acted => Todo::Promote,
        AnalysisPhase::Passed => Todo::Nothing,
        AnalysisPhase::Failed if !run.acted => Todo::RollBack,
        AnalysisPhase::Failed | AnalysisPhase::Paused | AnalysisPhase::Aborted => {
            if verified_since(run.finished_at) {
                Todo::Replace
            } else {
                Todo::Nothing
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(phase: AnalysisPhase, finished: Option<i64>, auto: bool, acted: bool) -> RunFacts {
        RunFacts {
            phase,
            finished_at: finished,
            auto_promote: auto,
            acted,
        }
    }

    #[test]
    fn table() {
        use AnalysisPhase::*;
        let facts = |checks, verified, latest, r| Facts {
            has_checks: checks,
            all_verified: verified,
            latest_verified: latest,
            run: r,
        };
        let cases = [
            (
                "no checks",
                facts(false, true, Some(10), None),
                Todo::Nothing,
            ),
            (
                "not all verified yet",
                facts(true, false, None, None),
                Todo::Nothing,
            ),
            (
                "verified: start",
                facts(true, true, Some(10), None),
                Todo::Create,
            ),
            (
                "running",
                facts(true, true, Some(10), Some(run(Running, None, true, false))),
                Todo::Advance,
            ),
            (
                "running while a tenant re-rolls",
                facts(true, false, None, Some(run(Running, None, false, false))),
                Todo::Advance,
            ),
            (
                "passed, auto",
                facts(
                    true,
                    true,
                    Some(10),
                    Some(run(Passed, Some(20), true, false)),
                ),
                Todo::Promote,
            ),
            (
                "passed, auto, done",
                facts(
                    true,
                    true,
                    Some(10),
                    Some(run(Passed, Some(20), true, true)),
                ),
                Todo::Nothing,
            ),
            (
                "passed, by hand",
                facts(
                    true,
                    true,
                    Some(10),
                    Some(run(Passed, Some(20), false, false)),
                ),
                Todo::Nothing,
            ),
            (
                "passed, verified again later: stays passed",
                facts(
                    true,
                    true,
                    Some(30),
                    Some(run(Passed, Some(20), false, false)),
                ),
                Todo::Nothing,
            ),
            (
                "failed: roll back",
                facts(
                    true,
                    true,
                    Some(10),
                    Some(run(Failed, Some(20), false, false)),
                ),
                Todo::RollBack,
            ),
            (
                "failed, rolled back",
                facts(
                    true,
                    true,
                    Some(10),
                    Some(run(Failed, Some(20), false, true)),
                ),
                Todo::Nothing,
            ),
            (
                "failed, re-promoted and verified again",
                facts(
                    true,
                    true,
                    Some(30),
                    Some(run(Failed, Some(20), false, true)),
                ),
                Todo::Replace,
            ),
            (
                "paused: held",
                facts(
                    true,
                    true,
                    Some(10),
                    Some(run(Paused, Some(20), true, false)),
                ),
                Todo::Nothing,
            ),
            (
                "paused, fixed by a commit",
                facts(
                    true,
                    true,
                    Some(30),
                    Some(run(Paused, Some(20), true, false)),
                ),
                Todo::Replace,
            ),
            (
                "paused, re-rolling",
                facts(true, false, None, Some(run(Paused, Some(20), true, false))),
                Todo::Nothing,
            ),
            (
                "aborted, back again",
                facts(
                    true,
                    true,
                    Some(30),
                    Some(run(Aborted, Some(20), false, false)),
                ),
                Todo::Replace,
            ),
            (
                "aborted, same verification",
                facts(
                    true,
                    true,
                    Some(20),
                    Some(run(Aborted, Some(20), false, false)),
                ),
                Todo::Nothing,
            ),
        ];
        for (name, f, want) in cases {
            assert_eq!(next(&f), want, "{name}");
        }
    }
}
