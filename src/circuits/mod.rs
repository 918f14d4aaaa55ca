//! Circuit and model-failure telemetry: the model gateway's (LiteLLM's)
//! and the broker's Prometheus metrics, read into per-deployment health
//! (healthy, cooled down, in outage), counter increases over a window
//! (fallbacks succeeded and failed, failed requests per model, requests),
//! the conditions the operator alerts on (`circuit/open`,
//! `model/failures`) and a per-tenant view. docs/circuits.md.
//!
//! Layout: pure cores with table-driven tests ([`text`]: the exposition
//! format; [`settings`]: a Fleet's `spec.circuits` checked, LiteLLM's
//! names by default; [`target`]: a labelled Service to its address;
//! [`reading`]: one scrape, deltas between two with counter resets, the
//! window; [`book`]: every target between scrapes, the findings and the
//! [`Snapshot`]), and the shared read handle [`Circuits`]. The scraping
//! leader task is `operator::circuits`.
//!
//! Guarantees: nothing here does I/O; a snapshot never counts a target
//! whose last scrape failed, so a reader gets `None` (no data) rather than
//! a stale "all closed".

pub mod book;
pub mod reading;
pub mod settings;
pub mod target;
pub mod text;

use std::sync::{Arc, PoisonError, RwLock};

pub use book::{Book, DeploymentState, Finding, Snapshot, TenantCircuits};
pub use reading::Health;
pub use settings::Settings;
pub use target::Target;

/// The latest [`Snapshot`], shared: the operator's circuit task publishes
/// one after each round of scrapes; readers (the analysis checks
/// `circuitsOpen` and `fallbackRate`) take it. Cheap to clone (every clone
/// reads the same), reading takes a short lock and an `Arc` clone, never
/// I/O. Empty (every answer `None`) until the first round, and again when
/// a leadership term ends.
#[derive(Debug, Clone, Default)]
pub struct Circuits {
    latest: Arc<RwLock<Arc<Snapshot>>>,
}

impl Circuits {
    pub fn new() -> Self {
        Self::default()
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.latest
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the snapshot (the circuit task).
    pub fn publish(&self, s: Snapshot) {
        *self.latest.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(s);
    }

    /// Deployments in outage behind the tenants' targets now; `None` when
    /// there is no data: none of them has a target, or one that has
    /// targets had none read at the last scrape.
    pub fn circuits_open<S: AsRef<str>>(&self, tenants: &[S]) -> Option<u32> {
        self.snapshot().circuits_open(tenants)
    }

    /// Fallbacks (succeeded and failed) per request over the window
    /// (`spec.circuits.window`); `None` as for [`Self::circuits_open`], or
    /// when there were no requests in it.
    pub fn fallback_rate<S: AsRef<str>>(&self, tenants: &[S]) -> Option<f64> {
        self.snapshot().fallback_rate(tenants)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handle_answers_none_until_published_and_shares_what_is() {
        let c = Circuits::new();
        let reader = c.clone();
        assert_eq!(reader.circuits_open(&["t1"]), None);
        assert_eq!(reader.fallback_rate(&["t1"]), None);
        let mut s = Snapshot::default();
        s.tenants.insert(
            "t1".into(),
            TenantCircuits {
                targets: 1,
                fresh: 1,
                open: 2,
                ..TenantCircuits::default()
            },
        );
        c.publish(s);
        assert_eq!(reader.circuits_open(&["t1".to_owned()]), Some(2));
        assert_eq!(reader.fallback_rate(&["t1"]), None, "no requests");
        c.publish(Snapshot::default());
        assert_eq!(reader.circuits_open(&["t1"]), None);
    }
}
