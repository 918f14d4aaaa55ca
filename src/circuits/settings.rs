//! The settings in force, checked: a Fleet's `spec.circuits`
//! ([`crate::crd::CircuitSettings`], LiteLLM's names by default) turned
//! into [`Settings`], or refused whole with every problem naming its field.
//! Pure.
//!
//! Refused whole, not field by field: a metric name that is wrong is not
//! "no data", it is a reading of the wrong thing, and half of one Fleet's
//! names with half of the defaults would be harder to explain than the
//! last good set (the operator keeps that one, and the defaults at first).

use std::time::Duration;

use crate::crd::CircuitSettings;

/// What the operator reads and decides with.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub enabled: bool,
    /// The window of the rates and of the `model/failures` count.
    pub window: Duration,
    /// `None`: `model/failures` is off.
    pub model_failures: Option<u32>,
    pub outage_at: f64,
    /// `None`: the gauge says nothing of cool-downs.
    pub cooled_down_at: Option<f64>,
    pub metrics: Names,
    pub labels: LabelNames,
}

/// The metric names, by what they mean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub deployment_state: String,
    pub deployment_cooled_down: String,
    pub fallbacks_succeeded: String,
    pub fallbacks_failed: String,
    pub failed_requests: String,
    pub requests: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelNames {
    pub deployment: String,
    pub deployment_name: String,
    pub model: String,
}

