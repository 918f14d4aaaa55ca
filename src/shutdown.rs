//! The one shutdown handler every long-running verb uses: the first SIGTERM
//! (what the kubelet sends) or SIGINT (Ctrl-C) asks the process to stop.
//!
//! A verb passes [`requested`] (or a [`watch`] receiver fed by it) to its
//! server or connection, which then closes its sockets with a close frame,
//! releases what it holds and returns, so `main` exits 0 within the
//! Pod's grace period. A second signal while stopping is not special: the
//! verbs bound their own drain time.

use tokio::sync::watch;
use tracing::info;

/// Which signal asked the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Terminate,
    Interrupt,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Terminate => "SIGTERM",
            Signal::Interrupt => "SIGINT",
        }
    }
}

/// Installs the SIGTERM and SIGINT handlers now, and returns a future that
/// resolves on the first of them. Installing before the future is polled
/// means a signal sent once the caller says it is listening is never the
/// default (killing) action. Call it inside the runtime.
pub fn install() -> impl Future<Output = Signal> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let handlers = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        );
        async move {
            match handlers {
                (Ok(mut term), Ok(mut int)) => tokio::select! {
                    _ = term.recv() => Signal::Terminate,
                    _ = int.recv() => Signal::Interrupt,
                },
                // No handler could be installed: Ctrl-C only.
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                    Signal::Interrupt
                }
            }
        }
    }
    #[cfg(not(unix))]
    async move {
        let _ = tokio::signal::ctrl_c().await;
        Signal::Interrupt
    }
}

/// [`install`], logged: resolves on the first signal after saying which.
pub fn requested() -> impl Future<Output = ()> + Send + 'static {
    let sig = install();
    async move {
        let sig = sig.await;
        info!(signal = sig.name(), "shutdown requested");
    }
}

/// [`requested`] as a receiver that turns `true` on the first signal (for
/// code that takes a `watch` shutdown, like the operator runtime).
pub fn watch() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    let sig = requested();
    tokio::spawn(async move {
        sig.await;
        tx.send_replace(true);
    });
    rx
}
