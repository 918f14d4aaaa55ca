//! The circuit telemetry's leader task: every `--circuit-scrape-interval`
//! it scrapes each Service labelled `autonomic.sh/metrics` (the model
//! gateway's, the broker's; where its annotation says), reads the pure
//! core's findings and reports what started and what cleared: a keyed
//! upstream alert `circuit/open/...` or `model/failures/...` (firing,
//! then resolved) when an alert sink is configured, an Event on the
//! Service each way, the `exo_circuits_*` gauges per tenant, and the
//! shared [`Circuits`] snapshot the analysis checks read.
//!
//! The targets come from a label-selected watch of Services this task runs
//! for its term (the apiserver selects by labels, not annotations; the
//! operator's shared Service cache holds only Exo's own Services). The
//! settings (names, window, threshold) are the first Fleet's
//! `spec.circuits`, read from the operator's Fleet cache at each round.
//!
//! Guarantees:
//! - a scrape failure is never fatal: it is counted
//!   (`exo_circuits_scrapes_total{result}`), reported once when the target
//!   starts failing and once when it recovers (Events), and the target
//!   counts as no data in the snapshot;
//! - each scrape has a deadline (`--circuit-scrape-timeout`, at most the
//!   interval) and reads at most [`scrape::MAX_BODY`] bytes; targets are
//!   scraped [`PARALLEL`] at a time;
//! - a refused `spec.circuits` (or target annotation) is reported once per
//!   distinct value, naming the field, and changes nothing in force;
//! - a term's end removes the gauges and empties the snapshot, so a
//!   standby shows and answers nothing stale.
//!
//! Caveat (as for the monitors): what fires is held in memory; a new
//! leader raises again what still holds (the control plane keys alerts).

pub mod scrape;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use tracing::{info, warn};

use crate::alerts::{AlertBook, AlertSink};
use crate::circuits::book::{CIRCUIT_PREFIX, Condition, MODEL_PREFIX};
use crate::circuits::{Book, Circuits, Finding, Settings, Snapshot, Target, target};
use crate::cluster::apply::Ctx;
use crate::cluster::events::Reason;
use crate::cluster::metrics::Metrics;
use crate::cluster::metrics::circuits::{TenantGauges, TenantLabels};
use crate::crd::CircuitSettings;
use crate::operator::monitor::{Firing, Keyed};

/// Targets scraped at once.
pub const PARALLEL: usize = 8;

/// What the task is given.
#[derive(Debug, Clone)]
pub struct CircuitConfig {
    /// How often every target is scraped (`--circuit-scrape-interval`).
    pub interval: Duration,
    /// A scrape's deadline (`--circuit-scrape-timeout`; at most `interval`).
    pub timeout: Duration,
    /// Watch Services only in this namespace (the operator's `--namespace`).
    pub namespace: Option<String>,
    /// Upstream alerts; `None` when the installation is unmanaged.
    pub alerts: Option<AlertSink>,
    /// Where each round's snapshot is published.
    pub circuits: Circuits,
}

impl Keyed for Finding {
    fn key(&self) -> String {
        Finding::key(self)
    }
}

/// Aborts its task when dropped (the term's Service watch).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The gauges and the snapshot this term set; taken back when it ends.
struct Shown {
    metrics: Arc<Metrics>,
    circuits: Circuits,
    tenants: BTreeSet<String>,
}

impl Shown {
    fn show(&mut self, snap: &Snapshot, firing: &Firing<Finding>, book: &Book) {
        let mut failing: BTreeMap<&str, u32> = BTreeMap::new();
        for f in firing.iter() {
            if matches!(f.condition, Condition::ModelFailures { .. }) {
                *failing.entry(f.tenant.as_str()).or_insert(0) += 1;
            }
        }
        let mut down: BTreeMap<&str, u32> = BTreeMap::new();
        for (t, why) in book.failing() {
            if why.is_some() {
                *down.entry(t.tenant.as_str()).or_insert(0) += 1;
            }
        }
        let now: BTreeSet<String> = snap.tenants.keys().cloned().collect();
        for gone in self.tenants.difference(&now) {
            self.metrics.circuits.forget(&TenantLabels {
                tenant: gone.clone(),
            });
        }
        for (tenant, t) in &snap.tenants {
            let g = TenantGauges {
                open: t.open,
                cooled_down: t.cooled_down,
                fallbacks_succeeded: t.window.fallbacks_succeeded,
                fallbacks_failed: t.window.fallbacks_failed,
                requests: t.window.requests,
                model_failures: t.window.failed_total(),
                models_failing: failing.get(tenant.as_str()).copied().unwrap_or(0),
                fallback_rate: t.window.fallback_rate(),
                targets: t.targets,
                targets_down: down.get(tenant.as_str()).copied().unwrap_or(0),
            };
            self.metrics.circuits.show(
                &TenantLabels {
                    tenant: tenant.clone(),
                },
                &g,
            );
        }
        self.tenants = now;
    }
}

