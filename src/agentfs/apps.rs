//! App volumes from the outside (`exo fs list --apps`, `exo fs resize
//! app/NAME`): each App's workspace and database, and the volumes kept
//! after their App was deleted (`retain: true`). Both routes call these,
//! like `ops`.
//!
//! A grow is checked here with the AgentFS rules (grow-only, capped at
//! `maxSize`) so the refusal names the flag; the apiserver checks again
//! (the CRD's maxSize rule and `deploy/app-admission.yaml`), and the
//! operator applies only what passes `plan_size`.

/// The prefix that names an App in `exo fs resize|backup|backups`
/// (kubectl's `kind/name`): `app/shop` is App shop's volumes, `shop` the
/// AgentFS.
pub const APP_PREFIX: &str = "app/";

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::FsError;
use crate::cluster::fs::{SizeRefusal, capacities, plan_size};
use crate::crd::{App, AppVolumeKind};
use crate::meta::{
    ANNOTATION_RETAINED, FIELD_MANAGER, LABEL_APP_VOLUME, LABEL_COMPONENT, LABEL_MANAGED_BY,
    MANAGED_BY,
};
use crate::wire::fs::{AppVolumeInfo, AppVolumeList, FsPhase};

/// The rows of one App: its workspace, then its database.
fn rows(app: &App) -> Vec<AppVolumeInfo> {
    let namespace = app.metadata.namespace.clone().unwrap_or_default();
    let name = app.metadata.name.clone().unwrap_or_default();
    let status = app.status.clone().unwrap_or_default();
    app.spec
        .volumes()
        .into_iter()
        .map(|(kind, vol)| {
            let st = status.volume(kind).cloned().unwrap_or_default();
            let backup = status.backup.as_ref().and_then(|b| b.volume(kind));
            AppVolumeInfo {
                namespace: namespace.clone(),
                app: name.clone(),
                volume: kind.as_str().to_owned(),
                phase: st.phase.unwrap_or_default().into(),
                size: vol.size.0,
                max_size: vol.max_size.0,
                retain: app.spec.retain,
                requested: st.requested.map(|q| q.0),
                provisioned: st.provisioned.map(|q| q.0),
                pvc: st.pvc_name,
                last_backup: backup
                    .and_then(|b| b.last_success.as_ref())
                    .map(|r| r.time.clone()),
                backup_error: backup
                    .and_then(|b| b.last_error.as_ref())
                    .map(|e| e.reason.clone()),
            }
        })
        .collect()
}

/// Sorts rows by namespace, app, then workspace before database.
fn sort(items: &mut [AppVolumeInfo]) {
    let order = |v: &str| u8::from(v != AppVolumeKind::Workspace.as_str());
    items.sort_by(|a, b| {
        (&a.namespace, &a.app, order(&a.volume)).cmp(&(&b.namespace, &b.app, order(&b.volume)))
    });
}

/// The retained PVCs among `pvcs` whose App is not in `live` (namespace,
/// name), as `Retained` rows.
fn retained(
    pvcs: &[PersistentVolumeClaim],
    live: &BTreeSet<(String, String)>,
) -> Vec<AppVolumeInfo> {
    pvcs.iter()
        .filter_map(|pvc| {
            let from = pvc
                .metadata
                .annotations
                .as_ref()?
                .get(ANNOTATION_RETAINED)?;
            let ns = pvc.metadata.namespace.clone().unwrap_or_default();
            if live.contains(&(ns.clone(), from.clone())) {
                return None;
            }
            let volume = pvc
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_APP_VOLUME))
                .cloned()
                .unwrap_or_default();
            let (requested, provisioned) = capacities(pvc);
            Some(AppVolumeInfo {
                namespace: ns,
                app: from.clone(),
                volume,
                phase: FsPhase::Retained,
                size: requested.clone().unwrap_or_default(),
                max_size: String::new(),
                retain: true,
                requested,
                provisioned,
                pvc: pvc.metadata.name.clone(),
                last_backup: None,
                backup_error: None,
            })
        })
        .collect()
}

