//! What the backup task looks at: one volume with a backup policy, an
//! AgentFS or one of an App's two volumes, with everything the loop needs
//! to plan, take and report its backup. Pure: built from the caches.
//!
//! Guarantees:
//! - an App's volumes follow the App's one policy, each to a repository
//!   of its own (`<repository>/workspace`, `<repository>/database`), so
//!   their tags, `keep` and restores never mix;
//! - the database volume carries the sidecar's backup hook (the App's
//!   `backupHook`, or the default `pg_dumpall`), run before it is read;
//! - one on-demand request on an App (`autonomic.sh/backup-requested-at`)
//!   is answered in each of its volumes' status;
//! - a volume being deleted, or without a policy, is no subject.

use std::sync::Arc;

use kube::ResourceExt;
use serde_json::{Value, json};

use super::drill::DrillSource;
use crate::backup::Volume;
use crate::backup::access::app_volume_policy;
use crate::cluster::build::app::{app_pvc_name, postgres_backup_hook};
use crate::cluster::build::pvc_name;
use crate::crd::{AgentFS, App, AppVolumeKind, BackupPolicy, BackupStatus};
use crate::meta::ANNOTATION_BACKUP_REQUESTED;

/// Which object a volume belongs to.
#[derive(Debug, Clone)]
pub enum Source {
    AgentFS(Arc<AgentFS>),
    App {
        app: Arc<App>,
        volume: AppVolumeKind,
    },
}

/// One volume to back up.
#[derive(Debug, Clone)]
pub struct Subject {
    pub source: Source,
    pub namespace: String,
    /// The AgentFS's or the App's name.
    pub name: String,
    /// The PVC holding the volume.
    pub claim: String,
    /// The policy this volume follows (an App volume's repository is its own).
    pub policy: BackupPolicy,
    pub status: Option<BackupStatus>,
    /// The on-demand request on the object.
    pub requested: Option<String>,
    /// The object's generation, whose policy the status follows.
    pub generation: Option<i64>,
    /// Exec'd in the container that mounts the volume before it is read.
    pub hook: Option<Vec<String>>,
}

impl Subject {
    pub fn of_fs(fs: &Arc<AgentFS>) -> Option<Subject> {
        let policy = fs.spec.backup.clone()?;
        if fs.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let name = fs.name_any();
        Some(Subject {
            source: Source::AgentFS(Arc::clone(fs)),
            namespace: fs.namespace().unwrap_or_default(),
            claim: fs
                .status
                .as_ref()
                .and_then(|s| s.pvc_name.clone())
                .unwrap_or_else(|| pvc_name(&name)),
            name,
            policy,
            status: fs.status.as_ref().and_then(|s| s.backup.clone()),
            requested: fs.annotations().get(ANNOTATION_BACKUP_REQUESTED).cloned(),
            generation: fs.metadata.generation,
            hook: None,
        })
    }

    /// Each volume of `app`, workspace first, when it has a policy.
    pub fn of_app(app: &Arc<App>) -> Vec<Subject> {
        let Some(policy) = app.spec.backup.as_ref() else {
            return Vec::new();
        };
        if app.metadata.deletion_timestamp.is_some() {
            return Vec::new();
        }
        let name = app.name_any();
        let backups = app.status.as_ref().and_then(|s| s.backup.as_ref());
        app.spec
            .volumes()
            .into_iter()
            .map(|(volume, _)| Subject {
                source: Source::App {
                    app: Arc::clone(app),
                    volume,
                },
                namespace: app.namespace().unwrap_or_default(),
                name: name.clone(),
                claim: app_pvc_name(&name, volume),
                policy: app_volume_policy(policy, volume),
                status: backups.and_then(|b| b.volume(volume)).cloned(),
                requested: app.annotations().get(ANNOTATION_BACKUP_REQUESTED).cloned(),
                generation: app.metadata.generation,
                hook: match volume {
                    AppVolumeKind::Workspace => None,
                    AppVolumeKind::Database => app
                        .spec
                        .database
                        .as_ref()
                        .map(|d| postgres_backup_hook(&d.postgres)),
                },
            })
            .collect()
    }

    /// `namespace/name` for an AgentFS, `namespace/app/name/volume` for an
    /// App's volume: the task's key, and what logs name.
    pub fn key(&self) -> String {
        match &self.source {
            Source::AgentFS(_) => format!("{}/{}", self.namespace, self.name),
            Source::App { volume, .. } => {
                format!("{}/app/{}/{}", self.namespace, self.name, volume)
            }
        }
    }

    /// The kind of object the volume belongs to: `AgentFS` or `App`.
    pub fn kind(&self) -> &'static str {
        match &self.source {
            Source::AgentFS(_) => "AgentFS",
            Source::App { .. } => "App",
        }
    }

    /// The volume's name within its namespace as alerts and gauges name
    /// it: the AgentFS's name, or `<app>/<volume>`.
    pub fn volume_name(&self) -> String {
        match &self.source {
            Source::AgentFS(_) => self.name.clone(),
            Source::App { volume, .. } => format!("{}/{}", self.name, volume),
        }
    }

    /// When the volume's object was created (seconds since the epoch).
    pub fn created(&self) -> Option<i64> {
        let meta = match &self.source {
            Source::AgentFS(fs) => &fs.metadata,
            Source::App { app, .. } => &app.metadata,
        };
        meta.creation_timestamp.as_ref().map(|t| t.0.as_second())
    }

    /// What a restore drill of this volume needs (`None` while its object
    /// has no uid).
    pub fn drill_source(&self) -> Option<DrillSource> {
        match &self.source {
            Source::AgentFS(fs) => DrillSource::of_fs(fs),
            Source::App { app, volume } => DrillSource::of_app(app, *volume),
        }
    }

    /// The volume as its backups' manifests name it: the AgentFS, or the
    /// App volume's claim.
    pub fn volume(&self) -> Volume {
        Volume {
            namespace: self.namespace.clone(),
            name: match &self.source {
                Source::AgentFS(_) => self.name.clone(),
                Source::App { .. } => self.claim.clone(),
            },
        }
    }

    /// The status merge patch that puts `fields` (with the generation they
    /// follow) in this volume's backup status.
    pub fn status_patch(&self, mut fields: Value) -> Value {
        if let Some(obj) = fields.as_object_mut() {
            obj.insert("observedGeneration".into(), json!(self.generation));
        }
        match &self.source {
            Source::AgentFS(_) => json!({ "backup": fields }),
            Source::App { volume, .. } => json!({ "backup": { volume.as_str(): fields } }),
        }
    }
}

