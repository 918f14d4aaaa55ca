//! One backup of one volume: its tar stream, read through a pod that
//! mounts it (an agent's or a short-lived helper for an AgentFS, the App's
//! own pod for an App volume), goes through `backup::backup` to the
//! policy's repository; then the backups past `keep` are deleted. Thin
//! I/O over `agentfs::transfer` and `backup`.
//!
//! Guarantees: nothing stops an agent or an app (the volume is read in
//! place); a volume with a hook (an App's database) has it exec'd in the
//! container that mounts the volume first, and a hook that fails fails the
//! backup before anything is read or pushed; the registry's credentials
//! are read from the Secret for this call and are in no message; a failure
//! leaves the repository's backups as they were (the manifest goes last,
//! `backup::take`).

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};

use super::plan::Settings;
use super::subject::{Source, Subject};
use crate::agentfs::FsError;
use crate::agentfs::exec::{self, Target};
use crate::agentfs::helper::{self, HelperOpts};
use crate::agentfs::tarstream::Limits;
use crate::agentfs::transfer::Download;
use crate::backup::access::{self, AccessError};
use crate::backup::{self, BackupError, ChunkSizes, Repository, StoreError, Taken, select};
use crate::cluster::build::label_value;
use crate::meta::LABEL_APP;

/// Characters of a failed hook's stderr kept for the status.
const HOOK_STDERR: usize = 200;
/// A hook that has not ended by then fails its backup: a stuck dump must
/// not hold one of the task's slots (and the volume) for ever.
const HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error("reading the volume: {0}")]
    Fs(#[from] FsError),
    #[error(transparent)]
    Backup(#[from] BackupError),
    #[error("the repository: {0}")]
    Store(#[from] StoreError),
    #[error("no running pod of App {namespace}/{app} mounts claim {claim}")]
    NoPod {
        namespace: String,
        app: String,
        claim: String,
    },
    #[error("the backup hook in {pod} {}", hook_end(*.code, .stderr.as_deref()))]
    Hook {
        pod: String,
        code: Option<i32>,
        stderr: Option<String>,
    },
}

/// How a failed hook ended, for its message.
fn hook_end(code: Option<i32>, stderr: Option<&str>) -> String {
    let how = code.map_or("failed without an exit status".to_owned(), |c| {
        format!("exited with status {c}")
    });
    match stderr {
        Some(line) => format!("{how}: {line}"),
        None => how,
    }
}

impl RunError {
    /// A bounded reason for the status, Events and metric labels.
    pub fn reason(&self) -> &'static str {
        match self {
            RunError::Access(e) => e.reason(),
            RunError::Fs(_) | RunError::NoPod { .. } => "volume",
            RunError::Hook { .. } => "hook",
            RunError::Backup(e) => e.category().as_str(),
            RunError::Store(e) => e.category().as_str(),
        }
    }
}

/// Takes one backup of `subject` now, then deletes the backups past
/// `keep`.
pub async fn backup_now(
    client: &Client,
    subject: &Subject,
    s: &Settings,
    helper: &HelperOpts,
) -> Result<Taken, RunError> {
    let repo = access::open(client, &subject.namespace, &subject.policy).await?;
    let t = reach(client, subject, helper).await?;
    if let Some(argv) = &subject.hook {
        hook(client, &t, argv).await?;
    }
    let download = Download::begin_volume(client, t, Limits::default(), helper).await?;
    // The checked pieces, then the exec's end (its exit status): a failed
    // `tar` is an error of the stream, so no manifest names its bytes.
    let pieces = futures::stream::unfold(Some(download), |d| async move {
        let mut d = d?;
        match d.next().await {
            Ok(Some(piece)) => Some((Ok(Bytes::from(piece)), Some(d))),
            Ok(None) => match d.finish().await {
                Ok(_) => None,
                Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
            },
            Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
        }
    });
    let reader = tokio_util::io::StreamReader::new(Box::pin(pieces));
    let taken = backup::backup(
        reader,
        &repo,
        &subject.volume(),
        ChunkSizes::default(),
        Limits::default(),
    )
    .await?;
    prune(&repo, s.keep).await?;
    Ok(taken)
}

/// The pod and container to read `subject`'s volume through: for an
/// AgentFS a pod that mounts it or the helper, for an App volume the
/// App's own pod (the container that mounts that claim).
async fn reach(client: &Client, subject: &Subject, h: &HelperOpts) -> Result<Target, RunError> {
    match &subject.source {
        Source::AgentFS(fs) => Ok(helper::target(client, fs, false, h).await?),
        Source::App { .. } => {
            let ns = &subject.namespace;
            let lp = ListParams::default()
                .labels(&format!("{LABEL_APP}={}", label_value(&subject.name)));
            let pods = Api::<Pod>::namespaced(client.clone(), ns)
                .list(&lp)
                .await
                .map_err(|e| FsError::kube(format!("list pods in {ns}"), e))?;
            helper::choose(&pods.items, &subject.claim, false).ok_or_else(|| RunError::NoPod {
                namespace: ns.clone(),
                app: subject.name.clone(),
                claim: subject.claim.clone(),
            })
        }
    }
}

/// Runs a volume's backup hook in `t`'s container; its output is not
/// kept, its exit status and the first line of its stderr are.
async fn hook(client: &Client, t: &Target, argv: &[String]) -> Result<(), RunError> {
    let pod = format!("{}/{} (container {})", t.namespace, t.pod, t.container);
    let mut run = exec::start_command(client, t, argv.to_vec(), false).await?;
    let ended = tokio::time::timeout(HOOK_TIMEOUT, async move {
        if let Some(mut out) = run.stdout() {
            let _ = tokio::io::copy(&mut out, &mut tokio::io::sink()).await;
        }
        run.wait().await
    })
    .await;
    // Dropping the exec (on the timeout) ends its connection.
    let exit = match ended {
        Ok(exit) if exit.success() => return Ok(()),
        Ok(exit) => exit,
        Err(_) => {
            return Err(RunError::Hook {
                pod,
                code: None,
                stderr: Some(format!("did not end within {} s", HOOK_TIMEOUT.as_secs())),
            });
        }
    };
    Err(RunError::Hook {
        pod,
        code: exit.code(),
        stderr: exit.stderr_line(HOOK_STDERR),
    })
}

/// Deletes the manifests of all but the newest `keep` backups (their
/// tags are Unix milliseconds; `latest` names the newest).
pub async fn prune(repo: &Repository, keep: u32) -> Result<usize, RunError> {
    let stamps = select::stamps(&repo.list_tags().await?);
    let mut deleted = 0;
    for old in stamps.iter().skip(keep as usize) {
        let pulled = repo.pull_manifest(&old.to_string()).await?;
        repo.delete_manifest(&pulled.digest).await?;
        deleted += 1;
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failed hook's message: where, how it ended, its first stderr
    /// line; its reason is `hook`, an App without its pod's is `volume`.
    #[test]
    fn a_failed_hook_says_where_and_how() {
        let e = RunError::Hook {
            pod: "team/app-shop-1 (container postgres)".into(),
            code: Some(3),
            stderr: Some("pg_dumpall: connection refused".into()),
        };
        assert_eq!(e.reason(), "hook");
        assert_eq!(
            e.to_string(),
            "the backup hook in team/app-shop-1 (container postgres) exited with status 3: \
             pg_dumpall: connection refused"
        );
        let slow = RunError::Hook {
            pod: "p".into(),
            code: None,
            stderr: None,
        };
        assert_eq!(
            slow.to_string(),
            "the backup hook in p failed without an exit status"
        );
        let gone = RunError::NoPod {
            namespace: "team".into(),
            app: "shop".into(),
            claim: "app-database-shop".into(),
        };
        assert_eq!(gone.reason(), "volume");
        assert!(gone.to_string().contains("app-database-shop"), "{gone}");
    }
}
