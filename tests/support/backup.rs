//! What the backup tests share: volumes with a policy, their backup
//! status, bytes that do not compress, and the test registry's storage.

use std::path::PathBuf;

use exo::crd::{AgentFS, BackupStatus};

/// Bytes that do not compress or repeat (a fixed LCG from `seed`).
pub fn noise_from(seed: u64, n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (x >> 33) as u8
        })
        .collect()
}

/// [`noise_from`] the one fixed seed.
pub fn noise(n: usize) -> Vec<u8> {
    noise_from(0, n)
}

/// The volume's `status.backup` (empty when it has none yet).
pub fn backup_of(fs: &AgentFS) -> BackupStatus {
    fs.status
        .as_ref()
        .and_then(|s| s.backup.clone())
        .unwrap_or_default()
}

/// An AgentFS `name` of 1Gi (max 2Gi) with the backup `policy`.
pub fn volume(name: &str, policy: serde_json::Value) -> AgentFS {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
        "metadata": { "name": name },
        "spec": { "size": "1Gi", "maxSize": "2Gi", "backup": policy }
    }))
    .expect("AgentFS fixture")
}

/// Where the open test registry keeps the bytes of blob `digest`
/// (`sha256:…`): the distribution registry's filesystem layout under the
/// test environment's state folder.
pub fn blob_file(digest: &str) -> PathBuf {
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    let state = super::testenv_var("EXO_TESTENV_DIR")
        .expect("EXO_TESTENV_DIR: the test environment's state folder (scripts/testenv env)");
    PathBuf::from(state)
        .join("registry/open/data/docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data")
}

/// Asks for a backup of the AgentFS `name` now: the on-demand annotation
/// set to `request` (answered in `status.backup.answeredRequest`).
pub async fn request_backup(api: &kube::Api<AgentFS>, name: &str, request: &str) {
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"metadata": {"annotations": {
            exo::meta::ANNOTATION_BACKUP_REQUESTED: request
        }}})),
    )
    .await
    .expect("the backup request annotation");
}
