//! The analysis of each wave (leader only, beside the sync and the sagas):
//! once every tenant of a wave is verified on the release the wave points
//! at, and that release gives the wave checks, an `AnalysisRun` is created
//! in the Fleet's namespace; its checks are measured while the wave soaks;
//! the outcome acts:
//! - passed, with the wave's `autoPromote`: the next wave is promoted to
//!   the release by a commit to `releases/waves.yaml`, once its gates pass
//!   (the run's pass among them), as `exo release promote` would;
//! - failed: the wave is rolled back by a commit to the newest release of
//!   its history that all its tenants verified, the analysis result in the
//!   commit message and on the run; `analysisFailed` is notified and each
//!   tenant's commit gets `failure`;
//! - inconclusive past its limit: the run is `Paused` with the reason and
//!   nothing moves until a person acts (a new commit the wave verifies,
//!   deleting the run to measure again, or a rollback).
//!
//! Guarantees:
//! - a run is resumed, never restarted, by a new leader: its start is its
//!   creation, its measurements are in its status, and a slot counts once
//!   (`crate::analysis::run`); a measurement taken and not yet written when
//!   the process died is taken again if its slot is still the latest, else
//!   skipped;
//! - an outcome's commit is idempotent: the edit is made on the branch's
//!   head, and one git already says is not made again, so a crash between
//!   the push and the status write makes no second commit;
//! - a run whose wave stopped running its release (moved in git meanwhile)
//!   is `Aborted` and does nothing;
//! - nothing is measured or committed while the Fleet is suspended;
//! - every status is stamped with the run's generation; readers trust only
//!   a current one (`AnalysisRun::current_status`).
//!
//! Reads: the runs are listed when the term starts and every
//! [`RELIST_EVERY`] (a run a person deleted is seen then); between, this
//! task's own writes keep its copy. Everything else comes from the
//! engine's last sync and the operator's caches. Writes: one status patch
//! per look that measured something or ended a run.

mod decide;
mod edit;
mod measure;
mod outcome;

pub use measure::SignalSources;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use tracing::{info, warn};

use self::decide::{Facts, RunFacts, Todo};
use super::notices::{self, Subject};
use super::{EngineConfig, Loaded, State};
use crate::analysis::{self, Measurement, Outcome, Step};
use crate::cluster::apply::Ctx;
use crate::cluster::events::Reason;
use crate::cluster::metrics::Controller;
use crate::crd::{
    ActionKind, AnalysisPhase, AnalysisRun, AnalysisRunSpec, AnalysisRunStatus, Rollout, RunTenant,
};
use crate::notify::EventKind;
use crate::release::WaveName;
use crate::rollout::gates;

/// How often the task looks.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);
/// How often the runs are listed again.
pub const RELIST_EVERY: Duration = Duration::from_secs(30);
/// How long a failed outcome commit waits before it is tried again.
pub const COMMIT_RETRY: Duration = Duration::from_secs(15);
/// Who the outcome commits are by.
pub const AUTHOR: (&str, &str) = ("Exo operator", "operator@autonomic.sh");

/// The task's memory for one term.
#[derive(Default)]
struct Memory {
    /// `namespace/name` -> the run as last read or written.
    runs: BTreeMap<String, AnalysisRun>,
    listed: Option<Instant>,
    /// Namespaces whose runs cannot be listed (no CRD or RBAC): said once.
    unlistable: bool,
    /// `namespace/name` -> when its outcome commit last failed.
    commit_failed: BTreeMap<String, Instant>,
}

fn key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

/// The run of `fleet`'s `wave` on `release`: its name.
pub fn run_name(fleet: &str, wave: WaveName, release: &str) -> String {
    let plain = format!("{fleet}-{}-{release}", wave.as_str());
    if crate::names::is_dns1123_subdomain(&plain) {
        plain
    } else {
        crate::cluster::build::child_name(fleet, &format!("{}-{release}", wave.as_str()))
    }
}

