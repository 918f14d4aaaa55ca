//! `exo fs backup NAME [--timeout 10m]`: asks the operator for a backup now
//! (a new value of `autonomic.sh/backup-requested-at`: this moment, RFC
//! 3339 with nanoseconds), then watches the AgentFS until
//! `status.backup.answeredRequest` is that value, and says what the
//! backup that answered it did. Direct route only.
//!
//! The status is read for what it answers: a request is answered only by
//! the backup that served it (`operator::backups::task`), and a status
//! computed for an older generation of the AgentFS (its policy changed
//! meanwhile) is said to be so.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::await_condition;

use crate::agentfs::helper::get_fs;
use crate::cli::fs_show::human;
use crate::crd::{AgentFS, BackupFailure, BackupRecord};
use crate::meta::{ANNOTATION_BACKUP_REQUESTED, FIELD_MANAGER};

/// What an AgentFS says about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Not answered yet.
    Pending,
    Done(BackupRecord),
    Failed(BackupFailure),
    /// The operator refuses the policy of the current generation: the
    /// request will not be served until the AgentFS changes.
    Refused(BackupFailure),
}

/// What `fs`'s status says about `request` (pure).
pub fn answer(fs: &AgentFS, request: &str) -> Answer {
    let Some(st) = fs.status.as_ref().and_then(|s| s.backup.as_ref()) else {
        return Answer::Pending;
    };
    if st.answered_request.as_deref() == Some(request) {
        // A success clears `lastError`: one left means this backup failed.
        return match (&st.last_error, &st.last_success) {
            (Some(e), _) => Answer::Failed(e.clone()),
            (None, Some(ok)) => Answer::Done(ok.clone()),
            (None, None) => Answer::Failed(BackupFailure {
                reason: "unknown".into(),
                message: "the request was answered without a backup or an error".into(),
                ..BackupFailure::default()
            }),
        };
    }
    match &st.last_error {
        Some(e) if e.reason == "invalid" && st.observed_generation == fs.metadata.generation => {
            Answer::Refused(e.clone())
        }
        _ => Answer::Pending,
    }
}

/// A note when the status was computed for an older generation than the
/// AgentFS's own (pure).
pub fn behind(fs: &AgentFS) -> Option<String> {
    let observed = fs
        .status
        .as_ref()
        .and_then(|s| s.backup.as_ref())
        .and_then(|b| b.observed_generation);
    match (observed, fs.metadata.generation) {
        (Some(o), Some(g)) if o < g => Some(format!(
            "the backup status was computed for generation {o} of the AgentFS, which is at \
             generation {g} now (its spec changed while the backup ran): the backup followed \
             the earlier policy"
        )),
        (None, Some(g)) => Some(format!(
            "the backup status does not say which generation it was computed for (the AgentFS \
             is at generation {g})"
        )),
        _ => None,
    }
}

/// Requests a backup of `namespace/name` and waits up to `timeout` for
/// its answer.
pub async fn backup(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Result<serde_json::Value, String> {
    let fs = get_fs(client, namespace, name)
        .await
        .map_err(|e| e.to_string())?;
    if fs.spec.backup.is_none() {
        return Err(format!(
            "AgentFS {namespace}/{name} has no spec.backup: set a backup policy first (docs/backups.md)"
        ));
    }
    let request = format!("{:.9}", k8s_openapi::jiff::Timestamp::now());
    let api: Api<AgentFS> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({
        "metadata": { "annotations": { ANNOTATION_BACKUP_REQUESTED: request } }
    });
    api.patch(
        name,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        },
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|e| format!("request a backup of AgentFS {namespace}/{name}: {e}"))?;

    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(format!("waiting for the backup of {namespace}/{name}"));
    pb.enable_steady_tick(Duration::from_millis(200));
    let answered = await_condition(api, name, |o: Option<&AgentFS>| {
        o.is_none_or(|fs| answer(fs, &request) != Answer::Pending)
    });
    let waited = tokio::time::timeout(timeout, answered).await;
    pb.finish_and_clear();
    let fs = match waited {
        Err(_) => {
            return Err(format!(
                "no answer to the backup request {request} of AgentFS {namespace}/{name} within \
                 {} s; is the operator running? The request stays on the AgentFS and is served \
                 when it gets to it",
                timeout.as_secs()
            ));
        }
        Ok(Err(e)) => return Err(format!("watching AgentFS {namespace}/{name}: {e}")),
        Ok(Ok(None)) => return Err(format!("AgentFS {namespace}/{name} was deleted")),
        Ok(Ok(Some(fs))) => fs,
    };
    if let Some(note) = behind(&fs) {
        eprintln!("exo fs backup: note: {note}");
    }
    match answer(&fs, &request) {
        Answer::Done(r) => Ok(serde_json::json!({
            "namespace": namespace,
            "name": name,
            "request": request,
            "digest": r.digest,
            "time": r.time,
            "files": r.files,
            "bytesTotal": r.bytes_total,
            "bytesUploaded": r.bytes_uploaded,
            "treeHash": r.tree_hash,
            "observedGeneration": fs.status.as_ref().and_then(|s| s.backup.as_ref()).and_then(|b| b.observed_generation),
            "generation": fs.metadata.generation,
        })),
        Answer::Failed(f) => Err(format!(
            "the backup of AgentFS {namespace}/{name} failed ({}): {}",
            f.reason, f.message
        )),
        Answer::Refused(f) => Err(format!(
            "the operator refuses the backup policy of AgentFS {namespace}/{name}: {}",
            f.message
        )),
        Answer::Pending => Err(format!(
            "AgentFS {namespace}/{name}: the watch ended before the request was answered"
        )),
    }
}

