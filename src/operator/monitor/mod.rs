//! Health monitors (leader only): `crashloop` (an Agent's or Tool's pods
//! restarting again and again), `restarts` (pod restarts per tenant
//! namespace) and `silent` (an Active Agent whose agentlet stopped checking
//! in at `POST /checkin/<namespace>/<agent>`).
//!
//! Layout: pure cores with table-driven tests ([`thresholds`]: Fleet spec
//! plus flags; [`crashloop`]: restart observations over time to the firing
//! sets of `crashloop` and `restarts`; [`silent`]: check-in times to the
//! firing set of `silent`; [`checkin`]: the check-in path, bearer token and
//! its constant-time check, the in-memory check-in book), and the thin I/O
//! edge [`task`] (the leader task reading the shared caches and reporting).
//! The check-in endpoint's reads and writes are in `operator::http`, which
//! serves it.
//!
//! Guarantees: a condition is reported once when it starts and once when
//! it clears, everywhere: the gauge `exo_operator_monitor_active` (back to
//! 0), one Event on the Agent or Tool each way, and a keyed upstream alert
//! `monitor/<monitor>/...` (firing, then resolved) when an alert sink is
//! configured. No token is ever logged, stored in clear or answered.

pub mod checkin;
pub mod crashloop;
pub mod silent;
pub mod task;
pub mod thresholds;

use std::collections::BTreeMap;

use crate::wire::{Alert, Severity};

/// Prefix of every monitor alert key.
pub const ALERT_PREFIX: &str = "monitor/";

/// The monitors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Monitor {
    Crashloop,
    Restarts,
    Silent,
}

impl Monitor {
    pub const ALL: [Monitor; 3] = [Monitor::Crashloop, Monitor::Restarts, Monitor::Silent];

    /// The name in metric labels and alert keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Monitor::Crashloop => "crashloop",
            Monitor::Restarts => "restarts",
            Monitor::Silent => "silent",
        }
    }

    /// The upstream alert's reason (an identifier).
    pub fn reason(self) -> &'static str {
        match self {
            Monitor::Crashloop => "CrashLoop",
            Monitor::Restarts => "RestartRate",
            Monitor::Silent => "AgentSilent",
        }
    }

    /// A silent agent is the worst failure mode: nothing else notices it.
    pub fn severity(self) -> Severity {
        match self {
            Monitor::Crashloop | Monitor::Restarts => Severity::Warning,
            Monitor::Silent => Severity::Critical,
        }
    }
}

/// What a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    Agent(String),
    Tool(String),
    /// The tenant namespace itself (`restarts`).
    Namespace,
}

impl Subject {
    /// `Kind/name` as alerts name objects; `ns` names a namespace subject.
    pub fn object(&self, ns: &str) -> String {
        match self {
            Subject::Agent(n) => format!("Agent/{n}"),
            Subject::Tool(n) => format!("Tool/{n}"),
            Subject::Namespace => format!("Namespace/{ns}"),
        }
    }
}

/// One condition that holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub monitor: Monitor,
    pub namespace: String,
    pub subject: Subject,
    /// Stable while the condition holds (no live counts), so the alert
    /// goes upstream once and not at every tick.
    pub message: String,
    /// What the Event says when it clears.
    pub cleared: String,
}

impl Finding {
    /// `monitor/<monitor>/<namespace>/<Kind>/<name>`, or
    /// `monitor/restarts/<namespace>` for a tenant.
    pub fn key(&self) -> String {
        let m = self.monitor.as_str();
        match &self.subject {
            Subject::Namespace => format!("{ALERT_PREFIX}{m}/{}", self.namespace),
            s => format!("{ALERT_PREFIX}{m}/{}/{}", self.namespace, s.object("")),
        }
    }

    pub fn alert(&self) -> Alert {
        Alert::new(
            self.monitor.severity(),
            self.monitor.reason(),
            self.namespace.clone(),
            self.subject.object(&self.namespace),
            self.message.clone(),
        )
        .keyed(self.key())
    }
}

/// `90s`, `10m`, `1h30m` (moved to [`crate::duration`], which the pure
/// circuit core shares).
pub use crate::duration::human;

