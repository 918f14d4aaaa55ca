//! Restore drills: a backup restored into a scratch AgentFS through its
//! `exo fs` helper pod (`backup::volume`, every check of a restore, and
//! the pod's own tree hash compared with the backup's), then the scratch
//! deleted (docs/backups.md, "Restore drills"). The scratch volume and
//! the record a drill leaves are built pure ([`scratch`], [`record`]).
//!
//! Guarantees:
//! - the scratch AgentFS is [`scratch_name`] in the volume's namespace,
//!   labelled `autonomic.sh/backup-drill: <name>` and owned by the volume
//!   (an App volume's: `<app>-<volume>`, owned by the App; see
//!   [`DrillSource`]), so deleting the volume deletes it; an AgentFS of
//!   that name that is not this volume's scratch is never touched: the
//!   drill fails, naming it;
//! - a scratch left by an earlier drill (an operator killed mid-drill) is
//!   deleted, and gone with its claim and helper pod, before the next one
//!   is created;
//! - the scratch and its helper pod are deleted after the drill, whether
//!   it passed or not;
//! - every write (create, delete) is fenced by the Lease (`cluster::apply`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};
use tracing::warn;

use crate::agentfs::helper::{HelperOpts, helper_name};
use crate::agentfs::tarstream::Limits;
use crate::backup::access::{self, AccessError};
use crate::backup::volume::{self, IntoVolume, NEW_VOLUME_READY, VolumeError};
use crate::backup::{RestoreError, prepare};
use crate::cluster::apply::Ctx;
use crate::cluster::build::{child_name, label_value, pvc_name};
use crate::cluster::metrics::Controller;
use crate::crd::{AgentFS, AgentFSSpec, App, AppVolumeKind, BackupPolicy, DrillRecord};
use crate::meta::{LABEL_BACKUP_DRILL, LABEL_FS_HELPER, LABEL_MANAGED_BY, MANAGED_BY};

const C: Controller = Controller::Agentfs;

/// How long a scratch volume left by an earlier drill may take to go.
const LEFTOVER_GONE: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error(
        "AgentFS {namespace}/{name} exists and is not this volume's drill scratch; the drill needs that name"
    )]
    NameTaken { namespace: String, name: String },
    #[error(
        "the scratch AgentFS {namespace}/{name} of an earlier drill is still being deleted after {secs} s"
    )]
    Leftover {
        namespace: String,
        name: String,
        secs: u64,
    },
    #[error("the scratch AgentFS: {0}")]
    Write(#[from] crate::cluster::error::Error),
    #[error("the scratch AgentFS {namespace}/{name}: {message}")]
    Read {
        namespace: String,
        name: String,
        message: String,
    },
    #[error("backup {digest}: {source}")]
    Prepare {
        digest: String,
        #[source]
        source: RestoreError,
    },
    #[error(transparent)]
    Volume(#[from] VolumeError),
    #[error("the volume has no uid or namespace yet")]
    Unnamed,
}

/// The scratch AgentFS of `source`'s drills.
pub fn scratch_name(source: &str) -> String {
    child_name("drill", source)
}

/// What a drill restores for (pure): the object that owns the volume
/// (an AgentFS, or the App of an App volume), the name the scratch's is
/// derived from (the AgentFS's, or `<app>-<volume>`), and the volume's
/// sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct DrillSource {
    pub namespace: String,
    pub name: String,
    pub owner: OwnerReference,
    pub size: Quantity,
    pub max_size: Quantity,
}

impl DrillSource {
    /// `None` while the AgentFS has no uid or namespace.
    pub fn of_fs(fs: &AgentFS) -> Option<DrillSource> {
        Some(DrillSource {
            namespace: fs.namespace()?,
            name: fs.metadata.name.clone()?,
            owner: fs.controller_owner_ref(&())?,
            size: fs.spec.size.clone(),
            max_size: fs.spec.max_size.clone(),
        })
    }

    /// One volume of `app`; `None` while the App has no uid or namespace,
    /// or has no such volume.
    pub fn of_app(app: &App, volume: AppVolumeKind) -> Option<DrillSource> {
        let (_, sizes) = app.spec.volumes().into_iter().find(|(k, _)| *k == volume)?;
        Some(DrillSource {
            namespace: app.namespace()?,
            name: format!("{}-{volume}", app.metadata.name.as_deref()?),
            owner: app.controller_owner_ref(&())?,
            size: sizes.size,
            max_size: sizes.max_size,
        })
    }
}

