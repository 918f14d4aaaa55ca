//! The circuit telemetry's metrics, `exo_circuits_*` (docs/circuits.md,
//! "Gauges"): a registry of its own under the `exo_circuits` prefix,
//! encoded on the same `/metrics` page as the operator's.
//!
//! Labels: `tenant` (a namespace with a scrape target; bounded by the
//! annotated Services, and the leader's task removes a tenant's series
//! when its last target goes and all of them when its term ends,
//! [`CircuitMetrics::forget`]); `outcome` and `result` are fixed sets.
//! Deployment ids and model names, which come from the scraped text,
//! never become labels.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct TenantLabels {
    pub tenant: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FallbackLabels {
    tenant: String,
    /// `succeeded` or `failed`.
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScrapeLabels {
    /// `ok`, or why it failed (`unreachable`, `timeout`, `status`,
    /// `too_large`, `parse`).
    result: &'static str,
}

/// What one tenant's gauges show; counts over the window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantGauges {
    /// Deployments in outage.
    pub open: u32,
    pub cooled_down: u32,
    pub fallbacks_succeeded: f64,
    pub fallbacks_failed: f64,
    pub requests: f64,
    /// Failed requests, every model.
    pub model_failures: f64,
    /// Models over the `model/failures` threshold.
    pub models_failing: u32,
    /// Fallbacks per request; `None` without requests (the series is
    /// removed).
    pub fallback_rate: Option<f64>,
    /// Targets, and those whose last scrape failed.
    pub targets: u32,
    pub targets_down: u32,
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

pub struct CircuitMetrics {
    pub(super) registry: Registry,
    open: Family<TenantLabels, Gauge>,
    cooled_down: Family<TenantLabels, Gauge>,
    fallbacks: Family<FallbackLabels, FloatGauge>,
    requests: Family<TenantLabels, FloatGauge>,
    model_failures: Family<TenantLabels, FloatGauge>,
    models_failing: Family<TenantLabels, Gauge>,
    fallback_rate: Family<TenantLabels, FloatGauge>,
    targets: Family<TenantLabels, Gauge>,
    targets_down: Family<TenantLabels, Gauge>,
    scrapes: Family<ScrapeLabels, Counter>,
}

impl Default for CircuitMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl CircuitMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("exo_circuits");
        let m = CircuitMetrics {
            open: Family::default(),
            cooled_down: Family::default(),
            fallbacks: Family::default(),
            requests: Family::default(),
            model_failures: Family::default(),
            models_failing: Family::default(),
            fallback_rate: Family::default(),
            targets: Family::default(),
            targets_down: Family::default(),
            scrapes: Family::default(),
            registry: Registry::default(),
        };
        registry.register(
            "open",
            "Model deployments in outage (circuit open) behind the tenant's scrape targets",
            m.open.clone(),
        );
        registry.register(
            "cooled_down",
            "Model deployments cooled down or partly out behind the tenant's scrape targets",
            m.cooled_down.clone(),
        );
        registry.register(
            "fallbacks",
            "Fallbacks within the window (spec.circuits.window), by outcome",
            m.fallbacks.clone(),
        );
        registry.register("requests", "Requests within the window", m.requests.clone());
        registry.register(
            "model_failures",
            "Failed requests within the window, every model",
            m.model_failures.clone(),
        );
        registry.register(
            "models_failing",
            "Models whose failed requests within the window reach spec.circuits.modelFailures",
            m.models_failing.clone(),
        );
        registry.register(
            "fallback_ratio",
            "Fallbacks per request within the window (absent without requests)",
            m.fallback_rate.clone(),
        );
        registry.register(
            "targets",
            "Scrape targets (Services labelled autonomic.sh/metrics)",
            m.targets.clone(),
        );
        registry.register(
            "targets_down",
            "Scrape targets whose last scrape failed",
            m.targets_down.clone(),
        );
        registry.register(
            "scrapes",
            "Scrapes of the targets, by result",
            m.scrapes.clone(),
        );
        CircuitMetrics { registry, ..m }
    }

    /// One scrape ended: `None` is success, else its failure's category.
    pub fn scraped(&self, failure: Option<&'static str>) {
        self.scrapes
            .get_or_create(&ScrapeLabels {
                result: failure.unwrap_or("ok"),
            })
            .inc();
    }

    /// Shows `g` for `tenant`.
    pub fn show(&self, tenant: &TenantLabels, g: &TenantGauges) {
        self.open.get_or_create(tenant).set(i64::from(g.open));
        self.cooled_down
            .get_or_create(tenant)
            .set(i64::from(g.cooled_down));
        for (outcome, n) in [
            ("succeeded", g.fallbacks_succeeded),
            ("failed", g.fallbacks_failed),
        ] {
            self.fallbacks
                .get_or_create(&fallback_labels(tenant, outcome))
                .set(n);
        }
        self.requests.get_or_create(tenant).set(g.requests);
        self.model_failures
            .get_or_create(tenant)
            .set(g.model_failures);
        self.models_failing
            .get_or_create(tenant)
            .set(i64::from(g.models_failing));
        match g.fallback_rate {
            Some(r) => {
                self.fallback_rate.get_or_create(tenant).set(r);
            }
            None => {
                self.fallback_rate.remove(tenant);
            }
        }
        self.targets.get_or_create(tenant).set(i64::from(g.targets));
        self.targets_down
            .get_or_create(tenant)
            .set(i64::from(g.targets_down));
    }

    /// Removes every series of `tenant`.
    pub fn forget(&self, tenant: &TenantLabels) {
        self.open.remove(tenant);
        self.cooled_down.remove(tenant);
        for outcome in ["succeeded", "failed"] {
            self.fallbacks.remove(&fallback_labels(tenant, outcome));
        }
        self.requests.remove(tenant);
        self.model_failures.remove(tenant);
        self.models_failing.remove(tenant);
        self.fallback_rate.remove(tenant);
        self.targets.remove(tenant);
        self.targets_down.remove(tenant);
    }
}

fn fallback_labels(tenant: &TenantLabels, outcome: &'static str) -> FallbackLabels {
    FallbackLabels {
        tenant: tenant.tenant.clone(),
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(m: &CircuitMetrics) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode_registry(&mut text, &m.registry).unwrap();
        text
    }

    #[test]
    fn a_tenants_series_are_shown_and_forgotten() {
        let m = CircuitMetrics::new();
        let t = TenantLabels {
            tenant: "t1".into(),
        };
        m.show(
            &t,
            &TenantGauges {
                open: 1,
                fallbacks_succeeded: 5.0,
                requests: 50.0,
                fallback_rate: Some(0.1),
                targets: 2,
                targets_down: 1,
                ..TenantGauges::default()
            },
        );
        m.scraped(None);
        m.scraped(Some("timeout"));
        let text = page(&m);
        for line in [
            "exo_circuits_open{tenant=\"t1\"} 1",
            "exo_circuits_fallbacks{tenant=\"t1\",outcome=\"succeeded\"} 5.0",
            "exo_circuits_fallback_ratio{tenant=\"t1\"} 0.1",
            "exo_circuits_targets_down{tenant=\"t1\"} 1",
            "exo_circuits_scrapes_total{result=\"timeout\"} 1",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        m.show(&t, &TenantGauges::default());
        assert!(
            !page(&m).contains("fallback_ratio{"),
            "no requests: no ratio"
        );
        m.forget(&t);
        assert!(!page(&m).contains("tenant=\"t1\""), "{}", page(&m));
    }
}
