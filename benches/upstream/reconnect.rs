//! Reconnect spread after a control-plane restart, with the operator's
//! policy and with plain backoff (see main.rs).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;

use exo::upstream::backoff::{Backoff, random_u64};

use crate::sim::{sim_connect, start_cp, tokens};
use crate::summary;

pub async fn reconnect(n: usize, spread: bool) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cp.sqlite");
    let toks = tokens(&db.display().to_string(), n).await;
    let mut cp = start_cp(&db, "127.0.0.1:0");
    let addr = cp.addr.clone();
    let restarted_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Duration, u32)>();
    let (up_tx, mut up_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    for t in toks {
        let addr = addr.clone();
        let tx = tx.clone();
        let up_tx = up_tx.clone();
        let restarted_at = restarted_at.clone();
        tokio::spawn(async move {
            let mut ws = sim_connect(&addr, &t).await.unwrap();
            let _ = up_tx.send(());
            // Wait for the server to go away.
            while let Some(Ok(_)) = ws.next().await {}
            let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(60));
            if spread {
                // What `exo::upstream::run` does after losing a connection.
                b.after_loss(
                    exo::upstream::UpstreamConfig::new(
                        "http://x",
                        exo::wire::token::SecretToken::new("x"),
                    )
                    .reconnect_spread,
                );
            }
            let mut attempts = 0;
            loop {
                tokio::time::sleep(b.next_delay(random_u64())).await;
                attempts += 1;
                if sim_connect(&addr, &t).await.is_ok() {
                    let since = restarted_at
                        .lock()
                        .unwrap()
                        .map(|r| r.elapsed())
                        .unwrap_or_default();
                    let _ = tx.send((since, attempts));
                    return;
                }
            }
        });
    }
    for _ in 0..n {
        up_rx.recv().await.unwrap();
    }
    let _ = cp.child.kill();
    let _ = cp.child.wait();
    let killed = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    cp = start_cp(&db, &addr);
    *restarted_at.lock().unwrap() = Some(Instant::now());
    let down = killed.elapsed();
    let mut times = Vec::new();
    let mut attempts = Vec::new();
    for _ in 0..n {
        let (d, a) = rx.recv().await.unwrap();
        times.push(d.as_secs_f64() * 1000.0);
        attempts.push(a as f64);
    }
    println!(
        "reconnect: control plane down for {:.1} s",
        down.as_secs_f64()
    );
    let mut buckets = vec![0usize; 1];
    for t in &times {
        let b = (*t / 1000.0) as usize;
        if buckets.len() <= b {
            buckets.resize(b + 1, 0);
        }
        buckets[b] += 1;
    }
    let max = buckets.iter().copied().max().unwrap_or(0);
    println!(
        "reconnects per 1 s bucket after the restart ({}): {:?}; largest bucket {:.1}% of {n}",
        if spread {
            "operator policy"
        } else {
            "plain backoff, no loss spread"
        },
        buckets,
        max as f64 * 100.0 / n as f64
    );
    summary("reconnect time after restart", times, "ms");
    summary("dial attempts per client", attempts, "");
    let _ = cp.child.kill();
    let _ = cp.child.wait();
}
