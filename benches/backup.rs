//! Backup and restore of a volume's tar stream through `exo::backup`,
//! against the test environment's open registry, side by side with the
//! floor for the same data: `tar -c | sha256sum` (reading and hashing it
//! once) and `tar -c | tar -x` (a local copy).
//!
//! Fixed workloads of EXO_BENCH_MIB MiB each (1024): one file of random
//! bytes, and 10,000 files in 100 folders; chunks of EXO_BENCH_AVG_KIB
//! KiB on average (4096, the default sizes). For each, timed:
//! - the floor: `tar -C dir -cf - vol | sha256sum`, `tar -c | tar -x`;
//! - the first backup (`tar -c` piped into `backup`; every chunk new);
//! - a second backup of the unchanged volume (no chunk sent);
//! - a backup after 1 % of the content changed (one region of the large
//!   file; 1 % of the small files, first all in one folder, then one in
//!   each folder), with the bytes it sent;
//! - a restore of that backup piped into `tar -x` (every chunk, file and
//!   the tree hash checked).
//!
//! Needs the test environment (`scripts/testenv up`; its `env` is read
//! from EXO_TEST_REGISTRY or `.testenv/env`). Leaves the blobs in the
//! registry (its garbage collection frees them once the manifests, which
//! the bench deletes, are gone). Run with `cargo bench --bench backup`.
//! Prints a Markdown table.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a bench: a panic is a failed run

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use common::knob;
use exo::agentfs::tarstream::Limits;
use exo::backup::{ChunkSizes, Options, Repository, Volume, backup, restore};

/// Deterministic pseudo-random bytes (splitmix64).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn registry() -> String {
    if let Ok(r) = std::env::var("EXO_TEST_REGISTRY") {
        return r;
    }
    let state = std::env::var("EXO_TESTENV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join(".testenv"));
    std::fs::read_to_string(state.join("env"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("EXO_TEST_REGISTRY=").map(str::to_owned))
        })
        .expect("no test registry: start it with `scripts/testenv up`")
}

/// EXO_BENCH_AVG_KIB (4096, the default sizes): the average chunk; min is
/// a quarter of it, max four times it.
fn sizes() -> ChunkSizes {
    let avg = knob("EXO_BENCH_AVG_KIB", 4096) as u32 * 1024;
    ChunkSizes {
        min: avg / 4,
        avg,
        max: avg * 4,
    }
}

fn sh(cmd: &str, dir: &Path) -> f64 {
    let t = Instant::now();
    let ok = std::process::Command::new("sh")
        .args(["-c", cmd])
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "{cmd}");
    t.elapsed().as_secs_f64()
}

struct Row {
    workload: &'static str,
    step: &'static str,
    secs: f64,
    mib: f64,
    sent: Option<(u64, u64)>,
}

