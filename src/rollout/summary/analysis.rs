//! A wave's analysis run as `exo release status` and `exo release rollout`
//! show it, pure: the phase only from a status computed for the run's spec
//! (otherwise `stale`), each check's counts (the first measurement of each
//! slot), and what its outcome did in git.

use std::collections::BTreeMap;

use serde::Serialize;

use super::short_id;
use crate::analysis::Verdict;
use crate::crd::{ActionKind, AnalysisPhase, AnalysisRun};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisSummary {
    pub namespace: String,
    pub name: String,
    pub fleet: String,
    pub wave: String,
    pub release: String,
    /// `None` when the status is not for the run's current spec.
    pub phase: Option<AnalysisPhase>,
    pub message: Option<String>,
    pub checks: Vec<CheckSummary>,
    /// What the outcome did: `promoted R to W (commit C)`.
    pub action: Option<String>,
    pub age_seconds: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckSummary {
    pub check: String,
    pub measured: u32,
    pub passed: u32,
    pub failed: u32,
    pub inconclusive: u32,
    /// The newest measurement's verdict and detail.
    pub last: Option<(Verdict, String)>,
}

pub fn summarize_run(r: &AnalysisRun, now: i64) -> AnalysisSummary {
    let status = r.current_status();
    let mut by_check: BTreeMap<&str, BTreeMap<u32, &crate::analysis::Measurement>> =
        BTreeMap::new();
    for c in &r.spec.checks {
        by_check.entry(c.name.as_str()).or_default();
    }
    for m in status.map(|s| s.measurements.as_slice()).unwrap_or(&[]) {
        by_check
            .entry(m.check.as_str())
            .or_default()
            .entry(m.slot)
            .or_insert(m);
    }
    let checks = r
        .spec
        .checks
        .iter()
        .map(|c| {
            let slots = by_check.get(c.name.as_str());
            let n = |v: Verdict| {
                slots.map_or(0, |s| s.values().filter(|m| m.verdict == v).count()) as u32
            };
            CheckSummary {
                check: c.name.clone(),
                measured: slots.map_or(0, |s| s.len()) as u32,
                passed: n(Verdict::Pass),
                failed: n(Verdict::Fail),
                inconclusive: n(Verdict::Inconclusive),
                last: slots
                    .and_then(|s| s.values().next_back())
                    .map(|m| (m.verdict, m.detail.clone())),
            }
        })
        .collect();
    let action = status.and_then(|s| s.action.as_ref()).map(|a| {
        let what = match a.kind {
            ActionKind::Promoted => format!("promoted {} to {}", a.release, a.wave),
            ActionKind::RolledBack => format!("rolled {} back to {}", a.wave, a.release),
        };
        match &a.commit {
            Some(c) => format!("{what} (commit {})", short_id(c)),
            None => what,
        }
    });
    AnalysisSummary {
        namespace: r.metadata.namespace.clone().unwrap_or_default(),
        name: r.metadata.name.clone().unwrap_or_default(),
        fleet: r.spec.fleet.clone(),
        wave: r.spec.wave.clone(),
        release: r.spec.release.clone(),
        phase: status.map(|s| s.phase),
        message: status.and_then(|s| s.message.clone()),
        checks,
        action,
        age_seconds: r.started().map(|t| now - t.as_second()),
    }
}

/// The newest run of each (namespace, Fleet, wave), in wave order.
pub fn newest(runs: &[AnalysisRun]) -> Vec<&AnalysisRun> {
    let mut newest: BTreeMap<(String, String, usize), &AnalysisRun> = BTreeMap::new();
    for r in runs {
        let order = crate::release::WaveName::ORDER
            .iter()
            .position(|w| w.as_str() == r.spec.wave)
            .unwrap_or(usize::MAX);
        let k = (
            r.metadata.namespace.clone().unwrap_or_default(),
            r.spec.fleet.clone(),
            order,
        );
        let older = newest.get(&k).is_some_and(|o| o.started() > r.started());
        if !older {
            newest.insert(k, r);
        }
    }
    newest.into_values().collect()
}

/// One line per check: `crashloops 3/5 measured: 3 pass (last: ...)`.
pub fn check_line(c: &CheckSummary) -> String {
    let mut s = format!(
        "{}: {} measured, {} passed, {} failed, {} inconclusive",
        c.check, c.measured, c.passed, c.failed, c.inconclusive
    );
    if let Some((v, detail)) = &c.last {
        s.push_str(&format!("; last {v:?}"));
        if !detail.is_empty() {
            s.push_str(&format!(": {detail}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{Check, Int, Measurement};
    use crate::crd::{AnalysisRunSpec, AnalysisRunStatus, RunAction};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn check(name: &str) -> Check {
        Check {
            name: name.into(),
            interval: "10s".into(),
            count: Some(Int(3)),
            failure_limit: Int(0),
            inconclusive_limit: Int(0),
            builtin: Some("crashloops".into()),
            max: Some(0.0),
            severity: None,
            prometheus: None,
        }
    }

    fn m(check: &str, slot: u32, verdict: Verdict) -> Measurement {
        Measurement {
            check: check.into(),
            slot,
            at: Time(Timestamp::from_second(100).unwrap()),
            value: Some(1.0),
            verdict,
            detail: format!("d{slot}"),
        }
    }

    fn run(generation: i64, observed: i64) -> AnalysisRun {
        let mut r = AnalysisRun::new(
            "f-canary-r2",
            AnalysisRunSpec {
                fleet: "f".into(),
                wave: "canary".into(),
                release: "r2".into(),
                commit: "c".into(),
                tenants: vec![],
                checks: vec![check("crashloops"), check("errors")],
                soak: None,
                auto_promote: true,
            },
        );
        r.metadata.namespace = Some("exo".into());
        r.metadata.generation = Some(generation);
        r.metadata.creation_timestamp = Some(Time(Timestamp::from_second(1000).unwrap()));
        r.status = Some(AnalysisRunStatus {
            observed_generation: Some(observed),
            phase: AnalysisPhase::Failed,
            message: Some("analysis failed".into()),
            measurements: vec![
                m("crashloops", 0, Verdict::Pass),
                m("crashloops", 1, Verdict::Fail),
                // A second measurement of slot 1 is not counted.
                m("crashloops", 1, Verdict::Pass),
                m("errors", 0, Verdict::Inconclusive),
            ],
            action: Some(RunAction {
                kind: ActionKind::RolledBack,
                wave: "canary".into(),
                release: "r1".into(),
                commit: Some("0123456789abcdef".into()),
                at: Time(Timestamp::from_second(1100).unwrap()),
            }),
            ..Default::default()
        });
        r
    }

    #[test]
    fn counts_each_slot_once_and_trusts_only_a_current_status() {
        let s = summarize_run(&run(1, 1), 1060);
        assert_eq!(s.phase, Some(AnalysisPhase::Failed));
        assert_eq!(s.age_seconds, Some(60));
        assert_eq!(
            (s.checks[0].measured, s.checks[0].passed, s.checks[0].failed),
            (2, 1, 1)
        );
        assert_eq!(s.checks[0].last, Some((Verdict::Fail, "d1".into())));
        assert_eq!(s.checks[1].inconclusive, 1);
        assert_eq!(
            s.action.as_deref(),
            Some("rolled canary back to r1 (commit 0123456789ab)")
        );
        assert_eq!(
            check_line(&s.checks[0]),
            "crashloops: 2 measured, 1 passed, 1 failed, 0 inconclusive; last Fail: d1"
        );
        let stale = summarize_run(&run(2, 1), 1060);
        assert_eq!(
            (stale.phase, stale.action, stale.checks[0].measured),
            (None, None, 0)
        );
    }

    #[test]
    fn the_newest_run_of_each_wave() {
        let old = run(1, 1);
        let mut new = run(1, 1);
        new.metadata.creation_timestamp = Some(Time(Timestamp::from_second(2000).unwrap()));
        new.spec.release = "r3".into();
        let runs = [old, new];
        let got = newest(&runs);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].spec.release, "r3");
    }
}
