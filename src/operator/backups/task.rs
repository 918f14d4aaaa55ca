//! The leader's backup loop: every `tick`, each volume with a backup
//! policy (an AgentFS, or an App's workspace and database: one
//! [`Subject`] each) is looked at from the caches ([`plan::next`]); a due or
//! requested backup runs ([`run::backup_now`]), or a due restore drill
//! ([`drill::run`]), at most `parallel` at once and one per volume (a
//! drill and a backup of the same volume never overlap); its outcome is
//! merged into its backup status (`status.backup` of an AgentFS,
//! `status.backup.workspace|database` of an App).
//!
//! Guarantees:
//! - the backup status is written only by this task, as a merge patch, with
//!   the generation whose policy it followed (`observedGeneration`);
//! - an on-demand request is answered (`answeredRequest`) by the backup
//!   that served it, whether it succeeded or failed, so `exo fs backup`
//!   never waits for nothing;
//! - an invalid policy is reported once, naming its field, and retried
//!   only when the AgentFS or App changes;
//! - a volume is not looked at again until the cache shows the outcome
//!   this task wrote (a cache a moment behind would otherwise run the same
//!   request, the same scheduled backup, or the same drill, twice);
//! - a failed drill is an Event `BackupDrillFailed` on the volume (an App
//!   volume's: on the App, naming the volume), naming
//!   the first file that differs (or the layer, or the error);
//! - losing the Lease stops the loop; a backup cut short pushed no
//!   manifest (`backup::take`), and the next leader starts it again.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::events::EventType;
use serde_json::json;
use tokio::sync::Semaphore;
use tracing::{info, warn};

use super::plan::{self, Next, Settings};
use super::subject::{self, Source, Subject};
use super::{drill, run};
use crate::agentfs::helper::HelperOpts;
use crate::cluster::apply::Ctx;
use crate::cluster::events::Reason;
use crate::cluster::metrics::Controller;
use crate::crd::{AgentFS, App, BackupFailure, BackupRecord};

#[derive(Debug, Clone)]
pub struct BackupTaskConfig {
    pub helper: HelperOpts,
    /// How often the volumes are looked at.
    pub tick: Duration,
    /// Backups running at once.
    pub parallel: usize,
}

fn now_s() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

fn rfc3339_now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// Volumes in hand: running, or written and not yet seen in the cache
/// (the time of the outcome written).
#[derive(Default)]
struct InHand {
    running: HashSet<String>,
    written: HashMap<String, String>,
}

impl InHand {
    /// Whether `key` may be looked at, given its cached status.
    fn free(&mut self, key: &str, status: Option<&crate::crd::BackupStatus>) -> bool {
        if self.running.contains(key) {
            return false;
        }
        let Some(time) = self.written.get(key) else {
            return true;
        };
        let shown = status.is_some_and(|s| {
            s.last_success.as_ref().is_some_and(|b| &b.time == time)
                || s.last_error.as_ref().is_some_and(|e| &e.time == time)
                || s.last_drill.as_ref().is_some_and(|d| &d.time == time)
        });
        if shown {
            self.written.remove(key);
        }
        shown
    }
}

