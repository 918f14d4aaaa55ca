//! Pure builders of an App's children: its workspace and database PVCs
//! and its pod (the app container, and a Postgres sidecar when the App has
//! a database). Like the other builders: no client, restricted pods.
//!
//! Ownership: the pod is always owned by the App. The PVCs are owned
//! unless `retain` is set; retained PVCs have no owner for the garbage
//! collector to follow, and carry [`ANNOTATION_RETAINED`] with the App's
//! name from the start, so nothing has to happen at deletion time (no
//! finalizer). An App made again under the same name takes them back.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container as K8sContainer, EmptyDirVolumeSource, EnvVar as K8sEnvVar, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, Pod, Volume, VolumeMount,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{
    Owner, child_name, labels, meta, named_by_hash, plain_env, pod_meta,
    restricted_container_security, restricted_pod, stamp,
};
use crate::cluster::error::Result;
use crate::crd::{AppSpec, AppVolumeKind};
use crate::meta::{
    ANNOTATION_RETAINED, APP_CONTAINER, APP_POSTGRES_CONTAINER, LABEL_APP, LABEL_APP_VOLUME,
};

/// Where the app container finds its workspace.
pub const WORKSPACE_MOUNT: &str = "/workspace";
/// Where the Postgres sidecar's volume is mounted.
pub const POSTGRES_MOUNT: &str = "/var/lib/postgresql/data";
/// The data folder inside it: Postgres wants an empty folder of its own,
/// and a fresh volume's root may hold `lost+found`.
pub const POSTGRES_PGDATA: &str = "/var/lib/postgresql/data/pgdata";
/// What the app container is given to reach its database. The sidecar
/// listens on the pod's loopback only, so nothing outside the pod can
/// reach it and no password has to be made, stored or shown.
pub const DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Where the Postgres sidecar's socket folder is mounted (the image's
/// default `unix_socket_directories`).
pub const POSTGRES_RUN: &str = "/var/run/postgresql";
/// The dump the default backup hook leaves at the database volume's root,
/// beside (not inside) the data folder: a restore finds it there.
pub const POSTGRES_DUMP: &str = "exo-backup.sql";

const TMP_VOLUME: &str = "tmp";
const PG_RUN_VOLUME: &str = "pg-run";

pub fn app_labels(app: &str) -> BTreeMap<String, String> {
    labels("app", LABEL_APP, app)
}

/// `app-workspace-<app>` or `app-database-<app>`.
pub fn app_pvc_name(app: &str, kind: AppVolumeKind) -> String {
    child_name(&format!("app-{}", kind.as_str()), app)
}

/// The volume name of `kind` inside the pod.
fn volume_name(kind: AppVolumeKind) -> &'static str {
    kind.as_str()
}

/// The PVC of one App volume asking for `size` (already checked against
/// the grow-only and maxSize rules by `cluster::fs::plan_size`), owned by
/// the App unless `retain`.
pub fn app_pvc(
    owner: &Owner,
    kind: AppVolumeKind,
    size: &str,
    retain: bool,
) -> Result<PersistentVolumeClaim> {
    let mut labels = app_labels(&owner.name);
    labels.insert(LABEL_APP_VOLUME.to_owned(), kind.as_str().to_owned());
    let mut metadata = meta(owner, app_pvc_name(&owner.name, kind), labels);
    if retain {
        metadata.owner_references = None;
        metadata.annotations = Some(BTreeMap::from([(
            ANNOTATION_RETAINED.to_owned(),
            owner.name.clone(),
        )]));
    }
    let pvc = PersistentVolumeClaim {
        metadata,
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(size.to_owned()),
                )])),
                limits: None,
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    };
    // The hash covers ownership and the retained mark too: turning
    // `retain` on or off is a change to apply.
    stamp(pvc, |p| &mut p.metadata)
}

