#![allow(clippy::expect_used, clippy::unwrap_used)] // benchmark code: a panic is a failed run
//! Upstream benchmarks (results in BENCHMARKS.md, section "Upstream").
//!
//! Run with the test environment up:
//!   set -a; eval "$(scripts/testenv env)"; set +a
//!   cargo bench --bench upstream -- [objects K] [latency N] [rss N] \
//!       [hb-ms MS] [hold S] [reconnect N] [reconnect-nospread N]
//!
//! - objects K: how many Agents and Tools (half each) the latency run puts
//!   into the watched namespace before it measures (default 0).
//! - snapshot-ms MS: the operator's backstop snapshot cadence during the
//!   latency run (default 300 s), to measure deltas queued behind snapshots.
//! - latency: change -> Delta latency. The operator side (`exo::upstream::run`)
//!   watches a fresh namespace of the real apiserver holding K objects; a
//!   minimal protocol server here timestamps each delta, and a plain kube
//!   watcher on the same namespace timestamps the same change (what a user
//!   gets from a bare watch, the floor). N changes, one at a time: with K = 0
//!   AgentFS creations, otherwise label patches of existing Agents.
//!   Latency = arrival minus the moment the request was sent.
//! - rss: resident memory of a real `exo control-plane serve` per connection,
//!   with N simulated operators (hello, a 10-resource snapshot, a heartbeat
//!   every `hb-ms`, default 5000, for `hold` seconds, default 60). The
//!   simulated operators run in child processes of at most 5000 connections
//!   each (the fd limit); heartbeats sent are compared with the server's
//!   `heartbeats_received`.
//! - reconnect: N simulated operators with the operator's policy (500 ms base,
//!   60 s cap, full jitter, first redial after a loss spread over 15 s);
//!   the control plane is killed, left down 2 s and restarted, and the
//!   spread of their reconnect times is reported per 1 s bucket.
//!   `reconnect-nospread` is the same without the loss spread (plain
//!   backoff from 500 ms), for comparison.
//!
//! - rss-pg N: the rss run on PostgreSQL (`EXO_TEST_POSTGRES_URL`, a fresh
//!   database) with `replicas` `serve` processes (default 3), the N
//!   operators spread evenly over them; memory and CPU are summed over the
//!   replicas, and the PostgreSQL server's CPU is given beside them.
//! - commands N: command round trip (`POST .../commands`, answered at once
//!   by a simulated operator), N each: on one SQLite process; on three
//!   PostgreSQL replicas asked of the holder and of another replica (one
//!   hop), interleaved.
//!
//! - fleet N: the fleet view across clusters (`fleet`): N simulated
//!   clusters of 10 tenants' Rollouts on three PostgreSQL replicas;
//!   `queries` reads of `GET /api/v1/fleet/rollouts` (default 500) and
//!   `trials` gate decisions (default 50). `benches/fleet_view.sh` runs it
//!   beside its kubectl baseline.
//!
//! Modules: `latency`, `sim` (control-plane process and simulated
//! operators), `connections` (rss and heartbeats), `reconnect`, `commands`,
//! `fleet`.

mod commands;
mod connections;
mod fleet;
mod latency;
mod reconnect;
mod sim;

/// A database of its own per run, on the test environment's PostgreSQL
/// (the tests' helper, shared).
#[path = "../../tests/support/postgres.rs"]
mod postgres;

fn repo_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

use std::time::Duration;

use connections::Backend;

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

pub fn summary(name: &str, mut v: Vec<f64>, unit: &str) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{name}: n={} p50={:.1}{unit} p90={:.1}{unit} p99={:.1}{unit} max={:.1}{unit}",
        v.len(),
        pct(&v, 0.5),
        pct(&v, 0.9),
        pct(&v, 0.99),
        v.last().copied().unwrap_or(f64::NAN)
    );
}

fn main() {
    // `cargo test --all-targets` runs this binary without `--bench`: the
    // benchmarks need minutes and the test environment, so only `cargo
    // bench` runs them.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("upstream benchmarks: run them with `cargo bench --bench upstream`");
        return;
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    if args.first().map(String::as_str) == Some("sim-clients") {
        let a = &args[1..];
        rt.block_on(connections::sim_clients(
            a[0].clone(),
            a[1].clone(),
            a[2].parse().unwrap(),
            a[3].parse().unwrap(),
            Duration::from_millis(a[4].parse().unwrap()),
            Duration::from_secs(a[5].parse().unwrap()),
        ));
        return;
    }
    let mut it = args.iter();
    let mut ran = false;
    let mut objects = 0;
    let mut hb = Duration::from_secs(5);
    let mut hold = Duration::from_secs(60);
    let mut replicas = 3;
    let mut snapshot_every = None;
    let mut queries = 500;
    let mut trials = 50;
    while let Some(what) = it.next() {
        let n: usize = it.next().and_then(|n| n.parse().ok()).unwrap_or(100);
        match what.as_str() {
            "objects" => objects = n,
            "hb-ms" => hb = Duration::from_millis(n as u64),
            "hold" => hold = Duration::from_secs(n as u64),
            "snapshot-ms" => snapshot_every = Some(Duration::from_millis(n as u64)),
            "replicas" => replicas = n,
            "queries" => queries = n,
            "trials" => trials = n,
            "fleet" => rt.block_on(fleet::fleet(n, queries, trials)),
            "latency" => rt.block_on(latency::latency(n, objects, snapshot_every)),
            "rss" => rt.block_on(connections::rss(n, hb, hold, Backend::Sqlite)),
            "rss-pg" => rt.block_on(connections::rss(
                n,
                hb,
                hold,
                Backend::Postgres { replicas },
            )),
            "commands" => rt.block_on(commands::commands(n)),
            "reconnect" => rt.block_on(reconnect::reconnect(n, true)),
            "reconnect-nospread" => rt.block_on(reconnect::reconnect(n, false)),
            other => panic!("unknown benchmark {other}"),
        }
        ran |= !matches!(
            what.as_str(),
            "objects" | "hb-ms" | "hold" | "snapshot-ms" | "replicas" | "queries" | "trials"
        );
    }
    if !ran {
        rt.block_on(latency::latency(200, 0, None));
        rt.block_on(connections::rss(500, hb, hold, Backend::Sqlite));
        rt.block_on(reconnect::reconnect(200, true));
    }
}
