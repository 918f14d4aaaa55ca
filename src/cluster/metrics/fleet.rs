//! The Fleets' own metrics: a registry under the `exo` prefix, on the same
//! `/metrics` page as the operator's.
//!
//! - `exo_fleet_commit_verification_failures_total{namespace,fleet,reason}`:
//!   syncs that refused the fetched commits because of their signatures
//!   (`spec.verify`; docs/supply-chain.md, "Signed fleet commits"). One per
//!   refused sync, so it keeps rising while the head stays refused.
//!
//! Labels are bounded: a Fleet's namespace and name (one series set per
//! Fleet with `spec.verify`), and the reason, a fixed set. Commits, signers
//! and messages never become labels.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerificationLabels {
    namespace: String,
    fleet: String,
    /// `Unsigned`, `UntrustedSigner`, `BadSignature`, `InvalidKeys`,
    /// `KeysUnavailable` or `HistoryUnavailable`.
    reason: &'static str,
}

pub struct FleetMetrics {
    pub(super) registry: Registry,
    verification_failures: Family<VerificationLabels, Counter>,
}

impl Default for FleetMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl FleetMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("exo");
        let verification_failures = Family::<VerificationLabels, Counter>::default();
        registry.register(
            "fleet_commit_verification_failures",
            "Fleet syncs that refused the fetched commits because of their signatures, by reason",
            verification_failures.clone(),
        );
        FleetMetrics {
            registry,
            verification_failures,
        }
    }

    /// A sync of Fleet `namespace/fleet` refused its fetched commits for
    /// `reason` (a fixed set).
    pub fn verification_failed(&self, namespace: &str, fleet: &str, reason: &'static str) {
        self.verification_failures
            .get_or_create(&VerificationLabels {
                namespace: namespace.to_owned(),
                fleet: fleet.to_owned(),
                reason,
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_counted_per_fleet_and_reason() {
        let m = FleetMetrics::new();
        m.verification_failed("team-a", "main", "Unsigned");
        m.verification_failed("team-a", "main", "Unsigned");
        m.verification_failed("team-a", "main", "InvalidKeys");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &m.registry).unwrap();
        for want in [
            r#"exo_fleet_commit_verification_failures_total{namespace="team-a",fleet="main",reason="Unsigned"} 2"#,
            r#"exo_fleet_commit_verification_failures_total{namespace="team-a",fleet="main",reason="InvalidKeys"} 1"#,
        ] {
            assert!(text.contains(want), "{want}\n{text}");
        }
    }
}
