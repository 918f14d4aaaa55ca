//! An analysis outcome in git: the next wave's promotion (once its gates
//! pass) or the wave's rollback, one commit on the branch's head pushed
//! with the Fleet's credentials off the async runtime, then recorded on the
//! run (its `action`), with an Event and a sync request. A commit that
//! fails is tried again after [`super::COMMIT_RETRY`].

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;
use tracing::{info, warn};

use super::edit;
use super::{AUTHOR, status_of, write_status};
use crate::cluster::apply::Ctx;
use crate::cluster::events::Reason;
use crate::cluster::metrics::Controller;
use crate::crd::{ActionKind, AnalysisRun, Fleet as FleetCr, Rollout, RunAction};
use crate::fleet::gitsync::{self, Committed};
use crate::release::WaveName;
use crate::rollout::engine::{EngineConfig, source_for};
use crate::rollout::gates;

/// Why an outcome's commit was not made (it is tried again).
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The Fleet's credentials could not be read.
    #[error("the Fleet's git source: {0}")]
    Source(#[source] crate::rollout::engine::Error),
    #[error(transparent)]
    Git(#[from] gitsync::GitSyncError),
    /// The blocking commit task panicked or was cancelled.
    #[error("the commit task ended: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// No release to roll back to.
    #[error(
        "wave {wave} has no earlier release that all its tenants verified (history: {history})"
    )]
    NoTarget { wave: WaveName, history: String },
}

/// The Fleet's git source (its credentials included).
async fn source(op: &Ctx, f: &FleetCr) -> Result<gitsync::Source, CommitError> {
    let ns = f.metadata.namespace.clone().unwrap_or_default();
    source_for(&op.client, f, &ns)
        .await
        .map_err(CommitError::Source)
}

/// Makes one outcome commit, off the async runtime.
async fn commit(
    cfg: &EngineConfig,
    source: gitsync::Source,
    edit: impl Fn(Option<&str>) -> Result<String, edit::EditError> + Send + 'static,
    message: String,
) -> Result<Committed, CommitError> {
    let cache = cfg.cache_dir.join("analysis-commits");
    Ok(tokio::task::spawn_blocking(move || {
        gitsync::commit_file(&source, &cache, &edit::waves_path(), edit, &message, AUTHOR)
    })
    .await??)
}

/// Records the action (or the failure) on the run; asks for a sync.
async fn acted(
    op: &Ctx,
    f: &FleetCr,
    mut run: AnalysisRun,
    action: Result<(Committed, RunAction), CommitError>,
    what: &str,
) -> Result<Option<AnalysisRun>, AnalysisRun> {
    let mut status = status_of(&run);
    match action {
        Ok((committed, mut a)) => {
            a.commit = match &committed {
                Committed::Pushed(id) => Some(id.clone()),
                Committed::Unchanged(_) => None,
            };
            let note = match &committed {
                Committed::Pushed(id) => {
                    format!("{what} (commit {})", crate::rollout::summary::short_id(id))
                }
                Committed::Unchanged(_) => format!("{what} (git said so already)"),
            };
            info!(run = ?run.metadata.name, %note, "analysis outcome committed");
            op.event(&run, EventType::Normal, Reason::AnalysisCommitted, note)
                .await;
            status.action = Some(a);
            write_status(op, &mut run, status).await;
            if let (Some(ns), Some(name)) = (&f.metadata.namespace, &f.metadata.name) {
                let stamp = Timestamp::now().to_string();
                let _ = op
                    .patch_metadata::<FleetCr>(
                        Controller::Rollout,
                        ns,
                        name,
                        None,
                        serde_json::json!({"annotations": {crate::meta::ANNOTATION_SYNC_REQUESTED: stamp}}),
                    )
                    .await;
            }
            Ok(Some(run))
        }
        Err(e) => {
            warn!(run = ?run.metadata.name, error = %e, "analysis outcome not committed; trying again");
            op.event(
                &run,
                EventType::Warning,
                Reason::AnalysisCommitFailed,
                format!("{what}: {e}"),
            )
            .await;
            Err(run)
        }
    }
}

