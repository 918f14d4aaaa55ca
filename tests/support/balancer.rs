//! A TCP load balancer on loopback, the way N control-plane replicas run
//! behind one address: each new connection goes to the next backend in
//! turn, skipping any that refuses it (a killed replica). Bytes are copied
//! both ways untouched, so WebSockets pass through.
//!
//! It runs on a thread and runtime of its own: the tests call the API with
//! blocking requests from a current-thread runtime, which would otherwise
//! stop it relaying (a command posted that way would never reach an
//! operator connected through it).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Balancer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Balancer {
    /// Balances over `backends` (`host:port` each).
    pub fn start(backends: Vec<String>) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tokio::select! {
                    _ = stopped => {}
                    () = accept(listener, Arc::new(backends)) => {}
                }
            });
        });
        Self {
            base,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

async fn accept(listener: tokio::net::TcpListener, backends: Arc<Vec<String>>) {
    let next = AtomicUsize::new(0);
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
}
