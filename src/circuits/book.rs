//! What the operator holds between scrapes: per target its last reading,
//! the deltas of the window and whether its last scrape failed
//! ([`Book`]); from them the conditions that hold ([`Finding`]:
//! `circuit/open`, `model/failures`) and the per-tenant view
//! ([`Snapshot`]). Pure: times are given in ms since the epoch.
//!
//! A target whose scrape fails keeps its last reading for the alerts (an
//! outage seen is not declared over because the gateway stopped
//! answering: a failing scrape is its own signal, counted and reported),
//! but counts as no data in the snapshot, so a check reading it is
//! inconclusive rather than passing. Its window's deltas age out as usual.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::reading::{Delta, Health, History, Reading};
use super::settings::Settings;
use super::target::Target;
use crate::wire::{Alert, Severity};

/// Prefix of the `circuit/open` alert keys.
pub const CIRCUIT_PREFIX: &str = "circuit/";
/// Prefix of the `model/failures` alert keys.
pub const MODEL_PREFIX: &str = "model/";

/// One target, between scrapes.
#[derive(Debug, Clone)]
struct Held {
    target: Target,
    last: Option<Reading>,
    history: History,
    /// Deployments cooled down between the last two scrapes.
    cooled: BTreeSet<String>,
    /// Why the last scrape failed (a bounded category); `None` after a
    /// good one.
    failing: Option<&'static str>,
}

impl Held {
    fn new(target: Target) -> Self {
        Held {
            target,
            last: None,
            history: History::default(),
            cooled: BTreeSet::new(),
            failing: None,
        }
    }

    fn fresh(&self) -> bool {
        self.failing.is_none() && self.last.is_some()
    }

    fn deployments(&self, s: &Settings) -> Vec<DeploymentState> {
        let Some(r) = &self.last else {
            return Vec::new();
        };
        r.deployments
            .iter()
            .filter_map(|(id, g)| {
                let health = r.health(id, self.cooled.contains(id), s)?;
                Some(DeploymentState {
                    service: self.target.service.clone(),
                    id: id.clone(),
                    name: g.name.clone(),
                    health,
                })
            })
            .collect()
    }
}

/// Every target's state, by tenant and Service.
#[derive(Debug, Clone, Default)]
pub struct Book {
    targets: BTreeMap<(String, String), Held>,
}

/// How one scrape of a target ended.
pub type Scraped = Result<Reading, &'static str>;

impl Book {
    /// The targets are now `targets`: new ones start afresh, gone ones are
    /// dropped (their conditions with them), and one whose address changed
    /// starts afresh (another endpoint's counters are not comparable).
    pub fn retarget(&mut self, targets: Vec<Target>) {
        let mut next = BTreeMap::new();
        for t in targets {
            let key = (t.tenant.clone(), t.service.clone());
            let held = match self.targets.remove(&key) {
                Some(h) if h.target == t => h,
                _ => Held::new(t),
            };
            next.insert(key, held);
        }
        self.targets = next;
    }

    /// The settings changed: every reading and window starts afresh (the
    /// names read may be others).
    pub fn reset(&mut self) {
        for h in self.targets.values_mut() {
            *h = Held::new(h.target.clone());
        }
    }

    pub fn targets(&self) -> impl Iterator<Item = &Target> {
        self.targets.values().map(|h| &h.target)
    }

    /// Records a scrape of `target` that ended at `at_ms`.
    pub fn scraped(&mut self, target: &Target, at_ms: i64, outcome: Scraped, s: &Settings) {
        let key = (target.tenant.clone(), target.service.clone());
        let Some(h) = self.targets.get_mut(&key).filter(|h| h.target == *target) else {
            return;
        };
        match outcome {
            Err(why) => h.failing = Some(why),
            Ok(now) => {
                h.failing = None;
                match &h.last {
                    Some(before) => {
                        let d = Delta::between(before, &now);
                        h.cooled = d.cooled_down.keys().cloned().collect();
                        h.history.push(at_ms, d, s.window);
                    }
                    None => h.history.start(at_ms),
                }
                h.last = Some(now);
            }
        }
    }

    /// Targets by why their last scrape failed (`None`: it did not).
    pub fn failing(&self) -> impl Iterator<Item = (&Target, Option<&'static str>)> {
        self.targets.values().map(|h| (&h.target, h.failing))
    }

