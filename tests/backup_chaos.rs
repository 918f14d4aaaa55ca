#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Backups interrupted, end to end (the real apiserver, operator, kwok
//! exec and registry, with a counting proxy in front of the registry):
//! - the operator killed (SIGKILL) in the middle of a backup: no manifest
//!   names a blob the registry lacks, nothing claims a backup, and the
//!   next leader serves the same request, sending again only the chunks
//!   that had not arrived;
//! - the registry failing in the middle of a backup: the status says so
//!   (a bounded reason), no manifest is pushed, the last good backup
//!   stays the last, and the next backup succeeds and clears the error.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use exo::backup::store::Blob;
use exo::backup::{Options, Repository};
use exo::crd::AgentFS;
use kube::api::{Patch, PatchParams};
use support::backup::{backup_of, noise_from, request_backup};
use support::eventually;
use support::operator::{OperatorProcess, create, restricted_namespace, volume_folder, wait_for};
use support::registry_proxy::{Counts, RegistryProxy};

/// Every blob the manifest `reference` names (config and chunks) is in
/// the repository.
async fn complete(repo: &Repository, reference: &str) {
    let pulled = repo.pull_manifest(reference).await.unwrap();
    let m: serde_json::Value = serde_json::from_slice(&pulled.bytes).unwrap();
    let config = m["config"]["digest"].as_str().unwrap();
    assert!(repo.blob_exists(config, Blob::Config).await.unwrap());
    let layers = m["layers"].as_array().unwrap();
    assert!(!layers.is_empty());
    for l in layers {
        let d = l["digest"].as_str().unwrap();
        assert!(
            repo.blob_exists(d, Blob::Any).await.unwrap(),
            "{reference} names {d}, which the registry lacks"
        );
    }
}

/// How many chunks the manifest `reference` names.
async fn layers(repo: &Repository, reference: &str) -> u64 {
    let pulled = repo.pull_manifest(reference).await.unwrap();
    let m: serde_json::Value = serde_json::from_slice(&pulled.bytes).unwrap();
    m["layers"].as_array().unwrap().len() as u64
}

/// The backups in the repository (their own tags; `latest` apart).
async fn stamps(repo: &Repository) -> Vec<String> {
    match repo.list_tags().await {
        Ok(tags) => tags
            .into_iter()
            .filter(|t| t.parse::<u64>().is_ok())
            .collect(),
        // A repository nothing was ever pushed to.
        Err(exo::backup::StoreError::NotFound { .. }) => Vec::new(),
        Err(e) => panic!("listing tags: {e}"),
    }
}

