//! The connection loop: watch, dial, hello/welcome, snapshot, deltas,
//! heartbeats, requests; reconnect with backoff.
//!
//! Guarantees:
//! - The first snapshot of a connection is sent only once every watched kind
//!   has been listed; watch events keep being folded in while disconnected,
//!   so the snapshot after a reconnect is current.
//! - Heartbeats, acks and results go through their own channel which the
//!   writer always serves before data frames: a big snapshot or a burst of
//!   deltas cannot starve them (the data channel is bounded and pushes back
//!   on the watch side instead).
//! - Transient failures redial with capped exponential backoff and full
//!   jitter, reset after a connection that stayed up `healthy_after`. A 401,
//!   a revoked token, an unsupported protocol version or an eviction waits
//!   `fatal_retry` instead: never a hot loop.
//! - Losing an established connection logs `error!` with the stable field
//!   `alert = "upstream_disconnected"` for ops alerting, and is counted in
//!   the health handle with its [`LossCause`].
//! - A socket on which nothing (frame or ping) arrived for `read_timeout` is
//!   given up and redialled. The check runs beside the session, not inside
//!   its loop, so a session stuck on a write the peer never reads is given
//!   up too.
//! - Alerts from the [`AlertQueue`] go out after the connection's first
//!   snapshot is complete, before data frames, and only to a control plane
//!   whose `welcome` says it takes them (`alerts` module).

use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::{error, info, warn};

mod copy;
mod requests;
mod session;
mod watch;
mod writer;

use session::Ctx;

use crate::alerts::{self, AlertQueue};
use crate::upstream::UpstreamError;
use crate::upstream::backoff::{Backoff, random_u64};
use crate::upstream::config::UpstreamConfig;
use crate::upstream::health::{ConnState, HealthHandle, LossCause};
use crate::upstream::tracker::{Tracker, WatchEvent};
use crate::wire::{self, Frame, HostMeta, ResourceKind, close};

/// The kinds streamed on the wire (Rollouts, Tenants, Apps and
/// AnalysisRuns only where they can be listed).
pub const WIRE_KINDS: [ResourceKind; 8] = [
    ResourceKind::Agent,
    ResourceKind::Tool,
    ResourceKind::AgentFS,
    ResourceKind::Pod,
    ResourceKind::Rollout,
    ResourceKind::Tenant,
    ResourceKind::App,
    ResourceKind::AnalysisRun,
];

type Events = mpsc::Receiver<(ResourceKind, WatchEvent)>;

/// Discovery fed from outside for some wire kinds: under `operator run`,
/// the operator's own caches (`operator::upstream_feed`), so the process
/// runs one watch per kind. The connection watches the other kinds itself.
#[derive(Debug)]
pub struct Feed {
    pub kinds: Vec<ResourceKind>,
    /// Watch-shaped events of those kinds: `Init`, `InitApply`s and
    /// `InitDone` for every (re)list, then `Apply` and `Delete`.
    pub events: Events,
}

/// What the writer task is told.
#[derive(Debug)]
enum Out {
    Frame(Box<Frame>),
    Close(u16, String),
}

enum End {
    Shutdown,
    /// The token file changed while connected: close and dial again at once
    /// with the new token (a rotation, not a failure).
    Redial(String),
    Retry {
        reason: String,
        /// `Some` for refusals that will repeat: wait `fatal_retry`.
        fatal: Option<ConnState>,
        was_connected: bool,
        cause: LossCause,
    },
}

fn retry(reason: impl Into<String>, was_connected: bool) -> End {
    End::Retry {
        reason: reason.into(),
        fatal: None,
        was_connected,
        cause: LossCause::Error,
    }
}

fn classify_close(code: u16, reason: &str) -> End {
    let fatal = match code {
        close::EVICTED => Some(ConnState::Evicted),
        close::TOKEN_REVOKED => Some(ConnState::Unauthorized),
        close::UNSUPPORTED_VERSION => Some(ConnState::Incompatible),
        _ => None,
    };
    End::Retry {
        reason: format!("closed by the control plane: {code} {reason}"),
        fatal,
        was_connected: true,
        cause: LossCause::Closed,
    }
}

/// Marks the health `Stopped` when the connection's task ends, however.
struct StopOnDrop(HealthHandle);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.update(|h| h.state(ConnState::Stopped));
    }
}

/// Resolves once nothing arrived from the server for `limit`.
async fn silence(health: &HealthHandle, limit: Duration) {
    let step = (limit / 4).clamp(Duration::from_millis(50), Duration::from_millis(500));
    loop {
        tokio::time::sleep(step).await;
        if health.last_event_age().is_some_and(|age| age >= limit) {
            return;
        }
    }
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_default()
}

/// A health handle with a fresh `boot_id`, to pass to [`run`] and to the
/// operator's `/health` endpoint.
pub fn health_handle() -> HealthHandle {
    HealthHandle::new(&wire::random_id())
}

/// Runs the upstream connection until `shutdown` resolves. Call it on the
/// leader only: the control plane keeps one connection per deployment and a
/// second one evicts the first.
pub async fn run(
    client: kube::Client,
    cfg: UpstreamConfig,
    health: HealthHandle,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), UpstreamError> {
    // Nobody raises alerts into this queue; its sink is dropped here.
    let (_, alerts) = alerts::channel(1);
    run_with_alerts(client, cfg, health, alerts, shutdown).await
}

/// [`run`], also sending the alerts raised through the sink of `alerts`
/// (made by [`alerts::channel`]).
pub async fn run_with_alerts(
    client: kube::Client,
    cfg: UpstreamConfig,
    health: HealthHandle,
    alerts: AlertQueue,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), UpstreamError> {
    run_fed(client, cfg, health, alerts, None, shutdown).await
}

