//! The fleet repository's fetch and checkout for a one-file change, against
//! the git CLI's shallow fetch of the same commit from the same daemon.
//!
//! Fixed workload: a repository of T tenant folders of N files each
//! (`manifests/tN/agent-M.yaml`, about 300 bytes), served by `git daemon`
//! on loopback. After a first full sync, each run changes one file of
//! tenant 0, commits and pushes, then times:
//! - `gitsync::fetch` into the operator's bare mirror;
//! - `Fetched::checkout` (the new commit written beside the old one);
//! - `git fetch --depth 1` of the same branch into a bare mirror of its
//!   own: what a user's own script would pay (the floor for the transport).
//!
//! Knobs: EXO_BENCH_TENANTS (10), EXO_BENCH_FILES (1000), EXO_BENCH_RUNS
//! (15). Run with `cargo bench --bench gitsync`. Prints a Markdown table.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a bench: a panic is a failed run

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::knob;
use exo::fleet::gitsync::{self, Source};

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn agent(t: usize, a: usize, rev: usize) -> String {
    format!(
        "apiVersion: autonomic.sh/v1alpha1\nkind: Agent\nmetadata:\n  name: agent-{a}\n  \
         namespace: tenant-{t}\nspec:\n  image: registry.example/agent@sha256:{:064x}\n  \
         release: \"2026.12.{rev}\"\n  env:\n    - name: MODEL\n      value: small\n",
        t * 100_000 + a
    )
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn main() {
    let tenants = knob("EXO_BENCH_TENANTS", 10);
    let files = knob("EXO_BENCH_FILES", 1000);
    let runs = knob("EXO_BENCH_RUNS", 15);
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    for t in 0..tenants {
        let dir = work.join(format!("manifests/t{t}"));
        std::fs::create_dir_all(&dir).unwrap();
        for a in 0..files {
            std::fs::write(dir.join(format!("agent-{a}.yaml")), agent(t, a, 0)).unwrap();
        }
    }
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "fleet"]);
    git(root.path(), &["init", "-q", "--bare", "served.git"]);
    git(&work, &["push", "-q", "../served.git", "main"]);

    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _daemon = Daemon(
        Command::new("git")
            .arg("daemon")
            .arg(format!("--base-path={}", root.path().display()))
            .args(["--export-all", "--reuseaddr", "--listen=127.0.0.1"])
            .arg(format!("--port={port}"))
            .arg(root.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("git://127.0.0.1:{port}/served.git");
    let source = Source {
        url: url.clone(),
        branch: "main".into(),
        credentials: None,
        allow_insecure: true,
        max_file_bytes: gitsync::DEFAULT_MAX_FILE_BYTES,
        full_history: false,
    };
    let cache = root.path().join("cache");
    let cli = root.path().join("cli.git");
    git(root.path(), &["init", "-q", "--bare", "cli.git"]);
    let cli_fetch = || {
        git(
            &cli,
            &["fetch", "-q", "--depth", "1", &url, "+main:refs/heads/main"],
        )
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let first = loop {
        match gitsync::fetch(&source, &cache) {
            Ok(f) => break f,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("first fetch: {e}"),
        }
    };
    let mut known = first
        .checkout(&cache, source.max_file_bytes, None)
        .expect("first checkout")
        .ids;
    cli_fetch();

    let (mut fetch, mut checkout, mut floor) = (vec![], vec![], vec![]);
    for run in 1..=runs {
        let path = work.join("manifests/t0/agent-0.yaml");
        std::fs::write(&path, agent(0, 0, run)).unwrap();
        git(&work, &["commit", "-q", "-am", &format!("edit {run}")]);
        git(&work, &["push", "-q", "../served.git", "main"]);

        let t = Instant::now();
        let fetched = gitsync::fetch(&source, &cache).expect("fetch");
        fetch.push(t.elapsed());
        let t = Instant::now();
        let c = fetched
            .checkout(&cache, source.max_file_bytes, Some(&known))
            .expect("checkout");
        checkout.push(t.elapsed());
        known = c.ids.clone();
        assert_eq!(
            std::fs::read_to_string(c.path.join("manifests/t0/agent-0.yaml")).unwrap(),
            agent(0, 0, run),
            "the checkout holds the pushed edit"
        );
        let t = Instant::now();
        cli_fetch();
        floor.push(t.elapsed());
    }
    let (f, c, g) = (median(fetch), median(checkout), median(floor));
    println!(
        "| files | runs | gitsync fetch ms | checkout ms | git CLI fetch --depth 1 ms | fetch / CLI |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    println!(
        "| {} | {runs} | {} | {} | {} | {:.2} |",
        tenants * files,
        ms(f),
        ms(c),
        ms(g),
        f.as_secs_f64() / g.as_secs_f64()
    );
}
