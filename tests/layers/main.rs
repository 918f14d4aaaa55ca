//! The layers of `ARCHITECTURE.md`, checked on the source: no import cycle
//! between modules anywhere in the crate, and no import that goes up a
//! declared layer. A failure names both modules and one file and path that
//! makes the dependency.

mod modgraph;

use std::path::Path;

use modgraph::{Crate, Edge, cycles, report};

/// Declared layers: for a parent module (`crate::rollout`), its children
/// from the bottom layer up. A child may name children of its own layer or
/// of a layer below, never one above. Children not listed are not
/// constrained by this table (the cycle check still holds for them).
const LAYERS: &[(&str, &[&[&str]])] = &[
    (
        "crate",
        &[
            &[
                "duration", "meta", "names", "net", "quantity", "redact", "severity", "shutdown",
                "text", "yaml",
            ],
            &["analysis", "crd", "wire"],
            &[
                "alerts",
                "circuits",
                "cluster",
                "fleet",
                "forge",
                "incident",
                "notify",
                "release",
                "saga",
                "signatures",
            ],
            &[
                "agentfs",
                "audit",
                "backup",
                "controlplane",
                "fuzzing",
                "rollout",
                "upstream",
            ],
            &["operator"],
            &["cli"],
        ],
    ),
    (
        "crate::rollout",
        &[
            &[
                "saga",
                "changed",
                "desired",
                "gates",
                "summary",
                "isolation",
                "diff",
            ],
            &["workload"],
            &[
                "actuate",
                "verify",
                "drift",
                "inventory",
                "prune",
                "reverify",
            ],
            &["engine"],
        ],
    ),
    (
        "crate::controlplane",
        &[
            &["model", "resources", "session", "tls"],
            &["bus"],
            &["store"],
            &[
                "admin",
                "disconnect",
                "fleet",
                "live",
                "relay",
                "replica",
                "view",
            ],
            &["dashboard", "http", "ws"],
        ],
    ),
];

/// Parents whose children still import each other in a circle, while issue
/// 27 removes them one by one. A parent listed here that has no cycle left
/// fails the test too, so the list only shrinks. Empty is the goal.
const KNOWN: &[&str] = &[];

fn at(parent: &[String]) -> String {
    if parent.is_empty() {
        "crate".to_string()
    } else {
        format!("crate::{}", parent.join("::"))
    }
}

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")
}

fn layer_violations(edges: &[Edge]) -> Vec<String> {
    let mut out = Vec::new();
    for (parent, layers) in LAYERS {
        let rank = |name: &str| layers.iter().position(|l| l.contains(&name));
        for e in edges.iter().filter(|e| at(&e.parent) == *parent) {
            if let (Some(from), Some(to)) = (rank(&e.from), rank(&e.to))
                && to > from
            {
                out.push(format!(
                    "{parent}: {} (layer {from}) names {} (layer {to}), above it: {} names {}",
                    e.from,
                    e.to,
                    e.witness.0.display(),
                    e.witness.1
                ));
            }
        }
    }
    out
}

#[test]
fn no_module_cycles() {
    let krate = match Crate::load(&src()) {
        Ok(k) => k,
        Err(e) => panic!("{e}"),
    };
    let found = cycles(&krate.edges());
    // `EXO_LAYERS_REPORT=1 cargo test --test layers -- --nocapture` shows
    // the known cycles too.
    if std::env::var_os("EXO_LAYERS_REPORT").is_some() {
        println!("{}", report(&found));
        for e in krate.edges().iter().filter(|e| e.parent.is_empty()) {
            println!("crate: {} -> {}", e.from, e.to);
        }
    }
    let new: Vec<_> = found
        .iter()
        .filter(|(p, _, _)| !KNOWN.contains(&at(p).as_str()))
        .cloned()
        .collect();
    assert!(
        new.is_empty(),
        "import cycles between modules:\n{}",
        report(&new)
    );
    let gone: Vec<&&str> = KNOWN
        .iter()
        .filter(|k| !found.iter().any(|(p, _, _)| at(p) == **k))
        .collect();
    assert!(
        gone.is_empty(),
        "no cycle left under {gone:?}: remove them from KNOWN in tests/layers/main.rs"
    );
}

