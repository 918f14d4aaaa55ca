//! A wave's `analysis` as written in a release (`spec.waves[i].analysis`):
//! strict serde types, read permissively where lint must name the field.
//!
//! Numbers that lint range-checks (`count`, `failureLimit`,
//! `inconclusiveLimit`) are read as any integer ([`Int`]) and the built-in's
//! name as text, so a negative limit or an unknown built-in is a lint
//! finding with its file and field rather than a reader error. [`plan`]
//! (`super::plan`) turns checked checks into what the stepper runs.

use serde::{Deserialize, Serialize};

/// One check of a wave's analysis. Exactly one kind: `builtin` (with `max`,
/// and `severity` for `alerts`) or `prometheus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Check {
    /// Unique within the wave; measurements are recorded under it.
    pub name: String,
    /// How often it is measured, e.g. `1m` (`crate::duration`).
    pub interval: String,
    /// How many measurements make a run; default the soak time over the
    /// interval, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<Int>,
    /// Failed measurements tolerated; one more fails the wave.
    #[serde(default, skip_serializing_if = "Int::is_zero")]
    pub failure_limit: Int,
    /// Inconclusive measurements tolerated; one more holds the wave.
    #[serde(default, skip_serializing_if = "Int::is_zero")]
    pub inconclusive_limit: Int,
    /// A built-in signal: `crashloops`, `restarts`, `silentAgents`,
    /// `contentDrift`, `alerts`, `circuitsOpen` or `fallbackRate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<String>,
    /// A built-in's threshold: a measurement above it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// For `alerts`: the least severity counted (`warning` or `critical`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusCheck>,
}

/// A PromQL query and the conditions its result is judged by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrometheusCheck {
    /// A template: `{{tenants}}`, `{{release}}`, `{{wave}}`.
    pub query: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_condition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_condition: Option<String>,
}

/// An integer as written. Any integer reads, negative ones included, so
/// lint (not the reader) refuses one out of range and names its field.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct Int(pub i64);

impl Int {
    pub fn is_zero(&self) -> bool {
        self.0 == 0
    }

    /// The value when it is a `u32`.
    pub fn to_u32(self) -> Option<u32> {
        u32::try_from(self.0).ok()
    }
}

impl std::fmt::Display for Int {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The built-in signals, each scoped to the wave's tenants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Builtin {
    /// Agents and Tools in a crash loop (count).
    Crashloops,
    /// Pod restarts per hour, summed over the wave's namespaces.
    Restarts,
    /// Active Agents that stopped checking in (count).
    SilentAgents,
    /// Tenants whose live content is not the release's (count).
    ContentDrift,
    /// Active upstream alerts of `severity` or worse (count).
    Alerts,
    /// Model deployments in outage (count).
    CircuitsOpen,
    /// Fallbacks over requests (a ratio, 0 to 1).
    FallbackRate,
}

impl Builtin {
    pub const ALL: [Builtin; 7] = [
        Builtin::Crashloops,
        Builtin::Restarts,
        Builtin::SilentAgents,
        Builtin::ContentDrift,
        Builtin::Alerts,
        Builtin::CircuitsOpen,
        Builtin::FallbackRate,
    ];

    /// Its name in a release, e.g. `silentAgents`.
    pub fn as_str(self) -> &'static str {
        match self {
            Builtin::Crashloops => "crashloops",
            Builtin::Restarts => "restarts",
            Builtin::SilentAgents => "silentAgents",
            Builtin::ContentDrift => "contentDrift",
            Builtin::Alerts => "alerts",
            Builtin::CircuitsOpen => "circuitsOpen",
            Builtin::FallbackRate => "fallbackRate",
        }
    }

    /// The inverse of [`Builtin::as_str`].
    pub fn parse(s: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.as_str() == s)
    }
}

impl std::fmt::Display for Builtin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_reads_strictly_and_limits_read_as_any_integer() {
        let c: Check = serde_json::from_str(
            r#"{"name": "x", "interval": "1m", "failureLimit": -1, "builtin": "nope", "max": 0}"#,
        )
        .unwrap();
        assert_eq!(c.failure_limit, Int(-1));
        assert_eq!(c.failure_limit.to_u32(), None);
        assert_eq!(c.inconclusive_limit, Int(0));
        assert_eq!(c.builtin.as_deref(), Some("nope"));
        assert!(
            serde_json::from_str::<Check>(r#"{"name": "x", "interval": "1m", "extra": 1}"#)
                .is_err()
        );
        assert!(
            serde_json::from_str::<PrometheusCheck>(r#"{"query": "up", "success": "x"}"#).is_err()
        );
    }

    #[test]
    fn builtin_names_round_trip() {
        for b in Builtin::ALL {
            assert_eq!(Builtin::parse(b.as_str()), Some(b));
        }
        assert_eq!(Builtin::parse("CrashLoops"), None);
    }
}
