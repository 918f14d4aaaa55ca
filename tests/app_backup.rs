#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! An App's volumes backed up, end to end: the real apiserver, the real
//! operator, kwok's exec (on this host, in the pod's folder, whose mounts
//! are links to the volumes' hostPath folders) and the real registry.
//! kwok runs no Postgres, so the database's backup hook is a shell
//! command of the test's: it writes a marker into the database volume,
//! and the database backup restored from the registry holds it; the
//! workspace backup holds the workspace's files; one request on the App
//! is answered in both volumes' status. A hook that exits 3 fails the
//! database's backup with reason `hook` (its status and first line of
//! stderr), pushes no manifest for it, and the workspace still backs up.
//! `exo fs backup app/NAME` names a failing volume and lists both once
//! they pass; `exo fs list --apps` shows each volume's last backup, and
//! `exo fs backups app/NAME --database` lists that volume's backups.
//! Each volume's first backup is proven by a restore drill.

mod support;

use exo::backup::{Options, Repository};
use exo::crd::{App, AppPhase, AppVolumeKind, BackupStatus};
use kube::api::{Api, Patch, PatchParams};
use support::backup::restored;
use support::fs::{exo_fs, json, refused};
use support::operator::{OperatorProcess, create, restricted_namespace, volume_folder, wait_for};

const WORKSPACE: &str = "app-workspace-shop";
const DATABASE: &str = "app-database-shop";

fn shop() -> App {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "App",
        "metadata": { "name": "shop" },
        "spec": {
            "image": "example.invalid/shop:1",
            "workspace": { "size": "1Gi", "maxSize": "4Gi" },
            "database": { "postgres": {
                "image": "example.invalid/postgres:16", "size": "1Gi", "maxSize": "8Gi"
            }}
        }
    }))
    .expect("App fixture")
}

/// The backup status of `app`'s `kind` volume (empty when none yet).
fn backup_of(app: &App, kind: AppVolumeKind) -> BackupStatus {
    app.status
        .as_ref()
        .and_then(|s| s.backup.as_ref())
        .and_then(|b| b.volume(kind).cloned())
        .unwrap_or_default()
}

fn answered(app: &App, request: &str) -> bool {
    [AppVolumeKind::Workspace, AppVolumeKind::Database]
        .iter()
        .all(|k| backup_of(app, *k).answered_request.as_deref() == Some(request))
}

async fn patch(api: &Api<App>, body: serde_json::Value) {
    api.patch("shop", &PatchParams::default(), &Patch::Merge(body))
        .await
        .unwrap();
}

async fn request(api: &Api<App>, r: &str) {
    patch(
        api,
        serde_json::json!({"metadata": {"annotations": {
            "autonomic.sh/backup-requested-at": r
        }}}),
    )
    .await;
}

