//! Embeds the dashboard's assets: every file under
//! `src/controlplane/dashboard/assets/` becomes an entry of a generated
//! table (`(path, bytes)`, sorted), so adding an asset needs no code change.

use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.is_file() {
            out.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/controlplane/dashboard/assets");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    let mut table = String::from("&[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let Ok(rel) = f.strip_prefix(&root) else {
            continue;
        };
        let rel = rel.to_string_lossy().replace('\\', "/");
        table.push_str(&format!(
            "    ({rel:?}, include_bytes!({:?})),\n",
            f.display().to_string()
        ));
    }
    table.push_str("]\n");
    let out =
        PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("dashboard_assets.rs");
    if let Err(e) = std::fs::write(&out, table) {
        panic!("write {}: {e}", out.display());
    }
}
