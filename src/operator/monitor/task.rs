//! The monitors' leader task: every `interval` it reads pods, Agents and
//! Tools from the operator's shared watch caches (no watch of its own),
//! runs the pure monitors and reports what started and what cleared.
//!
//! The thresholds come from the first Fleet (by namespace, then name) in
//! the followed namespace, read from the operator's Fleet cache at each
//! look (no list of its own), with the `--monitor-*` flags over them (see
//! [`super::thresholds`]).
//!
//! Caveat: the state (restart history, firing set, alert book) lives in
//! memory. A new leader starts afresh: it re-raises what still holds (the
//! control plane keys alerts, so that is an update), and a condition that
//! cleared during the hand-over is resolved only if it fires again.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use tracing::{info, warn};

use super::checkin::{AgentRef, Checkins};
use super::crashloop::{self, Ledger};
use super::silent::{self, Silence};
use super::thresholds::{Overrides, Thresholds, effective};
use super::{ALERT_PREFIX, Finding, Firing, Monitor, Subject};
use crate::alerts::{AlertBook, AlertSink};
use crate::analysis::{MonitorBoard, MonitorReadings, NamespaceHealth};
use crate::cluster::apply::Ctx;
use crate::cluster::events::Reason;
use crate::cluster::metrics::Metrics;
use crate::crd::Monitors;

/// What the task is given.
#[derive(Clone)]
pub struct MonitorConfig {
    /// `--monitor-*` flags.
    pub flags: Overrides,
    /// How often the monitors look (`--monitor-interval`).
    pub interval: Duration,
    /// Upstream alerts; `None` when the installation is unmanaged.
    pub alerts: Option<AlertSink>,
    /// Check-ins this replica took (the annotation carries the others').
    pub checkins: Arc<Checkins>,
    /// Where each look's readings are published for the analysis.
    pub board: MonitorBoard,
}

/// Clears the board when the task ends: a standby has no readings.
struct Published(MonitorBoard);

impl Drop for Published {
    fn drop(&mut self) {
        self.0.clear();
    }
}

/// The gauges this task set; put back to 0 when it ends (the Lease was
/// lost or the process stops), so a standby never shows a stale alarm.
struct Gauges {
    metrics: Arc<Metrics>,
    shown: BTreeSet<(Monitor, String)>,
}

impl Gauges {
    fn show(&mut self, firing: &Firing) {
        let counts = firing.counts();
        for key in &self.shown {
            if !counts.contains_key(key) {
                self.metrics.monitor_active(key.0.as_str(), &key.1, 0);
            }
        }
        for ((m, ns), n) in &counts {
            self.metrics.monitor_active(m.as_str(), ns, *n);
        }
        self.shown = counts.into_keys().collect();
    }
}

impl Drop for Gauges {
    fn drop(&mut self) {
        for (m, ns) in &self.shown {
            self.metrics.monitor_active(m.as_str(), ns, 0);
        }
    }
}

struct State {
    ledger: Ledger,
    silence: Silence,
    firing: Firing,
    book: AlertBook,
    gauges: Gauges,
    fleet: Option<Monitors>,
    thresholds: Thresholds,
}

/// Runs the monitors until aborted (on losing the Lease).
pub async fn run(ctx: Arc<Ctx>, cfg: MonitorConfig) {
    let mut synced = ctx.caches_synced.clone();
    if synced.wait_for(|s| *s).await.is_err() {
        return;
    }
    let (thresholds, _) = effective(&Monitors::default(), &cfg.flags);
    let mut state = State {
        ledger: Ledger::default(),
        silence: Silence::default(),
        firing: Firing::default(),
        book: AlertBook::new(),
        gauges: Gauges {
            metrics: ctx.metrics.clone(),
            shown: BTreeSet::new(),
        },
        fleet: None,
        thresholds,
    };
    let board = Published(cfg.board.clone());
    info!(interval = ?cfg.interval, "health monitors started");
    let mut tick = tokio::time::interval(cfg.interval.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        refresh_thresholds(&ctx, &cfg, &mut state);
        let findings = evaluate(&ctx, &cfg, &mut state);
        let changes = state.firing.update(findings);
        for f in &changes.started {
            report(&ctx, f, true).await;
        }
        for f in &changes.cleared {
            report(&ctx, f, false).await;
        }
        state.gauges.show(&state.firing);
        board.0.publish(readings(&state));
        if let Some(sink) = &cfg.alerts {
            let current = state.firing.iter().map(Finding::alert).collect();
            for alert in state.book.reconcile(ALERT_PREFIX, current) {
                sink.send(alert);
            }
        }
    }
}

