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
//!   `alert = "upstream_disconnected"` for ops alerting.
//! - Alerts from the [`AlertQueue`] go out after the connection's first
//!   snapshot is complete, before data frames, and only to a control plane
//!   whose `welcome` says it takes them (`alerts` module).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{FutureExt, SinkExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::{debug, error, info, warn};

use super::UpstreamError;
use super::actions;
use super::alerts::{self, AlertQueue};
use super::backoff::{Backoff, random_u64};
use super::config::UpstreamConfig;
use super::health::{ConnState, HealthHandle};
use super::outbox::{DataItem, Outbox};
use super::tracker::{Tracker, WatchEvent, to_wire};
use crate::crd::{Agent, AgentFS, Tool};
use crate::wire::{
    self, AuditRecord, CommandAck, CommandResult, Frame, Heartbeat, Hello, HostMeta,
    PROTOCOL_VERSION, ResourceKind, close,
};

/// The kinds streamed on the wire.
pub const WIRE_KINDS: [ResourceKind; 4] = [
    ResourceKind::Agent,
    ResourceKind::Tool,
    ResourceKind::AgentFS,
    ResourceKind::Pod,
];

type Events = mpsc::Receiver<(ResourceKind, WatchEvent)>;

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
    },
}

fn retry(reason: impl Into<String>, was_connected: bool) -> End {
    End::Retry {
        reason: reason.into(),
        fatal: None,
        was_connected,
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
    }
}

fn spawn_watch<K>(
    set: &mut JoinSet<()>,
    api: Api<K>,
    kind: ResourceKind,
    wc: watcher::Config,
    tx: mpsc::Sender<(ResourceKind, WatchEvent)>,
) where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    set.spawn(async move {
        let mut stream = watcher(api, wc).default_backoff().boxed();
        while let Some(ev) = stream.next().await {
            let ev = match ev {
                Ok(ev) => ev,
                Err(e) => {
                    warn!(kind = kind.as_str(), error = %e, "watch failed; retrying with backoff");
                    continue;
                }
            };
            let conv = |o: &K| match to_wire(kind, o) {
                Ok(r) => Some(r),
                Err(e) => {
                    warn!(kind = kind.as_str(), error = %e, "cannot encode object; skipped");
                    None
                }
            };
            let mapped = match ev {
                watcher::Event::Init => Some(WatchEvent::Init),
                watcher::Event::InitApply(o) => conv(&o).map(WatchEvent::InitApply),
                watcher::Event::InitDone => Some(WatchEvent::InitDone),
                watcher::Event::Apply(o) => conv(&o).map(WatchEvent::Apply),
                watcher::Event::Delete(o) => conv(&o).map(WatchEvent::Delete),
            };
            if let Some(m) = mapped
                && tx.send((kind, m)).await.is_err()
            {
                break;
            }
        }
    });
}

fn api<K>(client: &kube::Client, ns: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
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
    cfg.ws_url()?;
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
    let ns = cfg.namespace.as_deref();
    let wc = watcher::Config::default();
    spawn_watch(
        &mut watches,
        api::<Agent>(&client, ns),
        ResourceKind::Agent,
        wc.clone(),
        ev_tx.clone(),
    );
    spawn_watch(
        &mut watches,
        api::<Tool>(&client, ns),
        ResourceKind::Tool,
        wc.clone(),
        ev_tx.clone(),
    );
    spawn_watch(
        &mut watches,
        api::<AgentFS>(&client, ns),
        ResourceKind::AgentFS,
        wc.clone(),
        ev_tx.clone(),
    );
    spawn_watch(
        &mut watches,
        api::<Pod>(&client, ns),
        ResourceKind::Pod,
        wc.labels(&cfg.pod_selector),
        ev_tx,
    );

    let mut tracker = Tracker::new(WIRE_KINDS);
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
            } => (reason, fatal, was_connected),
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

struct Ctx {
    client: kube::Client,
    cfg: UpstreamConfig,
    health: HealthHandle,
    boot_id: String,
    host: HostMeta,
    /// Hash of the token of the last dial, to notice a rotated token file.
    dialled_with: std::sync::Mutex<Option<String>>,
    alerts: AlertQueue,
}

