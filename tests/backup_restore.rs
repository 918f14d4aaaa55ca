#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Restores, end to end: the real apiserver, the real operator, kwok's
//! exec over the volumes' hostPath folders and the real registry.
//! `exo fs backup` answers with the digest the status records, `exo fs
//! backups` lists it, `exo fs restore --to` makes a new volume with the
//! backup's files byte for byte (its tree hash checked in the pod), and
//! every refusal names what it refuses: a volume in use (the pod), a
//! volume that is not empty, a tampered manifest (nothing created). The
//! operator's restore drills pass on a good backup and remove their
//! scratch volume; a blob corrupted in the registry's storage fails the
//! next drill, naming the layer, with an Event.

mod support;

use std::time::Duration;

use exo::backup::manifest::{self, ANNOTATION_TREE_HASH};
use exo::backup::{Options, Repository};
use exo::crd::AgentFS;
use hyper::body::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use sha2::{Digest, Sha256};
use support::backup::{backup_of, blob_file, noise_from, volume};
use support::fs::{bound, exo_fs, files_of, json, ok, refused};
use support::operator::{
    OperatorProcess, active_agent_mounting, create, pod_name, restricted_namespace, wait_for,
    wait_gone,
};
use support::{events, eventually};

/// A seed of the namespace's name: each test's bytes are its own, so a
/// blob one test corrupts is no other test's.
fn seed(ns: &str) -> u64 {
    u64::from_be_bytes(Sha256::digest(ns.as_bytes())[..8].try_into().unwrap())
}

fn policy(registry: &str, path: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut p = serde_json::json!({
        "every": "1h", "keep": 5, "repository": format!("{registry}/{path}"), "insecure": true
    });
    if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    p
}

