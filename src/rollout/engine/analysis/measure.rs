//! One measurement of a due check: a built-in read off the operator's own
//! signals for the run's tenants, or a PromQL query. Never fails: what
//! cannot be read is an inconclusive reading with the reason.

use std::time::Duration;

use crate::analysis::{self, AnalysisError, Kind, Planned, Prometheus, Reading, Signals, Vars};
use crate::crd::{AnalysisRun, Rollout};

/// Where the built-in signals come from.
#[derive(Debug, Clone)]
pub struct SignalSources {
    /// The health monitors' last look (`crashloops`, `restarts`,
    /// `silentAgents`).
    pub monitors: analysis::MonitorBoard,
    /// The circuit telemetry (`circuitsOpen`, `fallbackRate`).
    pub circuits: crate::circuits::Circuits,
}

/// Whether `check` reads the health monitors, which have not looked yet in
/// this term: its measurement waits for their first look (a new leader's
/// first second), rather than count the operator's own start as no data.
pub fn waits_for_monitors(sources: &SignalSources, check: &Planned) -> bool {
    use crate::analysis::Builtin;
    matches!(&check.kind, Kind::Builtin(b) if matches!(b.signal, Builtin::Crashloops | Builtin::Restarts | Builtin::SilentAgents))
        && !sources.monitors.ready()
}

/// The run's tenants' signals now. `alerts` are the sink's active keyed
/// alerts; `rollouts` the tenants' Rollouts (content drift).
pub fn signals(
    sources: &SignalSources,
    alerts: &crate::alerts::AlertSink,
    run: &AnalysisRun,
    rollouts: &[&Rollout],
) -> Signals {
    let namespaces: Vec<&str> = run
        .spec
        .tenants
        .iter()
        .map(|t| t.namespace.as_str())
        .collect();
    let drifting = rollouts
        .iter()
        .filter(|r| {
            run.spec.tenants.iter().any(|t| {
                t.name == r.spec.tenant && r.metadata.namespace.as_deref() == Some(&t.namespace)
            }) && r.content_drift().is_some()
        })
        .count();
    Signals {
        crashloops: sources.monitors.crashloops(&namespaces),
        restarts_per_hour: sources.monitors.restarts_per_hour(&namespaces),
        silent_agents: sources.monitors.silent_agents(&namespaces),
        content_drift: Some(u32::try_from(drifting).unwrap_or(u32::MAX)),
        alerts: Some(alerts.active(&namespaces)),
        circuits_open: sources.circuits.circuits_open(&namespaces),
        fallback_rate: sources.circuits.fallback_rate(&namespaces),
    }
}

/// Measures `check` of `run`: `signals` for a built-in (taken once per
/// look, by the caller), the Fleet's Prometheus (`url`) for a query.
pub async fn reading(
    check: &Planned,
    run: &AnalysisRun,
    signals: &Signals,
    url: Option<&str>,
    timeout: Duration,
) -> Reading {
    match &check.kind {
        Kind::Builtin(b) => analysis::builtin::measure(b, signals),
        Kind::Prometheus(q) => {
            let Some(url) = url else {
                return Reading::inconclusive(AnalysisError::NoUrl.to_string());
            };
            let prometheus = match Prometheus::new(url, timeout) {
                Ok(p) => p,
                Err(e) => return Reading::inconclusive(e.to_string()),
            };
            let tenants: Vec<String> = run.spec.tenants.iter().map(|t| t.name.clone()).collect();
            let vars = Vars {
                tenants: &tenants,
                release: &run.spec.release,
                wave: &run.spec.wave,
            };
            prometheus.measure(q, &vars).await
        }
    }
}