impl Ctx {
    /// Whether the token file now holds a token other than the one of the
    /// last dial. A file that cannot be read counts as a change only when
    /// `unreadable_is_change` (a refused operator then dials and reports the
    /// problem; a connected one keeps its working connection).
    fn token_changed(&self, unreadable_is_change: bool) -> bool {
        if self.cfg.token_file.is_none() {
            return false;
        }
        let Ok(now) = self.cfg.current_token() else {
            return unreadable_is_change;
        };
        let last = self.dialled_with.lock().map(|g| g.clone()).unwrap_or(None);
        last.is_some_and(|h| h != now.hash())
    }

    async fn session<S>(&self, tracker: &mut Tracker, ev_rx: &mut Events, shutdown: &mut S) -> End
    where
        S: std::future::Future<Output = ()> + Unpin + futures::future::FusedFuture,
    {
        let cfg = &self.cfg;
        let connection_id = wire::random_id();
        self.health.update(|h| h.dialing());
        let mut req = match cfg.ws_url().map(|u| u.into_client_request()) {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return retry(format!("bad URL: {e}"), false),
            Err(e) => return retry(e.to_string(), false),
        };
        let token = match cfg.current_token() {
            Ok(t) => t,
            Err(e) => return retry(e.to_string(), false),
        };
        if let Ok(mut g) = self.dialled_with.lock() {
            *g = Some(token.hash());
        }
        let Ok(auth) = format!("Bearer {}", token.expose()).parse() else {
            return End::Retry {
                reason: "the token is not a valid header value".into(),
                fatal: Some(ConnState::Unauthorized),
                was_connected: false,
            };
        };
        req.headers_mut().insert("authorization", auth);
        let ws_cfg = WebSocketConfig::default()
            .max_message_size(Some(cfg.max_frame_bytes))
            .max_frame_size(Some(cfg.max_frame_bytes));
        let dial = tokio_tungstenite::connect_async_with_config(req, Some(ws_cfg), false);
        let ws = match tokio::time::timeout(cfg.dial_timeout, dial).await {
            Err(_) => return retry("dial timed out", false),
            Ok(Err(tungstenite::Error::Http(resp))) => {
                let status = resp.status();
                let fatal = matches!(status.as_u16(), 401 | 403).then_some(ConnState::Unauthorized);
                return End::Retry {
                    reason: format!("upgrade refused: HTTP {status}"),
                    fatal,
                    was_connected: false,
                };
            }
            Ok(Err(e)) => return retry(format!("dial: {e}"), false),
            Ok(Ok((ws, _))) => ws,
        };
        let (mut sink, mut stream) = ws.split();

        let hello = Frame::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            agent_version: cfg.agent_version.clone(),
            boot_id: self.boot_id.clone(),
            connection_id: connection_id.clone(),
            host: self.host.clone(),
        });
        if let Err(e) = send(&mut sink, &hello).await {
            return retry(e, false);
        }
        let welcome = loop {
            let msg = match tokio::time::timeout(cfg.dial_timeout, stream.next()).await {
                Err(_) => return retry("no welcome within the dial timeout", false),
                Ok(None) => return retry("closed before welcome", false),
                Ok(Some(Err(e))) => return retry(format!("read: {e}"), false),
                Ok(Some(Ok(m))) => m,
            };
            match msg {
                Message::Text(t) => match Frame::from_json(t.as_str()) {
                    Ok(Frame::Welcome(w)) => break w,
                    Ok(other) => {
                        return retry(format!("expected welcome, got {}", other.kind()), false);
                    }
                    Err(e) => return retry(format!("bad welcome: {e}"), false),
                },
                Message::Close(Some(cf)) => {
                    return classify_close(u16::from(cf.code), cf.reason.as_str());
                }
                Message::Close(None) => return retry("closed before welcome", false),
                _ => {}
            }
        };
        info!(deployment = %welcome.deployment, %connection_id, "upstream connected");
        self.health
            .update(|h| h.connected(&welcome.deployment, &connection_id));

        let count = Arc::new(AtomicU64::new(tracker.len() as u64));
        let (ctl_tx, ctl_rx) = mpsc::channel::<Out>(256);
        let (data_tx, data_rx) = mpsc::channel::<DataItem>(64);
        let outbox = Outbox::new(cfg.chunk_max_resources, cfg.chunk_max_bytes);
        // What the last connection sent without an acknowledgement may not
        // have arrived: it goes out again, first.
        self.alerts.requeue_unacked();
        let held = self.alerts.len();
        let alerts = if welcome.accepts_alerts {
            if held > 0 {
                info!(
                    alerts = held,
                    "upstream: sending held alerts after the snapshot"
                );
            }
            Some(self.alerts.clone())
        } else {
            if held > 0 {
                warn!(
                    alerts = held,
                    "upstream: the control plane does not take alerts; holding them"
                );
            }
            None
        };
        let mut writer = tokio::spawn(writer(
            sink,
            ctl_rx,
            data_rx,
            cfg.heartbeat_interval,
            count.clone(),
            self.health.clone(),
            outbox,
            alerts,
        ));
        let mut requests: JoinSet<()> = JoinSet::new();
        let end = self
            .steady(
                tracker,
                ev_rx,
                shutdown,
                &mut stream,
                &ctl_tx,
                &data_tx,
                &count,
                &mut writer,
                &mut requests,
            )
            .await;
        requests.abort_all();
        let goodbye = match &end {
            End::Shutdown => Some("operator shutting down"),
            End::Redial(_) => Some("token rotated; reconnecting"),
            End::Retry { .. } => None,
        };
        if let Some(reason) = goodbye {
            let _ = ctl_tx.send(Out::Close(close::NORMAL, reason.into())).await;
            let _ = tokio::time::timeout(Duration::from_secs(2), &mut writer).await;
        }
        writer.abort();
        end
    }

    #[allow(clippy::too_many_arguments)]
    async fn steady<S, R>(
        &self,
        tracker: &mut Tracker,
        ev_rx: &mut Events,
        shutdown: &mut S,
        stream: &mut R,
        ctl_tx: &mpsc::Sender<Out>,
        data_tx: &mpsc::Sender<DataItem>,
        count: &AtomicU64,
        writer: &mut tokio::task::JoinHandle<Result<(), String>>,
        requests: &mut JoinSet<()>,
    ) -> End
    where
        S: std::future::Future<Output = ()> + Unpin + futures::future::FusedFuture,
        R: futures::Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
    {
        let cfg = &self.cfg;
        if data_tx
            .send(DataItem::Snapshot(tracker.all()))
            .await
            .is_err()
        {
            return retry("writer stopped", true);
        }
        let mut snapshot_tick = tokio::time::interval_at(
            tokio::time::Instant::now() + cfg.snapshot_interval,
            cfg.snapshot_interval,
        );
        let mut idle_tick = tokio::time::interval(Duration::from_millis(500));
        let mut token_tick =
            tokio::time::interval(cfg.token_reload_interval.max(Duration::from_millis(10)));
        let watch_token = cfg.token_file.is_some();
        let mut last_rx = Instant::now();
        let mut attaches: std::collections::HashMap<String, super::attach::AttachHandle> =
            std::collections::HashMap::new();
        loop {
            tokio::select! {
                _ = &mut *shutdown => return End::Shutdown,
                res = &mut *writer => {
                    return match res {
                        Ok(Ok(())) => retry("writer stopped", true),
                        Ok(Err(e)) => retry(e, true),
                        Err(e) => retry(format!("writer task: {e}"), true),
                    };
                }
                ev = ev_rx.recv() => {
                    let Some((k, e)) = ev else {
                        return retry("watches ended", true);
                    };
                    let changes = tracker.on_event(k, e);
                    count.store(tracker.len() as u64, Ordering::Relaxed);
                    let n = tracker.len();
                    self.health.update(|h| h.watch_event(n));
                    for (op, r) in changes {
                        if data_tx.send(DataItem::Delta(op, r)).await.is_err() {
                            return retry("writer stopped", true);
                        }
                    }
                }
                _ = snapshot_tick.tick() => {
                    if data_tx.send(DataItem::Snapshot(tracker.all())).await.is_err() {
                        return retry("writer stopped", true);
                    }
                }
                _ = token_tick.tick(), if watch_token => {
                    if self.token_changed(false) {
                        return End::Redial("the token file holds a new token".into());
                    }
                }
                _ = idle_tick.tick() => {
                    if last_rx.elapsed() >= cfg.read_timeout {
                        return retry(format!("nothing from the control plane for {} s", cfg.read_timeout.as_secs()), true);
                    }
                }
                msg = stream.next() => {
                    last_rx = Instant::now();
                    self.health.update(|h| h.event());
                    let msg = match msg {
                        None => return retry("connection closed without a close frame", true),
                        Some(Err(e)) => return retry(format!("read: {e}"), true),
                        Some(Ok(m)) => m,
                    };
                    match msg {
                        Message::Close(Some(cf)) => return classify_close(u16::from(cf.code), cf.reason.as_str()),
                        Message::Close(None) => return retry("closed by the control plane", true),
                        Message::Text(t) => match Frame::from_json(t.as_str()) {
                            Ok(Frame::Command(req)) => {
                                let client = self.client.clone();
                                let tx = ctl_tx.clone();
                                requests.spawn(async move {
                                    let target = serde_json::to_value(&req.command).unwrap_or_default();
                                    let id = req.id.clone();
                                    let r = carry_out(&tx, &id, &req.actor, "command", target, req.deadline_ms, async {
                                        actions::run_command(&client, &req.command).await
                                    }).await;
                                    debug!(id, ok = r, "command done");
                                });
                            }
                            Ok(Frame::PodControl(req)) => {
                                let client = self.client.clone();
                                let tx = ctl_tx.clone();
                                requests.spawn(async move {
                                    let target = serde_json::json!({"namespace": req.namespace, "agent": req.agent, "action": req.action});
                                    let id = req.id.clone();
                                    let r = carry_out(&tx, &id, &req.actor, &format!("pod_control.{}", req.action.as_str()), target, req.deadline_ms, async {
                                        actions::pod_control(&client, req.action, &req.namespace, &req.agent).await
                                    }).await;
                                    debug!(id, ok = r, "pod control done");
                                });
                            }
                            Ok(Frame::AttachOpen(open)) => {
                                let tx = ctl_tx.clone();
                                let id = open.session.clone();
                                info!(session = %id, namespace = %open.namespace, agent = %open.agent, actor = %open.actor, "attach opened");
                                let h = super::attach::spawn(requests, self.client.clone(), open, move |f| {
                                    let tx = tx.clone();
                                    Box::pin(async move {
                                        let _ = tx.send(Out::Frame(Box::new(f))).await;
                                    })
                                });
                                attaches.insert(id, h);
                            }
                            Ok(Frame::AttachData(d)) => {
                                let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, d.data.as_bytes());
                                match (attaches.get(&d.session), bytes) {
                                    (Some(h), Ok(b)) => {
                                        if h.stdin.send(b).await.is_err() {
                                            attaches.remove(&d.session);
                                        }
                                    }
                                    _ => debug!(session = %d.session, "attach data for no session"),
                                }
                            }
                            Ok(Frame::AttachResize(r)) => {
                                if let Some(h) = attaches.get(&r.session) {
                                    let _ = h.resize.try_send((r.cols, r.rows));
                                }
                            }
                            Ok(Frame::AttachClose(c)) => {
                                // Dropping stdin ends the session's task.
                                attaches.remove(&c.session);
                            }
                            Ok(Frame::AlertAck(a)) => {
                                if !self.alerts.ack(&a.id) {
                                    debug!(id = %a.id, "ack for an alert not held");
                                }
                            }
                            Ok(other) => debug!(kind = other.kind(), "ignored frame from the control plane"),
                            Err(e) => {
                                let reason = format!("malformed frame from the control plane: {e}");
                                let _ = ctl_tx.send(Out::Close(close::PROTOCOL_ERROR, clip(&reason))).await;
                                return retry(reason, true);
                            }
                        },
                        _ => {}
                    }
                }
            }
        }
    }
}

