//! The leader's backup loop: every `tick`, each AgentFS with
//! `spec.backup` is looked at from the cache ([`plan::next`]); a due or
//! requested backup runs ([`run::backup_now`]), at most `parallel` at
//! once and one per volume; its outcome is merged into
//! `status.backup`.
//!
//! Guarantees:
//! - `status.backup` is written only by this task, as a merge patch, with
//!   the generation whose policy it followed (`observedGeneration`);
//! - an on-demand request is answered (`answeredRequest`) by the backup
//!   that served it, whether it succeeded or failed, so `exo fs backup`
//!   never waits for nothing;
//! - an invalid policy is reported once, naming its field, and retried
//!   only when the AgentFS changes;
//! - losing the Lease stops the loop; a backup cut short pushed no
//!   manifest (`backup::take`), and the next leader starts it again.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::ResourceExt;
use serde_json::json;
use tokio::sync::Semaphore;
use tracing::{info, warn};

use super::plan::{self, Next, Settings};
use super::run;
use crate::agentfs::helper::HelperOpts;
use crate::cluster::apply::Ctx;
use crate::cluster::metrics::Controller;
use crate::crd::{AgentFS, BackupFailure, BackupRecord};
use crate::meta::ANNOTATION_BACKUP_REQUESTED;

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

pub async fn run(ctx: Arc<Ctx>, cfg: BackupTaskConfig) {
    let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
    let slots = Arc::new(Semaphore::new(cfg.parallel.max(1)));
    let mut tick = tokio::time::interval(cfg.tick);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !ctx.caches_synced() {
            continue;
        }
        for fs in ctx.filesystems.state() {
            let Some(policy) = fs.spec.backup.clone() else {
                continue;
            };
            if fs.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let ns = fs.namespace().unwrap_or_default();
            let key = format!("{ns}/{}", fs.name_any());
            if busy.lock().map(|b| b.contains(&key)).unwrap_or(true) {
                continue;
            }
            let status = fs.status.as_ref().and_then(|s| s.backup.as_ref());
            let settings = match Settings::of(&policy) {
                Ok(s) => s,
                Err(e) => {
                    let message = e.to_string();
                    let told = status
                        .and_then(|s| s.last_error.as_ref())
                        .is_some_and(|f| f.message == message)
                        && status.and_then(|s| s.observed_generation) == fs.metadata.generation;
                    if !told {
                        warn!(volume = %key, error = %message, "backup policy refused");
                        let failure = BackupFailure {
                            time: rfc3339_now(),
                            reason: "invalid".into(),
                            message,
                        };
                        write(&ctx, &fs, json!({ "lastError": failure })).await;
                    }
                    continue;
                }
            };
            let requested = fs.annotations().get(ANNOTATION_BACKUP_REQUESTED).cloned();
            let Next::Backup { request } =
                plan::next(&key, now_s(), &settings, status, requested.as_deref())
            else {
                // Drills and staleness alerts are not run yet (issue 31):
                // only backups are taken.
                continue;
            };
            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                break;
            };
            if let Ok(mut b) = busy.lock() {
                b.insert(key.clone());
            }
            let (ctx, busy, helper) = (Arc::clone(&ctx), Arc::clone(&busy), cfg.helper.clone());
            tokio::spawn(async move {
                let _permit = permit;
                once(&ctx, &fs, &settings, &policy, &helper, request).await;
                if let Ok(mut b) = busy.lock() {
                    b.remove(&key);
                }
            });
        }
    }
}

/// One backup of `fs`, and its outcome merged into `status.backup`.
async fn once(
    ctx: &Ctx,
    fs: &AgentFS,
    settings: &Settings,
    policy: &crate::crd::BackupPolicy,
    helper: &HelperOpts,
    request: Option<String>,
) {
    let key = format!("{}/{}", fs.namespace().unwrap_or_default(), fs.name_any());
    let started = std::time::Instant::now();
    let outcome = run::backup_now(&ctx.client, fs, settings, policy, helper).await;
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
    write(ctx, fs, patch).await;
}

/// Merges `fields` into `status.backup`, with the generation they follow.
async fn write(ctx: &Ctx, fs: &AgentFS, mut fields: serde_json::Value) {
    if let Some(obj) = fields.as_object_mut() {
        obj.insert("observedGeneration".into(), json!(fs.metadata.generation));
    }
    let ns = fs.namespace().unwrap_or_default();
    let name = fs.name_any();
    if let Err(e) = ctx
        .merge_status::<AgentFS>(Controller::Agentfs, &ns, &name, json!({ "backup": fields }))
        .await
    {
        warn!(volume = %format!("{ns}/{name}"), error = %e, "cannot write the backup status");
    }
}