    /// The conditions that hold at `now_ms`.
    pub fn findings(&self, now_ms: i64, s: &Settings) -> Vec<Finding> {
        let mut out = Vec::new();
        for h in self.targets.values() {
            let (tenant, service) = (&h.target.tenant, &h.target.service);
            for d in h.deployments(s) {
                if d.health == Health::Outage {
                    out.push(Finding {
                        tenant: tenant.clone(),
                        service: service.clone(),
                        condition: Condition::CircuitOpen {
                            id: clean(&d.id),
                            name: clean(&d.name),
                        },
                        message: format!(
                            "Deployment {} (id {}) behind Service {tenant}/{service} is in outage: its circuit is open (state gauge {} at or above spec.circuits.outageAt {}). Requests to it fail over to fallbacks while it lasts; check its provider.",
                            clean(&d.name),
                            clean(&d.id),
                            s.metrics.deployment_state,
                            s.outage_at,
                        ),
                    });
                }
            }
            let Some(threshold) = s.model_failures else {
                continue;
            };
            let window = h.history.sum(now_ms, s.window);
            for (model, failed) in &window.failed_requests {
                if *failed >= f64::from(threshold) {
                    let model = if model.is_empty() { "(none)" } else { model };
                    out.push(Finding {
                        tenant: tenant.clone(),
                        service: service.clone(),
                        condition: Condition::ModelFailures {
                            model: clean(model),
                        },
                        message: format!(
                            "Model {} failed at least {threshold} requests within {} at Service {tenant}/{service} ({} over spec.circuits.modelFailures).",
                            clean(model),
                            crate::duration::human(s.window),
                            s.metrics.failed_requests,
                        ),
                    });
                }
            }
        }
        out
    }

    /// The per-tenant view at `now_ms`.
    pub fn snapshot(&self, now_ms: i64, s: &Settings) -> Snapshot {
        let mut tenants: BTreeMap<String, TenantCircuits> = BTreeMap::new();
        for h in self.targets.values() {
            let t = tenants.entry(h.target.tenant.clone()).or_default();
            t.targets += 1;
            if !h.fresh() {
                continue;
            }
            t.fresh += 1;
            for d in h.deployments(s) {
                match d.health {
                    Health::Outage => t.open += 1,
                    Health::CooledDown => t.cooled_down += 1,
                    Health::Healthy => {}
                }
                t.deployments.push(d);
            }
            t.window.add(&h.history.sum(now_ms, s.window));
            let covered = h.history.covered(now_ms);
            t.covered = Some(t.covered.map_or(covered, |c| c.min(covered)));
        }
        Snapshot {
            at_ms: now_ms,
            window: s.window,
            tenants,
        }
    }
}

/// A label value fit for an alert's key and message: no control
/// characters, at most 128 bytes.
fn clean(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if out.len() > 128 {
        let mut end = 128;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    out
}

/// One deployment as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentState {
    /// The Service it was read from.
    pub service: String,
    pub id: String,
    pub name: String,
    pub health: Health,
}

/// One tenant's circuits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantCircuits {
    /// Its targets.
    pub targets: u32,
    /// Those whose last scrape succeeded; only they are counted below.
    pub fresh: u32,
    pub deployments: Vec<DeploymentState>,
    /// Deployments in outage.
    pub open: u32,
    pub cooled_down: u32,
    /// The counters' increase over the window.
    pub window: Delta,
    /// How much of the window the increase covers (shorter after a start);
    /// `None` without a fresh target.
    pub covered: Option<Duration>,
}

/// Every tenant's circuits at one time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub at_ms: i64,
    pub window: Duration,
    pub tenants: BTreeMap<String, TenantCircuits>,
}

impl Snapshot {
    /// The named tenants that have targets, or `None` when one of them has
    /// no fresh target (it cannot be told) or none has targets at all.
    fn known<'a, S: AsRef<str>>(&'a self, tenants: &[S]) -> Option<Vec<&'a TenantCircuits>> {
        let mut out = Vec::new();
        for name in tenants {
            if let Some(t) = self.tenants.get(name.as_ref()) {
                if t.fresh == 0 {
                    return None;
                }
                out.push(t);
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// Deployments in outage behind the tenants' targets; `None` when
    /// there is no data (no target, or one of them not read).
    pub fn circuits_open<S: AsRef<str>>(&self, tenants: &[S]) -> Option<u32> {
        Some(self.known(tenants)?.iter().map(|t| t.open).sum())
    }

    /// Fallbacks (succeeded and failed) per request over the window;
    /// `None` when there is no data or there were no requests.
    pub fn fallback_rate<S: AsRef<str>>(&self, tenants: &[S]) -> Option<f64> {
        let mut sum = Delta::default();
        for t in self.known(tenants)? {
            sum.add(&t.window);
        }
        sum.fallback_rate()
    }
}

/// A condition that holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// A deployment in outage.
    CircuitOpen { id: String, name: String },
    /// A model's failed requests over the threshold within the window.
    ModelFailures { model: String },
}