impl Drop for Shown {
    fn drop(&mut self) {
        for tenant in &self.tenants {
            self.metrics.circuits.forget(&TenantLabels {
                tenant: tenant.clone(),
            });
        }
        self.circuits.publish(Snapshot::default());
    }
}

struct State {
    book: Book,
    firing: Firing<Finding>,
    alerts: AlertBook,
    settings: Settings,
    /// The last `spec.circuits` looked at (refused or not).
    spec: Option<CircuitSettings>,
    /// Services refused as targets, with the message last reported.
    invalid: BTreeMap<(String, String), String>,
    /// Targets whose last scrape failed.
    failing: BTreeSet<(String, String)>,
}

/// Runs until aborted (on losing the Lease).
pub async fn run(ctx: Arc<Ctx>, cfg: CircuitConfig) {
    let mut synced = ctx.caches_synced.clone();
    if synced.wait_for(|s| *s).await.is_err() {
        return;
    }
    let client = match crate::net::plain_client() {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "circuit telemetry not started: no HTTP client");
            return;
        }
    };
    let api: Api<Service> = match &cfg.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let (services, writer) = reflector::store();
    let selected = watcher::Config::default().labels(crate::meta::LABEL_METRICS);
    let _watch = AbortOnDrop(tokio::spawn(crate::cluster::feeds::selected_feed(
        api,
        selected,
        writer,
        crate::cluster::feeds::Hub::default(),
        None,
    )));
    if services.wait_until_ready().await.is_err() {
        return;
    }
    let mut shown = Shown {
        metrics: ctx.metrics.clone(),
        circuits: cfg.circuits.clone(),
        tenants: BTreeSet::new(),
    };
    let mut state = State {
        book: Book::default(),
        firing: Firing::default(),
        alerts: AlertBook::new(),
        settings: Settings::default(),
        spec: None,
        invalid: BTreeMap::new(),
        failing: BTreeSet::new(),
    };
    let interval = cfg.interval.max(Duration::from_millis(100));
    let timeout = cfg.timeout.min(interval);
    info!(?interval, ?timeout, "circuit telemetry started");
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        refresh_settings(&ctx, &mut state).await;
        let targets = if state.settings.enabled {
            targets(&ctx, &services, &mut state).await
        } else {
            Vec::new()
        };
        state.book.retarget(targets);
        scrape_all(&ctx, &client, timeout, &services, &mut state).await;
        let now = Timestamp::now().as_millisecond();
        let changes = state
            .firing
            .update(state.book.findings(now, &state.settings));
        for f in &changes.started {
            report(&ctx, &services, f, true).await;
        }
        for f in &changes.cleared {
            report(&ctx, &services, f, false).await;
        }
        if let Some(sink) = &cfg.alerts {
            for prefix in [CIRCUIT_PREFIX, MODEL_PREFIX] {
                let current = state
                    .firing
                    .iter()
                    .filter(|f| f.key().starts_with(prefix))
                    .map(Finding::alert)
                    .collect();
                for alert in state.alerts.reconcile(prefix, current) {
                    sink.send(alert);
                }
            }
        }
        let snap = state.book.snapshot(now, &state.settings);
        shown.show(&snap, &state.firing, &state.book);
        cfg.circuits.publish(snap);
    }
}

/// The first Fleet's `spec.circuits`, checked: in force when it passes; a
/// refusal is logged and reported on the Fleet once per distinct value,
/// and the settings in force stay.
async fn refresh_settings(ctx: &Ctx, state: &mut State) {
    let fleet = crate::operator::monitor::task::first_fleet(ctx);
    let spec = fleet
        .as_ref()
        .map(|f| f.spec.circuits.clone())
        .unwrap_or_default();
    if state.spec.as_ref() == Some(&spec) {
        return;
    }
    match Settings::of(&spec) {
        Ok(s) => {
            if s != state.settings {
                info!(window = ?s.window, model_failures = ?s.model_failures, enabled = s.enabled, "circuit settings");
                state.book.reset();
                state.settings = s;
            }
        }
        Err(errors) => {
            let note = errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            warn!(problems = %note, "circuits: the Fleet's spec.circuits is refused; the settings in force stay");
            if let Some(f) = &fleet {
                ctx.event(
                    f.as_ref(),
                    EventType::Warning,
                    Reason::CircuitSettingsInvalid,
                    format!("spec.circuits refused, the settings in force stay: {note}"),
                )
                .await;
            }
        }
    }
    state.spec = Some(spec);
}

