//! Replays the fuzz corpora on the stable toolchain: every file under
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` goes through
//! the same body the cargo-fuzz target runs (`exo::fuzzing`). A crash the
//! fuzzer found is saved under `fuzz/regressions/<target>/` with its fix,
//! so it stays fixed here; a corpus folder that went missing or empty
//! fails too, instead of passing on nothing. `scripts/fuzz` grows them.

use std::panic::catch_unwind;
use std::path::{Path, PathBuf};

/// Files of `dir`, sorted; names starting with '.' (`.gitkeep`) are not inputs.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}; it must exist (fuzz/)", dir.display()));
    let mut out: Vec<PathBuf> = entries
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path()
        })
        .filter(|p| p.is_file())
        .filter(|p| {
            p.file_name()
                .is_none_or(|n| !n.to_string_lossy().starts_with('.'))
        })
        .collect();
    out.sort();
    out
}

/// Runs `body` over the target's corpus and regressions; fails naming
/// every input that panicked.
fn replay(target: &str, body: fn(&[u8])) {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let corpus = inputs(&fuzz.join("corpus").join(target));
    assert!(
        !corpus.is_empty(),
        "fuzz/corpus/{target}/ is empty; seed it (see scripts/fuzz)"
    );
    let regressions = inputs(&fuzz.join("regressions").join(target));
    let mut failed = Vec::new();
    for path in corpus.iter().chain(&regressions) {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if catch_unwind(|| body(&data)).is_err() {
            failed.push(path.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: {} of {} inputs panicked (messages above):\n{}",
        failed.len(),
        corpus.len() + regressions.len(),
        failed.join("\n")
    );
}

#[test]
fn fleet_yaml() {
    replay("fleet_yaml", exo::fuzzing::fleet_yaml);
}

#[test]
fn wire_frame() {
    replay("wire_frame", exo::fuzzing::wire_frame);
}

#[test]
fn tar_stream() {
    replay("tar_stream", exo::fuzzing::tar_stream);
}
