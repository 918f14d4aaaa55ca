//! The leader's watch over the backups: every `interval` it reads each
//! AgentFS with `spec.backup` from the operator's cache (no API reads),
//! finds the backup alerts that hold ([`plan::stale`]: `backup/stale`,
//! `backup/drill-stale`, `backup/drill-failed`) and reports what started
//! and what cleared: a keyed upstream alert `backup/<kind>/<ns>/<name>`
//! (firing, then resolved) when an alert sink is configured, an Event on
//! the AgentFS each way, and the `exo_fs_backup_*` gauges
//! (`cluster::metrics::backup`).
//!
//! Guarantees:
//! - an alert goes upstream once when it starts, again only when its
//!   message changes (the last attempt's failure category, say), and once
//!   as resolved when it clears; so does its Event (a failed drill's own
//!   Event is the drill's, naming the file; this watch adds its clearing);
//! - an invalid policy raises nothing here: the backup task reports it in
//!   `status.backup.lastError`, naming the field;
//! - a volume being deleted, or whose policy went, has its alerts
//!   resolved and its series removed; a term's end removes them all, so a
//!   standby shows none.
//!
//! Which status is believed: a `status.backup` whose `observedGeneration`
//! is behind the AgentFS's generation is used as it is. Its fields are
//! facts with their times (when the last good backup ended, when a drill
//! passed or failed), true whatever policy they were taken under, and the
//! staleness is measured from them under the current policy. Ignoring them
//! until the backup task writes again would make an alert wrong: a volume
//! whose policy was just edited would look as if it had never been backed
//! up.
//!
//! Caveat (as for the monitors): what fires is held in memory. A new
//! leader raises again what still holds (the control plane keys alerts, so
//! upstream that is an update) with a new Event; a condition that cleared
//! during the hand-over is resolved only if it fires again.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use tracing::{info, warn};

use super::plan::{self, Settings, Stale};
use super::subject;
use crate::alerts::{AlertBook, AlertSink};
use crate::cluster::apply::Ctx;
use crate::cluster::events::Reason;
use crate::cluster::metrics::Metrics;
use crate::cluster::metrics::backup::{VolumeGauges, VolumeLabels};
use crate::crd::BackupStatus;
use crate::operator::monitor::{Firing, Keyed, human};
use crate::wire::{Alert, Severity};

/// Prefix of every backup alert key.
pub const ALERT_PREFIX: &str = "backup/";

/// What the watch is given.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    /// How often the volumes are looked at.
    pub interval: Duration,
    /// Upstream alerts; `None` when the installation is unmanaged.
    pub alerts: Option<AlertSink>,
}

/// One volume as the watch sees it.
#[derive(Debug, Clone, Copy)]
pub struct Look<'a> {
    /// `AgentFS` or `App`.
    pub kind: &'a str,
    pub namespace: &'a str,
    /// The AgentFS's name, or `<app>/<volume>`.
    pub name: &'a str,
    pub settings: &'a Settings,
    pub status: Option<&'a BackupStatus>,
    /// When the volume's object was created (seconds since the epoch).
    pub created: i64,
    /// When this term's watch first saw its policy (seconds).
    pub first_seen: i64,
}

/// One backup alert that holds for one volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `AgentFS` or `App`.
    pub kind: String,
    pub namespace: String,
    /// The AgentFS's name, or `<app>/<volume>`.
    pub name: String,
    pub stale: Stale,
    /// For humans: since when, and what to do. Stable while the condition
    /// holds (no live ages), so the alert goes upstream once.
    pub message: String,
}

impl Keyed for Finding {
    /// `backup/stale/<namespace>/<name>` and the like.
    fn key(&self) -> String {
        format!("{}/{}/{}", self.stale.kind(), self.namespace, self.name)
    }
}

fn rfc3339(secs: i64) -> String {
    Timestamp::from_second(secs)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| secs.to_string())
}

