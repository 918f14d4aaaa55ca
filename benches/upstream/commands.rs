//! Command round trip (see main.rs): `POST /api/v1/deployments/NAME/commands`
//! answered by a simulated operator, asked of the replica that holds its
//! connection, of another replica (one hop), and of a single SQLite
//! process, in the same run.

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::Message;

use exo::wire::{self, Frame};

use crate::sim::{Cp, sim_connect_as, start_cp_with, states, tokens};
use crate::summary;

/// One kept-alive HTTP/1.1 connection to a server.
struct Http {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl Http {
    async fn open(addr: &str) -> Self {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        Self { sender }
    }

    async fn post(&mut self, path: &str, body: &str) -> (u16, String) {
        let req = hyper::Request::post(path)
            .header("host", "bench")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap();
        self.sender.ready().await.unwrap();
        let res = self.sender.send_request(req).await.unwrap();
        let status = res.status().as_u16();
        let body = res.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }
}

/// A simulated operator on `addr` that answers every command at once.
async fn answering_operator(addr: &str, token: &str) {
    let ws = sim_connect_as(addr, token, &[wire::fs::CAP_MOUNT_FILESYSTEMS])
        .await
        .unwrap();
    let (mut sink, mut stream) = ws.split();
    tokio::spawn(async move {
        let mut beat = tokio::time::interval(Duration::from_secs(2));
        loop {
            let reply = tokio::select! {
                _ = beat.tick() => Frame::Heartbeat(wire::Heartbeat { sent_at_ms: wire::now_ms(), resources: 10 }),
                m = stream.next() => match m {
                    Some(Ok(Message::Text(t))) => match Frame::from_json(&t) {
                        Ok(Frame::Command(c)) => Frame::CommandResult(wire::CommandResult {
                            id: c.id,
                            ok: true,
                            result: serde_json::json!({ "volumes": [] }),
                            error: None,
                        }),
                        _ => continue,
                    },
                    Some(Ok(_)) => continue,
                    _ => return,
                },
            };
            if sink
                .send(Message::Text(reply.to_json().unwrap().into()))
                .await
                .is_err()
            {
                return;
            }
        }
    });
}

const BODY: &str = r#"{"command":{"name":"agentfs_list"}}"#;

async fn one(http: &mut Http) -> f64 {
    let t = Instant::now();
    let (status, body) = http.post("/api/v1/deployments/d0/commands", BODY).await;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""ok":true"#), "{body}");
    ms
}

/// `n` commands for an operator on the last of `servers`: asked of it and,
/// when there are several, of the first, interleaved.
async fn measure(label: &str, servers: &[Cp], token: &str, n: usize) {
    let holder = servers.last().unwrap();
    answering_operator(&holder.addr, token).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while servers.iter().any(|cp| states(&cp.addr).1 != 1) {
        assert!(
            Instant::now() < deadline,
            "{label}: d0 never online everywhere"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut same = Http::open(&holder.addr).await;
    let mut hop = match servers.len() {
        1 => None,
        _ => Some(Http::open(&servers[0].addr).await),
    };
    for _ in 0..50 {
        one(&mut same).await;
        if let Some(h) = hop.as_mut() {
            one(h).await;
        }
    }
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        a.push(one(&mut same).await);
        if let Some(h) = hop.as_mut() {
            b.push(one(h).await);
        }
    }
    summary(
        &format!("{label}: command round trip, same server"),
        a,
        "ms",
    );
    if hop.is_some() {
        summary(
            &format!("{label}: command round trip, across replicas"),
            b,
            "ms",
        );
    }
}

pub async fn commands(n: usize) {
    // One SQLite process: the embedded default.
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("cp.sqlite").display().to_string();
    let token = tokens(&sqlite, 1).await.remove(0);
    let mut single = vec![start_cp_with(&sqlite, "127.0.0.1:0", &[])];
    measure("sqlite, one process", &single, &token, n).await;
    for cp in &mut single {
        let _ = cp.child.kill();
        let _ = cp.child.wait();
    }
    // Three replicas on PostgreSQL.
    let pg = crate::postgres::fresh_database("bench_cmd").await;
    let token = tokens(&pg, 1).await.remove(0);
    let mut replicas: Vec<Cp> = (0..3)
        .map(|i| start_cp_with(&pg, "127.0.0.1:0", &["--replica-id", &format!("r{i}")]))
        .collect();
    measure("postgres, 3 replicas", &replicas, &token, n).await;
    for cp in &mut replicas {
        let _ = cp.child.kill();
        let _ = cp.child.wait();
    }
    crate::postgres::drop_database(&pg).await;
}