/// The targets the labelled Services make; a Service refused is reported
/// once per distinct problem.
async fn targets(ctx: &Ctx, services: &Store<Service>, state: &mut State) -> Vec<Target> {
    let mut out = Vec::new();
    let mut invalid = BTreeMap::new();
    for svc in services.state() {
        if svc.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match target::of(&svc) {
            Ok(t) => out.push(t),
            Err(e) => {
                let key = (
                    svc.metadata.namespace.clone().unwrap_or_default(),
                    svc.metadata.name.clone().unwrap_or_default(),
                );
                let message = e.to_string();
                if state.invalid.get(&key) != Some(&message) {
                    warn!(namespace = %key.0, service = %key.1, error = %message, "circuits: not a scrape target");
                    ctx.event(
                        svc.as_ref(),
                        EventType::Warning,
                        Reason::MetricsTargetInvalid,
                        format!("Not scraped: {message}"),
                    )
                    .await;
                }
                invalid.insert(key, message);
            }
        }
    }
    state.invalid = invalid;
    out
}

/// Scrapes every target, [`PARALLEL`] at a time, and records each outcome.
async fn scrape_all(
    ctx: &Ctx,
    client: &crate::net::Client,
    timeout: Duration,
    services: &Store<Service>,
    state: &mut State,
) {
    let targets: Vec<Target> = state.book.targets().cloned().collect();
    let settings = &state.settings;
    let outcomes: Vec<_> = futures::stream::iter(targets)
        .map(|t| async move {
            let r = scrape::scrape(client, &t, timeout, settings).await;
            (t, Timestamp::now().as_millisecond(), r)
        })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    let mut failing = BTreeSet::new();
    for (t, at, r) in outcomes {
        let key = (t.tenant.clone(), t.service.clone());
        let svc = services.get(&ObjectRef::new(&t.service).within(&t.tenant));
        match r {
            Ok(reading) => {
                ctx.metrics.circuits.scraped(None);
                if state.failing.contains(&key) {
                    info!(tenant = %t.tenant, service = %t.service, "circuits: scrape recovered");
                    if let Some(svc) = &svc {
                        ctx.event(
                            svc.as_ref(),
                            EventType::Normal,
                            Reason::MetricsScrapeRecovered,
                            format!("Scraped {} again", t.url),
                        )
                        .await;
                    }
                }
                state.book.scraped(&t, at, Ok(reading), &state.settings);
            }
            Err(e) => {
                let category = e.category();
                ctx.metrics.circuits.scraped(Some(category));
                if !state.failing.contains(&key) {
                    warn!(tenant = %t.tenant, service = %t.service, error = %e, "circuits: scrape failed");
                    if let Some(svc) = &svc {
                        ctx.event(
                            svc.as_ref(),
                            EventType::Warning,
                            Reason::MetricsScrapeFailed,
                            format!("Scraping the metrics failed ({category}): {e}. Its circuits count as unknown until a scrape succeeds."),
                        )
                        .await;
                    }
                }
                failing.insert(key);
                state.book.scraped(&t, at, Err(category), &state.settings);
            }
        }
    }
    state.failing = failing;
}

/// One Event on the Service (when it still exists) and one log line.
async fn report(ctx: &Ctx, services: &Store<Service>, f: &Finding, started: bool) {
    let (tenant, service) = (f.tenant.as_str(), f.service.as_str());
    if started {
        warn!(%tenant, %service, key = %f.key(), message = %f.message, "circuits: firing");
    } else {
        info!(%tenant, %service, key = %f.key(), "circuits: cleared");
    }
    let (reason, kind, note) = match (&f.condition, started) {
        (Condition::CircuitOpen { .. }, true) => {
            (Reason::CircuitOpen, EventType::Warning, f.message.clone())
        }
        (Condition::CircuitOpen { .. }, false) => {
            (Reason::CircuitClosed, EventType::Normal, f.cleared())
        }
        (Condition::ModelFailures { .. }, true) => {
            (Reason::ModelFailures, EventType::Warning, f.message.clone())
        }
        (Condition::ModelFailures { .. }, false) => {
            (Reason::ModelFailuresCleared, EventType::Normal, f.cleared())
        }
    };
    if let Some(svc) = services.get(&ObjectRef::new(service).within(tenant)) {
        ctx.event(svc.as_ref(), kind, reason, note).await;
    }
}
