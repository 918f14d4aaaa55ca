//! Container restarts over time, the pure core of `crashloop` (per Agent
//! and Tool) and `restarts` (per tenant namespace).
//!
//! Like kube-state-metrics' "restarts increased by N within W": each tick
//! passes the pods' `restartCount`s; an increase since the last tick is
//! that many restarts at the tick's time. A pod seen for the first time
//! brings at most one restart, at its `lastState.terminated.finishedAt`
//! when that is recent (so a new leader notices a crash loop it did not see
//! start). Restarts are kept per workload, so a rolled pod (a new uid,
//! counting from 0) keeps its predecessor's history.
//!
//! `crashloop` fires at `restarts` within `window` and clears only after a
//! whole `window` without a restart (a container at its longest back-off
//! still restarts every 5 minutes), or when the workload is gone.
//! `restarts` fires while a namespace's count in its window is at least
//! the threshold.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::thresholds::Rate;
use super::{Finding, Monitor, Subject};

/// Most restarts one container adds in one tick (a bound, not a rule).
const MAX_STEP: u32 = 1000;

/// One container of one pod, as a tick sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerObs {
    pub name: String,
    pub restart_count: u32,
    /// `lastState.terminated.finishedAt`, in ms since the epoch.
    pub last_terminated_ms: Option<i64>,
}

/// One pod, as a tick sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodObs {
    pub uid: String,
    pub namespace: String,
    /// The Agent or Tool controlling it; `None` for other exo pods (they
    /// count for their namespace only).
    pub owner: Option<Subject>,
    pub containers: Vec<ContainerObs>,
}

/// Reads what the monitors need from a pod. Pure.
pub fn observe(pod: &Pod) -> Option<PodObs> {
    let uid = pod.metadata.uid.clone()?;
    let namespace = pod.metadata.namespace.clone()?;
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .and_then(|o| match o.kind.as_str() {
            "Agent" => Some(Subject::Agent(o.name.clone())),
            "Tool" => Some(Subject::Tool(o.name.clone())),
            _ => None,
        });
    let status = pod.status.as_ref();
    let statuses = status
        .and_then(|s| s.init_container_statuses.as_ref())
        .into_iter()
        .chain(status.and_then(|s| s.container_statuses.as_ref()))
        .flatten();
    let containers = statuses
        .map(|cs| ContainerObs {
            name: cs.name.clone(),
            restart_count: u32::try_from(cs.restart_count).unwrap_or(0),
            last_terminated_ms: cs
                .last_state
                .as_ref()
                .and_then(|l| l.terminated.as_ref())
                .and_then(|t| t.finished_at.as_ref())
                .map(|t| t.0.as_millisecond()),
        })
        .collect();
    Some(PodObs {
        uid,
        namespace,
        owner,
        containers,
    })
}

#[derive(Debug, Clone)]
struct Restart {
    at_ms: i64,
    namespace: String,
    owner: Option<Subject>,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Restarts seen, and which workloads are crash-looping.
#[derive(Debug, Default)]
pub struct Ledger {
    /// `(pod uid, container)` -> the restartCount last seen.
    seen: HashMap<(String, String), u32>,
    restarts: Vec<Restart>,
    looping: BTreeSet<(String, Subject)>,
}

impl Ledger {
    /// Takes one tick's pods at `now_ms`; restarts older than `keep` are
    /// forgotten, and so are pods no longer listed.
    pub fn observe(&mut self, pods: &[PodObs], now_ms: i64, keep: Duration) {
        let since = now_ms.saturating_sub(ms(keep));
        let mut seen = HashMap::new();
        for p in pods {
            for c in &p.containers {
                let key = (p.uid.clone(), c.name.clone());
                let (n, at) = match self.seen.get(&key) {
                    Some(&before) => (c.restart_count.saturating_sub(before), now_ms),
                    None => match c.last_terminated_ms {
                        Some(t) if c.restart_count > 0 && t >= since && t <= now_ms => (1, t),
                        _ => (0, now_ms),
                    },
                };
                for _ in 0..n.min(MAX_STEP) {
                    self.restarts.push(Restart {
                        at_ms: at,
                        namespace: p.namespace.clone(),
                        owner: p.owner.clone(),
                    });
                }
                seen.insert(key, c.restart_count);
            }
        }
        self.seen = seen;
        self.restarts.retain(|r| r.at_ms >= since);
    }