impl Finding {
    /// The upstream alert's reason (an identifier).
    pub fn reason(&self) -> &'static str {
        match self.stale {
            Stale::Backup { .. } => "BackupStale",
            Stale::Drill { .. } => "BackupDrillStale",
            Stale::DrillFailed { .. } => "BackupDrillFailed",
        }
    }

    /// A drill that failed means a backup that may not restore: the worst.
    pub fn severity(&self) -> Severity {
        match self.stale {
            Stale::Backup { .. } | Stale::Drill { .. } => Severity::Warning,
            Stale::DrillFailed { .. } => Severity::Critical,
        }
    }

    pub fn alert(&self) -> Alert {
        Alert::new(
            self.severity(),
            self.reason(),
            self.namespace.clone(),
            format!("{}/{}", self.kind, self.name),
            self.message.clone(),
        )
        .keyed(self.key())
    }

    /// The Events' reasons: when it starts (none for a failed drill, whose
    /// drill has its own Event), and when it clears.
    fn reasons(&self) -> (Option<Reason>, Reason) {
        match self.stale {
            Stale::Backup { .. } => (Some(Reason::BackupStale), Reason::BackupStaleCleared),
            Stale::Drill { .. } => (
                Some(Reason::BackupDrillStale),
                Reason::BackupDrillStaleCleared,
            ),
            Stale::DrillFailed { .. } => (None, Reason::BackupDrillFailedCleared),
        }
    }

    /// What the clearing Event says, given the volume's status then
    /// (`None`: it has no backup policy any more).
    pub fn cleared(&self, status: Option<Option<&BackupStatus>>) -> String {
        let kind = self.stale.kind();
        let Some(status) = status else {
            return format!("{kind} cleared: the volume has no backup policy any more");
        };
        let last_ok = status
            .and_then(|s| s.last_success.as_ref())
            .map(|b| &b.time);
        let drill = status.and_then(|s| s.last_drill.as_ref());
        match (&self.stale, last_ok, drill) {
            (Stale::Backup { .. }, Some(t), _) => {
                format!("{kind} cleared: a backup succeeded at {t}")
            }
            (Stale::Drill { .. } | Stale::DrillFailed { .. }, _, Some(d)) if d.passed => {
                format!(
                    "{kind} cleared: the drill of {} passed at {}",
                    d.digest, d.time
                )
            }
            _ => format!("{kind} cleared"),
        }
    }
}

/// A policy's failure that is not an attempt: the task's refusal of an
/// invalid policy (`lastError.reason`), which waits for a change.
const INVALID: &str = "invalid";

/// The last attempt's failure category, when it is newer than the last
/// good backup (`exo fs list` shows it too).
pub fn failing(status: Option<&BackupStatus>) -> Option<&str> {
    let s = status?;
    let err = s.last_error.as_ref()?;
    let newer = match &s.last_success {
        Some(ok) => plan::seconds(&err.time) >= plan::seconds(&ok.time),
        None => true,
    };
    newer.then_some(err.reason.as_str())
}

fn message(v: &Look<'_>, stale: &Stale, from: i64) -> String {
    let (ns, name, s) = (v.namespace, v.name, v.settings);
    let volume = format!("{} {ns}/{name}", v.kind);
    match stale {
        Stale::Backup { since } => {
            let when = match since {
                Some(t) => format!("has had no good backup since {t}"),
                None => format!(
                    "has never had a good backup (counted from {})",
                    rfc3339(from)
                ),
            };
            let why = match failing(v.status) {
                Some(reason) => format!(
                    "; its last attempt failed ({reason}): read status.backup.lastError (exo fs list -n {ns} -o json)"
                ),
                None => String::new(),
            };
            format!(
                "{volume} {when}, longer than staleAfter ({}){why}. Check that the registry {} answers and takes the policy's credentials; setting the annotation autonomic.sh/backup-requested-at asks for a backup at once.",
                human(s.stale_after),
                s.registry,
            )
        }
        Stale::Drill { since } => {
            let when = match since {
                Some(t) => format!("since {t}"),
                None => format!("ever (counted from {})", rfc3339(from)),
            };
            format!(
                "No restore drill of {volume} has passed {when}, longer than twice drillEvery ({}). A drill restores the newest good backup into a scratch volume: read status.backup.lastDrill and check that backups succeed and the exo fs helper pod can run in {ns}.",
                human(s.drill_every * 2),
            )
        }
        Stale::DrillFailed { digest, message } => format!(
            "The restore drill of {volume} failed on backup {digest}: {message}. That backup may not restore: check the registry's storage of {}/{}, and take a new backup (the annotation autonomic.sh/backup-requested-at); the alert clears when a drill passes.",
            s.registry, s.path,
        ),
    }
}

