//! `exo fs backup NAME [--timeout 10m]`: asks the operator for a backup now
//! (a new value of `autonomic.sh/backup-requested-at`: this moment, RFC
//! 3339 with nanoseconds), then watches the AgentFS until
//! `status.backup.answeredRequest` is that value, and says what the
//! backup that answered it did. `exo fs backup app/NAME` does the same
//! for both volumes of an App, and waits for each volume's answer
//! (`status.backup.workspace|database`). Direct route only.
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

use crate::agentfs::apps::APP_PREFIX;
use crate::agentfs::helper::get_fs;
use crate::cli::fs_show::human;
use crate::crd::{AgentFS, App, AppVolumeKind, BackupFailure, BackupRecord, BackupStatus};
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
    let st = fs.status.as_ref().and_then(|s| s.backup.as_ref());
    answer_of(st, fs.metadata.generation, request)
}

/// What one volume's backup status says about `request`, its object
/// being at `generation` (pure; an AgentFS's or an App volume's).
pub fn answer_of(st: Option<&BackupStatus>, generation: Option<i64>, request: &str) -> Answer {
    let Some(st) = st else {
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
        Some(e) if e.reason == "invalid" && st.observed_generation == generation => {
            Answer::Refused(e.clone())
        }
        _ => Answer::Pending,
    }
}

/// What each volume of `app` says about `request`, workspace first (pure).
pub fn app_answers(app: &App, request: &str) -> Vec<(AppVolumeKind, Answer)> {
    let backups = app.status.as_ref().and_then(|s| s.backup.as_ref());
    app.spec
        .volumes()
        .into_iter()
        .map(|(kind, _)| {
            let st = backups.and_then(|b| b.volume(kind));
            (kind, answer_of(st, app.metadata.generation, request))
        })
        .collect()
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

/// Sets a new on-demand request on the object `name` of `api` (`what`
/// names it in messages), then waits up to `timeout` until `answered`
/// says its status answers it; the request and the object then.
async fn request_and_wait<K>(
    api: Api<K>,
    what: &str,
    name: &str,
    timeout: Duration,
    answered: impl Fn(&K, &str) -> bool,
) -> Result<(String, K), String>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    let request = format!("{:.9}", k8s_openapi::jiff::Timestamp::now());
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
    .map_err(|e| format!("request a backup of {what}: {e}"))?;

    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(format!("waiting for the backup of {what}"));
    pb.enable_steady_tick(Duration::from_millis(200));
    let r = request.clone();
    let done = await_condition(api, name, move |o: Option<&K>| {
        o.is_none_or(|o| answered(o, &r))
    });
    let waited = tokio::time::timeout(timeout, done).await;
    pb.finish_and_clear();
    match waited {
        Err(_) => Err(format!(
            "no answer to the backup request {request} of {what} within {} s; is the operator \
             running? The request stays on it and is served when the operator gets to it",
            timeout.as_secs()
        )),
        Ok(Err(e)) => Err(format!("watching {what}: {e}")),
        Ok(Ok(None)) => Err(format!("{what} was deleted")),
        Ok(Ok(Some(o))) => Ok((request, o)),
    }
}

fn record_json(r: &BackupRecord) -> serde_json::Value {
    serde_json::json!({
        "digest": r.digest,
        "time": r.time,
        "files": r.files,
        "bytesTotal": r.bytes_total,
        "bytesUploaded": r.bytes_uploaded,
        "treeHash": r.tree_hash,
    })
}

/// Why an answer is not a backup, for messages (`None`: it is one).
fn not_done(a: &Answer) -> Option<String> {
    match a {
        Answer::Done(_) => None,
        Answer::Failed(f) => Some(format!("failed ({}): {}", f.reason, f.message)),
        Answer::Refused(f) => Some(format!(
            "was refused: the operator refuses the backup policy: {}",
            f.message
        )),
        Answer::Pending => Some("was not answered: the watch ended first".into()),
    }
}

