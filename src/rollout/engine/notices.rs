//! What the engine tells the notifier (`crate::notify`), built from the
//! Rollout and its target. Pure; the callers emit.
//!
//! - a saga started on a commit: its commit status `pending`;
//! - the saga verified: the `verified` event and the status `success`;
//! - the saga failed: the status `failure`, with the step's message;
//! - drift put back: the `driftReverted` event;
//! - (for the analysis) a failed or passed analysis: [`analysis_failed`],
//!   [`analysis_passed`], [`wave_event`];
//! - a wave pointer moved (the sync): `promoted` or `rolledBack` for the
//!   wave's tenants, and on a rollback the status `failure` on the commit
//!   each of them was running.

use std::collections::{BTreeMap, BTreeSet};

use crate::crd::{DriftRecord, Rollout};
use crate::fleet::release::{WaveName, WavePointersSpec};
use crate::notify::waves::{Before, WaveMove, moves};
use crate::notify::{CommitState, CommitStatus, Event, EventKind};
use crate::rollout::desired::TenantTarget;

/// Whose saga, on which commit, wave and release.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub tenant: &'a str,
    pub commit: &'a str,
    pub wave: WaveName,
    pub release: &'a str,
}

impl<'a> Subject<'a> {
    pub fn of(ro: &'a Rollout, target: &'a TenantTarget) -> Self {
        Subject {
            tenant: &ro.spec.tenant,
            commit: &ro.spec.commit,
            wave: target.wave,
            release: &target.release.metadata.name,
        }
    }

    fn status(&self, state: CommitState, what: String) -> CommitStatus {
        CommitStatus::new(state, self.commit, self.tenant, what)
            .wave(self.wave)
            .release(self.release)
    }

    fn event(&self, kind: EventKind, message: String) -> Event {
        Event::new(kind, message)
            .tenant(self.tenant)
            .wave(self.wave)
            .release(self.release)
            .commit(self.commit)
    }
}

/// The saga started applying the Rollout's commit.
pub fn started(s: Subject<'_>) -> CommitStatus {
    s.status(
        CommitState::Pending,
        format!("applying release {}", s.release),
    )
}

/// The saga verified the tenant on its release. Where the wave has an
/// analysis (`analysed`), the commit stays `pending` until the analysis
/// ends ([`analysis_passed`], [`analysis_failed`]).
pub fn verified(s: Subject<'_>, analysed: bool) -> (Event, CommitStatus) {
    let message = format!("tenant {} verified on release {}", s.tenant, s.release);
    let status = if analysed {
        s.status(
            CommitState::Pending,
            format!("release {} verified; the wave's analysis runs", s.release),
        )
    } else {
        s.status(
            CommitState::Success,
            format!("release {} verified", s.release),
        )
    };
    (s.event(EventKind::Verified, message), status)
}

/// The saga failed at a step.
pub fn failed(s: Subject<'_>, step: &str, why: &str) -> CommitStatus {
    s.status(CommitState::Failure, format!("{step} failed: {why}"))
}

/// Drift put back in a verified tenant.
pub fn drift_reverted(s: Subject<'_>, record: &DriftRecord) -> Event {
    let message = format!(
        "{} in {} differed from git ({}); put back",
        record.object,
        s.tenant,
        record.fields.join(", ")
    );
    s.event(EventKind::DriftReverted, message)
}

/// The analysis failed a tenant's run: the `analysisFailed` event and the
/// `failure` of its commit. For the analysis to emit (`Notifier::emit`,
/// `Notifier::commit_status`).
pub fn analysis_failed(s: Subject<'_>, why: &str) -> (Event, CommitStatus) {
    let message = format!(
        "analysis of {} on release {} failed: {why}",
        s.tenant, s.release
    );
    (
        s.event(EventKind::AnalysisFailed, message),
        s.status(CommitState::Failure, format!("analysis failed: {why}")),
    )
}

/// The analysis passed a tenant's run: the `success` of its commit. Where
/// a wave has an analysis, this (not [`verified`]'s status) is the
/// success to tell.
pub fn analysis_passed(s: Subject<'_>, what: &str) -> CommitStatus {
    s.status(CommitState::Success, format!("analysis passed: {what}"))
}

/// An event about a whole wave (its tenants), for what judges a wave at
/// once, e.g. `analysisFailed` of the wave's analysis.
pub fn wave_event<S: AsRef<str>>(
    kind: EventKind,
    wave: WaveName,
    release: &str,
    commit: &str,
    tenants: impl IntoIterator<Item = S>,
    message: impl Into<String>,
) -> Event {
    Event::new(kind, message)
        .tenants(tenants)
        .wave(wave)
        .release(release)
        .commit(commit)
}

/// A wave's tenants, and what their Rollouts said before the sync's writes.
#[derive(Debug, Default, Clone)]
pub struct WaveTenants {
    pub tenants: BTreeSet<String>,
    /// Per tenant, the commit and release its Rollout was on.
    pub running: BTreeMap<String, (String, String)>,
    /// The releases the wave's tenants verified (any of them).
    pub verified: BTreeSet<String>,
}

