//! The notifications' metrics (docs/notifications.md, "Metrics"): a
//! registry of their own under the `exo` prefix, on the same `/metrics`
//! page as the operator's.
//!
//! - `exo_notifications_total{namespace,provider,result}`: deliveries by
//!   how they ended, `delivered` or `failed` (after every retry), and
//!   `dropped` (the provider's queue was full);
//! - `exo_notification_attempt_failures_total{namespace,provider,reason}`:
//!   every failed attempt, retried or not, by `unreachable`, `refused` or
//!   `invalid`;
//! - `exo_notifications_dropped_total`: notices the operator's queue
//!   dropped before any rule saw them (it was full).
//!
//! Labels are bounded: a provider's namespace and name (one series set per
//! `NotificationProvider`, forgotten when it goes), and fixed sets.
//! Secrets and error messages never become labels.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    namespace: String,
    provider: String,
    /// `delivered`, `failed` or `dropped`.
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    namespace: String,
    provider: String,
    /// `unreachable`, `refused` or `invalid`.
    reason: &'static str,
}

/// How a delivery ended.
pub const RESULTS: [&str; 3] = ["delivered", "failed", "dropped"];
/// Why an attempt failed.
pub const REASONS: [&str; 3] = ["unreachable", "refused", "invalid"];

pub struct NotifyMetrics {
    pub(super) registry: Registry,
    deliveries: Family<ResultLabels, Counter>,
    attempt_failures: Family<AttemptLabels, Counter>,
    dropped: Counter,
}

impl Default for NotifyMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl NotifyMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("exo");
        let deliveries = Family::<ResultLabels, Counter>::default();
        let attempt_failures = Family::<AttemptLabels, Counter>::default();
        let dropped = Counter::default();
        registry.register(
            "notifications",
            "Notification deliveries by provider and result (delivered, failed after its retries, dropped: the provider's queue was full)",
            deliveries.clone(),
        );
        registry.register(
            "notification_attempt_failures",
            "Failed delivery attempts, retried or not, by provider and reason (unreachable, refused, invalid)",
            attempt_failures.clone(),
        );
        registry.register(
            "notifications_dropped",
            "Notices dropped before routing because the operator's notification queue was full",
            dropped.clone(),
        );
        NotifyMetrics {
            registry,
            deliveries,
            attempt_failures,
            dropped,
        }
    }

    /// A delivery through provider `namespace/provider` ended with `result`
    /// (one of [`RESULTS`]).
    pub fn delivery(&self, namespace: &str, provider: &str, result: &'static str) {
        self.deliveries
            .get_or_create(&ResultLabels {
                namespace: namespace.to_owned(),
                provider: provider.to_owned(),
                result,
            })
            .inc();
    }

    /// An attempt through provider `namespace/provider` failed for `reason`
    /// (one of [`REASONS`]).
    pub fn attempt_failed(&self, namespace: &str, provider: &str, reason: &'static str) {
        self.attempt_failures
            .get_or_create(&AttemptLabels {
                namespace: namespace.to_owned(),
                provider: provider.to_owned(),
                reason,
            })
            .inc();
    }

    /// `n` more notices dropped by the operator's queue.
    pub fn dropped(&self, n: u64) {
        self.dropped.inc_by(n);
    }

    /// Removes every series of the provider `namespace/provider`.
    pub fn forget(&self, namespace: &str, provider: &str) {
        for result in RESULTS {
            self.deliveries.remove(&ResultLabels {
                namespace: namespace.to_owned(),
                provider: provider.to_owned(),
                result,
            });
        }
        for reason in REASONS {
            self.attempt_failures.remove(&AttemptLabels {
                namespace: namespace.to_owned(),
                provider: provider.to_owned(),
                reason,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(m: &NotifyMetrics) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &m.registry).unwrap();
        text
    }

    #[test]
    fn deliveries_and_failed_attempts_are_counted_per_provider() {
        let m = NotifyMetrics::new();
        m.attempt_failed("ops", "hook", "refused");
        m.attempt_failed("ops", "hook", "refused");
        m.delivery("ops", "hook", "delivered");
        m.delivery("ops", "down", "failed");
        m.dropped(3);
        let text = encoded(&m);
        for want in [
            r#"exo_notifications_total{namespace="ops",provider="hook",result="delivered"} 1"#,
            r#"exo_notifications_total{namespace="ops",provider="down",result="failed"} 1"#,
            r#"exo_notification_attempt_failures_total{namespace="ops",provider="hook",reason="refused"} 2"#,
            "exo_notifications_dropped_total 3",
        ] {
            assert!(text.contains(want), "{want}\n{text}");
        }
        m.forget("ops", "hook");
        let text = encoded(&m);
        assert!(!text.contains(r#"provider="hook""#), "{text}");
        assert!(text.contains(r#"provider="down""#), "{text}");
    }
}
