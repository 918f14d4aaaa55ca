//! `spec.monitors` of a Fleet: the thresholds of the operator's health
//! monitors (`src/operator/monitor/`). Every field has a default, so a
//! Fleet without the section gets the defaults below; a flag of
//! `exo operator run` (`--monitor-*`) overrides the Fleet's value.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// The health monitors' thresholds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Monitors {
    /// An Agent's or Tool's containers restarting again and again.
    #[serde(default)]
    pub crashloop: CrashloopMonitor,
    /// Pod restarts per tenant (namespace).
    #[serde(default)]
    pub restarts: RestartsMonitor,
    /// An Active Agent whose agentlet stopped checking in.
    #[serde(default)]
    pub silent: SilentMonitor,
}

/// Fires when an Agent's or Tool's pods restarted at least `restarts`
/// times within `window`; clears once they did not restart for a whole
/// `window`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrashloopMonitor {
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default = "default_crashloop_restarts")]
    pub restarts: u32,
    /// A duration, e.g. `10m`.
    #[serde(default = "default_crashloop_window")]
    pub window: String,
}

/// Fires when the pods of one namespace restarted at least `restarts`
/// times within `window`; clears when the count falls below it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestartsMonitor {
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default = "default_tenant_restarts")]
    pub restarts: u32,
    /// A duration, e.g. `1h`.
    #[serde(default = "default_tenant_window")]
    pub window: String,
}

/// Fires when an Active Agent has not checked in (`POST
/// /checkin/<namespace>/<agent>`) for `after`; clears at its next check-in
/// or when it is no longer Active.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SilentMonitor {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// A duration, e.g. `15m`.
    #[serde(default = "default_silent_after")]
    pub after: String,
}

impl Default for CrashloopMonitor {
    fn default() -> Self {
        Self {
            enabled: true,
            restarts: default_crashloop_restarts(),
            window: default_crashloop_window(),
        }
    }
}

impl Default for RestartsMonitor {
    fn default() -> Self {
        Self {
            enabled: true,
            restarts: default_tenant_restarts(),
            window: default_tenant_window(),
        }
    }
}

impl Default for SilentMonitor {
    fn default() -> Self {
        Self {
            enabled: true,
            after: default_silent_after(),
        }
    }
}

impl Monitors {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

fn default_true() -> bool {
    true
}
fn default_crashloop_restarts() -> u32 {
    3
}
fn default_crashloop_window() -> String {
    "10m".into()
}
fn default_tenant_restarts() -> u32 {
    10
}
fn default_tenant_window() -> String {
    "1h".into()
}
fn default_silent_after() -> String {
    "15m".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_omitted_section_or_field_takes_the_defaults() {
        let cases = [
            ("{}", Monitors::default()),
            (
                r#"{"crashloop": {"restarts": 5}}"#,
                Monitors {
                    crashloop: CrashloopMonitor {
                        restarts: 5,
                        ..CrashloopMonitor::default()
                    },
                    ..Monitors::default()
                },
            ),
            (
                r#"{"silent": {"enabled": false}}"#,
                Monitors {
                    silent: SilentMonitor {
                        enabled: false,
                        after: "15m".into(),
                    },
                    ..Monitors::default()
                },
            ),
        ];
        for (json, want) in cases {
            let got: Monitors = serde_json::from_str(json).unwrap();
            assert_eq!(got, want, "{json}");
        }
        assert!(serde_json::from_str::<Monitors>(r#"{"crashloops": {}}"#).is_err());
    }
}