/// The events of the waves whose pointer moved from `before` to `now`, at
/// `commit`, and on a rollback the `failure` of each tenant's old commit.
pub fn wave_moves(
    before: &BTreeMap<WaveName, Before>,
    now: &WavePointersSpec,
    waves: &BTreeMap<WaveName, WaveTenants>,
    commit: &str,
) -> (Vec<Event>, Vec<CommitStatus>) {
    let verified = waves
        .iter()
        .map(|(w, t)| (*w, t.verified.clone()))
        .collect();
    let mut events = Vec::new();
    let mut statuses = Vec::new();
    for m in moves(before, now, &verified) {
        let WaveMove {
            wave,
            from,
            to,
            kind,
        } = &m;
        let of = waves.get(wave).cloned().unwrap_or_default();
        events.push(
            Event::new(*kind, m.message())
                .tenants(&of.tenants)
                .wave(*wave)
                .release(to)
                .commit(commit),
        );
        if *kind != EventKind::RolledBack {
            continue;
        }
        for (tenant, (old_commit, release)) in &of.running {
            if release == from && !old_commit.is_empty() {
                statuses.push(
                    CommitStatus::new(
                        CommitState::Failure,
                        old_commit,
                        tenant,
                        format!("release {from} rolled back to {to}"),
                    )
                    .wave(*wave)
                    .release(from),
                );
            }
        }
    }
    (events, statuses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::release::WavePointer;

    fn pointers(canary: &str, history: &[&str]) -> WavePointersSpec {
        let p = |r: &str, h: &[&str]| WavePointer {
            release: r.to_owned(),
            history: h.iter().map(|s| (*s).to_owned()).collect(),
        };
        WavePointersSpec {
            canary: p(canary, history),
            low_risk: p("r1", &[]),
            fleet: p("r1", &[]),
        }
    }

    #[test]
    fn a_rollback_fails_the_old_commit_of_each_tenant_that_ran_it() {
        let before: BTreeMap<WaveName, Before> = [(
            WaveName::Canary,
            Before {
                release: "r2".into(),
                history: Some(vec!["r1".into()]),
            },
        )]
        .into();
        let canary = WaveTenants {
            tenants: ["a".to_owned(), "b".to_owned()].into(),
            running: [
                ("a".to_owned(), ("c2".to_owned(), "r2".to_owned())),
                // Still on r1 (never moved): nothing to fail.
                ("b".to_owned(), ("c1".to_owned(), "r1".to_owned())),
            ]
            .into(),
            verified: BTreeSet::new(),
        };
        let waves = [(WaveName::Canary, canary)].into();
        let (events, statuses) = wave_moves(&before, &pointers("r1", &["r2"]), &waves, "c3");
        assert_eq!(events.len(), 1);
        let e = &events[0];
        assert_eq!(e.kind, EventKind::RolledBack);
        assert_eq!(e.tenants, ["a", "b"]);
        assert_eq!(
            (e.release.as_deref(), e.commit.as_deref()),
            (Some("r1"), Some("c3"))
        );
        assert_eq!(statuses.len(), 1);
        assert_eq!(
            (
                statuses[0].commit.as_str(),
                statuses[0].tenant.as_str(),
                statuses[0].state
            ),
            ("c2", "a", CommitState::Failure)
        );
        // A promotion fails nothing.
        let (events, statuses) = wave_moves(&before, &pointers("r3", &["r2"]), &waves, "c3");
        assert_eq!(events[0].kind, EventKind::Promoted);
        assert!(statuses.is_empty());
    }

    #[test]
    fn a_tenants_statuses_carry_its_commit_wave_and_release() {
        let s = Subject {
            tenant: "acme",
            commit: "c2",
            wave: WaveName::Canary,
            release: "r2",
        };
        let p = started(s);
        assert_eq!(
            (p.state, p.commit.as_str(), p.context()),
            (CommitState::Pending, "c2", "exo/acme".to_owned())
        );
        let (e, ok) = verified(s, false);
        assert_eq!(
            (e.kind, ok.state),
            (EventKind::Verified, CommitState::Success)
        );
        assert_eq!(verified(s, true).1.state, CommitState::Pending);
        assert_eq!(e.tenants, ["acme"]);
        assert_eq!(
            (e.wave, e.release.as_deref(), e.commit.as_deref()),
            (Some(WaveName::Canary), Some("r2"), Some("c2"))
        );
        let f = failed(s, "pods-rolled/runtime", "digest differs");
        assert_eq!(f.description, "pods-rolled/runtime failed: digest differs");
        let d = drift_reverted(
            s,
            &DriftRecord {
                at: None,
                object: "Agent/assistant".into(),
                fields: vec!["spec.runtime.image".into()],
            },
        );
        let (e, f) = analysis_failed(s, "error rate 7% > 5%");
        assert_eq!(
            (e.kind, f.state),
            (EventKind::AnalysisFailed, CommitState::Failure)
        );
        assert_eq!(e.severity(), crate::notify::Severity::Error);
        assert_eq!(analysis_passed(s, "5 of 5").state, CommitState::Success);
        let w = wave_event(
            EventKind::AnalysisFailed,
            WaveName::LowRisk,
            "r2",
            "c2",
            ["b", "a"],
            "m",
        );
        assert_eq!(
            (w.tenants.as_slice(), w.wave),
            (
                &["a".to_owned(), "b".to_owned()][..],
                Some(WaveName::LowRisk)
            )
        );
        assert_eq!(d.kind, EventKind::DriftReverted);
        assert_eq!(
            d.message,
            "Agent/assistant in acme differed from git (spec.runtime.image); put back"
        );
    }
}