pub async fn run(ctx: Arc<Ctx>, cfg: BackupTaskConfig) {
    let busy: Arc<Mutex<InHand>> = Arc::default();
    let slots = Arc::new(Semaphore::new(cfg.parallel.max(1)));
    let mut tick = tokio::time::interval(cfg.tick);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !ctx.caches_synced() {
            continue;
        }
        let apps = ctx.apps.as_ref().map(|s| s.state()).unwrap_or_default();
        for subject in subject::subjects(&ctx.filesystems.state(), &apps) {
            let key = subject.key();
            let status = subject.status.as_ref();
            if !busy
                .lock()
                .map(|mut b| b.free(&key, status))
                .unwrap_or(false)
            {
                continue;
            }
            let settings = match Settings::of(&subject.policy) {
                Ok(s) => s,
                Err(e) => {
                    let message = e.to_string();
                    let told = status
                        .and_then(|s| s.last_error.as_ref())
                        .is_some_and(|f| f.message == message)
                        && status.and_then(|s| s.observed_generation) == subject.generation;
                    if !told {
                        warn!(volume = %key, error = %message, "backup policy refused");
                        let failure = BackupFailure {
                            time: rfc3339_now(),
                            reason: "invalid".into(),
                            message,
                        };
                        write(&ctx, &subject, json!({ "lastError": failure })).await;
                    }
                    continue;
                }
            };
            let next = plan::next(
                &key,
                now_s(),
                &settings,
                status,
                subject.requested.as_deref(),
            );
            if let Next::Wait(_) = next {
                continue;
            }
            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                break;
            };
            if let Ok(mut b) = busy.lock() {
                b.running.insert(key.clone());
            }
            let (ctx, busy, helper) = (Arc::clone(&ctx), Arc::clone(&busy), cfg.helper.clone());
            tokio::spawn(async move {
                let _permit = permit;
                let time = match next {
                    Next::Backup { request } => {
                        once(&ctx, &subject, &settings, &helper, request).await
                    }
                    Next::Drill { digest } => drill_once(&ctx, &subject, &helper, digest).await,
                    Next::Wait(_) => None,
                };
                if let Ok(mut b) = busy.lock() {
                    b.running.remove(&key);
                    if let Some(t) = time {
                        b.written.insert(key, t);
                    }
                }
            });
        }
    }
}

/// One backup of `subject`, and its outcome merged into its backup
/// status; the outcome's time when it was written.
async fn once(
    ctx: &Ctx,
    subject: &Subject,
    settings: &Settings,
    helper: &HelperOpts,
    request: Option<String>,
) -> Option<String> {
    let key = subject.key();
    let started = std::time::Instant::now();
    let outcome = run::backup_now(&ctx.client, subject, settings, helper).await;
    ctx.metrics.backups.ended(
        started.elapsed(),
        outcome.as_ref().err().map(run::RunError::reason),
    );
    let mut patch = match outcome {
        Ok(t) => {
            info!(volume = %key, digest = %t.digest, bytes_total = t.bytes_total,
                bytes_uploaded = t.bytes_uploaded, chunks = t.chunks,
                chunks_uploaded = t.chunks_uploaded, ms = started.elapsed().as_millis() as u64,
                "backup taken");
            let record = BackupRecord {
                time: t.created,
                digest: t.digest,
                bytes_uploaded: t.bytes_uploaded,
                bytes_total: t.bytes_total,
                files: t.files,
                tree_hash: t.tree_hash,
            };
            json!({ "lastSuccess": record, "lastError": null })
        }
        Err(e) => {
            warn!(volume = %key, reason = e.reason(), error = %e, "backup failed");
            let failure = BackupFailure {
                time: rfc3339_now(),
                reason: e.reason().to_owned(),
                message: e.to_string(),
            };
            json!({ "lastError": failure })
        }
    };
    if let (Some(r), Some(obj)) = (request, patch.as_object_mut()) {
        obj.insert("answeredRequest".into(), json!(r));
    }
    let time = ["lastSuccess", "lastError"]
        .iter()
        .find_map(|k| patch[*k]["time"].as_str().map(str::to_owned));
    write(ctx, subject, patch).await.then_some(time).flatten()
}