/// Every App's volumes in `namespace` (all when `None`), and the
/// retained volumes of Apps that are gone.
pub async fn list(client: &Client, namespace: Option<&str>) -> Result<AppVolumeList, FsError> {
    let apps: Api<App> = super::api_in(client, namespace);
    let pvcs: Api<PersistentVolumeClaim> = super::api_in(client, namespace);
    let apps = apps
        .list(&ListParams::default())
        .await
        .map_err(|e| FsError::kube("list Apps", e))?;
    let mut items: Vec<AppVolumeInfo> = apps.items.iter().flat_map(rows).collect();
    let live: BTreeSet<(String, String)> = apps
        .items
        .iter()
        .map(|a| {
            (
                a.metadata.namespace.clone().unwrap_or_default(),
                a.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    let selector = format!("{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_COMPONENT}=app");
    let pvcs = pvcs
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| FsError::kube("list PersistentVolumeClaims", e))?;
    items.extend(retained(&pvcs.items, &live));
    sort(&mut items);
    Ok(AppVolumeList { items })
}

/// Why a grow of one volume is refused, naming its flag.
fn refusal(what: &str, kind: AppVolumeKind, r: SizeRefusal) -> FsError {
    let flag = format!("--{kind}");
    FsError::Refused(match r {
        SizeRefusal::Shrink { requested, current } => format!(
            "{what}: {flag} {requested} is smaller than its current {kind} size {current}; resize is grow-only"
        ),
        SizeRefusal::AboveMax { requested, max } => {
            format!("{what}: {flag} {requested} exceeds its {kind} maxSize {max}")
        }
        SizeRefusal::Unparsable(q) => format!("{flag} {q:?} is not a valid quantity"),
    })
}

/// The merge patch that sets the new sizes, after checking each against
/// the App's spec. Pure.
pub fn resize_patch(
    app: &App,
    workspace: Option<&str>,
    database: Option<&str>,
) -> Result<serde_json::Value, FsError> {
    let what = format!(
        "App {}/{}",
        app.metadata.namespace.as_deref().unwrap_or_default(),
        app.metadata.name.as_deref().unwrap_or_default()
    );
    if workspace.is_none() && database.is_none() {
        return Err(FsError::Invalid(
            "name the volume to grow: --workspace SIZE, --database SIZE, or both".into(),
        ));
    }
    let mut spec = serde_json::Map::new();
    if let Some(size) = workspace {
        let vol = &app.spec.workspace;
        let plan = plan_size(size, &vol.max_size.0, Some(&vol.size.0));
        if let Some(r) = plan.refusal {
            return Err(refusal(&what, AppVolumeKind::Workspace, r));
        }
        spec.insert("workspace".into(), json!({ "size": size }));
    }
    if let Some(size) = database {
        let Some(db) = &app.spec.database else {
            return Err(FsError::Refused(format!(
                "{what} has no database (spec.database is not set); only --workspace applies"
            )));
        };
        let plan = plan_size(size, &db.postgres.max_size.0, Some(&db.postgres.size.0));
        if let Some(r) = plan.refusal {
            return Err(refusal(&what, AppVolumeKind::Database, r));
        }
        spec.insert("database".into(), json!({ "postgres": { "size": size } }));
    }
    Ok(json!({ "spec": spec }))
}

/// Grows an App's volumes (grow-only, capped at each `maxSize`); answers
/// with the App's rows as patched.
pub async fn resize(
    client: &Client,
    namespace: &str,
    name: &str,
    workspace: Option<&str>,
    database: Option<&str>,
) -> Result<AppVolumeList, FsError> {
    let api: Api<App> = Api::namespaced(client.clone(), namespace);
    let app = api
        .get_opt(name)
        .await
        .map_err(|e| FsError::kube(format!("get App {namespace}/{name}"), e))?
        .ok_or_else(|| FsError::AppNotFound {
            namespace: namespace.into(),
            name: name.into(),
        })?;
    let patch = resize_patch(&app, workspace, database)?;
    let patched = api
        .patch(
            name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|e| FsError::kube(format!("resize App {namespace}/{name}"), e))?;
    Ok(AppVolumeList {
        items: rows(&patched),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;
    use crate::crd::{AppDatabase, AppPostgres, AppSpec, AppVolume};

    fn app(database: bool) -> App {
        let q = |s: &str| Quantity(s.to_owned());
        let mut a = App::new(
            "shop",
            AppSpec {
                image: "reg/shop:1".into(),
                workspace: AppVolume {
                    size: q("2Gi"),
                    max_size: q("5Gi"),
                },
                database: database.then(|| AppDatabase {
                    postgres: AppPostgres {
                        image: "reg/postgres:16".into(),
                        size: q("1Gi"),
                        max_size: q("3Gi"),
                        backup_hook: None,
                    },
                }),
                ..AppSpec::default()
            },
        );
        a.metadata.namespace = Some("team".into());
        a
    }

    #[test]
    fn a_grow_patches_only_the_volumes_named() {
        let p = resize_patch(&app(true), Some("3Gi"), None).unwrap();
        assert_eq!(p, json!({"spec": {"workspace": {"size": "3Gi"}}}));
        let p = resize_patch(&app(true), Some("3Gi"), Some("2Gi")).unwrap();
        assert_eq!(
            p,
            json!({"spec": {"workspace": {"size": "3Gi"}, "database": {"postgres": {"size": "2Gi"}}}})
        );
    }

    #[test]
    fn refusals_name_the_flag_and_the_sizes() {
        // (workspace, database, has a database, words in the refusal)
        type Case<'a> = (Option<&'a str>, Option<&'a str>, bool, &'a [&'a str]);
        let cases: &[Case] = &[
            (
                Some("1Gi"),
                None,
                true,
                &[
                    "App team/shop",
                    "--workspace 1Gi",
                    "current workspace size 2Gi",
                    "grow-only",
                ],
            ),
            (
                None,
                Some("4Gi"),
                true,
                &["--database 4Gi", "database maxSize 3Gi"],
            ),
            (
                Some("6Gi"),
                None,
                true,
                &["--workspace 6Gi", "workspace maxSize 5Gi"],
            ),
            (None, Some("2Gi"), false, &["App team/shop has no database"]),
            (
                Some("lots"),
                None,
                true,
                &["--workspace \"lots\" is not a valid quantity"],
            ),
            (None, None, true, &["--workspace SIZE, --database SIZE"]),
        ];
        for (ws, db, with_db, words) in cases {
            let err = resize_patch(&app(*with_db), *ws, *db)
                .unwrap_err()
                .to_string();
            for w in *words {
                assert!(err.contains(w), "{ws:?} {db:?}: {err:?} lacks {w:?}");
            }
        }
    }

    #[test]
    fn retained_pvcs_of_gone_apps_are_listed_retained() {
        let pvc = |name: &str, from: Option<&str>, volume: &str| -> PersistentVolumeClaim {
            let mut p: PersistentVolumeClaim = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "team",
                    "labels": {LABEL_APP_VOLUME: volume}},
                "spec": {"resources": {"requests": {"storage": "2Gi"}}},
                "status": {"capacity": {"storage": "2Gi"}}
            }))
            .unwrap();
            if let Some(f) = from {
                p.metadata.annotations = Some(BTreeMap::from([(
                    ANNOTATION_RETAINED.to_owned(),
                    f.to_owned(),
                )]));
            }
            p
        };
        let pvcs = [
            pvc("app-workspace-gone", Some("gone"), "workspace"),
            pvc("app-database-gone", Some("gone"), "database"),
            pvc("app-workspace-live", Some("live"), "workspace"),
            pvc("app-workspace-owned", None, "workspace"),
        ];
        let live = BTreeSet::from([("team".to_owned(), "live".to_owned())]);
        let mut rows = retained(&pvcs, &live);
        sort(&mut rows);
        let got: Vec<_> = rows
            .iter()
            .map(|r| (r.app.as_str(), r.volume.as_str(), r.phase, r.size.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("gone", "workspace", FsPhase::Retained, "2Gi"),
                ("gone", "database", FsPhase::Retained, "2Gi")
            ]
        );
    }

    #[test]
    fn a_live_app_has_a_row_per_volume() {
        let mut a = app(true);
        a.spec.retain = true;
        let r = rows(&a);
        let got: Vec<_> = r
            .iter()
            .map(|r| {
                (
                    r.volume.as_str(),
                    r.size.as_str(),
                    r.max_size.as_str(),
                    r.retain,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("workspace", "2Gi", "5Gi", true),
                ("database", "1Gi", "3Gi", true)
            ]
        );
        assert_eq!(rows(&app(false)).len(), 1);
        assert_eq!(r[0].last_backup, None, "no backups yet");
    }

    /// Each row carries its own volume's last backup and failure.
    #[test]
    fn a_row_has_its_volumes_backup() {
        use crate::crd::{AppBackupStatus, BackupFailure, BackupRecord, BackupStatus};
        let mut a = app(true);
        a.status = Some(crate::crd::AppStatus {
            backup: Some(AppBackupStatus {
                workspace: BackupStatus {
                    last_success: Some(BackupRecord {
                        time: "2026-01-01T00:00:00Z".into(),
                        ..BackupRecord::default()
                    }),
                    ..BackupStatus::default()
                },
                database: Some(BackupStatus {
                    last_error: Some(BackupFailure {
                        reason: "hook".into(),
                        ..BackupFailure::default()
                    }),
                    ..BackupStatus::default()
                }),
            }),
            ..Default::default()
        });
        let r = rows(&a);
        assert_eq!(
            (r[0].last_backup.as_deref(), r[0].backup_error.as_deref()),
            (Some("2026-01-01T00:00:00Z"), None)
        );
        assert_eq!(
            (r[1].last_backup.as_deref(), r[1].backup_error.as_deref()),
            (None, Some("hook"))
        );
    }
}
