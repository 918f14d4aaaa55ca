//! `exo fs restore NAME --from latest|DIGEST|TIME [--to NEWNAME]`: a
//! backup of NAME restored into a new AgentFS NEWNAME (sized like NAME, no
//! backup policy), or into NAME itself when it is empty and no pod mounts
//! it, through `backup::volume` (every chunk, file and the tree hash
//! checked, then the pod's own tree hash compared). It reads NAME's policy
//! and Secret with the kubeconfig's credentials (direct route only).
//!
//! Nothing is created before the backup's manifest and config passed their
//! checks; a volume this restore created is deleted when the restore
//! fails or is interrupted, and an existing target is left as empty as it
//! was.

use std::time::Duration;

use kube::Client;

use crate::agentfs::helper::{HelperOpts, get_fs};
use crate::agentfs::ops::{self, NewFs};
use crate::agentfs::tarstream::Limits;
use crate::backup::select::{self, Wanted};
use crate::backup::volume::{self, NEW_VOLUME_READY};
use crate::backup::{access, prepare};
use crate::cli::fs_show::human;
use crate::crd::AgentFS;
use crate::names::is_dns1123_label;

/// What `exo fs restore` was asked.
#[derive(Debug, Clone)]
pub struct Ask {
    pub namespace: String,
    pub name: String,
    pub from: String,
    pub to: Option<String>,
}

/// Restores as asked; the JSON answer (`-o json`), or the message that
/// says why not.
pub async fn restore(
    client: &Client,
    helper: &HelperOpts,
    ask: &Ask,
) -> Result<serde_json::Value, String> {
    let ns = ask.namespace.as_str();
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let source = get_fs(client, ns, &ask.name).await.map_err(|e| text(&e))?;
    let policy = source.spec.backup.clone().ok_or_else(|| {
        format!(
            "AgentFS {ns}/{} has no spec.backup: it has no backups to restore from",
            ask.name
        )
    })?;
    let wanted = select::parse_wanted(&ask.from).map_err(|e| format!("--from: {e}"))?;

    // The target, checked before the registry is asked anything.
    let existing = match &ask.to {
        Some(new) => {
            if !is_dns1123_label(new) {
                return Err(format!(
                    "--to {new:?} is not a valid AgentFS name (lowercase letters, digits and '-', at most 63)"
                ));
            }
            if get_fs(client, ns, new).await.is_ok() {
                return Err(format!(
                    "AgentFS {ns}/{new} exists; --to names a new AgentFS (an empty, unmounted one \
                     is filled by restoring its own backup without --to)"
                ));
            }
            None
        }
        None => {
            volume::check_target(client, &source, helper)
                .await
                .map_err(|e| text(&e))?;
            Some(source.clone())
        }
    };

    let backups = format!("the backups of AgentFS {ns}/{}", ask.name);
    let repo = access::open(client, ns, &policy)
        .await
        .map_err(|e| format!("{backups}: {e}"))?;
    let stamps = match &wanted {
        Wanted::AtOrBefore { .. } => select::stamps(
            &repo
                .list_tags()
                .await
                .map_err(|e| format!("{backups}: {e}"))?,
        ),
        _ => Vec::new(),
    };
    let reference = select::resolve(&wanted, &stamps)
        .map_err(|e| format!("{backups} ({}): {e}", repo.name()))?;
    let prepared = prepare(&repo, &reference, Limits::default())
        .await
        .map_err(|e| format!("{backups}: {e}"))?;

    let (target, created) = match existing {
        Some(fs) => (fs, false),
        None => (create_like(client, &source, ask).await?, true),
    };
    let target_name = target.metadata.name.clone().unwrap_or_default();
    let helper = if created {
        HelperOpts {
            ready_timeout: helper.ready_timeout.max(NEW_VOLUME_READY),
            ..helper.clone()
        }
    } else {
        helper.clone()
    };
    let pb = crate::cli::fs_cp::bar(&format!(
        "restoring {} into {ns}/{target_name}",
        prepared.digest()
    ));
    let pbc = pb.clone();
    let outcome = tokio::select! {
        r = volume::restore_into(client, &target, &repo, prepared, &helper, |n| pbc.inc(n)) => {
            r.map_err(|e| text(&e))
        }
        _ = crate::shutdown::install() => Err("interrupted".to_owned()),
    };
    pb.finish_and_clear();
    let done = match outcome {
        Ok(done) => done,
        Err(e) if created => {
            let gone = match ops::delete(client, ns, &target_name).await {
                Ok(_) => "was deleted".to_owned(),
                Err(d) => format!("could not be deleted ({d}); delete it by hand"),
            };
            return Err(format!(
                "{e}; AgentFS {ns}/{target_name}, created for this restore, {gone}"
            ));
        }
        Err(e) => {
            return Err(format!(
                "{e}; nothing was moved into AgentFS {ns}/{target_name}"
            ));
        }
    };
    let r = &done.restored;
    Ok(serde_json::json!({
        "namespace": ns,
        "name": target_name,
        "source": ask.name,
        "createdVolume": created,
        "digest": r.digest,
        "backupCreated": r.created,
        "files": r.files,
        "bytes": r.file_bytes,
        "treeHash": done.landed,
        "pod": done.pod,
    }))
}

/// Creates `ask.to` sized like `source`, without a backup policy, and
/// reads it back (its uid owns the helper pod).
async fn create_like(client: &Client, source: &AgentFS, ask: &Ask) -> Result<AgentFS, String> {
    let ns = ask.namespace.as_str();
    let new = ask.to.clone().unwrap_or_default();
    ops::create(
        client,
        &NewFs {
            namespace: ns.to_owned(),
            name: new.clone(),
            size: source.spec.size.0.clone(),
            max_size: source.spec.max_size.0.clone(),
            access_mode: None,
            retain: false,
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    // The apiserver answered the create; a read a moment later sees it.
    for _ in 0..10 {
        if let Ok(fs) = get_fs(client, ns, &new).await {
            return Ok(fs);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "AgentFS {ns}/{new} was created but cannot be read back"
    ))
}

/// The table output: what was restored where, and its proof.
pub fn show(v: &serde_json::Value) -> String {
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    let n = |k: &str| v[k].as_u64().unwrap_or_default();
    let into = if v["createdVolume"].as_bool() == Some(true) {
        format!("{}/{} (a new AgentFS)", s("namespace"), s("name"))
    } else {
        format!("{}/{}", s("namespace"), s("name"))
    };
    format!(
        "restored backup {} ({}) of {}/{} into {into}\n\
         {} file(s), {}; tree hash {} verified in pod {}\n",
        s("digest"),
        s("backupCreated"),
        s("namespace"),
        s("source"),
        n("files"),
        human(n("bytes")),
        s("treeHash"),
        s("pod"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_what_where_and_the_proof() {
        let v = serde_json::json!({
            "namespace": "acme", "name": "work-2", "source": "work", "createdVolume": true,
            "digest": "sha256:ab", "backupCreated": "2026-05-01T12:00:00Z",
            "files": 3, "bytes": 2048, "treeHash": "cd", "pod": "exo-fs-work-2"
        });
        let t = show(&v);
        assert!(
            t.contains("sha256:ab") && t.contains("acme/work-2 (a new AgentFS)"),
            "{t}"
        );
        assert!(t.contains("of acme/work"), "{t}");
        assert!(
            t.contains("3 file(s), 2.0 KiB; tree hash cd verified in pod exo-fs-work-2"),
            "{t}"
        );
    }
}