/// The backup alerts of one volume at `now`: [`plan::stale`], with the
/// clock of a volume without a good backup (or without a passing drill)
/// starting at its creation once an attempt (a drill) is on record, and
/// before that at the later of its creation and when this term first saw
/// its policy. So a policy given to an old volume (a tier's new default,
/// say) is not stale before its first backup could end, while a volume
/// whose attempts fail is stale from its creation.
pub fn findings(now: i64, v: &Look<'_>) -> Vec<Finding> {
    let fresh = v.created.max(v.first_seen);
    let attempted = v.status.is_some_and(|s| {
        s.last_success.is_some() || s.last_error.as_ref().is_some_and(|e| e.reason != INVALID)
    });
    let drilled = v.status.is_some_and(|s| s.last_drill.is_some());
    let backup_from = if attempted { v.created } else { fresh };
    let drill_from = if drilled { v.created } else { fresh };
    let backups = plan::stale(now, v.settings, v.status, backup_from)
        .into_iter()
        .filter(|a| matches!(a, Stale::Backup { .. }))
        .map(|a| (a, backup_from));
    let drills = plan::stale(now, v.settings, v.status, drill_from)
        .into_iter()
        .filter(|a| !matches!(a, Stale::Backup { .. }))
        .map(|a| (a, drill_from));
    backups
        .chain(drills)
        .map(|(stale, from)| Finding {
            kind: v.kind.to_owned(),
            namespace: v.namespace.to_owned(),
            name: v.name.to_owned(),
            message: message(v, &stale, from),
            stale,
        })
        .collect()
}

/// What the gauges of one volume show at `now`.
pub fn gauges(now: i64, status: Option<&BackupStatus>, found: &[Finding]) -> VolumeGauges {
    let ok = status.and_then(|s| s.last_success.as_ref());
    VolumeGauges {
        age_seconds: ok.and_then(|b| plan::seconds(&b.time)).map(|t| now - t),
        bytes: ok.map(|b| (b.bytes_uploaded, b.bytes_total)),
        firing: found.iter().map(|f| f.stale.kind()).collect(),
    }
}

/// The series this term shows; removed when it ends.
struct Gauges {
    metrics: Arc<Metrics>,
    shown: BTreeSet<VolumeLabels>,
}

impl Gauges {
    fn show(&mut self, now: Vec<(VolumeLabels, VolumeGauges)>) {
        let next: BTreeSet<VolumeLabels> = now.iter().map(|(v, _)| v.clone()).collect();
        for gone in self.shown.difference(&next) {
            self.metrics.backups.forget(gone);
        }
        for (v, g) in &now {
            self.metrics.backups.show(v, g);
        }
        self.shown = next;
    }
}

impl Drop for Gauges {
    fn drop(&mut self) {
        for v in &self.shown {
            self.metrics.backups.forget(v);
        }
    }
}

struct State {
    firing: Firing<Finding>,
    book: AlertBook,
    gauges: Gauges,
    /// When this term first saw each volume's policy, by `namespace/name`.
    first_seen: HashMap<String, i64>,
}