async fn backup_of(dir: &Path, repo: &Repository) -> (f64, exo::backup::Taken) {
    let t = Instant::now();
    let mut tar = tokio::process::Command::new("tar")
        .args(["-C", dir.to_str().unwrap(), "-cf", "-", "vol"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = tar.stdout.take().unwrap();
    let volume = Volume {
        namespace: "bench".into(),
        name: "vol".into(),
    };
    let taken = backup(out, repo, &volume, sizes(), Limits::default())
        .await
        .unwrap();
    assert!(tar.wait().await.unwrap().success());
    (t.elapsed().as_secs_f64(), taken)
}

async fn restore_into(repo: &Repository, digest: &str, out: &Path) -> f64 {
    std::fs::create_dir_all(out).unwrap();
    let t = Instant::now();
    let mut tar = tokio::process::Command::new("tar")
        .args(["-C", out.to_str().unwrap(), "-xf", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = tar.stdin.take().unwrap();
    restore(repo, digest, stdin, Limits::default())
        .await
        .unwrap();
    assert!(tar.wait().await.unwrap().success());
    t.elapsed().as_secs_f64()
}

/// A change of the volume, named for the table.
type Change = (&'static str, Box<dyn Fn(&Path)>);

async fn run(
    workload: &'static str,
    dir: &Path,
    mib: f64,
    changes: Vec<Change>,
    rows: &mut Vec<Row>,
) {
    let reg = registry();
    let path =
        format!("exo-bench/backup-{}-{workload}", std::process::id()).replace([' ', ','], "-");
    let repo = Repository::new(&reg, &path, None, Options::default()).unwrap();
    let row = |step, secs, sent| Row {
        workload,
        step,
        secs,
        mib,
        sent,
    };
    rows.push(row(
        "floor: tar -c \\| sha256sum",
        sh("tar -cf - vol | sha256sum", dir),
        None,
    ));
    let copy = dir.join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    rows.push(row(
        "floor: tar -c \\| tar -x",
        sh("tar -cf - vol | tar -C copy -xf -", dir),
        None,
    ));
    std::fs::remove_dir_all(&copy).unwrap();
    let (secs, t1) = backup_of(dir, &repo).await;
    rows.push(row(
        "backup, first",
        secs,
        Some((t1.bytes_uploaded, t1.bytes_total)),
    ));
    let (secs, t2) = backup_of(dir, &repo).await;
    rows.push(row(
        "backup, unchanged",
        secs,
        Some((t2.bytes_uploaded, t2.bytes_total)),
    ));
    let mut last = t2.digest.clone();
    let mut digests = vec![t1.digest, t2.digest];
    for (name, change) in changes {
        change(dir);
        let (secs, t) = backup_of(dir, &repo).await;
        rows.push(row(name, secs, Some((t.bytes_uploaded, t.bytes_total))));
        last = t.digest.clone();
        digests.push(t.digest);
    }
    let out = dir.join("restored");
    let secs = restore_into(&repo, &last, &out).await;
    rows.push(row("restore into tar -x", secs, None));
    std::fs::remove_dir_all(&out).unwrap();
    for d in digests {
        repo.delete_manifest(&d).await.unwrap();
    }
}

#[tokio::main]
async fn main() {
    // `cargo test --all-targets` runs bench binaries too, without `--bench`:
    // 1 GiB through a debug build is not a test.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("benches/backup.rs: skipped outside `cargo bench --bench backup`");
        return;
    }
    let mib = knob("EXO_BENCH_MIB", 1024);
    let bytes = mib << 20;
    let mut rows = Vec::new();

    let large = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(large.path().join("vol")).unwrap();
    std::fs::write(large.path().join("vol/large.bin"), noise(1, bytes)).unwrap();
    run(
        "1 large file",
        large.path(),
        mib as f64,
        vec![(
            "backup, 1 % changed (one region)",
            Box::new(|dir: &Path| {
                let p = dir.join("vol/large.bin");
                let mut data = std::fs::read(&p).unwrap();
                let (at, n) = (data.len() / 2, data.len() / 100);
                for b in &mut data[at..at + n] {
                    *b ^= 0x5a;
                }
                std::fs::write(&p, data).unwrap();
            }),
        )],
        &mut rows,
    )
    .await;
    drop(large);

    let small = tempfile::tempdir().unwrap();
    let each = bytes / 10_000;
    for i in 0..10_000u64 {
        let d = small.path().join(format!("vol/d{:02}", i % 100));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("f{i:05}")), noise(i + 10, each)).unwrap();
    }
    run(
        "10,000 files",
        small.path(),
        mib as f64,
        vec![
            (
                "backup, 1 % of files changed (one folder)",
                Box::new(move |dir: &Path| {
                    for i in (0..10_000u64).filter(|i| i % 100 == 0) {
                        let p = dir.join(format!("vol/d00/f{i:05}"));
                        std::fs::write(&p, noise(i + 1_000_000, each)).unwrap();
                    }
                }),
            ),
            (
                "backup, 1 % of files changed (spread)",
                Box::new(move |dir: &Path| {
                    for i in (0..100u64).map(|k| k * 100 + k) {
                        let p = dir.join(format!("vol/d{:02}/f{i:05}", i % 100));
                        std::fs::write(&p, noise(i + 2_000_000, each)).unwrap();
                    }
                }),
            ),
        ],
        &mut rows,
    )
    .await;

    println!("| workload | step | seconds | MiB/s | sent |");
    println!("|---|---|---:|---:|---|");
    for r in rows {
        let sent = r.sent.map_or(String::new(), |(up, total)| {
            format!(
                "{:.1} MiB of {:.1} MiB ({:.2} %)",
                up as f64 / (1 << 20) as f64,
                total as f64 / (1 << 20) as f64,
                up as f64 * 100.0 / total as f64
            )
        });
        println!(
            "| {} | {} | {:.2} | {:.0} | {} |",
            r.workload,
            r.step,
            r.secs,
            r.mib / r.secs,
            sent
        );
    }
}
