//! The backups' metrics, `exo_fs_backup_*` and `exo_fs_backups_total`
//! (docs/backups.md, "Alerts and metrics"): a registry of their own under
//! the `exo_fs` prefix, encoded on the same `/metrics` page as the
//! operator's.
//!
//! Labels: the volume's `namespace` and `name` on the gauges. They are
//! bounded by the AgentFS that have a backup policy (one series each, or
//! two or three), and the leader's watch removes a volume's series when the
//! volume or its policy goes and all of them when its term ends
//! ([`BackupMetrics::forget`]); `outcome`, `reason`, `kind` and `alert`
//! are fixed sets. Error messages never become labels.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct VolumeLabels {
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BytesLabels {
    namespace: String,
    name: String,
    /// `uploaded` or `total`.
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StaleLabels {
    namespace: String,
    name: String,
    /// `backup/stale`, `backup/drill-stale` or `backup/drill-failed`.
    alert: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    /// `ok` or `failed`.
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndLabels {
    outcome: &'static str,
    /// `none` for a success; a failure's bounded category
    /// (`unreachable`, `auth`, `volume`, …).
    reason: &'static str,
}

/// The alerts `exo_fs_backup_stale` has a series for, per volume.
pub const ALERTS: [&str; 3] = ["backup/stale", "backup/drill-stale", "backup/drill-failed"];

/// What the gauges of one volume show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeGauges {
    /// Seconds since the last good backup; `None` before one.
    pub age_seconds: Option<i64>,
    /// Bytes the last good backup uploaded and held: `None` before one.
    pub bytes: Option<(u64, u64)>,
    /// The alerts of [`ALERTS`] that hold.
    pub firing: Vec<&'static str>,
}

pub struct BackupMetrics {
    pub(super) registry: Registry,
    age: Family<VolumeLabels, Gauge>,
    last_bytes: Family<BytesLabels, Gauge>,
    stale: Family<StaleLabels, Gauge>,
    duration: Family<OutcomeLabels, Histogram>,
    ended: Family<EndLabels, Counter>,
}

impl Default for BackupMetrics {
    fn default() -> Self {
        Self::new()
    }
}

fn bytes_labels(v: &VolumeLabels, kind: &'static str) -> BytesLabels {
    BytesLabels {
        namespace: v.namespace.clone(),
        name: v.name.clone(),
        kind,
    }
}

fn stale_labels(v: &VolumeLabels, alert: &'static str) -> StaleLabels {
    StaleLabels {
        namespace: v.namespace.clone(),
        name: v.name.clone(),
        alert,
    }
}

fn gauge_value(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl BackupMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("exo_fs");
        let age = Family::<VolumeLabels, Gauge>::default();
        let last_bytes = Family::<BytesLabels, Gauge>::default();
        let stale = Family::<StaleLabels, Gauge>::default();
        // 1 s to about 4.5 h.
        let duration = Family::<OutcomeLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(1.0, 2.0, 15))
        });
        let ended = Family::<EndLabels, Counter>::default();
        registry.register(
            "backup_age_seconds",
            "Seconds since the volume's last good backup (absent before the first)",
            age.clone(),
        );
        registry.register(
            "backup_last_bytes",
            "Bytes of the volume's last good backup: uploaded, and total (the tar stream)",
            last_bytes.clone(),
        );
        registry.register(
            "backup_stale",
            "1 while the backup alert holds for the volume (backup/stale, backup/drill-stale, backup/drill-failed), else 0",
            stale.clone(),
        );
        registry.register(
            "backup_duration_seconds",
            "Time one backup took, by outcome",
            duration.clone(),
        );
        registry.register(
            "backups",
            "Backups that ended, by outcome and reason (the failure's category)",
            ended.clone(),
        );
        BackupMetrics {
            registry,
            age,
            last_bytes,
            stale,
            duration,
            ended,
        }
    }

    /// A backup ended after `took`; `failure` is its error's category.
    pub fn ended(&self, took: Duration, failure: Option<&'static str>) {
        let outcome = if failure.is_some() { "failed" } else { "ok" };
        self.duration
            .get_or_create(&OutcomeLabels { outcome })
            .observe(took.as_secs_f64());
        self.ended
            .get_or_create(&EndLabels {
                outcome,
                reason: failure.unwrap_or("none"),
            })
            .inc();
    }

    /// Shows `g` for the volume `v`: an age and bytes only once it has a
    /// good backup, and every alert of [`ALERTS`] as 0 or 1.
    pub fn show(&self, v: &VolumeLabels, g: &VolumeGauges) {
        match g.age_seconds {
            Some(a) => {
                self.age.get_or_create(v).set(a.max(0));
            }
            None => {
                self.age.remove(v);
            }
        }
        for (i, kind) in ["uploaded", "total"].into_iter().enumerate() {
            let labels = bytes_labels(v, kind);
            match g.bytes {
                Some(b) => {
                    let n = if i == 0 { b.0 } else { b.1 };
                    self.last_bytes.get_or_create(&labels).set(gauge_value(n));
                }
                None => {
                    self.last_bytes.remove(&labels);
                }
            }
        }
        for alert in ALERTS {
            let on = i64::from(g.firing.contains(&alert));
            self.stale.get_or_create(&stale_labels(v, alert)).set(on);
        }
    }

    /// Removes every series of the volume `v`.
    pub fn forget(&self, v: &VolumeLabels) {
        self.age.remove(v);
        for kind in ["uploaded", "total"] {
            self.last_bytes.remove(&bytes_labels(v, kind));
        }
        for alert in ALERTS {
            self.stale.remove(&stale_labels(v, alert));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(m: &BackupMetrics) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &m.registry).unwrap();
        text
    }

    #[test]
    fn a_volumes_series_are_shown_updated_and_forgotten() {
        let m = BackupMetrics::new();
        let v = VolumeLabels {
            namespace: "acme".into(),
            name: "work".into(),
        };
        // Before any good backup: no age and no bytes, the alerts at 0 or 1.
        m.show(
            &v,
            &VolumeGauges {
                age_seconds: None,
                bytes: None,
                firing: vec!["backup/stale"],
            },
        );
        let text = encoded(&m);
        assert!(!text.contains("exo_fs_backup_age_seconds{"), "{text}");
        assert!(
            text.contains(
                r#"exo_fs_backup_stale{namespace="acme",name="work",alert="backup/stale"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"exo_fs_backup_stale{namespace="acme",name="work",alert="backup/drill-failed"} 0"#
            ),
            "{text}"
        );
        m.show(
            &v,
            &VolumeGauges {
                age_seconds: Some(42),
                bytes: Some((10, 1000)),
                firing: vec![],
            },
        );
        let text = encoded(&m);
        for want in [
            r#"exo_fs_backup_age_seconds{namespace="acme",name="work"} 42"#,
            r#"exo_fs_backup_last_bytes{namespace="acme",name="work",kind="uploaded"} 10"#,
            r#"exo_fs_backup_last_bytes{namespace="acme",name="work",kind="total"} 1000"#,
            r#"exo_fs_backup_stale{namespace="acme",name="work",alert="backup/stale"} 0"#,
        ] {
            assert!(text.contains(want), "{want}\n{text}");
        }
        m.forget(&v);
        let text = encoded(&m);
        assert!(!text.contains(r#"name="work""#), "{text}");
    }

    #[test]
    fn an_ended_backup_is_counted_by_outcome_and_reason() {
        let m = BackupMetrics::new();
        m.ended(Duration::from_secs(3), None);
        m.ended(Duration::from_secs(1), Some("unreachable"));
        m.ended(Duration::from_secs(1), Some("unreachable"));
        let text = encoded(&m);
        for want in [
            r#"exo_fs_backups_total{outcome="ok",reason="none"} 1"#,
            r#"exo_fs_backups_total{outcome="failed",reason="unreachable"} 2"#,
            r#"exo_fs_backup_duration_seconds_count{outcome="failed"} 2"#,
            r#"exo_fs_backup_duration_seconds_sum{outcome="ok"} 3.0"#,
        ] {
            assert!(text.contains(want), "{want}\n{text}");
        }
    }
}