    fn count_by<K: Ord>(
        &self,
        now_ms: i64,
        window: Duration,
        key: impl Fn(&Restart) -> Option<K>,
    ) -> BTreeMap<K, u32> {
        let since = now_ms.saturating_sub(ms(window));
        let mut out = BTreeMap::new();
        for r in self.restarts.iter().filter(|r| r.at_ms >= since) {
            if let Some(k) = key(r) {
                *out.entry(k).or_insert(0) += 1;
            }
        }
        out
    }

    /// The crash-looping workloads among `live` (the Agents and Tools that
    /// exist, by namespace).
    pub fn crashloop(
        &mut self,
        now_ms: i64,
        rate: Rate,
        live: &BTreeSet<(String, Subject)>,
    ) -> Vec<Finding> {
        // A workload that is gone takes its history with it (a new one of
        // the same name starts clean); its restarts still count for the
        // namespace.
        for r in &mut self.restarts {
            if r.owner
                .as_ref()
                .is_some_and(|o| !live.contains(&(r.namespace.clone(), o.clone())))
            {
                r.owner = None;
            }
        }
        let counts = self.count_by(now_ms, rate.window, |r| {
            r.owner.clone().map(|o| (r.namespace.clone(), o))
        });
        let window = super::human(rate.window);
        let looping: BTreeSet<(String, Subject)> = counts
            .into_iter()
            .filter(|(k, n)| live.contains(k) && (*n >= rate.restarts || self.looping.contains(k)))
            .map(|(k, _)| k)
            .collect();
        self.looping = looping;
        self.looping
            .iter()
            .map(|(ns, s)| Finding {
                monitor: Monitor::Crashloop,
                namespace: ns.clone(),
                subject: s.clone(),
                message: format!(
                    "{} restarted at least {} times within {window}; clears after {window} without a restart",
                    s.object(ns),
                    rate.restarts
                ),
                cleared: format!("{} has not restarted for {window}", s.object(ns)),
            })
            .collect()
    }

    /// Restarts per namespace within `window` before `now_ms`.
    pub fn restarts_by_namespace(&self, now_ms: i64, window: Duration) -> BTreeMap<String, u32> {
        self.count_by(now_ms, window, |r| Some(r.namespace.clone()))
    }

