//! Many simulated operators against one control plane: memory per
//! connection and dropped heartbeats (see main.rs).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

use exo::upstream::backoff::random_u64;
use exo::wire::{self, Frame};

use crate::sim::{
    cpu_ticks, postgres_pids, rss_kib, sim_connect, start_cp_with, states, stats, tokens,
};

pub async fn sim_clients(
    addr: String,
    tokens: String,
    start: usize,
    count: usize,
    hb: Duration,
    hold: Duration,
) {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let toks: Vec<String> = std::fs::read_to_string(tokens)
        .unwrap()
        .lines()
        .skip(start)
        .take(count)
        .map(str::to_owned)
        .collect();
    let sent = Arc::new(AtomicU64::new(0));
    let closed = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let failed = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    futures::stream::iter(toks)
        .map(|t| {
            let addr = addr.clone();
            async move { sim_connect(&addr, &t).await }
        })
        .buffer_unordered(64)
        .for_each(|r| {
            let (sent, closed, failed) = (sent.clone(), closed.clone(), failed.clone());
            let mut stop = stop_rx.clone();
            async move {
                let Ok(ws) = r else {
                    failed.fetch_add(1, Relaxed);
                    return;
                };
                tokio::spawn(async move {
                    let (mut sink, mut stream) = ws.split();
                    // A random phase, as real operators have.
                    let phase = Duration::from_millis(random_u64() % hb.as_millis().max(1) as u64);
                    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + phase, hb);
                    let mut sending = true;
                    loop {
                        tokio::select! {
                            _ = tick.tick(), if sending => {
                                let f = Frame::Heartbeat(wire::Heartbeat { sent_at_ms: wire::now_ms(), resources: 10 });
                                if sink.send(Message::Text(f.to_json().unwrap().into())).await.is_err() {
                                    closed.fetch_add(1, Relaxed);
                                    return;
                                }
                                sent.fetch_add(1, Relaxed);
                            }
                            r = stop.changed() => {
                                if r.is_err() || *stop.borrow() { sending = false; }
                                if r.is_err() { break; }
                            }
                            m = stream.next() => match m {
                                Some(Ok(_)) => {}
                                _ => { closed.fetch_add(1, Relaxed); return; }
                            },
                        }
                    }
                    // Keep the socket open (and answering pings) until exit.
                    while let Some(Ok(_)) = stream.next().await {}
                });
            }
        })
        .await;
    println!(
        "connected {} failed {} in {:.1} s",
        count as u64 - failed.load(Relaxed),
        failed.load(Relaxed),
        t0.elapsed().as_secs_f64()
    );
    tokio::time::sleep(hold).await;
    stop_tx.send_replace(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!(
        "sent {} closed {}",
        sent.load(Relaxed),
        closed.load(Relaxed)
    );
    drop(stop_tx);
}

/// Where the control plane keeps its state in a connection run.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    /// One `serve` process on a SQLite file (the embedded default).
    Sqlite,
    /// `replicas` `serve` processes on one fresh PostgreSQL database.
    Postgres { replicas: usize },
}

