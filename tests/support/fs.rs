//! What the `exo fs` tests share: running it on the direct route, reading
//! a CLI run's outcome, the files of a folder, and the staging folders a
//! copy may leave.

use std::path::{Path, PathBuf};
use std::process::Output;

/// `exo fs ARGS -n NS` on the direct route (the test kubeconfig).
pub fn exo_fs(ns: &str, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_exo"))
        .arg("fs")
        .args(args)
        .args(["-n", ns])
        .env("KUBECONFIG", &super::env().kubeconfig)
        .env_remove("EXO_DEPLOYMENT")
        .output()
        .expect("run exo fs")
}

/// Every file under `root`, by path relative to it, with its bytes,
/// sorted by path.
pub fn files_of(root: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

/// The run's stdout; fails the test, with stderr, when it did not succeed.
pub fn ok(o: &Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "exo fs failed: {}\n{out}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// The run's stdout as JSON (`-o json`).
pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(o)).expect("json output")
}

/// The run's stderr; fails the test unless the run was refused with a
/// message holding every one of `words`.
pub fn refused(o: &Output, words: &[&str]) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        !o.status.success(),
        "expected a refusal, got success: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    for w in words {
        assert!(err.contains(w), "refusal {err:?} does not say {w:?}");
    }
    err
}

/// The staging folders (`.exo-part-*`) directly in `dir`.
pub fn staging(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(".exo-part-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until AgentFS `name` is bound and provisioned; its volume's
/// folder on this host.
pub async fn bound(ns: &super::TestNamespace, name: &str) -> PathBuf {
    use exo::crd::AgentFS;
    super::operator::wait_for(&ns.api::<AgentFS>(), name, "Bound", |f| {
        f.status.as_ref().and_then(|s| s.pvc_name.clone()).is_some()
            && f.status
                .as_ref()
                .and_then(|s| s.provisioned.clone())
                .is_some()
    })
    .await;
    super::operator::volume_folder(ns, &format!("agentfs-{name}")).await
}
