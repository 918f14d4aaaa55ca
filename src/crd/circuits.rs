//! `spec.circuits` of a Fleet: how the operator reads the model gateway's
//! and the broker's circuit telemetry (`src/circuits/`,
//! `src/operator/circuits/`, docs/circuits.md). Every field has a default
//! (LiteLLM's metric names), so a Fleet without the section gets LiteLLM's
//! names, a 5-minute window and a `model/failures` threshold of 10.
//!
//! The apiserver refuses a bad metric or label name, a duration it cannot
//! read or a state threshold out of order, naming the field (the CEL rules
//! below); the operator checks the same again ([`crate::circuits::Settings`])
//! and refuses the whole section, naming the field, if anything slipped by.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// A Prometheus metric name.
const METRIC_RULE: &str = "self.matches('^[a-zA-Z_:][a-zA-Z0-9_:]*$')";
/// A Prometheus label name.
const LABEL_RULE: &str = "self.matches('^[a-zA-Z_][a-zA-Z0-9_]*$')";

/// The circuit telemetry settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("self.cooledDownAt == 0 || self.cooledDownAt < self.outageAt").message("cooledDownAt must be below outageAt (or 0: off)"))]
pub struct CircuitSettings {
    /// Scrape the annotated Services at all.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The window of the rates (fallback rate) and of the `model/failures`
    /// count, e.g. `5m`.
    #[serde(default = "default_window")]
    #[x_kube(validation = Rule::new("self.matches('^([0-9]+(ms|s|m|h|d))+$')").message("window must be a duration such as 5m or 1h30m"))]
    pub window: String,
    /// Failed requests of one model within `window` that raise
    /// `model/failures`; 0 turns the alert off.
    #[serde(default = "default_model_failures")]
    pub model_failures: u32,
    /// A deployment whose state gauge is at least this is in outage (its
    /// circuit is open). LiteLLM: 2 is a complete outage.
    #[serde(default = "default_outage_at")]
    #[schemars(range(min = 1))]
    pub outage_at: u32,
    /// A deployment whose state gauge is at least this (and below
    /// `outageAt`) is cooled down. LiteLLM: 1 is a partial outage. 0: the
    /// gauge says nothing of cool-downs (a gauge of 0 closed, 1 open), only
    /// the cool-down counter does.
    #[serde(default = "default_cooled_down_at")]
    pub cooled_down_at: u32,
    /// Metric names; LiteLLM's by default.
    #[serde(default)]
    pub metrics: CircuitMetricNames,
    /// Label names; LiteLLM's by default.
    #[serde(default)]
    pub labels: CircuitLabelNames,
}

/// The metrics read, by what they mean. A counter is found under its name
/// and under its name with `_total` (what Prometheus clients expose).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CircuitMetricNames {
    /// Gauge per deployment: 0 healthy, `cooledDownAt` and up cooled down,
    /// `outageAt` and up in outage.
    #[serde(default = "names::deployment_state")]
    #[x_kube(validation = Rule::new(METRIC_RULE).message("must be a Prometheus metric name"))]
    pub deployment_state: String,
    /// Counter per deployment: times it was cooled down.
    #[serde(default = "names::deployment_cooled_down")]
    #[x_kube(validation = Rule::new(METRIC_RULE).message("must be a Prometheus metric name"))]
    pub deployment_cooled_down: String,
    /// Counter: requests a fallback served.
    #[serde(default = "names::fallbacks_succeeded")]
    #[x_kube(validation = Rule::new(METRIC_RULE).message("must be a Prometheus metric name"))]
    pub fallbacks_succeeded: String,
    /// Counter: requests whose fallback failed too.
    #[serde(default = "names::fallbacks_failed")]
    #[x_kube(validation = Rule::new(METRIC_RULE).message("must be a Prometheus metric name"))]
    pub fallbacks_failed: String,
    /// Counter per model: requests that failed.
    #[serde(default = "names::failed_requests")]
    #[x_kube(validation = Rule::new(METRIC_RULE).message("must be a Prometheus metric name"))]
    pub failed_requests: String,
    /// Counter: every request.
    #[serde(default = "names::requests")]
    #[x_kube(validation = Rule::new(METRIC_RULE).message("must be a Prometheus metric name"))]
    pub requests: String,
}

/// The labels read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CircuitLabelNames {
    /// A deployment's identity (on the state and cool-down metrics).
    #[serde(default = "names::deployment")]
    #[x_kube(validation = Rule::new(LABEL_RULE).message("must be a Prometheus label name"))]
    pub deployment: String,
    /// A deployment's name for humans.
    #[serde(default = "names::deployment_name")]
    #[x_kube(validation = Rule::new(LABEL_RULE).message("must be a Prometheus label name"))]
    pub deployment_name: String,
    /// The model of a failed request.
    #[serde(default = "names::model")]
    #[x_kube(validation = Rule::new(LABEL_RULE).message("must be a Prometheus label name"))]
    pub model: String,
}

impl Default for CircuitSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            window: default_window(),
            model_failures: default_model_failures(),
            outage_at: default_outage_at(),
            cooled_down_at: default_cooled_down_at(),
            metrics: CircuitMetricNames::default(),
            labels: CircuitLabelNames::default(),
        }
    }
}

impl Default for CircuitMetricNames {
    fn default() -> Self {
        Self {
            deployment_state: names::deployment_state(),
            deployment_cooled_down: names::deployment_cooled_down(),
            fallbacks_succeeded: names::fallbacks_succeeded(),
            fallbacks_failed: names::fallbacks_failed(),
            failed_requests: names::failed_requests(),
            requests: names::requests(),
        }
    }
}

impl Default for CircuitLabelNames {
    fn default() -> Self {
        Self {
            deployment: names::deployment(),
            deployment_name: names::deployment_name(),
            model: names::model(),
        }
    }
}

impl CircuitSettings {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// LiteLLM's names (its proxy's `prometheus` callback), the defaults.
mod names {
    pub fn deployment_state() -> String {
        "litellm_deployment_state".into()
    }
    pub fn deployment_cooled_down() -> String {
        "litellm_deployment_cooled_down".into()
    }
    pub fn fallbacks_succeeded() -> String {
        "litellm_deployment_successful_fallbacks".into()
    }
    pub fn fallbacks_failed() -> String {
        "litellm_deployment_failed_fallbacks".into()
    }
    pub fn failed_requests() -> String {
        "litellm_proxy_failed_requests_metric".into()
    }
    pub fn requests() -> String {
        "litellm_proxy_total_requests_metric".into()
    }
    pub fn deployment() -> String {
        "model_id".into()
    }
    pub fn deployment_name() -> String {
        "litellm_model_name".into()
    }
    pub fn model() -> String {
        "requested_model".into()
    }
}

fn default_true() -> bool {
    true
}
fn default_window() -> String {
    "5m".into()
}
fn default_model_failures() -> u32 {
    10
}
fn default_outage_at() -> u32 {
    2
}
fn default_cooled_down_at() -> u32 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_section_is_the_default_and_unknown_fields_are_refused() {
        let s: CircuitSettings = serde_json::from_str("{}").unwrap();
        assert!(s.is_default());
        assert_eq!(s.metrics.deployment_state, "litellm_deployment_state");
        let e = serde_json::from_str::<CircuitSettings>(r#"{"windw": "5m"}"#).unwrap_err();
        assert!(e.to_string().contains("windw"), "{e}");
    }
}