#[test]
fn no_import_goes_up_a_layer() {
    let krate = match Crate::load(&src()) {
        Ok(k) => k,
        Err(e) => panic!("{e}"),
    };
    let bad = layer_violations(&krate.edges());
    assert!(bad.is_empty(), "imports up a layer:\n{}", bad.join("\n"));
}

/// The check is not blind: a copy of the crate with one planted import
/// (the bottom of the crate naming the CLI, which names everything) fails it,
/// and it names the planted file.
#[test]
fn a_planted_cycle_is_found() {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    };
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &dir.path().join("src"),
    );
    let victim = dir.path().join("src/duration.rs");
    let mut text = std::fs::read_to_string(&victim).unwrap_or_default();
    text.push_str("\n#[allow(unused_imports)]\nuse crate::cli::Cli as _Planted;\n");
    if let Err(e) = std::fs::write(&victim, text) {
        panic!("write {}: {e}", victim.display());
    }
    let krate = match Crate::load(&dir.path().join("src/lib.rs")) {
        Ok(k) => k,
        Err(e) => panic!("{e}"),
    };
    let found = cycles(&krate.edges());
    let text = report(&found);
    assert!(
        found.iter().any(|(parent, scc, _)| parent.is_empty()
            && scc.contains(&"duration".to_string())
            && scc.contains(&"cli".to_string())),
        "the planted cycle duration -> cli was not found:\n{text}"
    );
    assert!(
        text.contains("duration.rs names crate::cli::Cli"),
        "the report does not name the planted import:\n{text}"
    );
}

/// Re-exports are followed: naming a sibling's item through the parent's
/// `pub use` is a dependency on that sibling.
#[test]
fn reexports_and_relative_paths_resolve() {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    };
    let files: &[(&str, &str)] = &[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        (
            "a/mod.rs",
            "mod x;\nmod y;\npub use x::Thing;\npub use y::*;\n",
        ),
        (
            "a/x.rs",
            "pub struct Thing;\npub fn f() -> super::Other { super::Other }\n",
        ),
        (
            "a/y.rs",
            "pub struct Other;\npub fn g() { let _ = crate::a::Thing; }\n",
        ),
        (
            "b.rs",
            "pub fn h() { let _ = crate::a::Other; }\n#[cfg(test)]\nmod tests { use crate::b; }\n",
        ),
    ];
    for (name, body) in files {
        let p = dir.path().join(name);
        if let Some(parent) = p.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        if let Err(e) = std::fs::write(&p, body) {
            panic!("write {}: {e}", p.display());
        }
    }
    let krate = match Crate::load(&dir.path().join("lib.rs")) {
        Ok(k) => k,
        Err(e) => panic!("{e}"),
    };
    let edges = krate.edges();
    let pairs: Vec<(String, String, String)> = edges
        .iter()
        .map(|e| (e.parent.join("::"), e.from.clone(), e.to.clone()))
        .collect();
    assert!(
        pairs.contains(&("a".into(), "x".into(), "y".into())),
        "{pairs:?}"
    );
    assert!(
        pairs.contains(&("a".into(), "y".into(), "x".into())),
        "{pairs:?}"
    );
    assert!(
        pairs.contains(&("".into(), "b".into(), "a".into())),
        "{pairs:?}"
    );
    assert_eq!(pairs.len(), 3, "{pairs:?}");
    let found = cycles(&edges);
    assert_eq!(found.len(), 1, "{}", report(&found));
}

fn copy_tree(from: &Path, to: &Path) {
    let _ = std::fs::create_dir_all(to);
    let entries = match std::fs::read_dir(from) {
        Ok(e) => e,
        Err(e) => panic!("read {}: {e}", from.display()),
    };
    for entry in entries.flatten() {
        let p = entry.path();
        let q = to.join(entry.file_name());
        if p.is_dir() {
            copy_tree(&p, &q);
        } else if let Err(e) = std::fs::copy(&p, &q) {
            panic!("copy {}: {e}", p.display());
        }
    }
}