fn clip(s: &str) -> String {
    s.chars().take(100).collect()
}

/// Acks, runs until the deadline, answers with a result and an audit record.
async fn carry_out<F>(
    tx: &mpsc::Sender<Out>,
    id: &str,
    actor: &str,
    action: &str,
    target: serde_json::Value,
    deadline_ms: u64,
    work: F,
) -> bool
where
    F: std::future::Future<Output = Result<serde_json::Value, actions::ActionError>>,
{
    let now = wire::now_ms();
    let result = if deadline_ms <= now {
        Err("deadline passed before the request arrived".to_owned())
    } else {
        let _ = tx
            .send(Out::Frame(Box::new(Frame::CommandAck(CommandAck {
                id: id.to_owned(),
            }))))
            .await;
        match tokio::time::timeout(Duration::from_millis(deadline_ms - now), work).await {
            Err(_) => Err("deadline exceeded".to_owned()),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(v)) => Ok(v),
        }
    };
    let ok = result.is_ok();
    let (value, err) = match result {
        Ok(v) => (v, None),
        Err(e) => (serde_json::Value::Null, Some(e)),
    };
    let audit = AuditRecord {
        at_ms: wire::now_ms(),
        actor: actor.to_owned(),
        action: action.to_owned(),
        target: target.to_string(),
        outcome: if ok {
            "ok".into()
        } else {
            err.clone().unwrap_or_default()
        },
        detail: serde_json::json!({ "request_id": id }),
    };
    let _ = tx
        .send(Out::Frame(Box::new(Frame::CommandResult(CommandResult {
            id: id.to_owned(),
            ok,
            result: value,
            error: err,
        }))))
        .await;
    let _ = tx.send(Out::Frame(Box::new(Frame::Audit(audit)))).await;
    ok
}

