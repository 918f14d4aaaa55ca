#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The operator's backups, end to end: the real apiserver, the real
//! operator, kwok's exec over the volume's hostPath folder and the real
//! registry. A volume with `spec.backup` is backed up on its own; the
//! backup restores to the volume's files; an on-demand request is
//! answered by a new backup that uploads only what changed; `keep` holds
//! the number of backups; a policy with `keep: 0` is refused by name and
//! nothing is pushed; a wrong registry password is an error that does
//! not show it.

mod support;

use exo::backup::{Options, Repository};
use exo::crd::AgentFS;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use support::backup::{backup_of, noise, request_backup, restored, volume};
use support::operator::{OperatorProcess, create, restricted_namespace, volume_folder, wait_for};

#[tokio::test]
async fn volumes_are_backed_up_on_schedule_and_on_request() {
    let ns = restricted_namespace("fs-backup").await;
    let n = ns.name.as_str();
    let registry = support::env().registry.clone();
    let path = format!("exo-test/backup-op-{n}");
    let op = OperatorProcess::start(n, "a");
    op.wait_leader().await;

    // A volume with files, backed up every hour, two kept.
    let policy = serde_json::json!({
        "every": "1h", "keep": 2, "repository": format!("{registry}/{path}"), "insecure": true
    });
    create(&ns.api::<AgentFS>(), &volume("work", policy)).await;
    let bound = wait_for(&ns.api::<AgentFS>(), "work", "Bound", |f| {
        f.status
            .as_ref()
            .and_then(|s| s.provisioned.clone())
            .is_some()
    })
    .await;
    let pvc = bound.status.unwrap().pvc_name.unwrap();
    let dir = volume_folder(&ns, &pvc).await;
    std::fs::create_dir_all(dir.join("notes/deep")).unwrap();
    std::fs::write(dir.join("notes/a.md"), b"alpha\n").unwrap();
    // Bigger than a few chunks (4 MiB on average), so that an edit
    // elsewhere leaves most of them as they are.
    std::fs::write(dir.join("notes/deep/b.bin"), noise(12 << 20)).unwrap();
    // (Written after the claim bound; the first backup may have run on the
    // empty volume already: an on-demand request below takes the files.)
    let api = ns.api::<AgentFS>();
    let request = |r: &'static str| request_backup(&api, "work", r);
    request("r1").await;
    let first = wait_for(&api, "work", "the request r1 answered", |f| {
        backup_of(f).answered_request.as_deref() == Some("r1")
    })
    .await;
    let b1 = backup_of(&first);
    let ok1 = b1
        .last_success
        .clone()
        .unwrap_or_else(|| panic!("r1 failed: {b1:?}"));
    assert!(b1.last_error.is_none(), "{b1:?}");
    assert_eq!(b1.observed_generation, first.metadata.generation);
    assert_eq!(ok1.files, 2);
    assert!(ok1.digest.starts_with("sha256:"), "{ok1:?}");

    // What the registry holds is the volume, byte for byte.
    let repo = Repository::new(&registry, &path, None, Options::default()).unwrap();
    let files = restored(&repo, &ok1.digest).await;
    assert_eq!(files.len(), 2, "{:?}", files.keys());
    assert_eq!(files["notes/a.md"], b"alpha\n");
    assert_eq!(files["notes/deep/b.bin"], noise(12 << 20));

    // One file changed: a second backup sends little of the volume.
    std::fs::write(dir.join("notes/a.md"), b"alpha, edited\n").unwrap();
    request("r2").await;
    let second = wait_for(&api, "work", "the request r2 answered", |f| {
        backup_of(f).answered_request.as_deref() == Some("r2")
    })
    .await;
    let ok2 = backup_of(&second).last_success.unwrap();
    assert_ne!(ok2.digest, ok1.digest);
    assert!(
        ok2.bytes_uploaded * 2 < ok2.bytes_total,
        "the unchanged chunks are not sent again: {ok2:?}"
    );
    assert_eq!(
        restored(&repo, "latest").await["notes/a.md"],
        b"alpha, edited\n"
    );

    // A third: `keep: 2` leaves two backups in the repository.
    request("r3").await;
    wait_for(&api, "work", "the request r3 answered", |f| {
        backup_of(f).answered_request.as_deref() == Some("r3")
    })
    .await;
    let stamps: Vec<String> = repo
        .list_tags()
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.parse::<u64>().is_ok())
        .collect();
    assert_eq!(stamps.len(), 2, "{stamps:?}");
    assert!(
        repo.pull_manifest(&ok1.digest).await.is_err(),
        "the oldest is gone"
    );

    // Bad input: `keep: 0` is refused by name, and nothing is pushed.
    let zero_path = format!("exo-test/backup-op-{n}-zero");
    let zero = serde_json::json!({
        "every": "10s", "keep": 0, "repository": format!("{registry}/{zero_path}"), "insecure": true
    });
    // The schema's minimum refuses it at the door already.
    let e = api
        .create(&PostParams::default(), &volume("zero", zero))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("keep"), "{e}");

    // A wrong password: the status says so, and never shows it.
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "reg"},
        "stringData": {"username": "exo", "password": "not-the-password-4711"}
    }))
    .unwrap();
    ns.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let auth = serde_json::json!({
        "every": "1h", "keep": 1, "repository": format!("{}/exo-test/backup-op-{n}", support::env().registry_auth),
        "secretRef": "reg", "insecure": true
    });
    create(&api, &volume("locked", auth)).await;
    let locked = wait_for(&api, "locked", "the backup refused", |f| {
        backup_of(f).last_error.is_some()
    })
    .await;
    let err = backup_of(&locked).last_error.unwrap();
    assert_eq!(err.reason, "auth", "{err:?}");
    let shown = serde_json::to_string(&locked.status).unwrap();
    assert!(!shown.contains("not-the-password-4711"), "{shown}");
    assert!(!op.log().contains("not-the-password-4711"));
}
