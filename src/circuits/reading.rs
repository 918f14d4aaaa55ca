//! One scrape in the settings' terms ([`Reading`]), what changed between
//! two scrapes of the same target ([`Delta`], counter resets handled), and
//! the deltas of the last window ([`History`]). Pure.
//!
//! Counters are kept per series (the metric name and its labels), so a
//! reset is seen where it happens: a series whose value fell was reset
//! and counts from 0, and a series that appears between two scrapes counts
//! from 0 too (a Prometheus client creates a labelled series at its first
//! increment, so its whole value is new). Sums over series would hide a
//! reset behind another series' growth.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::settings::{Settings, is_counter};
use super::text::{self, Sample, TextError};

/// A deployment's state as the gauge says.
#[derive(Debug, Clone, PartialEq)]
pub struct Gauge {
    /// For humans (the `deploymentName` label), or the id.
    pub name: String,
    /// The highest value among its series.
    pub state: f64,
}

/// One counter's series: by series key, the group it counts for (a
/// deployment id, a model, or empty) and its value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counter {
    series: BTreeMap<String, (String, f64)>,
}

impl Counter {
    fn add(&mut self, sample: &Sample<'_>, group: &str) {
        if !(sample.value.is_finite() && sample.value >= 0.0) {
            return;
        }
        let mut key = sample.name.to_owned();
        for (k, v) in &sample.labels {
            key.push('\u{1f}');
            key.push_str(k);
            key.push('=');
            key.push_str(v);
        }
        self.series.insert(key, (group.to_owned(), sample.value));
    }

    /// The increase since `before`, per group.
    pub fn increase(&self, before: &Counter) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for (key, (group, now)) in &self.series {
            let grew = match before.series.get(key) {
                Some((_, then)) if now >= then => now - then,
                // Reset (the value fell), or new since `before`.
                _ => *now,
            };
            *out.entry(group.clone()).or_insert(0.0) += grew;
        }
        out
    }

    /// The series counted.
    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}

/// What one scrape of one target says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Deployments by id (the `deployment` label, else the name label).
    pub deployments: BTreeMap<String, Gauge>,
    /// Per deployment id.
    pub cooled_down: Counter,
    pub fallbacks_succeeded: Counter,
    pub fallbacks_failed: Counter,
    /// Per model.
    pub failed_requests: Counter,
    pub requests: Counter,
}

impl Reading {
    /// Reads the samples of `text` the settings name; the rest is skipped
    /// (but must be well formed: the first malformed line fails it all).
    pub fn parse(body: &str, s: &Settings) -> Result<Reading, TextError> {
        let mut r = Reading::default();
        let (m, l) = (&s.metrics, &s.labels);
        for sample in text::samples(body) {
            let sample = sample?;
            let name = sample.name;
            let id = || {
                sample
                    .label(&l.deployment)
                    .or_else(|| sample.label(&l.deployment_name))
            };
            if name == m.deployment_state {
                let Some(id) = id() else { continue };
                if sample.value.is_nan() {
                    continue;
                }
                let shown = sample.label(&l.deployment_name).unwrap_or(id);
                let g = r.deployments.entry(id.to_owned()).or_insert(Gauge {
                    name: shown.to_owned(),
                    state: sample.value,
                });
                g.state = g.state.max(sample.value);
            } else if is_counter(name, &m.deployment_cooled_down) {
                if let Some(id) = id() {
                    r.cooled_down.add(&sample, id);
                }
            } else if is_counter(name, &m.fallbacks_succeeded) {
                r.fallbacks_succeeded.add(&sample, "");
            } else if is_counter(name, &m.fallbacks_failed) {
                r.fallbacks_failed.add(&sample, "");
            } else if is_counter(name, &m.failed_requests) {
                let model = sample.label(&l.model).unwrap_or("").to_owned();
                r.failed_requests.add(&sample, &model);
            } else if is_counter(name, &m.requests) {
                r.requests.add(&sample, "");
            }
        }
        Ok(r)
    }