/// Runs until the engine stops (the end of the term).
pub(super) async fn run(op: Arc<Ctx>, cfg: EngineConfig, state: Arc<State>) {
    let mut mem = Memory::default();
    let mut tick = tokio::time::interval(LOOK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    info!("wave analysis started");
    loop {
        tick.tick().await;
        let loaded: Vec<(String, Arc<Loaded>)> = state
            .loaded
            .read()
            .await
            .iter()
            .map(|(k, l)| (k.clone(), Arc::clone(l)))
            .collect();
        if loaded.is_empty() {
            continue;
        }
        if mem.listed.is_none_or(|t| t.elapsed() >= RELIST_EVERY) {
            relist(&op, &loaded, &mut mem).await;
        }
        if mem.unlistable {
            continue;
        }
        for (fleet_key, l) in &loaded {
            look(&op, &cfg, fleet_key, l, &mut mem).await;
        }
    }
}

async fn relist(op: &Ctx, loaded: &[(String, Arc<Loaded>)], mem: &mut Memory) {
    let mut runs = BTreeMap::new();
    let namespaces: std::collections::BTreeSet<&str> = loaded
        .iter()
        .filter_map(|(k, _)| k.split_once('/').map(|(ns, _)| ns))
        .collect();
    for ns in namespaces {
        match op.api::<AnalysisRun>(ns).list(&ListParams::default()).await {
            Ok(list) => {
                for r in list.items {
                    let name = r.metadata.name.clone().unwrap_or_default();
                    runs.insert(key(ns, &name), r);
                }
            }
            Err(e) => {
                if !mem.unlistable {
                    warn!(namespace = ns, error = %e, "wave analysis off: AnalysisRuns cannot be listed (install the analysisruns.autonomic.sh CRD and its RBAC, then restart the operator)");
                }
                mem.unlistable = true;
                mem.listed = Some(Instant::now());
                return;
            }
        }
    }
    mem.unlistable = false;
    mem.runs = runs;
    mem.listed = Some(Instant::now());
}

/// The Rollouts of `l`'s tenants, each in its tenant's namespace.
fn rollouts_of(op: &Ctx, l: &Loaded) -> Vec<Arc<Rollout>> {
    let Some(store) = &op.rollouts else {
        return Vec::new();
    };
    store
        .state()
        .into_iter()
        .filter(|r| {
            l.tenants.contains_key(&r.spec.tenant)
                && r.metadata.namespace.as_deref() == Some(r.spec.tenant.as_str())
        })
        .collect()
}

async fn look(op: &Ctx, cfg: &EngineConfig, fleet_key: &str, l: &Loaded, mem: &mut Memory) {
    if l.policy.suspend {
        return;
    }
    let Some((ns, fleet_name)) = fleet_key.split_once('/') else {
        return;
    };
    let Some(pointers) = l.fleet.waves.as_ref().map(|w| &w.value.spec) else {
        return;
    };
    let fleet_cr = op
        .fleets
        .as_ref()
        .and_then(|s| s.get(&ObjectRef::new(fleet_name).within(ns)));
    let rollouts = rollouts_of(op, l);
    let now = Timestamp::now();
    // Runs of this Fleet still running on a release their wave left.
    let moved: Vec<String> = mem
        .runs
        .iter()
        .filter(|(_, r)| {
            r.metadata.namespace.as_deref() == Some(ns)
                && r.spec.fleet == fleet_name
                && r.phase() == AnalysisPhase::Running
                && r.spec
                    .wave
                    .parse::<WaveName>()
                    .is_ok_and(|w| pointers.get(w).release != r.spec.release)
        })
        .map(|(k, _)| k.clone())
        .collect();
    for k in moved {
        if let Some(mut r) = mem.runs.get(&k).cloned() {
            let wave: WaveName = r.spec.wave.parse().unwrap_or(WaveName::Fleet);
            let mut s = status_of(&r);
            s.phase = AnalysisPhase::Aborted;
            s.finished_at = Some(crate::rollout::now());
            s.message = Some(format!(
                "the {wave} wave runs {} now; this run of {} ends without acting",
                pointers.get(wave).release,
                r.spec.release
            ));
            if write_status(op, &mut r, s).await {
                mem.runs.insert(k, r);
            }
        }
    }
    for wave in WaveName::ORDER {
        let release = pointers.get(wave).release.clone();
        let Some(doc) = l.fleet.release(&release) else {
            continue;
        };
        let spec = &doc.value.spec;
        let checks = spec
            .wave(wave)
            .map(|w| w.analysis.as_slice())
            .unwrap_or(&[]);
        let name = run_name(fleet_name, wave, &release);
        let k = key(ns, &name);
        let standing = gates::wave_standing(wave, &release, &rollouts, now.as_second());
        let facts = Facts {
            has_checks: !checks.is_empty(),
            all_verified: standing.all_verified(),
            latest_verified: standing.latest_verified(),
            run: mem.runs.get(&k).map(RunFacts::of),
        };
        let todo = decide::next(&facts);
        let in_wave: Vec<&Rollout> = rollouts
            .iter()
            .map(AsRef::as_ref)
            .filter(|r| crate::rollout::summary::wave_of(r) == Some(wave))
            .collect();
        match todo {
            Todo::Nothing => {}
            Todo::Create => {
                let auto = spec.wave(wave).is_some_and(|w| w.auto_promote)
                    && !rolled_back_to(mem, ns, fleet_name, wave, &release);
                let run = AnalysisRunSpec {
                    fleet: fleet_name.to_owned(),
                    wave: wave.as_str().to_owned(),
                    release: release.clone(),
                    commit: l.commit.clone(),
                    tenants: in_wave
                        .iter()
                        .map(|r| RunTenant {
                            name: r.spec.tenant.clone(),
                            namespace: r.metadata.namespace.clone().unwrap_or_default(),
                        })
                        .collect(),
                    checks: checks.to_vec(),
                    soak: spec.soak_of(wave).map(str::to_owned),
                    auto_promote: auto,
                };
                if let Some(r) = create(op, ns, &name, run).await {
                    info!(fleet = fleet_key, %wave, %release, run = %name, "wave analysis started");
                    for t in &in_wave {
                        cfg.notifier.commit_status(
                            crate::notify::CommitStatus::new(
                                crate::notify::CommitState::Pending,
                                &t.spec.commit,
                                &t.spec.tenant,
                                format!("analysis of {release} running"),
                            )
                            .wave(wave)
                            .release(&release),
                        );
                    }
                    mem.runs.insert(k, r);
                }
            }
            Todo::Replace => {
                if let Some(r) = mem.runs.get(&k) {
                    let uid = r.metadata.uid.clone();
                    match op
                        .delete::<AnalysisRun>(Controller::Rollout, ns, &name, uid)
                        .await
                    {
                        Ok(()) => {
                            info!(run = %name, "the wave was verified again since its analysis ended: measuring again");
                            mem.runs.remove(&k);
                        }
                        Err(e) => warn!(run = %name, error = %e, "cannot replace the analysis run"),
                    }
                }
            }
            Todo::Advance => {
                let url = fleet_cr
                    .as_ref()
                    .and_then(|f| f.spec.analysis.as_ref())
                    .map(|a| a.prometheus_url.clone());
                if let Some(r) = mem.runs.get(&k).cloned() {
                    let r = advance(op, cfg, r, &rollouts, url.as_deref()).await;
                    mem.runs.insert(k, r);
                }
            }
            Todo::Promote | Todo::RollBack => {
                if mem
                    .commit_failed
                    .get(&k)
                    .is_some_and(|t| t.elapsed() < COMMIT_RETRY)
                {
                    continue;
                }
                let (Some(fleet_cr), Some(run)) = (fleet_cr.clone(), mem.runs.get(&k).cloned())
                else {
                    continue;
                };
                let done = if todo == Todo::Promote {
                    let spans = l.fleet.spans_clusters();
                    outcome::promote(op, cfg, &fleet_cr, run, spec, &rollouts, spans).await
                } else {
                    outcome::roll_back(op, cfg, &fleet_cr, run, pointers.get(wave), &in_wave).await
                };
                match done {
                    Ok(Some(r)) => {
                        mem.commit_failed.remove(&k);
                        mem.runs.insert(k, r);
                    }
                    Ok(None) => {}
                    Err(r) => {
                        mem.commit_failed.insert(k.clone(), Instant::now());
                        mem.runs.insert(k, r);
                    }
                }
            }
        }
    }
}

/// Whether this Fleet's wave came to `release` by an analysis' rollback:
/// such a release is judged again, but not promoted onward on its own.
fn rolled_back_to(mem: &Memory, ns: &str, fleet: &str, wave: WaveName, release: &str) -> bool {
    mem.runs.values().any(|r| {
        r.metadata.namespace.as_deref() == Some(ns)
            && r.spec.fleet == fleet
            && r.spec.wave == wave.as_str()
            && r.current_status()
                .and_then(|s| s.action.as_ref())
                .is_some_and(|a| a.kind == ActionKind::RolledBack && a.release == release)
    })
}

async fn create(op: &Ctx, ns: &str, name: &str, spec: AnalysisRunSpec) -> Option<AnalysisRun> {
    let mut run = AnalysisRun::new(name, spec);
    run.metadata.namespace = Some(ns.to_owned());
    if let Err(e) = op.create(Controller::Rollout, &run).await {
        warn!(run = name, error = %e, "cannot create the analysis run");
        return None;
    }
    // Read back for its creation time (the run's start) and generation.
    match op.api::<AnalysisRun>(ns).get(name).await {
        Ok(r) => Some(r),
        Err(e) => {
            warn!(run = name, error = %e, "cannot read the analysis run back");
            None
        }
    }
}

fn status_of(r: &AnalysisRun) -> AnalysisRunStatus {
    r.current_status().cloned().unwrap_or_default()
}

/// Writes `status` (stamped with the run's generation) and keeps it in
/// `run`; whether it was written.
async fn write_status(op: &Ctx, run: &mut AnalysisRun, mut status: AnalysisRunStatus) -> bool {
    status.observed_generation = run.metadata.generation;
    let (Some(ns), Some(name)) = (run.metadata.namespace.clone(), run.metadata.name.clone()) else {
        return false;
    };
    let body = match serde_json::to_value(&status) {
        Ok(b) => b,
        Err(e) => {
            warn!(run = %name, error = %e, "cannot encode the analysis status");
            return false;
        }
    };
    match op
        .merge_status::<AnalysisRun>(Controller::Rollout, &ns, &name, body)
        .await
    {
        Ok(()) => {
            run.status = Some(status);
            true
        }
        Err(e) => {
            warn!(run = %name, error = %e, "cannot write the analysis status");
            false
        }
    }
}

/// Measures what is due and ends the run once its outcome is decided.
async fn advance(
    op: &Ctx,
    cfg: &EngineConfig,
    mut run: AnalysisRun,
    rollouts: &[Arc<Rollout>],
    url: Option<&str>,
) -> AnalysisRun {
    let Some(started) = run.started() else {
        return run;
    };
    let soak = run
        .spec
        .soak
        .as_deref()
        .and_then(|s| crate::duration::parse(s).ok());
    let mut status = status_of(&run);
    let plan = match analysis::plan(&run.spec.checks, soak) {
        Ok(p) => p,
        Err(problems) => {
            // Lint refuses such a release; one that reached the cluster
            // anyway holds the wave rather than judge it.
            status.phase = AnalysisPhase::Paused;
            status.finished_at = Some(crate::rollout::now());
            status.message = Some(format!(
                "the checks do not plan: {}",
                problems
                    .iter()
                    .map(|p| format!("{}: {}", p.field, p.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
            write_status(op, &mut run, status).await;
            return run;
        }
    };
    let now = Timestamp::now();
    let mut recorded = false;
    if let Step::Running { due, .. } = analysis::step(&plan, started, now, &status.measurements)
        && !due.is_empty()
        && !due
            .iter()
            .any(|d| measure::waits_for_monitors(&cfg.signals, d.check))
    {
        let tenants_rollouts: Vec<&Rollout> = rollouts.iter().map(AsRef::as_ref).collect();
        let signals = measure::signals(&cfg.signals, &cfg.alerts, &run, &tenants_rollouts);
        let mut taken = Vec::new();
        for d in &due {
            let reading =
                measure::reading(d.check, &run, &signals, url, cfg.prometheus_timeout).await;
            taken.push(Measurement::new(&d.check.name, d.slot, now, reading));
        }
        for m in taken {
            recorded |= analysis::record(&mut status.measurements, m);
        }
    }
    let before = status.phase;
    let outcome = match analysis::step(&plan, started, Timestamp::now(), &status.measurements) {
        Step::Running { next, .. } => {
            let tallies = analysis::tally(&plan, &status.measurements);
            let measured: u32 = tallies.iter().map(|t| t.measured).sum();
            let count: u32 = tallies.iter().map(|t| t.count).sum();
            status.message = Some(format!(
                "{measured} of {count} measurements; next at {}",
                next.strftime("%H:%M:%S")
            ));
            None
        }
        Step::Done(o) => {
            status.phase = match &o {
                Outcome::Passed => AnalysisPhase::Passed,
                Outcome::Failed { .. } => AnalysisPhase::Failed,
                Outcome::Inconclusive { .. } => AnalysisPhase::Paused,
            };
            status.check = match &o {
                Outcome::Passed => None,
                Outcome::Failed { check, .. } | Outcome::Inconclusive { check, .. } => {
                    Some(check.clone())
                }
            };
            status.finished_at = Some(crate::rollout::now());
            status.message = Some(match &o {
                Outcome::Passed => format!("{o}: {}", summary(&plan, &status.measurements)),
                Outcome::Failed { .. } => format!("{o}; rolling the wave back"),
                Outcome::Inconclusive { .. } => {
                    format!("{o}; the wave is held until a person acts")
                }
            });
            Some(o)
        }
    };
    if !recorded && outcome.is_none() && before == status.phase {
        return run;
    }
    if !write_status(op, &mut run, status).await {
        return run;
    }
    if let Some(o) = outcome {
        tell(op, cfg, &run, rollouts, &o, &plan).await;
    }
    run
}

/// `5 of 5 measurements of 2 checks passed`.
fn summary(plan: &analysis::Plan, measurements: &[Measurement]) -> String {
    let tallies = analysis::tally(plan, measurements);
    let passed: u32 = tallies.iter().map(|t| t.passed).sum();
    let measured: u32 = tallies.iter().map(|t| t.measured).sum();
    format!(
        "{passed} of {measured} measurements of {} check(s) passed",
        tallies.len()
    )
}

/// The outcome told: an Event on the run, the notifier's event, and each
/// tenant's commit status.
async fn tell(
    op: &Ctx,
    cfg: &EngineConfig,
    run: &AnalysisRun,
    rollouts: &[Arc<Rollout>],
    o: &Outcome,
    plan: &analysis::Plan,
) {
    let Ok(wave) = run.spec.wave.parse::<WaveName>() else {
        return;
    };
    let release = &run.spec.release;
    let message = format!("wave {wave} on {release}: {o}");
    let (reason, kind) = match o {
        Outcome::Passed => (Reason::AnalysisPassed, EventType::Normal),
        Outcome::Failed { .. } => (Reason::AnalysisFailed, EventType::Warning),
        Outcome::Inconclusive { .. } => (Reason::AnalysisPaused, EventType::Warning),
    };
    match o {
        Outcome::Passed => info!(run = ?run.metadata.name, %message, "wave analysis passed"),
        _ => warn!(run = ?run.metadata.name, %message, "wave analysis did not pass"),
    }
    op.event(run, kind, reason, message.clone()).await;
    let tenants: Vec<&str> = run.spec.tenants.iter().map(|t| t.name.as_str()).collect();
    if !matches!(o, Outcome::Passed) {
        cfg.notifier.emit(notices::wave_event(
            EventKind::AnalysisFailed,
            wave,
            release,
            &run.spec.commit,
            &tenants,
            message.clone(),
        ));
    }
    for r in rollouts
        .iter()
        .filter(|r| tenants.contains(&r.spec.tenant.as_str()) && r.spec.release == *release)
    {
        let s = Subject {
            tenant: &r.spec.tenant,
            commit: &r.spec.commit,
            wave,
            release,
        };
        let status = match o {
            Outcome::Passed => {
                notices::analysis_passed(s, &summary(plan, &status_of(run).measurements))
            }
            _ => notices::analysis_failed(s, &o.to_string()).1,
        };
        cfg.notifier.commit_status(status);
    }
}