#[tokio::test]
async fn a_killed_operator_and_a_failing_registry_leave_no_broken_backup() {
    let ns = restricted_namespace("fs-backup-chaos").await;
    let n = ns.name.as_str();
    let registry = support::env().registry.clone();
    let proxy = RegistryProxy::start(&registry).await;
    let path = format!("exo-test/backup-chaos-{n}");
    let mut first = OperatorProcess::start(n, "a");
    first.wait_leader().await;

    // The volume first, without a policy: its files are written before any
    // backup can start.
    let api = ns.api::<AgentFS>();
    let fs: AgentFS = serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
        "metadata": { "name": "work" },
        "spec": { "size": "1Gi", "maxSize": "2Gi" }
    }))
    .unwrap();
    create(&api, &fs).await;
    let bound = wait_for(&api, "work", "Bound", |f| {
        f.status
            .as_ref()
            .and_then(|s| s.provisioned.clone())
            .is_some()
    })
    .await;
    let dir = volume_folder(&ns, &bound.status.unwrap().pvc_name.unwrap()).await;
    std::fs::write(dir.join("notes.md"), b"kept\n").unwrap();
    // About ten chunks of 4 MiB on average.
    std::fs::write(dir.join("big.bin"), noise_from(1, 40 << 20)).unwrap();

    let request = |r: &'static str| request_backup(&api, "work", r);

    // 1. SIGKILL in the middle: three uploads go through, the fourth hangs,
    // and the operator is killed while it waits.
    proxy.hold_after.store(3, Ordering::SeqCst);
    request("r1").await;
    api.patch(
        "work",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"backup": {
            "every": "1h", "keep": 5, "repository": format!("{}/{path}", proxy.addr),
            "insecure": true
        }}})),
    )
    .await
    .unwrap();
    let repo = Repository::new(&registry, &path, None, Options::default()).unwrap();
    eventually(
        "three chunks of the backup sent, the fourth held",
        Duration::from_secs(90),
        || async { (Counts::get(&proxy.counts.upload_puts) >= 3).then_some(()) },
    )
    .await;
    first.kill();
    assert_eq!(
        Counts::get(&proxy.counts.upload_puts),
        3,
        "the fourth upload was held, not stored"
    );
    let killed = api.get("work").await.unwrap();
    let b = backup_of(&killed);
    assert!(
        b.last_success.is_none() && b.answered_request.is_none(),
        "a killed backup claims nothing: {b:?}"
    );
    assert!(
        stamps(&repo).await.is_empty(),
        "no manifest was pushed by a killed backup"
    );
    assert_eq!(Counts::get(&proxy.counts.manifest_puts), 0);

    // The next leader serves the same request; the chunks that arrived
    // are found by HEAD and not sent again. (The held upload is refused
    // once released: its client is gone.)
    proxy.counts.reset();
    proxy.hold_after.store(u64::MAX, Ordering::SeqCst);
    let second = OperatorProcess::start(n, "b");
    second.wait_leader().await;
    let served = eventually(
        "r1 answered by the next leader",
        Duration::from_secs(90),
        || {
            let api = api.clone();
            async move {
                let f = api.get("work").await.ok()?;
                (backup_of(&f).answered_request.as_deref() == Some("r1")).then_some(f)
            }
        },
    )
    .await;
    let ok1 = backup_of(&served)
        .last_success
        .unwrap_or_else(|| panic!("r1 failed: {:?}", backup_of(&served)));
    assert_eq!(ok1.files, 2, "{ok1:?}");
    complete(&repo, &ok1.digest).await;
    let chunks = layers(&repo, &ok1.digest).await;
    assert_eq!(
        Counts::get(&proxy.counts.upload_puts),
        chunks - 3 + 1,
        "the 3 chunks that arrived before the kill are not sent again (of {chunks}; and the config)"
    );

    // 2. The registry fails in the middle: a new big file (every chunk
    // new), two uploads let through, then 503s.
    std::fs::write(dir.join("big.bin"), noise_from(2, 40 << 20)).unwrap();
    proxy.counts.reset();
    proxy.uploads_allowed.store(2, Ordering::SeqCst);
    request("r2").await;
    let failed = wait_for(&api, "work", "r2 answered", |f| {
        backup_of(f).answered_request.as_deref() == Some("r2")
    })
    .await;
    let b2 = backup_of(&failed);
    let err = b2
        .last_error
        .clone()
        .unwrap_or_else(|| panic!("r2 should fail: {b2:?}"));
    assert_eq!(err.reason, "registry", "{err:?}");
    assert_eq!(
        b2.last_success.as_ref().map(|s| s.digest.as_str()),
        Some(ok1.digest.as_str()),
        "the last good backup stays the last"
    );
    assert_eq!(
        stamps(&repo).await.len(),
        1,
        "no manifest for a failed backup"
    );
    assert_eq!(Counts::get(&proxy.counts.manifest_puts), 0);
    complete(&repo, "latest").await;

    // The registry is back: the next backup succeeds, sends only what had
    // not arrived, and clears the error.
    proxy.counts.reset();
    proxy.uploads_allowed.store(u64::MAX, Ordering::SeqCst);
    request("r3").await;
    let healed = wait_for(&api, "work", "r3 answered", |f| {
        backup_of(f).answered_request.as_deref() == Some("r3")
    })
    .await;
    let b3 = backup_of(&healed);
    let ok3 = b3
        .last_success
        .clone()
        .unwrap_or_else(|| panic!("r3 failed: {b3:?}"));
    assert!(b3.last_error.is_none(), "{b3:?}");
    assert_ne!(ok3.digest, ok1.digest);
    complete(&repo, &ok3.digest).await;
    let chunks = layers(&repo, &ok3.digest).await;
    assert_eq!(
        Counts::get(&proxy.counts.upload_puts),
        chunks - 2 + 1,
        "the 2 chunks that arrived before the failure are not sent again (of {chunks}; and the config)"
    );
    assert_eq!(stamps(&repo).await.len(), 2);
}
