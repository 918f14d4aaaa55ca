//! What the `exo fs` tests share: reading a CLI run's outcome, and the
//! staging folders a copy may leave.

use std::path::{Path, PathBuf};
use std::process::Output;

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