pub(super) async fn promote(
    op: &Ctx,
    cfg: &EngineConfig,
    f: &FleetCr,
    run: AnalysisRun,
    spec: &crate::fleet::release::ReleaseSpec,
    rollouts: &[Arc<Rollout>],
    spans_clusters: bool,
) -> Result<Option<AnalysisRun>, AnalysisRun> {
    let Ok(wave) = run.spec.wave.parse::<WaveName>() else {
        return Ok(None);
    };
    let release = run.spec.release.clone();
    let Some(next) = wave.next() else {
        return Ok(None);
    };
    if spans_clusters {
        // This cluster's run judged this cluster's tenants only: the next
        // wave waits for a gate over every (tenant, cluster) pair.
        let mut run = run;
        let mut status = status_of(&run);
        let message = format!(
            "analysis passed on this cluster; {release} is not promoted to {next} from here: the fleet spans clusters (clusters/), and one cluster cannot vouch for the others (exo release promote --control-plane)"
        );
        if status.message.as_deref() != Some(message.as_str()) {
            status.message = Some(message);
            write_status(op, &mut run, status).await;
        }
        return Ok(Some(run));
    }
    let all: Vec<Rollout> = rollouts.iter().map(|r| Rollout::clone(r)).collect();
    let next_gates = spec.wave(next).map(|w| w.gates.clone()).unwrap_or_default();
    if let Err(g) = gates::check(
        next,
        &release,
        &next_gates,
        &all,
        gates::Analysis::Run(Some(&run)),
        Timestamp::now().as_second(),
    ) {
        // Passed, but the next wave's gates (its soak time) say not yet.
        let mut run = run;
        let mut status = status_of(&run);
        let message = format!("analysis passed; promoting {release} to {next} once: {g}");
        if status.message.as_deref() != Some(message.as_str()) {
            status.message = Some(message);
            write_status(op, &mut run, status).await;
        }
        return Ok(Some(run));
    }
    let source = match source(op, f).await {
        Ok(s) => s,
        Err(e) => return acted(op, f, run, Err(e), "promotion").await,
    };
    let summary = status_of(&run).message.unwrap_or_default();
    let message = edit::promote_message(&release, next, wave, &summary);
    let r2 = release.clone();
    let action = RunAction {
        kind: ActionKind::Promoted,
        wave: next.as_str().to_owned(),
        release: release.clone(),
        commit: None,
        at: crate::rollout::now(),
    };
    let what = format!("promoted {release} to the {next} wave");
    let edit = move |text: Option<&str>| edit::promote(text, next, &r2);
    commit_and_record(op, cfg, f, run, source, edit, message, action, &what).await
}

/// Makes the commit, then records it (or the failure) on the run.
#[allow(clippy::too_many_arguments)]
async fn commit_and_record(
    op: &Ctx,
    cfg: &EngineConfig,
    f: &FleetCr,
    run: AnalysisRun,
    source: gitsync::Source,
    edit: impl Fn(Option<&str>) -> Result<String, edit::EditError> + Send + 'static,
    message: String,
    action: RunAction,
    what: &str,
) -> Result<Option<AnalysisRun>, AnalysisRun> {
    let result = commit(cfg, source, edit, message)
        .await
        .map(|c| (c, action));
    acted(op, f, run, result, what).await
}

pub(super) async fn roll_back(
    op: &Ctx,
    cfg: &EngineConfig,
    f: &FleetCr,
    run: AnalysisRun,
    pointer: &crate::fleet::release::WavePointer,
    in_wave: &[&Rollout],
) -> Result<Option<AnalysisRun>, AnalysisRun> {
    let Ok(wave) = run.spec.wave.parse::<WaveName>() else {
        return Ok(None);
    };
    let from = run.spec.release.clone();
    let Some(to) = gates::rollback_target(pointer, in_wave) else {
        let e = CommitError::NoTarget {
            wave,
            history: if pointer.history.is_empty() {
                "empty".to_owned()
            } else {
                pointer.history.join(", ")
            },
        };
        return acted(op, f, run, Err(e), "rollback").await;
    };
    let source = match source(op, f).await {
        Ok(s) => s,
        Err(e) => return acted(op, f, run, Err(e), "rollback").await,
    };
    let outcome = status_of(&run)
        .message
        .unwrap_or_else(|| "analysis failed".into());
    let message = edit::rollback_message(wave, &from, &to, &outcome);
    let (f2, t2) = (from.clone(), to.clone());
    let action = RunAction {
        kind: ActionKind::RolledBack,
        wave: wave.as_str().to_owned(),
        release: to.clone(),
        commit: None,
        at: crate::rollout::now(),
    };
    let what = format!("rolled the {wave} wave back from {from} to {to}");
    let edit = move |text: Option<&str>| edit::roll_back(text, wave, &f2, &t2);
    commit_and_record(op, cfg, f, run, source, edit, message, action, &what).await
}