/// A condition that holds, known by a stable key (the key of its alert).
pub trait Keyed {
    fn key(&self) -> String;
}

impl Keyed for Finding {
    fn key(&self) -> String {
        Finding::key(self)
    }
}

/// What changed between two ticks: the findings that started and those
/// that cleared. Pure.
#[derive(Debug, PartialEq, Eq)]
pub struct Transitions<F = Finding> {
    pub started: Vec<F>,
    pub cleared: Vec<F>,
}

/// The set of findings that hold, by key, and what changed from the last.
/// The monitors' and the backup watch's (`operator::backups::watch`).
#[derive(Debug)]
pub struct Firing<F = Finding> {
    by_key: BTreeMap<String, F>,
}

impl<F> Default for Firing<F> {
    fn default() -> Self {
        Firing {
            by_key: BTreeMap::new(),
        }
    }
}

impl<F: Keyed + Clone> Firing<F> {
    /// Replaces the set with `now`; returns what started and what cleared.
    /// A finding whose message changed is neither (its alert is re-sent by
    /// the alert book).
    pub fn update(&mut self, now: Vec<F>) -> Transitions<F> {
        let next: BTreeMap<String, F> = now.into_iter().map(|f| (f.key(), f)).collect();
        let mut t = Transitions {
            started: Vec::new(),
            cleared: Vec::new(),
        };
        for (k, f) in &self.by_key {
            if !next.contains_key(k) {
                t.cleared.push(f.clone());
            }
        }
        for (k, f) in &next {
            if !self.by_key.contains_key(k) {
                t.started.push(f.clone());
            }
        }
        self.by_key = next;
        t
    }

    pub fn iter(&self) -> impl Iterator<Item = &F> {
        self.by_key.values()
    }
}

impl Firing<Finding> {
    /// Firing findings per (monitor, namespace).
    pub fn counts(&self) -> BTreeMap<(Monitor, String), i64> {
        let mut out = BTreeMap::new();
        for f in self.by_key.values() {
            *out.entry((f.monitor, f.namespace.clone())).or_insert(0) += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(m: Monitor, ns: &str, s: Subject) -> Finding {
        Finding {
            monitor: m,
            namespace: ns.into(),
            subject: s,
            message: "m".into(),
            cleared: "c".into(),
        }
    }

    #[test]
    fn keys_and_objects() {
        let cases = [
            (
                f(Monitor::Crashloop, "t1", Subject::Agent("a".into())),
                "monitor/crashloop/t1/Agent/a",
                "Agent/a",
            ),
            (
                f(Monitor::Crashloop, "t1", Subject::Tool("b".into())),
                "monitor/crashloop/t1/Tool/b",
                "Tool/b",
            ),
            (
                f(Monitor::Restarts, "t1", Subject::Namespace),
                "monitor/restarts/t1",
                "Namespace/t1",
            ),
            (
                f(Monitor::Silent, "t2", Subject::Agent("a".into())),
                "monitor/silent/t2/Agent/a",
                "Agent/a",
            ),
        ];
        for (finding, key, object) in cases {
            assert_eq!(finding.key(), key);
            let alert = finding.alert();
            assert_eq!((alert.key.as_str(), alert.object.as_str()), (key, object));
            assert!(alert.validate().is_ok(), "{alert:?}");
        }
    }

    #[test]
    fn transitions_report_starts_and_clears_once() {
        let a = f(Monitor::Crashloop, "t1", Subject::Agent("a".into()));
        let b = f(Monitor::Silent, "t1", Subject::Agent("b".into()));
        let mut firing = Firing::default();
        let steps: [(Vec<Finding>, Vec<Finding>, Vec<Finding>); 4] = [
            (vec![a.clone()], vec![a.clone()], vec![]),
            (vec![a.clone(), b.clone()], vec![b.clone()], vec![]),
            (vec![a.clone(), b.clone()], vec![], vec![]),
            (vec![], vec![], vec![a.clone(), b.clone()]),
        ];
        for (i, (now, started, cleared)) in steps.into_iter().enumerate() {
            let t = firing.update(now);
            assert_eq!((t.started, t.cleared), (started, cleared), "step {i}");
        }
        assert!(firing.counts().is_empty());
    }
}