/// One restore drill of `digest`, its record merged into
/// `status.backup.lastDrill` (and an Event when it failed); the record's
/// time when it was written.
async fn drill_once(
    ctx: &Ctx,
    subject: &Subject,
    helper: &HelperOpts,
    digest: String,
) -> Option<String> {
    let key = subject.key();
    let started = std::time::Instant::now();
    let outcome = match subject.drill_source() {
        Some(source) => drill::run(ctx, &source, &subject.policy, helper, &digest).await,
        None => Err(drill::DrillError::Unnamed),
    };
    let ms = started.elapsed().as_millis() as u64;
    let result = match &outcome {
        Ok(done) => {
            info!(volume = %key, %digest, files = done.restored.files,
                tree_hash = %done.landed, pod = %done.pod, ms, "restore drill passed");
            Ok(())
        }
        Err(e) => {
            let message = e.to_string();
            warn!(volume = %key, %digest, error = %message, ms, "restore drill failed");
            let note = format!("restore drill of backup {digest}: {message}");
            let (warn, reason) = (EventType::Warning, Reason::BackupDrillFailed);
            match &subject.source {
                Source::AgentFS(fs) => ctx.event(fs.as_ref(), warn, reason, note).await,
                Source::App { app, volume } => {
                    let note = format!("the {volume} volume's {note}");
                    ctx.event(app.as_ref(), warn, reason, note).await
                }
            }
            Err(message)
        }
    };
    let previous = subject.status.as_ref().and_then(|b| b.last_drill.as_ref());
    let record = drill::record(previous, rfc3339_now(), digest, result);
    let time = record.time.clone();
    write(ctx, subject, json!({ "lastDrill": record }))
        .await
        .then_some(time)
}

/// Merges `fields` into the subject's backup status, with the generation
/// they follow; whether it was written.
async fn write(ctx: &Ctx, subject: &Subject, fields: serde_json::Value) -> bool {
    let patch = subject.status_patch(fields);
    let (ns, name) = (subject.namespace.as_str(), subject.name.as_str());
    let written = match &subject.source {
        Source::AgentFS(_) => {
            ctx.merge_status::<AgentFS>(Controller::Agentfs, ns, name, patch)
                .await
        }
        Source::App { .. } => {
            ctx.merge_status::<App>(Controller::App, ns, name, patch)
                .await
        }
    };
    match written {
        Ok(()) => true,
        Err(e) => {
            warn!(volume = %subject.key(), error = %e, "cannot write the backup status");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{BackupRecord, BackupStatus, DrillRecord};

    /// A volume whose outcome this task wrote is not looked at again until
    /// the cache shows that outcome (a stale copy would run it twice).
    #[test]
    fn a_volume_waits_for_its_written_outcome() {
        let mut hand = InHand::default();
        let old = BackupStatus {
            last_success: Some(BackupRecord {
                time: "t1".into(),
                ..BackupRecord::default()
            }),
            ..BackupStatus::default()
        };
        assert!(hand.free("a/w", Some(&old)));
        hand.running.insert("a/w".into());
        assert!(!hand.free("a/w", Some(&old)), "running");
        hand.running.remove("a/w");
        hand.written.insert("a/w".into(), "t2".into());
        assert!(!hand.free("a/w", Some(&old)), "the cache is behind");
        assert!(!hand.free("a/w", None));
        let mut new = old.clone();
        new.last_success.as_mut().unwrap().time = "t2".into();
        assert!(hand.free("a/w", Some(&new)), "the cache caught up");
        assert!(hand.written.is_empty());
        assert!(hand.free("b/x", None), "others are free");
    }

    /// A drill's written record is an outcome too: the volume waits for
    /// the cache to show it, whatever its backups' fields say.
    #[test]
    fn a_volume_waits_for_its_written_drill() {
        let mut hand = InHand::default();
        let before = BackupStatus {
            last_success: Some(BackupRecord {
                time: "t1".into(),
                ..BackupRecord::default()
            }),
            last_drill: Some(DrillRecord {
                time: "d1".into(),
                ..DrillRecord::default()
            }),
            ..BackupStatus::default()
        };
        hand.written.insert("a/w".into(), "d2".into());
        assert!(!hand.free("a/w", Some(&before)), "the old drill is shown");
        let mut after = before.clone();
        after.last_drill.as_mut().unwrap().time = "d2".into();
        assert!(hand.free("a/w", Some(&after)), "the drill written is shown");
        assert!(hand.written.is_empty());
    }
}