/// The scratch AgentFS for a drill of `source` (pure): as large as the
/// source may be, no backup policy of its own, not retained, labelled as
/// a drill and owned by the source's owner object.
pub fn scratch(source: &DrillSource) -> AgentFS {
    let mut fs = AgentFS::new(
        &scratch_name(&source.name),
        AgentFSSpec {
            size: source.size.clone(),
            max_size: source.max_size.clone(),
            ..AgentFSSpec::default()
        },
    );
    fs.metadata.namespace = Some(source.namespace.clone());
    fs.metadata.labels = Some(
        [
            (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
            (LABEL_BACKUP_DRILL.to_owned(), label_value(&source.name)),
        ]
        .into(),
    );
    fs.metadata.owner_references = Some(vec![OwnerReference {
        block_owner_deletion: Some(false),
        ..source.owner.clone()
    }]);
    fs
}

/// Whether `fs` is a scratch volume of `source`'s drills: its label and
/// its owner (a label alone anyone could set).
pub fn is_scratch_of(fs: &AgentFS, source: &DrillSource) -> bool {
    let labelled = fs
        .labels()
        .get(LABEL_BACKUP_DRILL)
        .is_some_and(|v| *v == label_value(&source.name));
    let owned = fs
        .owner_references()
        .iter()
        .any(|o| o.uid == source.owner.uid && o.kind == source.owner.kind);
    labelled && owned
}

/// The record a drill leaves (pure): `lastPassed` is this drill's time
/// when it passed, else the previous record's (the last drill that
/// passed, however many failed since).
pub fn record(
    previous: Option<&DrillRecord>,
    time: String,
    digest: String,
    outcome: Result<(), String>,
) -> DrillRecord {
    let passed = outcome.is_ok();
    DrillRecord {
        last_passed: if passed {
            Some(time.clone())
        } else {
            previous.and_then(|p| p.last_passed.clone())
        },
        time,
        digest,
        passed,
        message: outcome.err(),
    }
}

/// Restores `digest` of `source`'s repository into a fresh scratch volume
/// and deletes the scratch again. See the module comment.
pub async fn run(
    ctx: &Ctx,
    source: &DrillSource,
    policy: &BackupPolicy,
    helper: &HelperOpts,
    digest: &str,
) -> Result<IntoVolume, DrillError> {
    let ns = source.namespace.clone();
    let want = scratch(source);
    let name = want.name_any();
    remove_scratch(ctx, source, &ns, &name, true).await?;

    let repo = access::open(&ctx.client, &ns, policy).await?;
    // The backup's manifest and config first: a refused backup fails the
    // drill before any volume is made.
    let prepared = prepare(&repo, digest, Limits::default())
        .await
        .map_err(|source| DrillError::Prepare {
            digest: digest.to_owned(),
            source,
        })?;
    let made = ctx.put_guarded(C, &want).await?;
    let helper = HelperOpts {
        ready_timeout: helper.ready_timeout.max(NEW_VOLUME_READY),
        ..helper.clone()
    };
    let out = volume::restore_into(&ctx.client, &made, &repo, prepared, &helper, |_| {}).await;
    // Passed or not, the scratch goes (its claim with it, through its
    // owner reference; the next drill waits until all of it is gone).
    if let Err(e) = remove_scratch(ctx, source, &ns, &name, false).await {
        warn!(volume = %format!("{ns}/{name}"), error = %e, "could not delete a drill's scratch volume");
    }
    Ok(out?)
}

/// Deletes `source`'s scratch volume `name` and its helper pod, if they
/// are there; with `wait`, until they and the volume's claim are gone (a
/// new scratch of the same name must not meet the old claim or pod).
/// An AgentFS of that name that is not `source`'s scratch is refused.
async fn remove_scratch(
    ctx: &Ctx,
    source: &DrillSource,
    ns: &str,
    name: &str,
    wait: bool,
) -> Result<(), DrillError> {
    let read = |e: kube::Error| DrillError::Read {
        namespace: ns.to_owned(),
        name: name.to_owned(),
        message: e.to_string(),
    };
    let volumes = ctx.api::<AgentFS>(ns);
    let pods = ctx.api::<Pod>(ns);
    let claims = ctx.api::<PersistentVolumeClaim>(ns);
    let hname = helper_name(name);
    if let Some(left) = volumes.get_opt(name).await.map_err(read)? {
        if !is_scratch_of(&left, source) {
            return Err(DrillError::NameTaken {
                namespace: ns.to_owned(),
                name: name.to_owned(),
            });
        }
        ctx.delete::<AgentFS>(C, ns, name, left.uid()).await?;
    }
    // Its owner reference would take it too, a moment later; a claim is
    // held until no pod mounts it.
    if let Some(pod) = pods.get_opt(&hname).await.map_err(read)?
        && pod.labels().get(LABEL_FS_HELPER).map(String::as_str) == Some(name)
    {
        ctx.delete::<Pod>(C, ns, &hname, pod.uid()).await?;
    }
    if !wait {
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + LEFTOVER_GONE;
    loop {
        let there = volumes.get_opt(name).await.map_err(read)?.is_some()
            || pods.get_opt(&hname).await.map_err(read)?.is_some()
            || claims
                .get_opt(&pvc_name(name))
                .await
                .map_err(read)?
                .is_some();
        if !there {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(DrillError::Leftover {
                namespace: ns.to_owned(),
                name: name.to_owned(),
                secs: LEFTOVER_GONE.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(name: &str) -> AgentFS {
        let mut fs: AgentFS = serde_json::from_value(serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
            "metadata": { "name": name, "namespace": "acme", "uid": "u-1" },
            "spec": { "size": "3Gi", "maxSize": "8Gi", "retain": true,
                "backup": { "every": "1h", "keep": 2, "repository": "r.example/x" } }
        }))
        .unwrap();
        fs.metadata.generation = Some(4);
        fs
    }

    #[test]
    fn the_scratch_is_sized_like_its_source_labelled_and_owned() {
        let fs = source("work");
        let src = DrillSource::of_fs(&fs).unwrap();
        let s = scratch(&src);
        assert_eq!(s.name_any(), "drill-work");
        assert_eq!(s.namespace().as_deref(), Some("acme"));
        assert_eq!(s.spec.size.0, "3Gi");
        assert_eq!(s.spec.max_size.0, "8Gi");
        assert!(s.spec.backup.is_none(), "a scratch is not backed up");
        assert!(!s.spec.retain, "a scratch's data goes with it");
        assert_eq!(s.labels()[LABEL_BACKUP_DRILL], "work");
        let o = &s.owner_references()[0];
        assert_eq!((o.kind.as_str(), o.uid.as_str()), ("AgentFS", "u-1"));
        assert!(is_scratch_of(&s, &src));

        // A long name still gives a valid, bounded name.
        let long = "w".repeat(63);
        let n = scratch_name(&long);
        assert!(n.len() <= 63 && crate::names::is_dns1123_label(&n), "{n}");
        assert_ne!(n, scratch_name(&"w".repeat(62)));

        // Without a uid there is no owner to give it.
        let mut unsaved = fs.clone();
        unsaved.metadata.uid = None;
        assert!(DrillSource::of_fs(&unsaved).is_none());
    }

    #[test]
    fn only_the_sources_own_scratch_is_recognised() {
        let src = DrillSource::of_fs(&source("work")).unwrap();
        let s = scratch(&src);
        let mut other_owner = s.clone();
        other_owner.owner_references_mut()[0].uid = "u-2".into();
        assert!(!is_scratch_of(&other_owner, &src), "the owner is checked");
        let mut unlabelled = s.clone();
        unlabelled.labels_mut().remove(LABEL_BACKUP_DRILL);
        assert!(!is_scratch_of(&unlabelled, &src), "the label is checked");
        assert!(!is_scratch_of(
            &s,
            &DrillSource::of_fs(&source("other")).unwrap()
        ));
    }

    /// An App volume's scratch is named for the App and the volume, sized
    /// like that volume, and owned by the App.
    #[test]
    fn an_app_volumes_scratch_is_the_apps() {
        let app: App = serde_json::from_value(serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "App",
            "metadata": { "name": "shop", "namespace": "acme", "uid": "u-app" },
            "spec": { "image": "i", "workspace": { "size": "1Gi", "maxSize": "2Gi" },
                "database": { "postgres": { "image": "p", "size": "3Gi", "maxSize": "9Gi" } } }
        }))
        .unwrap();
        let db = DrillSource::of_app(&app, AppVolumeKind::Database).unwrap();
        let s = scratch(&db);
        assert_eq!(s.name_any(), "drill-shop-database");
        assert_eq!(
            (s.spec.size.0.as_str(), s.spec.max_size.0.as_str()),
            ("3Gi", "9Gi")
        );
        let o = &s.owner_references()[0];
        assert_eq!((o.kind.as_str(), o.uid.as_str()), ("App", "u-app"));
        assert!(is_scratch_of(&s, &db));
        let ws = DrillSource::of_app(&app, AppVolumeKind::Workspace).unwrap();
        assert!(!is_scratch_of(&s, &ws), "the other volume's is not");
        let mut bare = app.clone();
        bare.spec.database = None;
        assert!(DrillSource::of_app(&bare, AppVolumeKind::Database).is_none());
    }

    /// `lastPassed` carries the last passing drill's time across failures.
    #[test]
    fn a_drill_record_keeps_the_last_pass() {
        let d = |t: &str| format!("sha256:{t}");
        let first = record(None, "t1".into(), d("a"), Ok(()));
        assert!(first.passed);
        assert_eq!(first.last_passed.as_deref(), Some("t1"));
        assert_eq!(first.message, None);

        let failed = record(
            Some(&first),
            "t2".into(),
            d("b"),
            Err("restored file \"vol/a\" differs".into()),
        );
        assert!(!failed.passed);
        assert_eq!(failed.last_passed.as_deref(), Some("t1"));
        assert_eq!(failed.digest, d("b"));
        assert!(failed.message.as_deref().unwrap().contains("vol/a"));

        let again = record(Some(&failed), "t3".into(), d("b"), Err("x".into()));
        assert_eq!(again.last_passed.as_deref(), Some("t1"), "still the pass");

        let never = record(None, "t1".into(), d("a"), Err("x".into()));
        assert_eq!(never.last_passed, None);

        let back = record(Some(&again), "t4".into(), d("c"), Ok(()));
        assert_eq!(back.last_passed.as_deref(), Some("t4"));
    }
}