/// Requests a backup of `namespace/name` (an AgentFS, or `app/NAME` for
/// both volumes of an App) and waits up to `timeout` for its answer.
pub async fn backup(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Result<serde_json::Value, String> {
    if let Some(app) = name.strip_prefix(APP_PREFIX) {
        return backup_app(client, namespace, app, timeout).await;
    }
    let fs = get_fs(client, namespace, name)
        .await
        .map_err(|e| e.to_string())?;
    if fs.spec.backup.is_none() {
        return Err(format!(
            "AgentFS {namespace}/{name} has no spec.backup: set a backup policy first (docs/backups.md)"
        ));
    }
    let api: Api<AgentFS> = Api::namespaced(client.clone(), namespace);
    let what = format!("AgentFS {namespace}/{name}");
    let (request, fs) = request_and_wait(api, &what, name, timeout, |fs, r| {
        answer(fs, r) != Answer::Pending
    })
    .await?;
    if let Some(note) = behind(&fs) {
        eprintln!("exo fs backup: note: {note}");
    }
    match answer(&fs, &request) {
        Answer::Done(r) => {
            let mut v = record_json(&r);
            v["namespace"] = namespace.into();
            v["name"] = name.into();
            v["request"] = request.into();
            v["observedGeneration"] = fs
                .status
                .as_ref()
                .and_then(|s| s.backup.as_ref())
                .and_then(|b| b.observed_generation)
                .into();
            v["generation"] = fs.metadata.generation.into();
            Ok(v)
        }
        other => Err(format!(
            "the backup of {what} {}",
            not_done(&other).unwrap_or_default()
        )),
    }
}

/// Both volumes of App `namespace/app`: one request, answered in each
/// volume's status; an error names each volume that did not back up.
async fn backup_app(
    client: &Client,
    namespace: &str,
    app: &str,
    timeout: Duration,
) -> Result<serde_json::Value, String> {
    if app.is_empty() {
        return Err("app/: name the App, e.g. app/shop".into());
    }
    let api: Api<App> = Api::namespaced(client.clone(), namespace);
    let what = format!("App {namespace}/{app}");
    let found = api
        .get_opt(app)
        .await
        .map_err(|e| format!("get {what}: {e}"))?
        .ok_or_else(|| format!("{what} not found"))?;
    if found.spec.backup.is_none() {
        return Err(format!(
            "{what} has no spec.backup: set a backup policy first (docs/backups.md)"
        ));
    }
    let (request, got) = request_and_wait(api, &what, app, timeout, |a, r| {
        app_answers(a, r)
            .iter()
            .all(|(_, answer)| *answer != Answer::Pending)
    })
    .await?;
    let answers = app_answers(&got, &request);
    let failed: Vec<String> = answers
        .iter()
        .filter_map(|(kind, a)| not_done(a).map(|why| format!("the {kind} {why}")))
        .collect();
    if !failed.is_empty() {
        return Err(format!("the backup of {what}: {}", failed.join("; ")));
    }
    let volumes: Vec<serde_json::Value> = answers
        .iter()
        .filter_map(|(kind, a)| match a {
            Answer::Done(r) => {
                let mut v = record_json(r);
                v["volume"] = kind.as_str().into();
                Some(v)
            }
            _ => None,
        })
        .collect();
    Ok(serde_json::json!({
        "namespace": namespace,
        "app": app,
        "request": request,
        "generation": got.metadata.generation,
        "volumes": volumes,
    }))
}

/// The table output.
pub fn show(v: &serde_json::Value) -> String {
    let n = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap_or_default();
    let line = |r: &serde_json::Value, who: String| {
        let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
        format!(
            "backed up {who}: {}\n{} file(s), {} in the stream, {} uploaded; tree hash {}\n",
            s("digest"),
            n(r, "files"),
            human(n(r, "bytesTotal")),
            human(n(r, "bytesUploaded")),
            s("treeHash"),
        )
    };
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    match v["volumes"].as_array() {
        Some(volumes) => volumes
            .iter()
            .map(|r| {
                let volume = r["volume"].as_str().unwrap_or_default();
                line(r, format!("{}/app/{} {volume}", s("namespace"), s("app")))
            })
            .collect(),
        None => line(v, format!("{}/{}", s("namespace"), s("name"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::AgentFSStatus;

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

    /// An App's request is answered once per volume; each answer counts.
    #[test]
    fn an_apps_request_is_answered_per_volume() {
        let mut a: App = serde_json::from_value(serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "App",
            "metadata": { "name": "shop", "generation": 2 },
            "spec": { "image": "i", "workspace": { "size": "1Gi", "maxSize": "2Gi" },
                "database": { "postgres": { "image": "p", "size": "1Gi", "maxSize": "2Gi" } } }
        }))
        .unwrap();
        let pending = [
            (AppVolumeKind::Workspace, Answer::Pending),
            (AppVolumeKind::Database, Answer::Pending),
        ];
        assert_eq!(app_answers(&a, "r1"), pending);
        let answered = |e: Option<BackupFailure>| BackupStatus {
            answered_request: Some("r1".into()),
            last_success: Some(ok()),
            last_error: e,
            ..BackupStatus::default()
        };
        a.status = Some(crate::crd::AppStatus {
            backup: Some(crate::crd::AppBackupStatus {
                workspace: answered(None),
                database: None,
            }),
            ..Default::default()
        });
        assert_eq!(
            app_answers(&a, "r1"),
            [
                (AppVolumeKind::Workspace, Answer::Done(ok())),
                (AppVolumeKind::Database, Answer::Pending)
            ]
        );
        a.status.as_mut().unwrap().backup.as_mut().unwrap().database =
            Some(answered(Some(err("hook"))));
        assert_eq!(app_answers(&a, "r1")[1].1, Answer::Failed(err("hook")));
        let v = serde_json::json!({"namespace": "acme", "app": "shop", "volumes": [
            {"volume": "workspace", "digest": "sha256:ab", "files": 1},
            {"volume": "database", "digest": "sha256:cd", "files": 2}]});
        let t = show(&v);
        assert!(
            t.starts_with("backed up acme/app/shop workspace: sha256:ab\n"),
            "{t}"
        );
        assert!(
            t.contains("backed up acme/app/shop database: sha256:cd\n2 file(s)"),
            "{t}"
        );
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