/// The command exec'd in the Postgres sidecar before its volume is read
/// by a backup: the App's `backupHook`, or by default a `pg_dumpall` over
/// the sidecar's own socket (trust auth on the pod's loopback, so no
/// password) into [`POSTGRES_DUMP`] at the volume's root, written under a
/// temporary name and renamed, so a backup never holds half a dump. The
/// data folder is copied as it is as well; the dump is what is consistent.
pub fn postgres_backup_hook(pg: &crate::crd::AppPostgres) -> Vec<String> {
    if let Some(hook) = &pg.backup_hook {
        return hook.clone();
    }
    let dump = format!("{POSTGRES_MOUNT}/{POSTGRES_DUMP}");
    vec![
        "sh".to_owned(),
        "-c".to_owned(),
        format!(
            "pg_dumpall -U postgres -h {POSTGRES_RUN} > {dump}.part && mv -f {dump}.part {dump}"
        ),
    ]
}

fn mount(volume: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: volume.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}

fn empty_dir(name: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }
}

fn claim(owner: &Owner, kind: AppVolumeKind) -> Volume {
    Volume {
        name: volume_name(kind).to_owned(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: app_pvc_name(&owner.name, kind),
            read_only: None,
        }),
        ..Volume::default()
    }
}

/// The App's pod: the app container with the workspace at
/// [`WORKSPACE_MOUNT`], and with a database the Postgres sidecar with its
/// volume at [`POSTGRES_MOUNT`]. Both containers have a writable `/tmp`
/// (the root file system is read-only); Postgres also gets its socket
/// folder.
pub fn app_pod(owner: &Owner, spec: &AppSpec) -> Result<Pod> {
    let mut volumes = vec![
        empty_dir(TMP_VOLUME),
        claim(owner, AppVolumeKind::Workspace),
    ];
    let mut env: Vec<K8sEnvVar> = vec![plain_env("EXO_APP_NAME", &owner.name)];
    let mut containers = Vec::new();
    if spec.database.is_some() {
        env.push(plain_env("DATABASE_URL", DATABASE_URL));
    }
    containers.push(K8sContainer {
        name: APP_CONTAINER.to_owned(),
        image: Some(spec.image.clone()),
        env: Some(env),
        volume_mounts: Some(vec![
            mount(TMP_VOLUME, "/tmp"),
            mount(volume_name(AppVolumeKind::Workspace), WORKSPACE_MOUNT),
        ]),
        security_context: Some(restricted_container_security()),
        ..K8sContainer::default()
    });
    if let Some(db) = &spec.database {
        volumes.push(claim(owner, AppVolumeKind::Database));
        volumes.push(empty_dir(PG_RUN_VOLUME));
        containers.push(K8sContainer {
            name: APP_POSTGRES_CONTAINER.to_owned(),
            image: Some(db.postgres.image.clone()),
            // Loopback only: the app shares the pod's network, nobody else.
            args: Some(vec![
                "-c".to_owned(),
                "listen_addresses=127.0.0.1".to_owned(),
            ]),
            env: Some(vec![
                plain_env("PGDATA", POSTGRES_PGDATA),
                plain_env("POSTGRES_HOST_AUTH_METHOD", "trust"),
            ]),
            volume_mounts: Some(vec![
                mount(TMP_VOLUME, "/tmp"),
                mount(PG_RUN_VOLUME, POSTGRES_RUN),
                mount(volume_name(AppVolumeKind::Database), POSTGRES_MOUNT),
            ]),
            security_context: Some(restricted_container_security()),
            ..K8sContainer::default()
        });
    }
    let pod = restricted_pod(
        pod_meta(owner, "app", app_labels(&owner.name), APP_CONTAINER),
        containers,
        volumes,
        "Always",
        spec.node_tier.as_deref(),
        spec.run_as_user,
    );
    named_by_hash(stamp(pod, |p| &mut p.metadata)?, "app", &owner.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::build::{hash_of, restricted_pod_security};
    use crate::crd::{App, AppDatabase, AppPostgres, AppVolume};
    use crate::meta::LABEL_MANAGED_BY;

    fn owner() -> Owner {
        let mut a = App::new("shop", AppSpec::default());
        a.metadata.namespace = Some("team".into());
        a.metadata.uid = Some("uid-app".into());
        Owner::of(&a).unwrap()
    }

    fn spec(database: bool) -> AppSpec {
        AppSpec {
            image: "reg/shop:1".into(),
            workspace: AppVolume {
                size: Quantity("1Gi".into()),
                max_size: Quantity("5Gi".into()),
            },
            database: database.then(|| AppDatabase {
                postgres: AppPostgres {
                    image: "reg/postgres:16".into(),
                    size: Quantity("2Gi".into()),
                    max_size: Quantity("10Gi".into()),
                    backup_hook: None,
                },
            }),
            ..AppSpec::default()
        }
    }

    fn mounts(pod: &Pod, container: &str) -> Vec<(String, String)> {
        pod.spec
            .as_ref()
            .unwrap()
            .containers
            .iter()
            .find(|c| c.name == container)
            .unwrap()
            .volume_mounts
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|m| (m.name, m.mount_path))
            .collect()
    }

    fn claims(pod: &Pod) -> Vec<(String, String)> {
        pod.spec
            .as_ref()
            .unwrap()
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| {
                let c = v.persistent_volume_claim.as_ref()?;
                Some((v.name.clone(), c.claim_name.clone()))
            })
            .collect()
    }

    /// The default hook dumps over the sidecar's socket into the volume's
    /// root (where the backup reads it); a hook of the App's own wins.
    #[test]
    fn the_backup_hook_is_the_apps_or_a_pg_dumpall_into_the_volume() {
        let mut pg = spec(true).database.unwrap().postgres;
        let argv = postgres_backup_hook(&pg);
        assert_eq!(argv[..2], ["sh", "-c"]);
        assert_eq!(
            argv[2],
            "pg_dumpall -U postgres -h /var/run/postgresql > /var/lib/postgresql/data/exo-backup.sql.part \
             && mv -f /var/lib/postgresql/data/exo-backup.sql.part /var/lib/postgresql/data/exo-backup.sql"
        );
        assert!(
            mounts(&app_pod(&owner(), &spec(true)).unwrap(), "postgres")
                .contains(&("pg-run".to_owned(), POSTGRES_RUN.to_owned()))
        );
        pg.backup_hook = Some(vec!["true".into()]);
        assert_eq!(postgres_backup_hook(&pg), ["true"]);
    }

    #[test]
    fn with_a_database_the_pod_has_the_app_and_a_postgres_sidecar() {
        let pod = app_pod(&owner(), &spec(true)).unwrap();
        let ps = pod.spec.as_ref().unwrap();
        let names: Vec<_> = ps.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["app", "postgres"]);
        assert_eq!(ps.containers[0].image.as_deref(), Some("reg/shop:1"));
        assert_eq!(ps.containers[1].image.as_deref(), Some("reg/postgres:16"));
        assert_eq!(
            claims(&pod),
            [
                ("workspace".to_owned(), "app-workspace-shop".to_owned()),
                ("database".to_owned(), "app-database-shop".to_owned())
            ]
        );
        assert!(mounts(&pod, "app").contains(&("workspace".into(), "/workspace".into())));
        assert!(!mounts(&pod, "app").iter().any(|(v, _)| v == "database"));
        assert!(
            mounts(&pod, "postgres")
                .contains(&("database".into(), "/var/lib/postgresql/data".into()))
        );
        assert!(
            !mounts(&pod, "postgres")
                .iter()
                .any(|(v, _)| v == "workspace")
        );
        let env = |c: usize, name: &str| {
            ps.containers[c]
                .env
                .iter()
                .flatten()
                .find(|e| e.name == name)
                .and_then(|e| e.value.clone())
        };
        assert_eq!(env(0, "DATABASE_URL").as_deref(), Some(DATABASE_URL));
        assert_eq!(env(1, "PGDATA").as_deref(), Some(POSTGRES_PGDATA));
        assert_eq!(
            ps.containers[1].args.as_deref(),
            Some(&["-c".to_owned(), "listen_addresses=127.0.0.1".to_owned()][..])
        );
    }

    #[test]
    fn without_a_database_the_pod_has_one_container_and_one_claim() {
        let pod = app_pod(&owner(), &spec(false)).unwrap();
        let ps = pod.spec.as_ref().unwrap();
        assert_eq!(ps.containers.len(), 1);
        assert_eq!(
            claims(&pod),
            [("workspace".to_owned(), "app-workspace-shop".to_owned())]
        );
        assert!(
            ps.containers[0]
                .env
                .iter()
                .flatten()
                .all(|e| e.name != "DATABASE_URL")
        );
    }

    #[test]
    fn the_pod_is_restricted_owned_and_named_by_its_template() {
        let pod = app_pod(&owner(), &spec(true)).unwrap();
        let ps = pod.spec.as_ref().unwrap();
        assert_eq!(ps.security_context, Some(restricted_pod_security(None)));
        assert_eq!(ps.automount_service_account_token, Some(false));
        for c in &ps.containers {
            assert_eq!(
                c.security_context,
                Some(restricted_container_security()),
                "{}",
                c.name
            );
        }
        let refs = pod.metadata.owner_references.clone().unwrap();
        assert_eq!(
            (refs[0].uid.as_str(), refs[0].controller),
            ("uid-app", Some(true))
        );
        let hash = hash_of(&pod.metadata).unwrap();
        assert_eq!(
            pod.metadata.name.as_deref(),
            Some(format!("app-shop-{}", &hash[..8]).as_str())
        );
        let labels = pod.metadata.labels.clone().unwrap();
        assert_eq!(labels[LABEL_APP], "shop");
        assert_eq!(labels[LABEL_MANAGED_BY], "exo");
        // A new image is a new template: the pod rolls under a new name.
        let mut other = spec(true);
        other.image = "reg/shop:2".into();
        let rolled = app_pod(&owner(), &other).unwrap();
        assert_ne!(rolled.metadata.name, pod.metadata.name);
        // Adding a database rolls it too (the sidecar joins).
        let grown = app_pod(&owner(), &spec(false)).unwrap();
        assert_ne!(grown.metadata.name, pod.metadata.name);
    }

    #[test]
    fn pvcs_are_owned_unless_retained() {
        // (retain, owned, retained-from annotation)
        for (retain, owned, mark) in [(false, true, None), (true, false, Some("shop"))] {
            for kind in [AppVolumeKind::Workspace, AppVolumeKind::Database] {
                let pvc = app_pvc(&owner(), kind, "3Gi", retain).unwrap();
                let what = format!("{kind} retain={retain}");
                assert_eq!(
                    pvc.metadata.name.as_deref(),
                    Some(format!("app-{kind}-shop").as_str()),
                    "{what}"
                );
                let refs = pvc.metadata.owner_references.clone().unwrap_or_default();
                assert_eq!(refs.iter().any(|r| r.uid == "uid-app"), owned, "{what}");
                let annotations = pvc.metadata.annotations.clone().unwrap_or_default();
                assert_eq!(
                    annotations.get(ANNOTATION_RETAINED).map(String::as_str),
                    mark,
                    "{what}"
                );
                let labels = pvc.metadata.labels.clone().unwrap();
                assert_eq!(labels[LABEL_APP_VOLUME], kind.as_str(), "{what}");
                assert_eq!(labels[LABEL_APP], "shop", "{what}");
                let spec = pvc.spec.unwrap();
                assert_eq!(
                    spec.resources.unwrap().requests.unwrap()["storage"].0,
                    "3Gi",
                    "{what}"
                );
                assert_eq!(spec.access_modes.unwrap(), ["ReadWriteOnce"], "{what}");
            }
        }
    }

    #[test]
    fn turning_retain_on_or_off_changes_the_pvc_hash() {
        let kept = app_pvc(&owner(), AppVolumeKind::Workspace, "1Gi", true).unwrap();
        let owned = app_pvc(&owner(), AppVolumeKind::Workspace, "1Gi", false).unwrap();
        let grown = app_pvc(&owner(), AppVolumeKind::Workspace, "2Gi", false).unwrap();
        assert_ne!(hash_of(&kept.metadata), hash_of(&owned.metadata));
        assert_ne!(hash_of(&owned.metadata), hash_of(&grown.metadata));
    }
}