/// What this look saw, per namespace, for the analysis' built-in checks.
fn readings(state: &State) -> MonitorReadings {
    let th = state.thresholds;
    let now = Timestamp::now().as_millisecond();
    let mut out = MonitorReadings {
        crashloop: th.crashloop.is_some(),
        restarts: th.restarts.is_some() || th.crashloop.is_some(),
        silent: th.silent.is_some(),
        namespaces: Default::default(),
    };
    for f in state.firing.iter() {
        let h = out.namespaces.entry(f.namespace.clone()).or_default();
        match f.monitor {
            Monitor::Crashloop => h.crashloops += 1,
            Monitor::Silent => h.silent_agents += 1,
            Monitor::Restarts => {}
        }
    }
    let window = th.restarts.or(th.crashloop).map(|r| r.window);
    if let Some(window) = window.filter(|w| !w.is_zero()) {
        let per_hour = 3600.0 / window.as_secs_f64();
        for (ns, n) in state.ledger.restarts_by_namespace(now, window) {
            let h: &mut NamespaceHealth = out.namespaces.entry(ns).or_default();
            h.restarts_per_hour = f64::from(n) * per_hour;
        }
    }
    out
}

/// The first Fleet (by namespace, then name) in the operator's Fleet
/// cache, whose settings the monitors and the circuit task use; `None`
/// when there is none or Fleets are not watched.
pub fn first_fleet(ctx: &Ctx) -> Option<Arc<crate::crd::Fleet>> {
    ctx.fleets.as_ref()?.state().into_iter().min_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    })
}

/// The first Fleet's `spec.monitors`, or the defaults.
fn fleet_monitors(ctx: &Ctx) -> Monitors {
    first_fleet(ctx)
        .map(|f| f.spec.monitors.clone())
        .unwrap_or_default()
}

fn refresh_thresholds(ctx: &Ctx, cfg: &MonitorConfig, state: &mut State) {
    let spec = fleet_monitors(ctx);
    if state.fleet.as_ref() == Some(&spec) {
        return;
    }
    let (thresholds, errors) = effective(&spec, &cfg.flags);
    for e in &errors {
        warn!(error = %e, "monitors: Fleet value not used");
    }
    info!(?thresholds, "monitor thresholds");
    state.thresholds = thresholds;
    state.fleet = Some(spec);
}

fn evaluate(ctx: &Ctx, cfg: &MonitorConfig, state: &mut State) -> Vec<Finding> {
    let now = Timestamp::now().as_millisecond();
    let th = state.thresholds;
    let pods: Vec<_> = ctx
        .pods
        .state()
        .iter()
        .filter_map(|p| crashloop::observe(p))
        .collect();
    state.ledger.observe(&pods, now, th.longest_window());
    let agents = ctx.agents.state();
    let mut live: BTreeSet<(String, Subject)> = BTreeSet::new();
    for a in &agents {
        if let (Some(ns), Some(n)) = (&a.metadata.namespace, &a.metadata.name) {
            live.insert((ns.clone(), Subject::Agent(n.clone())));
        }
    }
    for t in ctx.tools.state() {
        if let (Some(ns), Some(n)) = (&t.metadata.namespace, &t.metadata.name) {
            live.insert((ns.clone(), Subject::Tool(n.clone())));
        }
    }
    let mut out = Vec::new();
    if let Some(rate) = th.crashloop {
        out.extend(state.ledger.crashloop(now, rate, &live));
    }
    if let Some(rate) = th.restarts {
        out.extend(state.ledger.tenant_restarts(now, rate));
    }
    if let Some(after) = th.silent {
        let observed: Vec<_> = agents
            .iter()
            .filter_map(|a| {
                let key = AgentRef {
                    namespace: a.metadata.namespace.clone()?,
                    name: a.metadata.name.clone()?,
                };
                silent::observe(a, cfg.checkins.book.last(&key))
            })
            .collect();
        out.extend(state.silence.evaluate(&observed, now, after));
    }
    out
}

/// One Event on the Agent or Tool (none for a namespace) and one log line.
async fn report(ctx: &Ctx, f: &Finding, started: bool) {
    let ns = f.namespace.as_str();
    let object = f.subject.object(ns);
    let monitor = f.monitor.as_str();
    if started {
        warn!(monitor, namespace = ns, %object, message = %f.message, "monitor firing");
    } else {
        info!(monitor, namespace = ns, %object, "monitor cleared");
    }
    let (reason, kind) = match (f.monitor, started) {
        (Monitor::Crashloop, true) => (Reason::CrashLoop, EventType::Warning),
        (Monitor::Crashloop, false) => (Reason::CrashLoopCleared, EventType::Normal),
        (Monitor::Silent, true) => (Reason::AgentSilent, EventType::Warning),
        (Monitor::Silent, false) => (Reason::AgentSilentCleared, EventType::Normal),
        // A namespace has no object of ours to hang an Event on.
        (Monitor::Restarts, _) => return,
    };
    let note = if started {
        f.message.clone()
    } else {
        f.cleared.clone()
    };
    match &f.subject {
        Subject::Agent(name) => {
            if let Some(a) = ctx.agents.get(&ObjectRef::new(name).within(ns)) {
                ctx.event(a.as_ref(), kind, reason, note).await;
            }
        }
        Subject::Tool(name) => {
            if let Some(t) = ctx.tools.get(&ObjectRef::new(name).within(ns)) {
                ctx.event(t.as_ref(), kind, reason, note).await;
            }
        }
        Subject::Namespace => {}
    }
}
