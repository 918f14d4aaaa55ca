//! `silent`: an Active Agent whose agentlet has not checked in for the
//! threshold. Pure.
//!
//! The clock of an Agent starts at the latest of its last check-in (the
//! `autonomic.sh/last-checkin` annotation or this replica's own memory),
//! the time it became Active (its `Ready` condition's transition), and the
//! time this monitor first saw it Active (after a leader change, an Agent
//! is given a whole threshold before it is called silent). An Agent that is
//! not Active (paused, starting, failed, deleted) is never silent.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::{Finding, Monitor, Subject};
use crate::crd::{Agent, AgentPhase};
use crate::meta::ANNOTATION_LAST_CHECKIN;

/// One Agent, as a tick sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentObs {
    pub namespace: String,
    pub name: String,
    pub active: bool,
    /// When `Ready` last turned `True`, in ms since the epoch.
    pub active_since_ms: Option<i64>,
    /// The last check-in this replica knows of (annotation or memory).
    pub last_checkin_ms: Option<i64>,
}

/// Reads what `silent` needs from an Agent; `remembered` is this replica's
/// own last check-in time for it. Pure.
pub fn observe(agent: &Agent, remembered: Option<i64>) -> Option<AgentObs> {
    let status = agent.status.as_ref();
    let active = agent.metadata.deletion_timestamp.is_none()
        && status.and_then(|s| s.phase) == Some(AgentPhase::Active);
    let active_since_ms = status
        .into_iter()
        .flat_map(|s| s.conditions.iter())
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| c.last_transition_time.0.as_millisecond());
    let annotated = agent
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_LAST_CHECKIN))
        .and_then(|v| v.parse::<Timestamp>().ok())
        .map(|t| t.as_millisecond());
    Some(AgentObs {
        namespace: agent.metadata.namespace.clone()?,
        name: agent.metadata.name.clone()?,
        active,
        active_since_ms,
        last_checkin_ms: annotated.max(remembered),
    })
}

/// Which Agents are silent, remembering when each was first seen Active.
#[derive(Debug, Default)]
pub struct Silence {
    first_seen: BTreeMap<(String, String), i64>,
}

impl Silence {
    pub fn evaluate(&mut self, agents: &[AgentObs], now_ms: i64, after: Duration) -> Vec<Finding> {
        let after_ms = i64::try_from(after.as_millis()).unwrap_or(i64::MAX);
        let active: BTreeSet<(String, String)> = agents
            .iter()
            .filter(|a| a.active)
            .map(|a| (a.namespace.clone(), a.name.clone()))
            .collect();
        self.first_seen.retain(|k, _| active.contains(k));
        let threshold = super::human(after);
        let mut out = Vec::new();
        for a in agents.iter().filter(|a| a.active) {
            let key = (a.namespace.clone(), a.name.clone());
            let first = *self.first_seen.entry(key).or_insert(now_ms);
            let since = [Some(first), a.active_since_ms, a.last_checkin_ms]
                .into_iter()
                .flatten()
                .max()
                .unwrap_or(now_ms);
            if now_ms.saturating_sub(since) >= after_ms {
                let message = match a.last_checkin_ms {
                    Some(_) => {
                        format!("Active agent {} has not checked in for {threshold}", a.name)
                    }
                    None => format!(
                        "Active agent {} has not checked in since it became Active ({threshold} or more)",
                        a.name
                    ),
                };
                out.push(Finding {
                    monitor: Monitor::Silent,
                    namespace: a.namespace.clone(),
                    subject: Subject::Agent(a.name.clone()),
                    message,
                    cleared: format!("agent {} checked in again, or is no longer Active", a.name),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1000;

    fn obs(name: &str, active: bool, since: Option<i64>, checkin: Option<i64>) -> AgentObs {
        AgentObs {
            namespace: "t1".into(),
            name: name.into(),
            active,
            active_since_ms: since.map(|s| s * S),
            last_checkin_ms: checkin.map(|s| s * S),
        }
    }

    #[test]
    fn silent_agents() {
        let after = Duration::from_secs(60);
        // (what, ticks of (time s, agents, silent names))
        type Tick = (i64, Vec<AgentObs>, &'static [&'static str]);
        let cases: Vec<(&str, Vec<Tick>)> = vec![
            (
                "checking in keeps an agent out",
                vec![
                    (90, vec![obs("a", true, Some(0), Some(90))], &[]),
                    (149, vec![obs("a", true, Some(0), Some(90))], &[]),
                    (150, vec![obs("a", true, Some(0), Some(90))], &["a"]),
                    (151, vec![obs("a", true, Some(0), Some(151))], &[]),
                ],
            ),
            (
                "never checked in: counted from becoming Active",
                vec![
                    (0, vec![obs("a", true, Some(0), None)], &[]),
                    (59, vec![obs("a", true, Some(0), None)], &[]),
                    (60, vec![obs("a", true, Some(0), None)], &["a"]),
                ],
            ),
            (
                "a new leader gives a whole threshold from first sight",
                vec![
                    (1000, vec![obs("a", true, Some(0), Some(10))], &[]),
                    (1059, vec![obs("a", true, Some(0), Some(10))], &[]),
                    (1060, vec![obs("a", true, Some(0), Some(10))], &["a"]),
                ],
            ),
            (
                "only Active agents",
                vec![
                    (
                        0,
                        vec![obs("a", true, Some(0), None), obs("b", false, None, None)],
                        &[],
                    ),
                    (
                        70,
                        vec![obs("a", false, Some(0), None), obs("b", false, None, None)],
                        &[],
                    ),
                    // Active again: the clock starts again.
                    (80, vec![obs("a", true, Some(0), None)], &[]),
                    (139, vec![obs("a", true, Some(0), None)], &[]),
                    (140, vec![obs("a", true, Some(0), None)], &["a"]),
                    (141, vec![], &[]),
                ],
            ),
        ];
        for (what, ticks) in cases {
            let mut s = Silence::default();
            for (i, (t, agents, want)) in ticks.into_iter().enumerate() {
                let got: Vec<String> = s
                    .evaluate(&agents, t * S, after)
                    .into_iter()
                    .map(|f| match f.subject {
                        Subject::Agent(n) => n,
                        other => panic!("{other:?}"),
                    })
                    .collect();
                assert_eq!(got, want, "{what}: tick {i} at {t}s");
            }
        }
    }

    #[test]
    fn reads_the_annotation_and_the_memory() {
        let mut a: Agent = serde_json::from_value(serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "Agent",
            "metadata": {"name": "a", "namespace": "t1",
                "annotations": {ANNOTATION_LAST_CHECKIN: "2026-01-01T00:00:10Z"}},
            "spec": {"runtime": {"image": "r"}, "agentlet": {"image": "a"}},
            "status": {"phase": "Active", "conditions": [{"type": "Ready", "status": "True",
                "reason": "Running", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap();
        let t0 = "2026-01-01T00:00:00Z"
            .parse::<Timestamp>()
            .unwrap()
            .as_millisecond();
        let o = observe(&a, None).unwrap();
        assert!(o.active);
        assert_eq!(o.active_since_ms, Some(t0));
        assert_eq!(o.last_checkin_ms, Some(t0 + 10 * S));
        assert_eq!(
            observe(&a, Some(t0 + 20 * S)).unwrap().last_checkin_ms,
            Some(t0 + 20 * S)
        );
        a.status.as_mut().unwrap().phase = Some(AgentPhase::Paused);
        assert!(!observe(&a, None).unwrap().active);
    }
}