#[tokio::test]
async fn the_cli_backs_up_lists_and_restores_refusing_by_name() {
    let ns = restricted_namespace("fs-restore").await;
    let n = ns.name.as_str();
    let registry = support::env().registry.clone();
    let path = format!("exo-test/restore-{n}");
    let op = OperatorProcess::start(n, "a");
    op.wait_leader().await;
    let api = ns.api::<AgentFS>();
    create(
        &api,
        &volume("work", policy(&registry, &path, serde_json::json!({}))),
    )
    .await;
    let dir = bound(&ns, "work").await;
    std::fs::create_dir_all(dir.join("notes/deep")).unwrap();
    std::fs::write(dir.join("notes/a.md"), format!("alpha of {n}\n")).unwrap();
    std::fs::write(dir.join("notes/deep/b.bin"), noise_from(seed(n), 3 << 20)).unwrap();
    std::fs::write(dir.join("notes/empty"), b"").unwrap();
    std::fs::write(dir.join(".hidden"), b"dot\n").unwrap();
    let source = files_of(&dir);
    let file_bytes: usize = source.iter().map(|(_, b)| b.len()).sum();

    // `exo fs backup` waits for the operator's answer: its digest is the
    // one the status records.
    let b = json(&exo_fs(
        n,
        &["backup", "work", "--timeout", "2m", "-o", "json"],
    ));
    let digest = b["digest"].as_str().unwrap().to_owned();
    let ok1 = backup_of(&api.get("work").await.unwrap())
        .last_success
        .unwrap();
    assert_eq!(digest, ok1.digest, "{b}");
    assert_eq!(b["files"], 4, "{b}");
    assert_eq!(b["treeHash"], ok1.tree_hash.as_str(), "{b}");

    // `exo fs backups` lists it, counts from the manifest.
    let list = json(&exo_fs(n, &["backups", "work", "-o", "json"]));
    let row = list["backups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["digest"] == digest.as_str())
        .unwrap_or_else(|| panic!("{digest} is not listed: {list}"))
        .clone();
    assert_eq!(row["files"], 4, "{row}");
    assert_eq!(row["fileBytes"], file_bytes, "{row}");
    assert_eq!(row["treeHash"], ok1.tree_hash.as_str(), "{row}");
    assert_eq!(row["drillResult"], "-", "no drill yet: {row}");
    let table = ok(&exo_fs(n, &["backups", "work"]));
    assert!(
        table.starts_with("TIME") && table.contains(&digest),
        "{table}"
    );

    // Restored to a new name: a new AgentFS like the source, without a
    // policy, holding the backup's files byte for byte.
    let r = json(&exo_fs(
        n,
        &[
            "restore", "work", "--from", &digest, "--to", "copy", "-o", "json",
        ],
    ));
    assert_eq!(r["digest"], digest.as_str(), "{r}");
    assert_eq!(r["treeHash"], ok1.tree_hash.as_str(), "{r}");
    assert_eq!(r["createdVolume"], true, "{r}");
    assert_eq!(r["files"], 4, "{r}");
    let copy = bound(&ns, "copy").await;
    assert_eq!(files_of(&copy), source);
    let made = api.get("copy").await.unwrap();
    assert!(made.spec.backup.is_none());
    assert_eq!(
        (made.spec.size.0.as_str(), made.spec.max_size.0.as_str()),
        ("1Gi", "2Gi")
    );

    // A second backup; `--from TIME` takes the newest at or before it.
    let shown = ok(&exo_fs(n, &["backup", "work", "--timeout", "2m"]));
    let ok2 = backup_of(&api.get("work").await.unwrap())
        .last_success
        .unwrap();
    assert!(
        shown.starts_with(&format!("backed up {n}/work: {}", ok2.digest)),
        "{shown}"
    );
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let by_time = ok(&exo_fs(
        n,
        &["restore", "work", "--from", &now, "--to", "by-time"],
    ));
    assert!(
        by_time.contains(&format!("restored backup {}", ok2.digest))
            && by_time.contains("verified in pod"),
        "{by_time}"
    );
    assert_eq!(files_of(&bound(&ns, "by-time").await), source);

    // Refusals, each naming what it refuses; none creates a volume.
    refused(
        &exo_fs(n, &["restore", "work", "--from", "latest"]),
        &[&format!("AgentFS {n}/work is not empty")],
    );
    refused(
        &exo_fs(n, &["restore", "work", "--from", "latest", "--to", "copy"]),
        &[&format!("AgentFS {n}/copy exists")],
    );
    refused(
        &exo_fs(
            n,
            &["restore", "work", "--from", "yesterday", "--to", "never"],
        ),
        &["--from", "RFC 3339"],
    );
    refused(
        &exo_fs(
            n,
            &[
                "restore",
                "work",
                "--from",
                "2001-01-01T00:00:00Z",
                "--to",
                "never",
            ],
        ),
        &["no backup at or before 2001-01-01T00:00:00Z"],
    );
    assert!(api.get_opt("never").await.unwrap().is_none());

    // A tampered manifest (its tree-hash annotation lies) is refused
    // before anything is made.
    let repo = Repository::new(&registry, &path, None, Options::default()).unwrap();
    let pulled = repo.pull_manifest(&digest).await.unwrap();
    let mut m: serde_json::Value = serde_json::from_slice(&pulled.bytes).unwrap();
    m["annotations"][ANNOTATION_TREE_HASH] =
        serde_json::json!(hex::encode(Sha256::digest(b"forged")));
    let forged = repo
        .push_manifest("tampered", Bytes::from(serde_json::to_vec(&m).unwrap()))
        .await
        .unwrap();
    refused(
        &exo_fs(n, &["restore", "work", "--from", &forged, "--to", "forged"]),
        &[
            &forged,
            "is refused",
            "annotations.sh.autonomic.exo.backup.tree-hash",
        ],
    );
    assert!(
        api.get_opt("forged").await.unwrap().is_none(),
        "nothing is half-restored"
    );

    // In use: an agent's pod mounts the volume; the refusal names the pod.
    active_agent_mounting(&ns, "worker", "work").await;
    let pod = pod_name(&ns.api::<Pod>(), "agent", "worker").await;
    refused(
        &exo_fs(n, &["restore", "work", "--from", "latest"]),
        &[&format!("AgentFS {n}/work is mounted by pod {pod}")],
    );
}

#[tokio::test]
async fn drills_prove_a_backup_and_name_a_corrupted_layer() {
    let ns = restricted_namespace("fs-drill").await;
    let n = ns.name.as_str();
    let registry = support::env().registry.clone();
    let path = format!("exo-test/drill-{n}");
    let op = OperatorProcess::start(n, "a");
    op.wait_leader().await;
    let api = ns.api::<AgentFS>();
    create(
        &api,
        &volume(
            "vault",
            policy(
                &registry,
                &path,
                serde_json::json!({ "keep": 2, "drillEvery": "10s" }),
            ),
        ),
    )
    .await;
    let dir = bound(&ns, "vault").await;
    std::fs::create_dir_all(dir.join("kept")).unwrap();
    std::fs::write(dir.join("kept/a.txt"), format!("vault of {n}\n")).unwrap();
    std::fs::write(dir.join("kept/b.bin"), noise_from(seed(n), 200_000)).unwrap();
    api.patch(
        "vault",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
            "autonomic.sh/backup-requested-at": "r1"
        }}})),
    )
    .await
    .unwrap();
    let answered = wait_for(&api, "vault", "the request r1 answered", |f| {
        backup_of(f).answered_request.as_deref() == Some("r1")
    })
    .await;
    let ok1 = backup_of(&answered).last_success.unwrap();
    assert_eq!(ok1.files, 2, "{ok1:?}");

    // The latest backup is drilled, passes, and its scratch volume goes.
    let drill_of = |passed: bool| {
        let api = api.clone();
        let digest = ok1.digest.clone();
        move || {
            let api = api.clone();
            let digest = digest.clone();
            async move {
                let fs = api.get_opt("vault").await.ok().flatten()?;
                backup_of(&fs)
                    .last_drill
                    .filter(|d| d.digest == digest && d.passed == passed)
            }
        }
    };
    let passed = eventually(
        "a passing drill of the backup",
        Duration::from_secs(120),
        drill_of(true),
    )
    .await;
    assert_eq!(passed.last_passed.as_deref(), Some(passed.time.as_str()));
    assert_eq!(passed.message, None);
    wait_gone(&api, "drill-vault", "the drill's scratch volume deleted").await;
    let listed = json(&exo_fs(n, &["backups", "vault", "-o", "json"]));
    assert!(
        listed["backups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["digest"] == ok1.digest.as_str() && r["drillResult"] == "passed"),
        "{listed}"
    );

    // A chunk corrupted in the registry's storage (same size, other
    // bytes): the next drill fails, naming the layer, with an Event, and
    // keeps when the last drill passed.
    let repo = Repository::new(&registry, &path, None, Options::default()).unwrap();
    let pulled = repo.pull_manifest(&ok1.digest).await.unwrap();
    let m = manifest::parse_manifest(&pulled.bytes).unwrap();
    let file = blob_file(&m.layers[0].digest);
    let mut bytes = std::fs::read(&file).unwrap();
    assert_eq!(bytes.len() as u64, m.layers[0].size);
    for b in &mut bytes {
        *b ^= 0xff;
    }
    std::fs::write(&file, &bytes).unwrap();
    let failed = eventually(
        "a failing drill of the backup",
        Duration::from_secs(120),
        drill_of(false),
    )
    .await;
    let message = failed.message.clone().unwrap_or_default();
    assert!(
        message.contains("layer 0") && message.contains("does not match its digest"),
        "{failed:?}"
    );
    assert!(failed.last_passed.is_some(), "{failed:?}");
    let event = eventually(
        "a BackupDrillFailed Event",
        Duration::from_secs(30),
        || async {
            events(n, "BackupDrillFailed")
                .await
                .into_iter()
                .find(|e| e.note.as_deref().is_some_and(|t| t.contains("layer 0")))
        },
    )
    .await;
    assert_eq!(
        event.regarding.and_then(|r| r.name).as_deref(),
        Some("vault")
    );
    wait_gone(
        &api,
        "drill-vault",
        "the failed drill's scratch volume deleted",
    )
    .await;

    // The CLI refuses the corrupted backup too, and deletes the volume it
    // made for it.
    refused(
        &exo_fs(
            n,
            &["restore", "vault", "--from", &ok1.digest, "--to", "again"],
        ),
        &["layer 0", "created for this restore, was deleted"],
    );
    wait_gone(&api, "again", "the restore's own volume deleted").await;
}