/// [`run_with_alerts`], with the kinds of `feed` taken from it rather than
/// from watches of the connection's own.
pub async fn run_fed(
    client: kube::Client,
    cfg: UpstreamConfig,
    health: HealthHandle,
    alerts: AlertQueue,
    feed: Option<Feed>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), UpstreamError> {
    cfg.ws_url()?;
    health.update(|h| h.wedged_after(cfg.wedged_after));
    // Aborted (a lost Lease) or returning: no longer connected, so /health
    // cannot call a connection that is gone wedged.
    let _stopped = StopOnDrop(health.clone());
    let boot_id = health
        .report()
        .map(|r| r.boot_id)
        .unwrap_or_else(wire::random_id);
    let kubernetes_version = client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .unwrap_or_default();
    let host = HostMeta {
        hostname: hostname(),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        namespace: cfg.namespace.clone().unwrap_or_default(),
        kubernetes_version,
    };

    let (ev_tx, mut ev_rx) = mpsc::channel(1024);
    let mut watches = JoinSet::new();
    let fed: Vec<ResourceKind> = feed.as_ref().map(|f| f.kinds.clone()).unwrap_or_default();
    if let Some(mut feed) = feed {
        let tx = ev_tx.clone();
        watches.spawn(async move {
            while let Some(e) = feed.events.recv().await {
                if tx.send(e).await.is_err() {
                    break;
                }
            }
        });
    }
    let mut kinds = fed.clone();
    kinds.extend(watch::spawn_own(&mut watches, &client, &cfg, &fed, ev_tx).await);
    if !fed.is_empty() {
        info!(kinds = ?fed.iter().map(|k| k.as_str()).collect::<Vec<_>>(), "upstream: streaming the operator's caches");
    }

    // Only the kinds streamed: one that cannot be listed must not hold up
    // the first snapshot forever.
    let mut tracker = Tracker::new(kinds);
    let mut backoff = Backoff::new(cfg.backoff_base, cfg.backoff_max);
    let shutdown = shutdown.fuse();
    tokio::pin!(shutdown);

    info!(url = %cfg.base_url, namespace = ?cfg.namespace, "upstream: waiting for the first list of every kind");
    while !tracker.ready() {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            ev = ev_rx.recv() => match ev {
                Some((k, e)) => { tracker.on_event(k, e); }
                None => return Err(UpstreamError::WatchesEnded),
            },
        }
    }

    let ctx = Ctx {
        client,
        cfg,
        health,
        boot_id,
        host,
        dialled_with: std::sync::Mutex::new(None),
        alerts,
    };
    loop {
        let started = Instant::now();
        let end = ctx.session(&mut tracker, &mut ev_rx, &mut shutdown).await;
        let (reason, fatal, was_connected) = match end {
            End::Shutdown => {
                ctx.health.update(|h| h.state(ConnState::Stopped));
                info!("upstream: stopped");
                return Ok(());
            }
            End::Redial(reason) => {
                info!(%reason, "upstream: redialling with the rotated token");
                ctx.health.update(|h| h.closed(&reason));
                backoff.reset();
                continue;
            }
            End::Retry {
                reason,
                fatal,
                was_connected,
                cause,
            } => {
                if was_connected {
                    ctx.health.update(|h| h.lost(cause));
                }
                (reason, fatal, was_connected)
            }
        };
        if was_connected && started.elapsed() >= ctx.cfg.healthy_after {
            backoff.reset();
        }
        let (delay, state) = match fatal {
            Some(state) => (ctx.cfg.fatal_retry, state),
            None => {
                if was_connected {
                    backoff.after_loss(ctx.cfg.reconnect_spread);
                }
                (backoff.next_delay(random_u64()), ConnState::Backoff)
            }
        };
        let retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        if was_connected || fatal.is_some() {
            error!(alert = "upstream_disconnected", %reason, retry_in_ms, state = ?state, "upstream connection lost");
        } else {
            warn!(%reason, retry_in_ms, "upstream dial failed");
        }
        ctx.health.update(|h| {
            if was_connected {
                h.closed(&reason);
            } else {
                h.error(&reason);
            }
            h.retry_at(state, Instant::now() + delay);
        });
        let sleep = tokio::time::sleep(delay);
        tokio::pin!(sleep);
        // A refused token is not retried until `fatal_retry`, unless the
        // token file now holds another token (the Secret was rotated).
        let watch_file = state == ConnState::Unauthorized && ctx.cfg.token_file.is_some();
        let mut file_tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                _ = file_tick.tick(), if watch_file => {
                    if ctx.token_changed(true) {
                        info!("upstream: the token file changed; dialling with the new token");
                        break;
                    }
                }
                _ = &mut shutdown => {
                    ctx.health.update(|h| h.state(ConnState::Stopped));
                    return Ok(());
                }
                ev = ev_rx.recv() => match ev {
                    Some((k, e)) => {
                        tracker.on_event(k, e);
                        let n = tracker.len();
                        ctx.health.update(|h| h.watch_event(n));
                    }
                    None => return Err(UpstreamError::WatchesEnded),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_connection_task_is_never_reported_wedged() {
        let h = HealthHandle::new("b");
        h.update(|w| {
            w.wedged_after(Duration::from_millis(1));
            w.connected("d", "c");
        });
        let guard = StopOnDrop(h.clone());
        std::thread::sleep(Duration::from_millis(5));
        assert!(h.report().unwrap().wedged);
        // What a lost Lease does to the leader task: drop it mid-way.
        drop(guard);
        let r = h.report().unwrap();
        assert_eq!(
            (r.state, r.wedged, r.http_status()),
            (ConnState::Stopped, false, 200)
        );
    }
}
