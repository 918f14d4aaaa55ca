//! The built-in checks, pure: a reading of one [`Signals`] snapshot of the
//! wave's tenants against a threshold. The operator fills `Signals` from
//! its monitors; a signal it could not read is `None`, which is
//! inconclusive, never a pass.

use super::plan::BuiltinCheck;
use super::run::{Reading, Verdict};
use super::spec::Builtin;
use crate::severity::Severity;

/// What the operator sees of a wave's tenants at one moment. Each field is
/// `None` when it could not be read (a monitor off or not yet run, no
/// circuit telemetry).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signals {
    /// Agents and Tools in a crash loop.
    pub crashloops: Option<u32>,
    /// Pod restarts per hour, summed over the wave's namespaces.
    pub restarts_per_hour: Option<f64>,
    /// Active Agents that stopped checking in.
    pub silent_agents: Option<u32>,
    /// Tenants whose live content is not the release's (a `ContentDrift`
    /// condition on their Rollout).
    pub content_drift: Option<u32>,
    /// Active (firing, keyed) upstream alerts about the wave's tenants.
    pub alerts: Option<AlertCounts>,
    /// Model deployments in outage.
    pub circuits_open: Option<u32>,
    /// Fallbacks over requests, 0 to 1.
    pub fallback_rate: Option<f64>,
}

/// Active alerts by severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AlertCounts {
    pub warning: u32,
    pub critical: u32,
}

impl AlertCounts {
    /// Alerts of `severity` or worse.
    pub fn at_least(self, severity: Severity) -> u32 {
        match severity {
            Severity::Warning => self.warning.saturating_add(self.critical),
            Severity::Critical => self.critical,
        }
    }
}

/// Reads `check` off `signals`: above `max` fails, at or below passes.
pub fn measure(check: &BuiltinCheck, signals: &Signals) -> Reading {
    let count = |n: Option<u32>| n.map(f64::from);
    let (value, what) = match check.signal {
        Builtin::Crashloops => (count(signals.crashloops), "workloads in a crash loop"),
        Builtin::Restarts => (signals.restarts_per_hour, "pod restarts per hour"),
        Builtin::SilentAgents => (count(signals.silent_agents), "silent agents"),
        Builtin::ContentDrift => (count(signals.content_drift), "tenants with content drift"),
        Builtin::Alerts => {
            let severity = check.severity.unwrap_or(Severity::Warning);
            let what = match severity {
                Severity::Warning => "active alerts (warning or critical)",
                Severity::Critical => "active critical alerts",
            };
            (count(signals.alerts.map(|a| a.at_least(severity))), what)
        }
        Builtin::CircuitsOpen => (count(signals.circuits_open), "model deployments in outage"),
        Builtin::FallbackRate => (signals.fallback_rate, "fallback rate"),
    };
    let max = check.max;
    match value {
        None => Reading::inconclusive(format!("{}: no data", check.signal)),
        Some(v) if v.is_nan() => Reading::inconclusive(format!("{}: NaN", check.signal)),
        Some(v) => Reading {
            value: Some(v),
            verdict: if v > max {
                Verdict::Fail
            } else {
                Verdict::Pass
            },
            detail: format!(
                "{v} {what} ({} max {max})",
                if v > max { "over the" } else { "within the" }
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(signal: Builtin, max: f64, severity: Option<Severity>) -> BuiltinCheck {
        BuiltinCheck {
            signal,
            max,
            severity,
        }
    }

    #[test]
    fn thresholds_pass_at_or_below_and_fail_above() {
        let s = Signals {
            crashloops: Some(1),
            restarts_per_hour: Some(2.5),
            silent_agents: Some(0),
            content_drift: Some(3),
            alerts: Some(AlertCounts {
                warning: 2,
                critical: 1,
            }),
            circuits_open: Some(0),
            fallback_rate: Some(0.2),
        };
        let cases = [
            (check(Builtin::Crashloops, 0.0, None), 1.0, Verdict::Fail),
            (check(Builtin::Crashloops, 1.0, None), 1.0, Verdict::Pass),
            (check(Builtin::Restarts, 2.0, None), 2.5, Verdict::Fail),
            (check(Builtin::Restarts, 3.0, None), 2.5, Verdict::Pass),
            (check(Builtin::SilentAgents, 0.0, None), 0.0, Verdict::Pass),
            (check(Builtin::ContentDrift, 2.0, None), 3.0, Verdict::Fail),
            (
                check(Builtin::Alerts, 2.0, Some(Severity::Warning)),
                3.0,
                Verdict::Fail,
            ),
            (
                check(Builtin::Alerts, 2.0, Some(Severity::Critical)),
                1.0,
                Verdict::Pass,
            ),
            (check(Builtin::CircuitsOpen, 0.0, None), 0.0, Verdict::Pass),
            (check(Builtin::FallbackRate, 0.1, None), 0.2, Verdict::Fail),
        ];
        for (c, value, verdict) in cases {
            let r = measure(&c, &s);
            assert_eq!((r.value, r.verdict), (Some(value), verdict), "{c:?}: {r:?}");
            assert!(!r.detail.is_empty());
        }
    }

    #[test]
    fn a_signal_not_read_is_inconclusive_never_a_pass() {
        let none = Signals::default();
        let nan = Signals {
            fallback_rate: Some(f64::NAN),
            restarts_per_hour: Some(f64::NAN),
            ..Signals::default()
        };
        for b in Builtin::ALL {
            let c = check(b, 1000.0, Some(Severity::Warning));
            let r = measure(&c, &none);
            assert_eq!(r.verdict, Verdict::Inconclusive, "{b}");
            assert_eq!(r.value, None);
            assert!(r.detail.contains("no data"), "{}", r.detail);
        }
        for b in [Builtin::FallbackRate, Builtin::Restarts] {
            let r = measure(&check(b, 1000.0, None), &nan);
            assert_eq!(r.verdict, Verdict::Inconclusive, "{b}");
        }
    }
}