    /// How the deployment `id` stands, given whether it was cooled down
    /// since the scrape before.
    pub fn health(&self, id: &str, cooled: bool, s: &Settings) -> Option<Health> {
        let g = self.deployments.get(id)?;
        Some(if g.state >= s.outage_at {
            Health::Outage
        } else if s.cooled_down_at.is_some_and(|at| g.state >= at) || cooled {
            Health::CooledDown
        } else {
            Health::Healthy
        })
    }
}

/// A deployment's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Health {
    Healthy,
    /// Partly out (the state gauge at `cooledDownAt`), or cooled down since
    /// the scrape before.
    CooledDown,
    /// In outage: its circuit is open.
    Outage,
}

impl Health {
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::CooledDown => "cooled-down",
            Health::Outage => "outage",
        }
    }
}

/// What the counters did between two scrapes of one target.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delta {
    pub fallbacks_succeeded: f64,
    pub fallbacks_failed: f64,
    pub requests: f64,
    /// Per model.
    pub failed_requests: BTreeMap<String, f64>,
    /// Per deployment id; only those that grew.
    pub cooled_down: BTreeMap<String, f64>,
}

fn total(m: BTreeMap<String, f64>) -> f64 {
    m.values().sum()
}

fn positive(m: BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    m.into_iter().filter(|(_, v)| *v > 0.0).collect()
}

impl Delta {
    pub fn between(before: &Reading, now: &Reading) -> Delta {
        Delta {
            fallbacks_succeeded: total(
                now.fallbacks_succeeded
                    .increase(&before.fallbacks_succeeded),
            ),
            fallbacks_failed: total(now.fallbacks_failed.increase(&before.fallbacks_failed)),
            requests: total(now.requests.increase(&before.requests)),
            failed_requests: positive(now.failed_requests.increase(&before.failed_requests)),
            cooled_down: positive(now.cooled_down.increase(&before.cooled_down)),
        }
    }

    /// Adds `other` into this one.
    pub fn add(&mut self, other: &Delta) {
        self.fallbacks_succeeded += other.fallbacks_succeeded;
        self.fallbacks_failed += other.fallbacks_failed;
        self.requests += other.requests;
        for (k, v) in &other.failed_requests {
            *self.failed_requests.entry(k.clone()).or_insert(0.0) += v;
        }
        for (k, v) in &other.cooled_down {
            *self.cooled_down.entry(k.clone()).or_insert(0.0) += v;
        }
    }

    /// Fallbacks (succeeded or failed) per request; `None` without requests.
    pub fn fallback_rate(&self) -> Option<f64> {
        (self.requests > 0.0)
            .then(|| (self.fallbacks_succeeded + self.fallbacks_failed) / self.requests)
    }

    pub fn failed_total(&self) -> f64 {
        self.failed_requests.values().sum()
    }
}

/// The deltas of one target within the last window, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// (the later scrape's time in ms since the epoch, the delta).
    deltas: VecDeque<(i64, Delta)>,
    /// How far back the deltas reach: the first scrape's time while it is
    /// within the window.
    since_ms: Option<i64>,
}

impl History {
    /// A delta ending at `at_ms`; deltas that ended `window` or longer ago
    /// go.
    pub fn push(&mut self, at_ms: i64, d: Delta, window: Duration) {
        self.deltas.push_back((at_ms, d));
        self.forget(at_ms, window);
    }

    /// The first scrape: the window starts here.
    pub fn start(&mut self, at_ms: i64) {
        self.since_ms.get_or_insert(at_ms);
    }

    fn forget(&mut self, now_ms: i64, window: Duration) {
        let from = now_ms.saturating_sub(i64::try_from(window.as_millis()).unwrap_or(i64::MAX));
        while self.deltas.front().is_some_and(|(at, _)| *at <= from) {
            self.deltas.pop_front();
        }
        if self.since_ms.is_some_and(|s| s < from) {
            self.since_ms = Some(from);
        }
    }

