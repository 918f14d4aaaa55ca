//! A TCP load balancer on loopback, the way N control-plane replicas run
//! behind one address: each new connection goes to the next backend in
//! turn, skipping any that refuses it (a killed replica). Bytes are copied
//! both ways untouched, so WebSockets pass through.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Balancer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Balancer {
    /// Balances over `backends` (`host:port` each).
    pub async fn start(backends: Vec<String>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let backends = Arc::new(backends);
        let next = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                let backends = backends.clone();
                let first = next.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    for i in 0..backends.len() {
                        let to = &backends[(first + i) % backends.len()];
                        if let Ok(mut out) = tokio::net::TcpStream::connect(to).await {
                            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                            return;
                        }
                    }
                });
            }
        });
        Self { base, task }
    }
}