    /// The namespaces whose pods restarted at least `rate.restarts` times
    /// within `rate.window`.
    pub fn tenant_restarts(&self, now_ms: i64, rate: Rate) -> Vec<Finding> {
        let window = super::human(rate.window);
        self.count_by(now_ms, rate.window, |r| Some(r.namespace.clone()))
            .into_iter()
            .filter(|(_, n)| *n >= rate.restarts)
            .map(|(ns, _)| Finding {
                monitor: Monitor::Restarts,
                namespace: ns,
                subject: Subject::Namespace,
                message: format!(
                    "pods restarted at least {} times within {window}",
                    rate.restarts
                ),
                cleared: format!(
                    "pods restarted fewer than {} times within {window}",
                    rate.restarts
                ),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1000;

    fn pod(uid: &str, ns: &str, agent: &str, count: u32, last: Option<i64>) -> PodObs {
        PodObs {
            uid: uid.into(),
            namespace: ns.into(),
            owner: Some(Subject::Agent(agent.into())),
            containers: vec![ContainerObs {
                name: "runtime".into(),
                restart_count: count,
                last_terminated_ms: last,
            }],
        }
    }

    fn live(items: &[(&str, &str)]) -> BTreeSet<(String, Subject)> {
        items
            .iter()
            .map(|(ns, a)| (ns.to_string(), Subject::Agent(a.to_string())))
            .collect()
    }

    /// Ticks of (time in s, pods) -> the crash-looping agents after each.
    #[test]
    fn crashloop_fires_at_the_threshold_and_clears_after_a_quiet_window() {
        let rate = Rate {
            restarts: 3,
            window: Duration::from_secs(60),
        };
        let a = live(&[("t1", "a")]);
        type Tick = (i64, Vec<PodObs>, &'static [&'static str]);
        let cases: Vec<(&str, Vec<Tick>)> = vec![
            (
                "three restarts within the window fire",
                vec![
                    (0, vec![pod("p1", "t1", "a", 0, None)], &[]),
                    (10, vec![pod("p1", "t1", "a", 1, None)], &[]),
                    (20, vec![pod("p1", "t1", "a", 2, None)], &[]),
                    (30, vec![pod("p1", "t1", "a", 3, None)], &["a"]),
                    // Restarting slower still holds it (hysteresis)...
                    (80, vec![pod("p1", "t1", "a", 4, None)], &["a"]),
                    (139, vec![pod("p1", "t1", "a", 4, None)], &["a"]),
                    // ...until a whole window passes without one.
                    (141, vec![pod("p1", "t1", "a", 4, None)], &[]),
                ],
            ),
            (
                "restarts spread wider than the window never fire",
                vec![
                    (0, vec![pod("p1", "t1", "a", 0, None)], &[]),
                    (40, vec![pod("p1", "t1", "a", 1, None)], &[]),
                    (80, vec![pod("p1", "t1", "a", 2, None)], &[]),
                    (120, vec![pod("p1", "t1", "a", 3, None)], &[]),
                ],
            ),
            (
                "a jump of several restarts in one tick fires",
                vec![
                    (0, vec![pod("p1", "t1", "a", 1, None)], &[]),
                    (5, vec![pod("p1", "t1", "a", 4, None)], &["a"]),
                ],
            ),
            (
                "a rolled pod keeps the workload's history",
                vec![
                    (0, vec![pod("p1", "t1", "a", 0, None)], &[]),
                    (5, vec![pod("p1", "t1", "a", 2, None)], &[]),
                    (10, vec![pod("p2", "t1", "a", 0, None)], &[]),
                    (15, vec![pod("p2", "t1", "a", 1, None)], &["a"]),
                ],
            ),
            (
                "a first sight counts one recent restart, not the whole history",
                vec![
                    (0, vec![pod("p1", "t1", "a", 50, Some(-5 * S))], &[]),
                    (5, vec![pod("p1", "t1", "a", 51, None)], &[]),
                    (6, vec![pod("p1", "t1", "a", 52, None)], &["a"]),
                ],
            ),
        ];
        for (what, ticks) in cases {
            let mut ledger = Ledger::default();
            for (i, (t, pods, want)) in ticks.into_iter().enumerate() {
                ledger.observe(&pods, t * S, rate.window);
                let got: Vec<String> = ledger
                    .crashloop(t * S, rate, &a)
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
    fn a_workload_that_is_gone_clears() {
        let rate = Rate {
            restarts: 2,
            window: Duration::from_secs(60),
        };
        let mut ledger = Ledger::default();
        ledger.observe(&[pod("p1", "t1", "a", 0, None)], 0, rate.window);
        ledger.observe(&[pod("p1", "t1", "a", 5, None)], S, rate.window);
        assert_eq!(ledger.crashloop(S, rate, &live(&[("t1", "a")])).len(), 1);
        ledger.observe(&[], 2 * S, rate.window);
        assert!(ledger.crashloop(2 * S, rate, &live(&[])).is_empty());
        // Re-created with the same name: its predecessor's restarts are gone.
        assert!(
            ledger
                .crashloop(3 * S, rate, &live(&[("t1", "a")]))
                .is_empty()
        );
    }

    #[test]
    fn tenant_restarts_count_every_pod_of_a_namespace() {
        let rate = Rate {
            restarts: 4,
            window: Duration::from_secs(3600),
        };
        let mut ledger = Ledger::default();
        let tick = |ledger: &mut Ledger, t: i64, counts: [u32; 3]| {
            let pods = vec![
                pod("p1", "t1", "a", counts[0], None),
                pod("p2", "t1", "b", counts[1], None),
                pod("p3", "t2", "c", counts[2], None),
            ];
            ledger.observe(&pods, t * S, rate.window);
            ledger
                .tenant_restarts(t * S, rate)
                .into_iter()
                .map(|f| f.namespace)
                .collect::<Vec<_>>()
        };
        assert!(tick(&mut ledger, 0, [0, 0, 0]).is_empty());
        assert!(tick(&mut ledger, 60, [2, 1, 3]).is_empty());
        assert_eq!(tick(&mut ledger, 120, [2, 2, 3]), ["t1"]);
        assert_eq!(tick(&mut ledger, 180, [2, 2, 4]), ["t1", "t2"]);
        assert_eq!(tick(&mut ledger, 3659, [2, 2, 4]), ["t1", "t2"]);
        // An hour after the first restarts they leave the window.
        assert!(tick(&mut ledger, 3661, [2, 2, 4]).is_empty());
    }
}
