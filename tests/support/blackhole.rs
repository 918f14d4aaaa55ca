//! A TCP proxy on loopback that can stop forwarding, in both directions,
//! without closing anything: what a blackholed socket (a dead NAT entry, a
//! firewall dropping packets) looks like from either end. What was read
//! while paused is held and forwarded once it resumes.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Blackhole {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    paused: tokio::sync::watch::Sender<bool>,
}

impl Blackhole {
    /// Forwards every connection to `upstream` (`host:port`), on the
    /// caller's runtime.
    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (paused, _) = tokio::sync::watch::channel(false);
        let p = paused.clone();
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pump(cr, sw, p.subscribe()));
                tokio::spawn(pump(sr, cw, p.subscribe()));
            }
        });
        Blackhole { base, paused }
    }

    /// Stops (`true`) or resumes forwarding on every connection, new ones
    /// included.
    pub fn pause(&self, on: bool) {
        self.paused.send_replace(on);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut paused: tokio::sync::watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if paused.wait_for(|p| !*p).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
