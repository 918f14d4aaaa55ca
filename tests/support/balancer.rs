//! A TCP load balancer on loopback, the way N control-plane replicas run
//! behind one address: each new connection goes to the next backend in
//! turn, skipping any that refuses it (a killed replica). Bytes are copied
//! both ways untouched, so WebSockets pass through.
//!
//! [`Balancer::set_down`] makes it drop every connection at once, the way a
//! backend that went away looks to a client (the chaos tests put one in
//! front of the git daemon).
//!
//! It runs on a thread and runtime of its own: the tests call the API with
//! blocking requests from a current-thread runtime, which would otherwise
//! stop it relaying (a command posted that way would never reach an
//! operator connected through it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub struct Balancer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    down: Arc<AtomicBool>,
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
        let down = Arc::new(AtomicBool::new(false));
        let is_down = down.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tokio::select! {
                    _ = stopped => {}
                    () = accept(listener, Arc::new(backends), is_down) => {}
                }
            });
        });
        Self {
            base,
            down,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// While down, every new connection is closed at once and the open
    /// ones are cut.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }
}

async fn accept(
    listener: tokio::net::TcpListener,
    backends: Arc<Vec<String>>,
    down: Arc<AtomicBool>,
) {
    let next = AtomicUsize::new(0);
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        if down.load(Ordering::SeqCst) {
            drop(inbound);
            continue;
        }
        let down = down.clone();
        let backends = backends.clone();
        let first = next.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            for i in 0..backends.len() {
                let to = &backends[(first + i) % backends.len()];
                if let Ok(mut out) = tokio::net::TcpStream::connect(to).await {
                    let cut = async {
                        while !down.load(Ordering::SeqCst) {
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        }
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut out) => {}
                        () = cut => {}
                    }
                    return;
                }
            }
        });
    }
}