/// One condition of one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub tenant: String,
    pub service: String,
    pub condition: Condition,
    /// Stable while the condition holds (no live counts).
    pub message: String,
}

impl Finding {
    /// `circuit/open/<tenant>/<service>/<deployment id>` or
    /// `model/failures/<tenant>/<service>/<model>`.
    pub fn key(&self) -> String {
        let (t, s) = (&self.tenant, &self.service);
        match &self.condition {
            Condition::CircuitOpen { id, .. } => format!("{CIRCUIT_PREFIX}open/{t}/{s}/{id}"),
            Condition::ModelFailures { model } => format!("{MODEL_PREFIX}failures/{t}/{s}/{model}"),
        }
    }

    /// The alert's reason (an identifier).
    pub fn reason(&self) -> &'static str {
        match self.condition {
            Condition::CircuitOpen { .. } => "CircuitOpen",
            Condition::ModelFailures { .. } => "ModelFailures",
        }
    }

    pub fn alert(&self) -> Alert {
        Alert::new(
            Severity::Warning,
            self.reason(),
            self.tenant.clone(),
            format!("Service/{}", self.service),
            self.message.clone(),
        )
        .keyed(self.key())
    }

    /// What the clearing Event says.
    pub fn cleared(&self) -> String {
        match &self.condition {
            Condition::CircuitOpen { id, name } => format!(
                "Deployment {name} (id {id}) behind Service {}/{} is out of outage, or no longer listed: its circuit closed",
                self.tenant, self.service
            ),
            Condition::ModelFailures { model } => format!(
                "Model {model} at Service {}/{} is below the failure threshold again",
                self.tenant, self.service
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(tenant: &str, service: &str) -> Target {
        Target {
            tenant: tenant.into(),
            service: service.into(),
            url: format!("http://{service}.{tenant}.svc:4000/metrics"),
        }
    }

    fn text(d1: u32, requests: u32, fallbacks: u32, failed: u32) -> String {
        format!(
            "litellm_deployment_state{{litellm_model_name=\"azure/gpt-4o\",model_id=\"d1\"}} {d1}\n\
             litellm_deployment_state{{litellm_model_name=\"claude\",model_id=\"d2\"}} 0\n\
             litellm_proxy_total_requests_metric_total{{requested_model=\"gpt-4o\"}} {requests}\n\
             litellm_deployment_successful_fallbacks_total{{requested_model=\"gpt-4o\"}} {fallbacks}\n\
             litellm_proxy_failed_requests_metric_total{{requested_model=\"gpt-4o\"}} {failed}\n"
        )
    }

    fn scrape(book: &mut Book, t: &Target, at: i64, body: &str, s: &Settings) {
        book.scraped(t, at, Ok(Reading::parse(body, s).unwrap()), s);
    }

    #[test]
    fn an_outage_opens_a_circuit_and_recovery_closes_it() {
        let s = Settings::default();
        let (a, b) = (target("t1", "litellm"), target("t2", "litellm"));
        let mut book = Book::default();
        book.retarget(vec![a.clone(), b.clone()]);
        // Nothing read yet: no data for anyone.
        let snap = book.snapshot(0, &s);
        assert_eq!(snap.circuits_open(&["t1"]), None);
        scrape(&mut book, &a, 1_000, &text(0, 100, 0, 0), &s);
        scrape(&mut book, &b, 1_000, &text(0, 100, 0, 0), &s);
        let snap = book.snapshot(1_000, &s);
        assert_eq!(snap.circuits_open(&["t1", "t2"]), Some(0));
        assert_eq!(
            snap.fallback_rate(&["t1"]),
            None,
            "one scrape: no requests in the window"
        );
        assert!(book.findings(1_000, &s).is_empty());

        scrape(&mut book, &a, 31_000, &text(2, 150, 5, 3), &s);
        scrape(&mut book, &b, 31_000, &text(0, 200, 0, 0), &s);
        let snap = book.snapshot(31_000, &s);
        assert_eq!(snap.circuits_open(&["t1"]), Some(1));
        assert_eq!(snap.circuits_open(&["t2"]), Some(0));
        assert_eq!(snap.circuits_open(&["t1", "t2", "no-targets"]), Some(1));
        assert_eq!(snap.circuits_open(&["no-targets"]), None);
        assert_eq!(snap.fallback_rate(&["t1"]), Some(0.1));
        assert_eq!(snap.fallback_rate(&["t1", "t2"]), Some(5.0 / 150.0));
        let t1 = &snap.tenants["t1"];
        assert_eq!((t1.open, t1.fresh, t1.targets), (1, 1, 1));
        assert_eq!(t1.covered, Some(Duration::from_secs(30)));
        let f = book.findings(31_000, &s);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].key(), "circuit/open/t1/litellm/d1");
        let alert = f[0].alert();
        assert_eq!(
            (
                alert.reason.as_str(),
                alert.namespace.as_str(),
                alert.object.as_str()
            ),
            ("CircuitOpen", "t1", "Service/litellm")
        );
        assert!(alert.validate().is_ok());
        assert!(f[0].message.contains("azure/gpt-4o"), "{}", f[0].message);

        // The gateway stops answering: the outage is held for the alert,
        // the snapshot has no data for t1.
        book.scraped(&a, 61_000, Err("unreachable"), &s);
        assert_eq!(book.findings(61_000, &s).len(), 1);
        let snap = book.snapshot(61_000, &s);
        assert_eq!(snap.circuits_open(&["t1"]), None);
        assert_eq!(snap.circuits_open(&["t1", "t2"]), None);
        assert_eq!(snap.circuits_open(&["t2"]), Some(0));

        // It recovers.
        scrape(&mut book, &a, 91_000, &text(0, 160, 5, 3), &s);
        assert!(book.findings(91_000, &s).is_empty());
        assert_eq!(book.snapshot(91_000, &s).circuits_open(&["t1"]), Some(0));
    }

    #[test]
    fn model_failures_fire_over_the_threshold_within_the_window() {
        let s = Settings {
            model_failures: Some(5),
            window: Duration::from_secs(60),
            ..Settings::default()
        };
        let a = target("t1", "litellm");
        let mut book = Book::default();
        book.retarget(vec![a.clone()]);
        scrape(&mut book, &a, 0, &text(0, 10, 0, 0), &s);
        scrape(&mut book, &a, 30_000, &text(0, 20, 0, 3), &s);
        assert!(book.findings(30_000, &s).is_empty(), "3 < 5");
        scrape(&mut book, &a, 60_000, &text(0, 30, 0, 6), &s);
        let f = book.findings(60_000, &s);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].key(), "model/failures/t1/litellm/gpt-4o");
        assert_eq!(f[0].alert().reason, "ModelFailures");
        assert!(
            f[0].message.contains("at least 5 requests within 1m"),
            "{}",
            f[0].message
        );
        // No new failures: the window slides past the first 3 and it
        // clears (3 in (30 s, 90 s]).
        scrape(&mut book, &a, 90_000, &text(0, 40, 0, 6), &s);
        assert!(book.findings(90_000, &s).is_empty());
        // Off.
        let off = Settings {
            model_failures: None,
            ..s.clone()
        };
        scrape(&mut book, &a, 150_000, &text(0, 60, 0, 60), &off);
        assert!(book.findings(150_000, &off).is_empty());
        assert_eq!(book.findings(150_000, &s).len(), 1);
    }

    #[test]
    fn retargeting_keeps_unchanged_targets_and_drops_gone_ones() {
        let s = Settings::default();
        let a = target("t1", "litellm");
        let mut book = Book::default();
        book.retarget(vec![a.clone()]);
        scrape(&mut book, &a, 0, &text(2, 0, 0, 0), &s);
        book.retarget(vec![a.clone(), target("t1", "broker")]);
        assert_eq!(book.findings(0, &s).len(), 1, "kept");
        let moved = Target {
            url: "http://litellm.t1.svc:4001/metrics".into(),
            ..a.clone()
        };
        book.retarget(vec![moved.clone()]);
        assert!(
            book.findings(0, &s).is_empty(),
            "a new address starts afresh"
        );
        // A scrape of the old address that ends late is not recorded.
        scrape(&mut book, &a, 1, &text(2, 0, 0, 0), &s);
        assert!(book.findings(1, &s).is_empty());
        scrape(&mut book, &moved, 1, &text(2, 0, 0, 0), &s);
        assert_eq!(book.findings(1, &s).len(), 1);
        book.reset();
        assert!(book.findings(1, &s).is_empty());
        book.retarget(vec![]);
        assert_eq!(book.targets().count(), 0);
    }

    #[test]
    fn label_values_are_cleaned_for_keys() {
        assert_eq!(clean("a\nb"), "a?b");
        let long = "é".repeat(100);
        let c = clean(&long);
        assert!(c.len() <= 128 && c.chars().all(|ch| ch == 'é'));
    }
}