/// The table output.
pub fn show(v: &serde_json::Value) -> String {
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    let n = |k: &str| v[k].as_u64().unwrap_or_default();
    format!(
        "backed up {}/{}: {}\n{} file(s), {} in the stream, {} uploaded; tree hash {}\n",
        s("namespace"),
        s("name"),
        s("digest"),
        n("files"),
        human(n("bytesTotal")),
        human(n("bytesUploaded")),
        s("treeHash"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{AgentFSStatus, BackupStatus};

    fn fs(generation: i64, status: BackupStatus) -> AgentFS {
        let mut f = AgentFS::new("work", Default::default());
        f.metadata.generation = Some(generation);
        f.status = Some(AgentFSStatus {
            backup: Some(status),
            ..AgentFSStatus::default()
        });
        f
    }

    fn ok() -> BackupRecord {
        BackupRecord {
            time: "t".into(),
            digest: "sha256:ab".into(),
            ..BackupRecord::default()
        }
    }

    fn err(reason: &str) -> BackupFailure {
        BackupFailure {
            time: "t".into(),
            reason: reason.into(),
            message: "m".into(),
        }
    }

    #[test]
    fn only_the_answer_to_this_request_counts() {
        let earlier = BackupStatus {
            observed_generation: Some(2),
            last_success: Some(ok()),
            answered_request: Some("r0".into()),
            ..BackupStatus::default()
        };
        assert_eq!(answer(&fs(2, earlier.clone()), "r1"), Answer::Pending);
        assert_eq!(
            answer(&AgentFS::new("w", Default::default()), "r1"),
            Answer::Pending
        );

        let done = BackupStatus {
            answered_request: Some("r1".into()),
            ..earlier.clone()
        };
        assert_eq!(answer(&fs(2, done), "r1"), Answer::Done(ok()));

        // A failure keeps the earlier success: the error decides.
        let failed = BackupStatus {
            answered_request: Some("r1".into()),
            last_error: Some(err("unreachable")),
            ..earlier.clone()
        };
        assert_eq!(
            answer(&fs(2, failed), "r1"),
            Answer::Failed(err("unreachable"))
        );

        // A refused policy of this generation is never served; of an
        // earlier generation it may be by now.
        let refused = BackupStatus {
            last_error: Some(err("invalid")),
            ..earlier.clone()
        };
        assert_eq!(
            answer(&fs(2, refused.clone()), "r1"),
            Answer::Refused(err("invalid"))
        );
        assert_eq!(answer(&fs(3, refused), "r1"), Answer::Pending);
        let transient = BackupStatus {
            last_error: Some(err("unreachable")),
            ..earlier
        };
        assert_eq!(answer(&fs(2, transient), "r1"), Answer::Pending);
    }

    #[test]
    fn a_status_for_an_older_generation_is_said_to_be_so() {
        let at = |g| BackupStatus {
            observed_generation: g,
            ..BackupStatus::default()
        };
        assert_eq!(behind(&fs(3, at(Some(3)))), None);
        let note = behind(&fs(4, at(Some(3)))).unwrap();
        assert!(
            note.contains("generation 3") && note.contains("generation 4"),
            "{note}"
        );
        assert!(behind(&fs(4, at(None))).is_some());
    }

    #[test]
    fn the_table_shows_the_digest_and_sizes() {
        let v = serde_json::json!({"namespace": "acme", "name": "work", "digest": "sha256:ab",
            "files": 2, "bytesTotal": 3072, "bytesUploaded": 1024, "treeHash": "cd"});
        let t = show(&v);
        assert!(t.starts_with("backed up acme/work: sha256:ab\n"), "{t}");
        assert!(
            t.contains("2 file(s), 3.0 KiB in the stream, 1.0 KiB uploaded; tree hash cd"),
            "{t}"
        );
    }
}