pub async fn rss(n: usize, hb: Duration, hold: Duration, backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (db, replicas) = match backend {
        Backend::Sqlite => (dir.path().join("cp.sqlite").display().to_string(), 1),
        Backend::Postgres { replicas } => {
            (crate::postgres::fresh_database("bench_rss").await, replicas)
        }
    };
    println!("== {n} connections, {backend:?}");
    let t_tok = Instant::now();
    // One warm-up deployment per server, then the measured ones.
    let toks = tokens(&db, n + replicas).await;
    println!(
        "created {} deployments in {:.1} s",
        n + replicas,
        t_tok.elapsed().as_secs_f64()
    );
    let tok_file = dir.path().join("tokens");
    std::fs::write(&tok_file, toks[replicas..].join("\n")).unwrap();
    let hb_flag = format!("{}ms", hb.as_millis());
    let mut servers: Vec<_> = (0..replicas)
        .map(|i| {
            let id = format!("r{i}");
            let mut args = vec!["--heartbeat-interval", hb_flag.as_str()];
            if matches!(backend, Backend::Postgres { .. }) {
                args.extend(["--replica-id", id.as_str()]);
            }
            start_cp_with(&db, "127.0.0.1:0", &args)
        })
        .collect();
    let pids: Vec<u32> = servers.iter().map(|cp| cp.child.id()).collect();
    let addrs: Vec<String> = servers.iter().map(|cp| cp.addr.clone()).collect();
    // Warm up the allocator and the first connection path of each.
    for (addr, tok) in addrs.iter().zip(&toks) {
        drop(sim_connect(addr, tok).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_sum = || pids.iter().map(|p| rss_kib(*p)).sum::<u64>();
    let cpu_sum = || pids.iter().map(|p| cpu_ticks(*p)).sum::<u64>();
    let pg_cpu = || postgres_pids().into_iter().map(cpu_ticks).sum::<u64>();
    let before = rss_sum();
    let cpu0 = cpu_sum();
    let t0 = Instant::now();
    // Server i gets the i-th share of the tokens, in client processes of
    // at most 5000 sockets each: each side needs one fd per connection and
    // the limit is 20000.
    let per = 5000;
    let mut children = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        let (from, to) = (n * i / replicas, n * (i + 1) / replicas);
        for start in (from..to).step_by(per) {
            let count = per.min(to - start);
            let mut c = Command::new(std::env::current_exe().unwrap())
                .args(["--bench", "sim-clients", addr])
                .arg(&tok_file)
                .args([
                    start.to_string(),
                    count.to_string(),
                    hb.as_millis().to_string(),
                    hold.as_secs().to_string(),
                ])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let out = BufReader::new(c.stdout.take().unwrap());
            children.push((c, out));
        }
    }
    for (_, out) in &mut children {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        println!("client process: {}", line.trim());
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let connected: usize = addrs.iter().map(|a| states(a).0).sum();
        if connected == n {
            break;
        }
        assert!(Instant::now() < deadline, "only {connected}/{n} connected");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let t_all = t0.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_sum();
    println!(
        "control plane RSS ({replicas} process(es) summed): {n} connections (10 resources each): before {before} KiB, after {after} KiB, {:.1} KiB per connection; all shown connected after {:.1} s",
        (after.saturating_sub(before)) as f64 / n as f64,
        t_all.as_secs_f64()
    );
    // Watch the states while heartbeats flow. Every server judges every
    // deployment, so they are asked in turn: one list of all N every 5 s
    // in total, whatever the number of servers, so that the list's own
    // cost is the same in each configuration.
    let mut worst = (0, 0);
    let t_hold = Instant::now();
    let cpu_hold0 = cpu_sum();
    let pg_hold0 = pg_cpu();
    for addr in addrs.iter().cycle() {
        if t_hold.elapsed() + Duration::from_secs(8) >= hold {
            break;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (_, online, degraded, offline) = states(addr);
        worst = (worst.0.max(degraded), worst.1.max(offline));
        if online + degraded + offline < n {
            println!(
                "states on {addr}: only {} of {n} judged",
                online + degraded + offline
            );
        }
    }
    let secs = t_hold.elapsed().as_secs_f64();
    let hold_cpu = (cpu_sum() - cpu_hold0) as f64 / 100.0 / secs;
    let hold_pg = (pg_cpu().saturating_sub(pg_hold0)) as f64 / 100.0 / secs;
    let mut sent = 0u64;
    let mut closed = 0u64;
    for (mut c, mut out) in children {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let w: Vec<&str> = line.split_whitespace().collect();
        sent += w[1].parse::<u64>().unwrap();
        closed += w[3].parse::<u64>().unwrap();
        let _ = c.wait();
    }
    let peak: Vec<String> = pids
        .iter()
        .map(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().to_owned()))
                .unwrap_or_default()
        })
        .collect();
    let received: u64 = addrs
        .iter()
        .map(|a| stats(a)["heartbeats_received"].as_u64().unwrap())
        .sum();
    println!(
        "heartbeats: sent {sent}, received {received}, dropped {}; sockets closed early {closed}; worst seen during hold: degraded {}, offline {}",
        sent as i64 - received as i64,
        worst.0,
        worst.1
    );
    println!(
        "control plane CPU: {:.1} s to accept {n}; {:.1}% of one core while holding them (heartbeat every {} ms), PostgreSQL server {:.1}% more; peak RSS {}",
        (cpu_hold0 - cpu0) as f64 / 100.0,
        hold_cpu * 100.0,
        hb.as_millis(),
        hold_pg * 100.0,
        peak.join(" / ")
    );
    for cp in &mut servers {
        let _ = cp.child.kill();
        let _ = cp.child.wait();
    }
    if let Backend::Postgres { .. } = backend {
        crate::postgres::drop_database(&db).await;
    }
}