/// Every volume with a backup policy, AgentFS first, then each App's.
pub fn subjects(filesystems: &[Arc<AgentFS>], apps: &[Arc<App>]) -> Vec<Subject> {
    let mut out: Vec<Subject> = filesystems.iter().filter_map(Subject::of_fs).collect();
    out.extend(apps.iter().flat_map(Subject::of_app));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::AppBackupStatus;

    fn policy() -> serde_json::Value {
        json!({"every": "1h", "keep": 2, "repository": "reg.example.com/backups/team"})
    }

    fn app(database: bool, backup: bool) -> Arc<App> {
        let mut spec = json!({
            "image": "reg/shop:1",
            "workspace": { "size": "1Gi", "maxSize": "4Gi" },
        });
        if database {
            spec["database"] = json!({"postgres": {
                "image": "reg/postgres:16", "size": "1Gi", "maxSize": "8Gi"
            }});
        }
        if backup {
            spec["backup"] = policy();
        }
        let mut a: App = serde_json::from_value(json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "App",
            "metadata": { "name": "shop", "namespace": "team", "generation": 3,
                "annotations": { ANNOTATION_BACKUP_REQUESTED: "r1" } },
            "spec": spec
        }))
        .unwrap();
        a.status = Some(crate::crd::AppStatus {
            backup: Some(AppBackupStatus {
                workspace: BackupStatus {
                    answered_request: Some("r1".into()),
                    ..BackupStatus::default()
                },
                database: None,
            }),
            ..Default::default()
        });
        Arc::new(a)
    }

    fn fs(name: &str, backup: bool, deleting: bool) -> Arc<AgentFS> {
        let mut spec = json!({ "size": "1Gi", "maxSize": "2Gi" });
        if backup {
            spec["backup"] = policy();
        }
        let mut f: AgentFS = serde_json::from_value(json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
            "metadata": { "name": name, "namespace": "team", "generation": 1 },
            "spec": spec
        }))
        .unwrap();
        if deleting {
            f.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
        }
        Arc::new(f)
    }

    #[test]
    fn subjects_are_the_volumes_with_a_policy() {
        let all = subjects(
            &[
                fs("work", true, false),
                fs("plain", false, false),
                fs("gone", true, true),
            ],
            &[app(true, true), app(true, false)],
        );
        let keys: Vec<String> = all.iter().map(Subject::key).collect();
        assert_eq!(
            keys,
            [
                "team/work",
                "team/app/shop/workspace",
                "team/app/shop/database"
            ]
        );
        // An App without a database has one volume to back up.
        assert_eq!(Subject::of_app(&app(false, true)).len(), 1);
    }

    #[test]
    fn an_apps_volumes_go_to_repositories_of_their_own() {
        let [ws, db] = <[Subject; 2]>::try_from(Subject::of_app(&app(true, true))).unwrap();
        assert_eq!(
            ws.policy.repository,
            "reg.example.com/backups/team/workspace"
        );
        assert_eq!(
            db.policy.repository,
            "reg.example.com/backups/team/database"
        );
        assert_eq!(ws.policy.keep, 2, "the rest of the policy is the App's");
        let bare = BackupPolicy {
            repository: "reg.example.com".into(),
            ..ws.policy.clone()
        };
        assert_eq!(
            app_volume_policy(&bare, AppVolumeKind::Workspace).repository,
            "reg.example.com",
            "a bad repository stays bad, to be refused by name"
        );
        assert_eq!(
            (ws.claim.as_str(), db.claim.as_str()),
            ("app-workspace-shop", "app-database-shop")
        );
        assert_eq!(db.volume().name, "app-database-shop");
        // The workspace has no hook; the database the default dump.
        assert_eq!(ws.hook, None);
        assert!(
            db.hook.as_ref().unwrap()[2].starts_with("pg_dumpall"),
            "{:?}",
            db.hook
        );
        // One request, answered per volume.
        assert_eq!(ws.requested.as_deref(), Some("r1"));
        assert_eq!(db.requested.as_deref(), Some("r1"));
        assert_eq!(ws.status.unwrap().answered_request.as_deref(), Some("r1"));
        assert_eq!(db.status, None);
    }

    #[test]
    fn the_status_patch_names_the_volume_and_its_generation() {
        let [_, db] = <[Subject; 2]>::try_from(Subject::of_app(&app(true, true))).unwrap();
        assert_eq!(
            db.status_patch(json!({"lastError": null})),
            json!({"backup": {"database": {"lastError": null, "observedGeneration": 3}}})
        );
        let f = Subject::of_fs(&fs("work", true, false)).unwrap();
        assert_eq!(
            f.status_patch(json!({})),
            json!({"backup": {"observedGeneration": 1}})
        );
        assert_eq!(f.claim, pvc_name("work"));
        assert_eq!(f.volume().name, "work");
    }
}