/// Runs the watch until aborted (on losing the Lease).
pub async fn run(ctx: Arc<Ctx>, cfg: WatchConfig) {
    let mut synced = ctx.caches_synced.clone();
    if synced.wait_for(|s| *s).await.is_err() {
        return;
    }
    let mut state = State {
        firing: Firing::default(),
        book: AlertBook::new(),
        gauges: Gauges {
            metrics: ctx.metrics.clone(),
            shown: BTreeSet::new(),
        },
        first_seen: HashMap::new(),
    };
    info!(interval = ?cfg.interval, "backup watch started");
    let mut tick = tokio::time::interval(cfg.interval.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (found, shown) = look(&ctx, &mut state.first_seen);
        let changes = state.firing.update(found);
        for f in &changes.started {
            report(&ctx, f, true).await;
        }
        for f in &changes.cleared {
            report(&ctx, f, false).await;
        }
        state.gauges.show(shown);
        if let Some(sink) = &cfg.alerts {
            let current = state.firing.iter().map(Finding::alert).collect();
            for alert in state.book.reconcile(ALERT_PREFIX, current) {
                sink.send(alert);
            }
        }
    }
}

/// Every volume with a valid policy in the cache: its findings and gauges.
fn look(
    ctx: &Ctx,
    first_seen: &mut HashMap<String, i64>,
) -> (Vec<Finding>, Vec<(VolumeLabels, VolumeGauges)>) {
    let now = Timestamp::now().as_second();
    let mut found = Vec::new();
    let mut shown = Vec::new();
    let mut seen = BTreeSet::new();
    let apps = ctx.apps.as_ref().map(|s| s.state()).unwrap_or_default();
    for subject in subject::subjects(&ctx.filesystems.state(), &apps) {
        // Invalid: the backup task's to report. (Being deleted, or without
        // a policy: no subject, nothing to protect.)
        let Ok(settings) = Settings::of(&subject.policy) else {
            continue;
        };
        let name = subject.volume_name();
        let key = format!("{}/{}/{name}", subject.kind(), subject.namespace);
        let first = *first_seen.entry(key.clone()).or_insert(now);
        seen.insert(key);
        let status = subject.status.as_ref();
        let v = Look {
            kind: subject.kind(),
            namespace: &subject.namespace,
            name: &name,
            settings: &settings,
            status,
            created: subject.created().unwrap_or(now),
            first_seen: first,
        };
        let mine = findings(now, &v);
        let labels = VolumeLabels {
            namespace: subject.namespace.clone(),
            name: name.clone(),
        };
        shown.push((labels, gauges(now, status, &mine)));
        found.extend(mine);
    }
    first_seen.retain(|k, _| seen.contains(k));
    (found, shown)
}

/// One Event on the AgentFS (when it still exists) and one log line.
async fn report(ctx: &Ctx, f: &Finding, started: bool) {
    let (ns, name, kind) = (f.namespace.as_str(), f.name.as_str(), f.stale.kind());
    if started {
        warn!(alert = kind, namespace = ns, volume = name, message = %f.message, "backup alert firing");
    } else {
        info!(
            alert = kind,
            namespace = ns,
            volume = name,
            "backup alert cleared"
        );
    }
    let apps = ctx.apps.as_ref().map(|s| s.state()).unwrap_or_default();
    let subjects = subject::subjects(&ctx.filesystems.state(), &apps);
    let now = subjects
        .iter()
        .find(|s| s.kind() == f.kind && s.namespace == ns && s.volume_name() == name);
    let (on_start, on_clear) = f.reasons();
    let (reason, type_, note) = if started {
        let Some(r) = on_start else { return };
        (r, EventType::Warning, f.message.clone())
    } else {
        // `None`: the volume has no policy any more (or is gone).
        (
            on_clear,
            EventType::Normal,
            f.cleared(now.map(|s| s.status.as_ref())),
        )
    };
    // On the volume's object, while it exists.
    let first = name.split('/').next().unwrap_or(name);
    if f.kind == "App" {
        if let Some(app) = ctx
            .apps
            .as_ref()
            .and_then(|s| s.get(&ObjectRef::new(first).within(ns)))
        {
            ctx.event(app.as_ref(), type_, reason, note).await;
        }
    } else if let Some(fs) = ctx.filesystems.get(&ObjectRef::new(name).within(ns)) {
        ctx.event(fs.as_ref(), type_, reason, note).await;
    }
}

#[cfg(test)]
mod tests;
