//! A real control-plane process and simulated operators (hello, a
//! 10-resource snapshot), shared by the connection and reconnect benches.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use exo::controlplane::Store;
use exo::wire::{self, Frame, Hello, HostMeta, Resource, ResourceKey, ResourceKind};

pub struct Cp {
    pub child: Child,
    pub addr: String,
}

pub fn start_cp(db: &std::path::Path, listen: &str) -> Cp {
    start_cp_with(db, listen, &[])
}

pub fn start_cp_with(db: impl AsRef<std::ffi::OsStr>, listen: &str, extra: &[&str]) -> Cp {
    let mut child = Command::new(env!("CARGO_BIN_EXE_exo"))
        .arg("control-plane")
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", listen])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .trim_start_matches("listening on http://")
        .to_owned();
    Cp { child, addr }
}

pub fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

pub fn res(i: usize) -> Resource {
    Resource {
        key: ResourceKey {
            kind: ResourceKind::Agent,
            namespace: "bench".into(),
            name: format!("a{i}"),
        },
        uid: wire::random_id(),
        resource_version: "1".into(),
        generation: Some(1),
        created: None,
        phase: Some("Active".into()),
        labels: Default::default(),
        spec: serde_json::json!({"runtime": {"image": "r@sha256:0"}}),
        status: serde_json::json!({"phase": "Active"}),
    }
}

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects, says hello, sends a 10-resource snapshot; returns the socket.
pub async fn sim_connect(addr: &str, token: &str) -> Result<Socket, String> {
    sim_connect_as(addr, token, &[]).await
}

/// Connects and says hello; returns the socket after the welcome.
pub async fn sim_hello(addr: &str, token: &str) -> Result<Socket, String> {
    hello_as(addr, token, &[]).await
}

/// [`sim_connect`], advertising `capabilities` in the hello.
pub async fn sim_connect_as(
    addr: &str,
    token: &str,
    capabilities: &[&str],
) -> Result<Socket, String> {
    let mut ws = hello_as(addr, token, capabilities).await?;
    let snap = Frame::Snapshot(wire::SnapshotChunk {
        snapshot_id: wire::random_id(),
        chunk: 0,
        last: true,
        resources: (0..10).map(res).collect(),
    });
    ws.send(Message::Text(snap.to_json().unwrap().into()))
        .await
        .map_err(|e| e.to_string())?;
    Ok(ws)
}

async fn hello_as(addr: &str, token: &str, capabilities: &[&str]) -> Result<Socket, String> {
    let mut req = format!("ws://{addr}/api/v1/connect")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .map_err(|e| e.to_string())?;
    let hello = Frame::Hello(Hello {
        protocol: 1,
        agent_version: "bench".into(),
        boot_id: wire::random_id(),
        connection_id: wire::random_id(),
        host: HostMeta::default(),
        capabilities: capabilities.iter().map(|c| (*c).to_owned()).collect(),
    });
    ws.send(Message::Text(hello.to_json().unwrap().into()))
        .await
        .map_err(|e| e.to_string())?;
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(_))) => break,
            Some(Ok(_)) => {}
            other => return Err(format!("no welcome: {other:?}")),
        }
    }
    Ok(ws)
}

/// Creates `n` deployments in `db` (a SQLite path or a PostgreSQL URL) and
/// returns their tokens.
pub async fn tokens(db: &str, n: usize) -> Vec<String> {
    let store = Store::connect(db).await.unwrap();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (_, t) = store.create_deployment(&format!("d{i}")).await.unwrap();
        out.push(t.expose().to_owned());
    }
    out
}

pub fn stats(addr: &str) -> serde_json::Value {
    serde_json::from_str(&exo_http_get(addr, "/api/v1/stats")).unwrap()
}

/// `(connected with 10 resources, online, degraded, offline)` per the API.
/// A replica lists every deployment of the shared database but has the
/// resources of only those it holds, so the first figure of a replica
/// counts what it holds.
pub fn states(addr: &str) -> (usize, usize, usize, usize) {
    let v: serde_json::Value =
        serde_json::from_str(&exo_http_get(addr, "/api/v1/deployments")).unwrap();
    let ds = v["deployments"].as_array().unwrap();
    let count = |f: &dyn Fn(&serde_json::Value) -> bool| ds.iter().filter(|d| f(d)).count();
    (
        count(&|d| d["connected"] == true && d["resources"] == 10),
        count(&|d| d["state"] == "online"),
        count(&|d| d["state"] == "degraded"),
        count(&|d| d["state"] == "offline"),
    )
}

/// CPU time (utime + stime, in clock ticks) of `pid`; 0 once it is gone.
pub fn cpu_ticks(pid: u32) -> u64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// The pids of every PostgreSQL server process on the machine (the
/// postmaster, its background workers and one backend per connection).
pub fn postgres_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "postgres")
        })
        .collect()
}

/// Child-process mode: `count` simulated operators from line `start` of the
/// token file; each sends a heartbeat every `hb` until `hold` after all are
/// connected, keeps answering pings 3 s more, then reports on stdout.
pub fn exo_http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    r.split_once("\r\n\r\n")
        .map(|x| x.1.to_owned())
        .unwrap_or_default()
}