async fn send<W>(sink: &mut W, frame: &Frame) -> Result<(), String>
where
    W: futures::Sink<Message, Error = tungstenite::Error> + Unpin,
{
    let text = frame.to_json().map_err(|e| format!("encode: {e}"))?;
    sink.send(Message::Text(text.into()))
        .await
        .map_err(|e| format!("write: {e}"))
}

/// Sends control frames first, heartbeats on time, alerts once the first
/// snapshot is out (`alerts` is `None` when the control plane takes none),
/// and data frames from the outbox in between.
#[allow(clippy::too_many_arguments)]
async fn writer<W>(
    mut sink: W,
    mut ctl_rx: mpsc::Receiver<Out>,
    mut data_rx: mpsc::Receiver<DataItem>,
    heartbeat_interval: Duration,
    count: Arc<AtomicU64>,
    health: HealthHandle,
    mut outbox: Outbox,
    alerts: Option<AlertQueue>,
) -> Result<(), String>
where
    W: futures::Sink<Message, Error = tungstenite::Error> + Unpin,
{
    let mut hb = tokio::time::interval_at(
        tokio::time::Instant::now() + heartbeat_interval,
        heartbeat_interval,
    );
    let heartbeat = |count: &AtomicU64| {
        Frame::Heartbeat(Heartbeat {
            sent_at_ms: wire::now_ms(),
            resources: count.load(Ordering::Relaxed),
        })
    };
    // The control plane learns the cluster's state from the first snapshot;
    // alerts about it follow.
    let mut snapshot_sent = false;
    let alert_wake = async |q: &Option<AlertQueue>| match q {
        Some(q) => q.queued().await,
        None => std::future::pending().await,
    };
    loop {
        match ctl_rx.try_recv() {
            Ok(Out::Frame(f)) => {
                send(&mut sink, &f).await?;
                continue;
            }
            Ok(Out::Close(code, reason)) => {
                let _ = sink
                    .send(Message::Close(Some(CloseFrame {
                        code: CloseCode::from(code),
                        reason: reason.into(),
                    })))
                    .await;
                return Ok(());
            }
            Err(mpsc::error::TryRecvError::Disconnected) => return Ok(()),
            Err(mpsc::error::TryRecvError::Empty) => {}
        }
        if hb.tick().now_or_never().is_some() {
            send(&mut sink, &heartbeat(&count)).await?;
        }
        if snapshot_sent && let Some(a) = alerts.as_ref().and_then(AlertQueue::next_to_send) {
            send(&mut sink, &Frame::Alert(a)).await?;
            continue;
        }
        while outbox.queued() < 256 {
            match data_rx.try_recv() {
                Ok(item) => outbox.push(item),
                Err(_) => break,
            }
        }
        if let Some(frame) = outbox.next_frame() {
            send(&mut sink, &frame).await?;
            match &frame {
                Frame::Snapshot(c) if c.last => {
                    snapshot_sent = true;
                    health.update(|h| h.sent_snapshot());
                }
                Frame::Delta(_) => health.update(|h| h.sent_delta()),
                _ => {}
            }
            continue;
        }
        tokio::select! {
            biased;
            m = ctl_rx.recv() => match m {
                Some(Out::Frame(f)) => send(&mut sink, &f).await?,
                Some(Out::Close(code, reason)) => {
                    let _ = sink
                        .send(Message::Close(Some(CloseFrame {
                            code: CloseCode::from(code),
                            reason: reason.into(),
                        })))
                        .await;
                    return Ok(());
                }
                None => return Ok(()),
            },
            _ = hb.tick() => send(&mut sink, &heartbeat(&count)).await?,
            // Loops back to the top, which sends it.
            _ = alert_wake(&alerts), if snapshot_sent => {}
            item = data_rx.recv() => match item {
                Some(item) => outbox.push(item),
                None => return Ok(()),
            },
        }
    }
}