    /// The sum of the deltas within `window` of `now_ms`.
    pub fn sum(&self, now_ms: i64, window: Duration) -> Delta {
        let from = now_ms.saturating_sub(i64::try_from(window.as_millis()).unwrap_or(i64::MAX));
        let mut out = Delta::default();
        for (_, d) in self.deltas.iter().filter(|(at, _)| *at > from) {
            out.add(d);
        }
        out
    }

    /// How long the deltas cover, at most the window: shorter just after
    /// the first scrape.
    pub fn covered(&self, now_ms: i64) -> Duration {
        let since = self.since_ms.unwrap_or(now_ms);
        Duration::from_millis(u64::try_from(now_ms.saturating_sub(since)).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Reading {
        Reading::parse(text, &Settings::default()).unwrap()
    }

    const BEFORE: &str = r#"
# TYPE litellm_deployment_state gauge
litellm_deployment_state{api_base="https://eu.example",api_provider="azure",litellm_model_name="azure/gpt-4o",model_id="d1"} 0.0
litellm_deployment_state{api_base="https://us.example",api_provider="openai",litellm_model_name="gpt-4o",model_id="d2"} 0.0
litellm_deployment_state{api_base="https://x.example",api_provider="anthropic",litellm_model_name="claude",model_id="d3"} 0.0
# TYPE litellm_deployment_cooled_down_total counter
litellm_deployment_cooled_down_total{api_base="https://eu.example",litellm_model_name="azure/gpt-4o",model_id="d1",exception_status="429"} 1.0
# TYPE litellm_deployment_successful_fallbacks_total counter
litellm_deployment_successful_fallbacks_total{requested_model="gpt-4o",fallback_model="claude",api_key_alias="a"} 4.0
litellm_deployment_successful_fallbacks_created{requested_model="gpt-4o",fallback_model="claude",api_key_alias="a"} 1.7e9
# TYPE litellm_deployment_failed_fallbacks_total counter
litellm_deployment_failed_fallbacks_total{requested_model="gpt-4o",fallback_model="claude"} 1.0
# TYPE litellm_proxy_failed_requests_metric_total counter
litellm_proxy_failed_requests_metric_total{requested_model="gpt-4o",exception_status="429",api_key_alias="a"} 5.0
litellm_proxy_failed_requests_metric_total{requested_model="gpt-4o",exception_status="500",api_key_alias="a"} 2.0
# TYPE litellm_proxy_total_requests_metric_total counter
litellm_proxy_total_requests_metric_total{requested_model="gpt-4o",status_code="200",api_key_alias="a"} 90.0
litellm_proxy_total_requests_metric_total{requested_model="gpt-4o",status_code="429",api_key_alias="a"} 10.0
"#;

    #[test]
    fn a_scrape_is_read_in_the_settings_terms() {
        let r = read(BEFORE);
        assert_eq!(r.deployments.len(), 3);
        assert_eq!(r.deployments["d1"].name, "azure/gpt-4o");
        assert_eq!(
            r.fallbacks_succeeded.len(),
            1,
            "_created is not the counter"
        );
        assert_eq!(r.failed_requests.len(), 2);
        let s = Settings::default();
        assert_eq!(r.health("d1", false, &s), Some(Health::Healthy));
        assert_eq!(r.health("d1", true, &s), Some(Health::CooledDown));
        assert_eq!(r.health("nope", false, &s), None);
        let zero = Reading::default();
        let d = Delta::between(&zero, &r);
        assert_eq!(
            (d.requests, d.fallbacks_succeeded, d.fallbacks_failed),
            (100.0, 4.0, 1.0)
        );
        assert_eq!(d.failed_requests["gpt-4o"], 7.0);
        assert_eq!(d.fallback_rate(), Some(0.05));
    }

    #[test]
    fn states_cooldowns_and_counter_resets_between_two_scrapes() {
        let before = read(BEFORE);
        // d1 in complete outage and cooled down again, d2 partly out;
        // requests grew by 50; the 500 series of the failures was reset
        // (the process restarted it) and a new 503 series appeared.
        let now = BEFORE
            .replace("model_id=\"d1\"} 0.0", "model_id=\"d1\"} 2.0")
            .replace("model_id=\"d2\"} 0.0", "model_id=\"d2\"} 1.0")
            .replace(
                "exception_status=\"429\"} 1.0",
                "exception_status=\"429\"} 3.0",
            )
            .replace(
                "status_code=\"200\",api_key_alias=\"a\"} 90.0",
                "status_code=\"200\",api_key_alias=\"a\"} 140.0",
            )
            .replace(
                "exception_status=\"500\",api_key_alias=\"a\"} 2.0",
                "exception_status=\"500\",api_key_alias=\"a\"} 1.0",
            )
            + "litellm_proxy_failed_requests_metric_total{requested_model=\"claude\",exception_status=\"503\"} 2.0\n"
            + "litellm_deployment_successful_fallbacks_total{requested_model=\"gpt-4o\",fallback_model=\"claude\",api_key_alias=\"b\"} 1.0\n";
        let now = read(&now);
        let d = Delta::between(&before, &now);
        assert_eq!(d.requests, 50.0);
        assert_eq!(d.fallbacks_succeeded, 1.0, "a new series counts from 0");
        assert_eq!(d.fallbacks_failed, 0.0);
        assert_eq!(
            d.failed_requests["gpt-4o"], 1.0,
            "the reset series counts from 0"
        );
        assert_eq!(d.failed_requests["claude"], 2.0);
        assert_eq!(d.cooled_down, BTreeMap::from([("d1".to_owned(), 2.0)]));
        assert_eq!(d.fallback_rate(), Some(1.0 / 50.0));
        let s = Settings::default();
        let cooled = |id: &str| d.cooled_down.contains_key(id);
        assert_eq!(now.health("d1", cooled("d1"), &s), Some(Health::Outage));
        assert_eq!(now.health("d2", cooled("d2"), &s), Some(Health::CooledDown));
        assert_eq!(now.health("d3", cooled("d3"), &s), Some(Health::Healthy));
        // Nothing moved: no requests, no rate.
        assert_eq!(Delta::between(&now, &now).fallback_rate(), None);
    }

    #[test]
    fn names_and_labels_are_configurable() {
        let mut s = Settings::default();
        s.metrics.deployment_state = "broker_circuit_open".into();
        s.metrics.requests = "broker_requests".into();
        s.labels.deployment = "upstream".into();
        s.outage_at = 1.0;
        s.cooled_down_at = None;
        let text = "broker_circuit_open{upstream=\"gw-a\"} 1\nbroker_circuit_open{upstream=\"gw-b\"} 0\nbroker_requests 12\nlitellm_deployment_state{model_id=\"x\"} 2\n";
        let r = Reading::parse(text, &s).unwrap();
        assert_eq!(r.deployments.keys().collect::<Vec<_>>(), ["gw-a", "gw-b"]);
        assert_eq!(r.health("gw-a", false, &s), Some(Health::Outage));
        assert_eq!(r.health("gw-b", false, &s), Some(Health::Healthy));
        assert_eq!(Delta::between(&Reading::default(), &r).requests, 12.0);
    }

    #[test]
    fn the_history_sums_the_window_only() {
        let w = Duration::from_secs(60);
        let mut h = History::default();
        h.start(0);
        let d = |n: f64| Delta {
            requests: n,
            ..Delta::default()
        };
        h.push(30_000, d(1.0), w);
        h.push(60_000, d(2.0), w);
        assert_eq!(h.covered(60_000), w);
        assert_eq!(h.sum(60_000, w).requests, 3.0);
        h.push(90_000, d(4.0), w);
        // The delta ending at 30 s is now outside (30 s, 90 s].
        assert_eq!(h.sum(90_000, w).requests, 6.0);
        assert_eq!(h.covered(90_000), w);
        let mut fresh = History::default();
        fresh.start(100);
        assert_eq!(fresh.covered(5_100), Duration::from_secs(5));
    }
}