/// One refused value of `spec.circuits`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("spec.circuits.{field} {value:?} is not a Prometheus {what} name")]
    BadName {
        field: &'static str,
        value: String,
        what: &'static str,
    },
    #[error("spec.circuits.window: {0}")]
    BadWindow(#[source] crate::duration::DurationError),
    #[error("spec.circuits.window must be longer than 0")]
    ZeroWindow,
    #[error("spec.circuits.{field} is 0; it must be at least 1")]
    ZeroThreshold { field: &'static str },
    #[error(
        "spec.circuits.cooledDownAt ({cooled_down_at}) must be below spec.circuits.outageAt ({outage_at}), or 0 (off)"
    )]
    Order { cooled_down_at: u32, outage_at: u32 },
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`, Prometheus' metric name rule.
pub fn is_metric_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || c == b':')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, Prometheus' label name rule.
pub fn is_label_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

impl Default for Settings {
    fn default() -> Self {
        // LiteLLM's defaults pass every check.
        Settings::of(&CircuitSettings::default()).unwrap_or_else(|_| unreachable!())
    }
}

impl Settings {
    /// `spec`, checked; every problem, each naming its field.
    pub fn of(spec: &CircuitSettings) -> Result<Settings, Vec<SettingsError>> {
        let mut errors = Vec::new();
        let m = &spec.metrics;
        let l = &spec.labels;
        let metric: fn(&str) -> bool = is_metric_name;
        let label: fn(&str) -> bool = is_label_name;
        let names = [
            ("metrics.deploymentState", &m.deployment_state, metric),
            (
                "metrics.deploymentCooledDown",
                &m.deployment_cooled_down,
                metric,
            ),
            ("metrics.fallbacksSucceeded", &m.fallbacks_succeeded, metric),
            ("metrics.fallbacksFailed", &m.fallbacks_failed, metric),
            ("metrics.failedRequests", &m.failed_requests, metric),
            ("metrics.requests", &m.requests, metric),
            ("labels.deployment", &l.deployment, label),
            ("labels.deploymentName", &l.deployment_name, label),
            ("labels.model", &l.model, label),
        ];
        for (field, value, ok) in names {
            if !ok(value) {
                let what = if field.starts_with("metrics.") {
                    "metric"
                } else {
                    "label"
                };
                errors.push(SettingsError::BadName {
                    field,
                    value: value.clone(),
                    what,
                });
            }
        }
        let window = match crate::duration::parse(&spec.window) {
            Ok(d) if d.is_zero() => {
                errors.push(SettingsError::ZeroWindow);
                Duration::ZERO
            }
            Ok(d) => d,
            Err(e) => {
                errors.push(SettingsError::BadWindow(e));
                Duration::ZERO
            }
        };
        if spec.outage_at == 0 {
            errors.push(SettingsError::ZeroThreshold { field: "outageAt" });
        }
        if spec.cooled_down_at > 0 && spec.cooled_down_at >= spec.outage_at {
            errors.push(SettingsError::Order {
                cooled_down_at: spec.cooled_down_at,
                outage_at: spec.outage_at,
            });
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Settings {
            enabled: spec.enabled,
            window,
            model_failures: (spec.model_failures > 0).then_some(spec.model_failures),
            outage_at: f64::from(spec.outage_at),
            cooled_down_at: (spec.cooled_down_at > 0).then(|| f64::from(spec.cooled_down_at)),
            metrics: Names {
                deployment_state: m.deployment_state.clone(),
                deployment_cooled_down: m.deployment_cooled_down.clone(),
                fallbacks_succeeded: m.fallbacks_succeeded.clone(),
                fallbacks_failed: m.fallbacks_failed.clone(),
                failed_requests: m.failed_requests.clone(),
                requests: m.requests.clone(),
            },
            labels: LabelNames {
                deployment: l.deployment.clone(),
                deployment_name: l.deployment_name.clone(),
                model: l.model.clone(),
            },
        })
    }
}

/// Whether a sample named `sample` is the counter `name`: the name itself,
/// or with the `_total` suffix Prometheus clients add to counters.
pub fn is_counter(sample: &str, name: &str) -> bool {
    sample
        .strip_prefix(name)
        .is_some_and(|rest| rest.is_empty() || rest == "_total")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{CircuitLabelNames, CircuitMetricNames};

    #[test]
    fn the_defaults_are_litellms() {
        let s = Settings::default();
        assert!(s.enabled);
        assert_eq!(s.window, Duration::from_secs(300));
        assert_eq!(s.model_failures, Some(10));
        assert_eq!((s.cooled_down_at, s.outage_at), (Some(1.0), 2.0));
        assert_eq!(s.metrics.deployment_state, "litellm_deployment_state");
        assert_eq!(
            s.metrics.fallbacks_succeeded,
            "litellm_deployment_successful_fallbacks"
        );
        assert_eq!(s.labels.deployment, "model_id");
    }

    fn refused(spec: &CircuitSettings) -> Vec<String> {
        let errors = Settings::of(spec).unwrap_err();
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn every_bad_value_is_refused_naming_its_field() {
        let spec = CircuitSettings {
            window: "soon".into(),
            outage_at: 1,
            cooled_down_at: 1,
            metrics: CircuitMetricNames {
                requests: "total requests".into(),
                ..CircuitMetricNames::default()
            },
            labels: CircuitLabelNames {
                model: "model:name".into(),
                ..CircuitLabelNames::default()
            },
            ..CircuitSettings::default()
        };
        assert_eq!(
            refused(&spec),
            [
                "spec.circuits.metrics.requests \"total requests\" is not a Prometheus metric name",
                "spec.circuits.labels.model \"model:name\" is not a Prometheus label name",
                "spec.circuits.window: \"soon\": expected a number before \"soon\"",
                "spec.circuits.cooledDownAt (1) must be below spec.circuits.outageAt (1), or 0 (off)",
            ]
        );
        let zero = CircuitSettings {
            window: "0s".into(),
            outage_at: 0,
            ..CircuitSettings::default()
        };
        assert_eq!(
            refused(&zero),
            [
                "spec.circuits.window must be longer than 0",
                "spec.circuits.outageAt is 0; it must be at least 1",
                "spec.circuits.cooledDownAt (1) must be below spec.circuits.outageAt (0), or 0 (off)",
            ]
        );
    }

    #[test]
    fn zero_turns_model_failures_and_the_gauges_cool_down_off() {
        let spec = CircuitSettings {
            model_failures: 0,
            outage_at: 1,
            cooled_down_at: 0,
            ..CircuitSettings::default()
        };
        let s = Settings::of(&spec).unwrap();
        assert_eq!((s.model_failures, s.cooled_down_at), (None, None));
    }

    #[test]
    fn names() {
        for (s, metric, label) in [
            ("litellm_x", true, true),
            ("ns:x", true, false),
            ("_x9", true, true),
            ("9x", false, false),
            ("", false, false),
            ("a-b", false, false),
        ] {
            assert_eq!(
                (is_metric_name(s), is_label_name(s)),
                (metric, label),
                "{s:?}"
            );
        }
        assert!(is_counter("x_total", "x"));
        assert!(is_counter("x", "x"));
        assert!(!is_counter("x_created", "x"));
        assert!(!is_counter("xy_total", "x"));
    }
}