/// The Unix-millisecond tags (one per backup) of `repo`.
async fn stamps(repo: &Repository) -> Vec<String> {
    let mut v: Vec<String> = repo
        .list_tags()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.parse::<u64>().is_ok())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn an_apps_workspace_and_database_are_backed_up_the_database_after_its_hook() {
    let ns = restricted_namespace("app-backup").await;
    let n = ns.name.as_str();
    let registry = support::env().registry.clone();
    let path = format!("exo-test/app-backup-{n}");
    let op = OperatorProcess::start(n, "a");
    op.wait_leader().await;
    let apps = ns.api::<App>();
    create(&apps, &shop()).await;
    let running = wait_for(&apps, "shop", "Running", |a| {
        a.status
            .as_ref()
            .is_some_and(|s| s.phase == Some(AppPhase::Running) && s.pod_name.is_some())
    })
    .await;
    let pod = running.status.unwrap().pod_name.unwrap();

    // The workspace holds code; the database volume its data folder.
    let ws = volume_folder(&ns, WORKSPACE).await;
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/main.py"), b"print('shop')\n").unwrap();
    let db = volume_folder(&ns, DATABASE).await;
    std::fs::create_dir_all(db.join("pgdata")).unwrap();
    std::fs::write(db.join("pgdata/PG_VERSION"), b"16\n").unwrap();

    // The policy, and a hook that writes a marker into the database
    // volume through the sidecar's mount (kwok runs it in the pod's
    // folder under EXO_POD_ROOT).
    let marker = format!("$EXO_POD_ROOT/{n}/{pod}/var/lib/postgresql/data/hook-marker");
    patch(
        &apps,
        serde_json::json!({"spec": {
            "backup": {"every": "1h", "keep": 3,
                "repository": format!("{registry}/{path}"), "insecure": true},
            "database": {"postgres": {"backupHook":
                ["sh", "-c", format!("echo dumped-by-hook > \"{marker}\"")]}}
        }}),
    )
    .await;
    request(&apps, "r1").await;
    let first = wait_for(&apps, "shop", "r1 answered by both volumes", |a| {
        answered(a, "r1")
    })
    .await;
    let generation = first.metadata.generation;
    let (ws1, db1) = (
        backup_of(&first, AppVolumeKind::Workspace),
        backup_of(&first, AppVolumeKind::Database),
    );
    for b in [&ws1, &db1] {
        assert!(b.last_error.is_none(), "{b:?}");
        assert!(b.last_success.is_some(), "{b:?}");
        assert_eq!(b.observed_generation, generation, "{b:?}");
    }
    // The App reconciler left the backup status alone.
    assert_eq!(
        first.status.as_ref().unwrap().phase,
        Some(AppPhase::Running)
    );

    // Each volume went to its own repository, as it was.
    let ws_repo = Repository::new(
        &registry,
        &format!("{path}/workspace"),
        None,
        Options::default(),
    )
    .unwrap();
    let db_repo = Repository::new(
        &registry,
        &format!("{path}/database"),
        None,
        Options::default(),
    )
    .unwrap();
    let ws_files = restored(&ws_repo, &ws1.last_success.as_ref().unwrap().digest).await;
    assert_eq!(ws_files["src/main.py"], b"print('shop')\n");
    assert!(
        !ws_files.contains_key("hook-marker"),
        "{:?}",
        ws_files.keys()
    );
    let db_ok = db1.last_success.clone().unwrap();
    let db_files = restored(&db_repo, &db_ok.digest).await;
    assert_eq!(db_files["pgdata/PG_VERSION"], b"16\n");
    assert_eq!(
        db_files.get("hook-marker").map(Vec::as_slice),
        Some(&b"dumped-by-hook\n"[..]),
        "the hook ran before the volume was read: {:?}",
        db_files.keys()
    );
    let db_stamps = stamps(&db_repo).await;
    assert!(!db_stamps.is_empty());

    // The first backups are proven by a restore drill each (into a
    // scratch AgentFS owned by the App, gone afterwards).
    let drilled = wait_for(&apps, "shop", "both volumes drilled", |a| {
        [AppVolumeKind::Workspace, AppVolumeKind::Database]
            .iter()
            .all(|k| backup_of(a, *k).last_drill.is_some())
    })
    .await;
    for kind in [AppVolumeKind::Workspace, AppVolumeKind::Database] {
        let d = backup_of(&drilled, kind).last_drill.unwrap();
        assert!(d.passed, "{kind}: {d:?}");
    }
    let fss = ns.api::<exo::crd::AgentFS>();
    support::eventually(
        "the drills' scratch volumes gone",
        std::time::Duration::from_secs(60),
        || {
            let fss = fss.clone();
            async move {
                let left = fss.list(&Default::default()).await.ok()?;
                left.items.is_empty().then_some(())
            }
        },
    )
    .await;

    // The backup watch sees App volumes too: each has its age gauge, under
    // `<app>/<volume>`.
    for volume in ["workspace", "database"] {
        let series =
            format!(r#"exo_fs_backup_age_seconds{{namespace="{n}",name="shop/{volume}"}}"#);
        support::eventually(
            &format!("the {volume} volume's backup age on /metrics"),
            std::time::Duration::from_secs(30),
            || {
                let body = op.get("/metrics").map(|(_, b)| b).unwrap_or_default();
                let found = body.contains(&series);
                async move { found.then_some(()) }
            },
        )
        .await;
    }

    // A hook that fails: the database's backup fails with reason `hook`
    // and pushes nothing; the workspace still backs up.
    std::fs::write(ws.join("src/new.py"), b"print('new')\n").unwrap();
    patch(
        &apps,
        serde_json::json!({"spec": {"database": {"postgres": {"backupHook":
            ["sh", "-c", "echo the dump broke >&2; exit 3"]}}}}),
    )
    .await;
    request(&apps, "r2").await;
    let second = wait_for(&apps, "shop", "r2 answered by both volumes", |a| {
        answered(a, "r2")
    })
    .await;
    let db2 = backup_of(&second, AppVolumeKind::Database);
    let err = db2.last_error.clone().unwrap_or_else(|| panic!("{db2:?}"));
    assert_eq!(err.reason, "hook", "{err:?}");
    assert!(err.message.contains("exited with status 3"), "{err:?}");
    assert!(err.message.contains("the dump broke"), "{err:?}");
    assert_eq!(
        db2.last_success,
        Some(db_ok.clone()),
        "the last good one stays"
    );
    assert_eq!(db2.observed_generation, second.metadata.generation);
    assert_eq!(
        stamps(&db_repo).await,
        db_stamps,
        "no manifest for the database"
    );
    assert_eq!(
        db_repo.pull_manifest("latest").await.unwrap().digest,
        db_ok.digest
    );
    let ws2 = backup_of(&second, AppVolumeKind::Workspace);
    assert!(ws2.last_error.is_none(), "{ws2:?}");
    let ws_ok = ws2.last_success.unwrap();
    assert_ne!(Some(&ws_ok), ws1.last_success.as_ref());
    assert_eq!(
        restored(&ws_repo, &ws_ok.digest).await["src/new.py"],
        b"print('new')\n"
    );

    // The CLI: `exo fs backup app/shop` requests both and waits for both;
    // a failing volume is named, with its reason.
    let out = exo_fs(n, &["backup", "app/shop", "--timeout", "2m"]);
    refused(
        &out,
        &[
            "App",
            "shop",
            "database failed (hook)",
            "exited with status 3",
        ],
    );
    patch(
        &apps,
        serde_json::json!({"spec": {"database": {"postgres": {"backupHook": ["true"]}}}}),
    )
    .await;
    let v = json(&exo_fs(
        n,
        &["backup", "app/shop", "--timeout", "2m", "-o", "json"],
    ));
    let volumes: Vec<&str> = v["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["volume"].as_str().unwrap())
        .collect();
    assert_eq!(volumes, ["workspace", "database"], "{v}");
    let db3 = backup_of(&apps.get("shop").await.unwrap(), AppVolumeKind::Database);
    assert_eq!(
        v["volumes"][1]["digest"].as_str(),
        db3.last_success.as_ref().map(|b| b.digest.as_str()),
        "{v}"
    );
    assert_ne!(db3.last_success, Some(db_ok), "a new database backup");

    let db_latest = db3.last_success.as_ref().unwrap().digest.clone();

    // `exo fs list --apps` shows each volume's last backup.
    let rows = json(&exo_fs(n, &["list", "--apps", "-o", "json"]));
    let last: Vec<(String, String)> = rows["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (s("volume"), s("lastBackup"))
        })
        .collect();
    assert_eq!(
        last,
        [
            (
                "workspace".to_owned(),
                backup_of(&apps.get("shop").await.unwrap(), AppVolumeKind::Workspace)
                    .last_success
                    .unwrap()
                    .time
            ),
            (
                "database".to_owned(),
                db3.last_success.clone().unwrap().time
            ),
        ]
    );
    let table = String::from_utf8_lossy(&exo_fs(n, &["list", "--apps"]).stdout).into_owned();
    assert!(table.lines().next().unwrap().ends_with("BACKUP"), "{table}");

    // `exo fs backups app/shop --database` lists that volume's repository.
    let listed = json(&exo_fs(
        n,
        &["backups", "app/shop", "--database", "-o", "json"],
    ));
    assert_eq!(listed["volume"], "database", "{listed}");
    assert!(
        listed["repository"]
            .as_str()
            .unwrap()
            .ends_with(&format!("{path}/database")),
        "{listed}"
    );
    let digests: Vec<&str> = listed["backups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["digest"].as_str().unwrap())
        .collect();
    assert_eq!(digests.len(), stamps(&db_repo).await.len(), "{listed}");
    assert_eq!(Some(digests[0]), Some(db_latest.as_str()), "newest first");
    refused(
        &exo_fs(n, &["backups", "app/shop"]),
        &["--workspace or --database"],
    );
}
