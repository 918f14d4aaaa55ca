//! The WebSocket endpoint: authenticate at upgrade, then one task per
//! connection that reads frames, writes requests and pings. Live tokens are
//! re-checked for all connections at once by [`token_checker`].
//!
//! Guarantees: a missing or unknown token gets HTTP 401 before any upgrade,
//! and the deployment comes from the token, never from the client. A
//! malformed, binary or oversized frame closes only that connection, with a
//! close code and a reason that names the problem. A socket that stops
//! answering pings is closed after the pong timeout. A revoked or expired
//! token closes its live connection within one token-check interval.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::App;
use super::disconnect::Trigger;
use super::live::ToSocket;
use super::model::{Authenticated, NewAudit};
use crate::wire::token::SecretToken;
use crate::wire::{self, Frame, PROTOCOL_VERSION, Welcome, close};

mod fleet;
mod frames;
pub mod updates;

pub fn bearer(headers: &HeaderMap) -> Option<SecretToken> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let t = v.strip_prefix("Bearer ")?.trim();
    (!t.is_empty()).then(|| SecretToken::new(t))
}

pub async fn connect(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let looked_up = match bearer(&headers) {
        Some(t) => Some(app.store.authenticate(&t).await),
        None => None,
    };
    let auth = match looked_up {
        Some(Ok(Some(auth))) => auth,
        Some(Err(e)) => {
            warn!(error = %e, "token lookup failed");
            return (StatusCode::SERVICE_UNAVAILABLE, "token lookup failed\n").into_response();
        }
        _ => {
            app.stats.auth_rejected.fetch_add(1, ORD);
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "missing, unknown, revoked or expired deployment token\n",
            )
                .into_response();
        }
    };
    // The frame limit is checked on whole messages, so the peer has finished
    // writing and reliably receives the 1009 close. tungstenite's own limit is
    // a hard cap above it that bounds memory: a message beyond that is cut
    // off mid-read, and its close may be lost to a TCP reset.
    let hard_cap = hard_cap(app.cfg.max_frame_bytes);
    // tungstenite reads into a 128 KiB buffer by default; most frames are
    // small, so 8 KiB cuts the memory of an idle connection (BENCHMARKS.md).
    ws.max_message_size(hard_cap)
        .max_frame_size(hard_cap)
        .read_buffer_size(8 * 1024)
        .on_upgrade(move |socket| async move {
            Session::run(app, auth, socket).await;
        })
}

/// The memory bound per message: four times the frame limit, at least 4 MiB.
pub fn hard_cap(max_frame_bytes: usize) -> usize {
    max_frame_bytes.saturating_mul(4).max(4 << 20)
}

const ORD: std::sync::atomic::Ordering = std::sync::atomic::Ordering::Relaxed;

/// The 1001 reason every live connection gets when the server stops.
pub const SHUTDOWN_REASON: &str = "control plane shutting down";

/// How long a sent close waits for the peer's close before the socket is
/// dropped. Dropping at once can reset the TCP connection with the close
/// frame still unread on the peer's side, which then sees 1006.
const CLOSE_HANDSHAKE: Duration = Duration::from_secs(1);

/// Reads (and discards) until the peer answers the close, or the socket
/// ends, or [`CLOSE_HANDSHAKE`] passes.
async fn closing_handshake(socket: &mut WebSocket) {
    let answered = async {
        while let Some(Ok(m)) = socket.recv().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_HANDSHAKE, answered).await;
}

/// Resolves once the server's shutdown flag is set, also when it was set
/// before the call.
async fn stopped(flag: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = flag.wait_for(|v| *v).await;
}

/// One open operator socket, counted in [`App::open_sockets`].
struct Open(Arc<App>);

impl Open {
    fn new(app: &Arc<App>) -> Self {
        app.open_sockets.send_modify(|n| *n += 1);
        Open(app.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0
            .open_sockets
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

struct Session {
    app: Arc<App>,
    auth: Authenticated,
    session: String,
    connection_id: Option<String>,
    boot_id: Option<String>,
    /// The operator's host name from `hello`.
    host: String,
    /// This connection's own queue to its socket (acknowledgements). Weak:
    /// the registry's sender alone decides when the queue ends.
    out: Option<mpsc::WeakUnboundedSender<ToSocket>>,
    /// The `incident_update`s sent and not answered (`updates`).
    updates: updates::InFlight,
    /// A fleet projection write failed: the next Rollout frame writes the
    /// whole set (`fleet`).
    fleet_dirty: bool,
}

enum Outcome {
    /// Close the socket with this code and reason.
    Close(u16, String),
    /// The peer closed or the socket broke.
    Gone(String),
    /// The peer said goodbye (close 1000).
    Bye(String),
}

impl Session {
    async fn run(app: Arc<App>, auth: Authenticated, mut socket: WebSocket) {
        // Counted until the close is sent and the record written: `serve`
        // waits for every counted socket before it returns.
        let _open = Open::new(&app);
        app.stats.connections_accepted.fetch_add(1, ORD);
        let mut s = Session {
            app,
            auth,
            session: wire::random_id(),
            connection_id: None,
            boot_id: None,
            host: String::new(),
            out: None,
            updates: updates::InFlight::default(),
            fleet_dirty: false,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let mut stopping = s.app.shutdown.subscribe();
        let shutting_down = || Outcome::Close(close::GOING_AWAY, SHUTDOWN_REASON.into());
        let handshake = tokio::select! {
            r = s.handshake(&mut socket, tx) => r,
            () = stopped(&mut stopping) => Err(shutting_down()),
        };
        let outcome = match handshake {
            Ok(()) => s.serve(&mut socket, rx).await,
            Err(o) => o,
        };
        // Only an unclean end raises the disconnect alert at once.
        let clean = match &outcome {
            Outcome::Bye(_) => true,
            Outcome::Close(..) => *s.app.shutdown.borrow(),
            Outcome::Gone(_) => false,
        };
        let reason = match outcome {
            Outcome::Close(code, reason) => {
                let reason = close::reason(&reason);
                if code != close::EVICTED {
                    s.app.stats.closed_by_server.fetch_add(1, ORD);
                }
                let sent = socket
                    .send(Message::Close(Some(CloseFrame {
                        code,
                        reason: Utf8Bytes::from(reason.clone()),
                    })))
                    .await;
                if sent.is_ok() {
                    closing_handshake(&mut socket).await;
                }
                format!("{code} {reason}")
            }
            Outcome::Gone(r) | Outcome::Bye(r) => r,
        };
        let dep = s.auth.deployment.clone();
        let was_live = s.app.live.unregister(&dep, &s.session, &reason);
        s.app.live.fail_session(&s.session);
        if let Some(r) = &s.app.replica
            && let Err(e) = r.release(&dep, &s.session, &reason).await
        {
            warn!(deployment = %dep, error = %e, "connection release failed; the lease reaper or the next claim ends it");
        }
        if was_live {
            s.app.store.fleet_changed(&dep).await;
        }
        if was_live {
            let lost = Trigger::Lost {
                clean,
                reason: reason.clone(),
            };
            s.app
                .on_connection(
                    &dep,
                    lost,
                    &s.host,
                    s.boot_id.as_deref(),
                    s.connection_id.as_deref(),
                )
                .await;
        }
        info!(deployment = %dep, session = %s.session, %reason, was_live, "connection closed");
        s.audit("connection.closed", &reason, None).await;
    }

    async fn audit(&self, action: &str, outcome: &str, detail: Option<serde_json::Value>) {
        let record = NewAudit {
            deployment: &self.auth.deployment,
            connection_id: self.connection_id.as_deref(),
            source: "server",
            actor: "control-plane",
            action,
            target: &self.session,
            outcome,
            detail,
        };
        if let Err(e) = self.app.store.append_audit(&record).await {
            warn!(error = %e, action, "audit write failed");
        }
    }

    async fn handshake(
        &mut self,
        socket: &mut WebSocket,
        tx: mpsc::UnboundedSender<ToSocket>,
    ) -> Result<(), Outcome> {
        let first = tokio::time::timeout(self.app.cfg.hello_timeout, socket.recv()).await;
        let msg = match first {
            Err(_) => {
                return Err(Outcome::Close(
                    close::HELLO_TIMEOUT,
                    close::HELLO_TIMEOUT_REASON.into(),
                ));
            }
            Ok(None) => return Err(Outcome::Gone("closed before hello".into())),
            Ok(Some(Err(e))) => return Err(self.read_error(&e)),
            Ok(Some(Ok(m))) => m,
        };
        let frame = self.decode(msg)?;
        let Some(frame) = frame else {
            return Err(Outcome::Close(
                close::PROTOCOL_ERROR,
                "expected hello as the first frame".into(),
            ));
        };
        let Frame::Hello(hello) = frame else {
            return Err(Outcome::Close(
                close::PROTOCOL_ERROR,
                format!("expected hello as the first frame, got {}", frame.kind()),
            ));
        };
        if hello.protocol != PROTOCOL_VERSION {
            self.app.stats.frames_rejected.fetch_add(1, ORD);
            return Err(Outcome::Close(
                close::UNSUPPORTED_VERSION,
                format!(
                    "unsupported protocol version {}; this server speaks {PROTOCOL_VERSION}",
                    hello.protocol
                ),
            ));
        }
        self.connection_id = Some(hello.connection_id.clone());
        self.boot_id = Some(hello.boot_id.clone());
        self.host = hello.host.hostname.clone();
        self.out = Some(tx.downgrade());
        self.updates = updates::InFlight::for_capabilities(&hello.capabilities);
        let dep = self.auth.deployment.clone();
        let detail = serde_json::json!({
            "boot_id": hello.boot_id, "agent_version": hello.agent_version,
            "hostname": hello.host.hostname, "token_id": self.auth.token_id,
        });
        let welcome = Frame::Welcome(Welcome {
            protocol: PROTOCOL_VERSION,
            deployment: dep.clone(),
            connection_id: hello.connection_id.clone(),
            heartbeat_interval_ms: u64::try_from(self.app.cfg.heartbeat_interval.as_millis())
                .unwrap_or(u64::MAX),
            accepts_alerts: true,
            accepts_rollouts: true,
            accepts_tenants: true,
            accepts_registrations: true,
            accepts_incidents: true,
            accepts_apps: true,
            accepts_analysis_runs: true,
        });
        // With replicas, the database decides who holds the deployment; the
        // claim and the registration here happen in one order per
        // deployment (`replica`).
        let mut remote = None;
        let order = match &self.app.replica {
            Some(r) => {
                let order = r.lock(&dep).await;
                match r.claim(&dep, &self.session, &hello).await {
                    Ok(prev) => remote = prev.filter(|p| p.replica != r.id),
                    Err(e) => {
                        warn!(deployment = %dep, error = %e, "connection claim failed");
                        return Err(Outcome::Close(
                            close::GOING_AWAY,
                            "control plane database unavailable; reconnect".into(),
                        ));
                    }
                }
                Some(order)
            }
            None => None,
        };
        let evicted = self
            .app
            .live
            .register(&dep, &self.session, &self.auth.token_id, hello, tx)
            .map_err(|e| Outcome::Close(close::GOING_AWAY, e.to_string()))?;
        drop(order);
        let evicted = evicted.or_else(|| remote.map(|p| p.session));
        info!(deployment = %dep, session = %self.session, evicted = ?evicted, "connection registered");
        self.audit("connection.opened", "registered", Some(detail))
            .await;
        self.app
            .on_connection(
                &dep,
                Trigger::Registered,
                &self.host,
                self.boot_id.as_deref(),
                self.connection_id.as_deref(),
            )
            .await;
        if let Some(old) = evicted {
            self.audit(
                "connection.evicted",
                close::EVICTED_REASON,
                Some(serde_json::json!({ "evicted_session": old })),
            )
            .await;
        }
        self.send(socket, &welcome).await?;
        // Online now, on every replica's fleet view.
        self.app.store.fleet_changed(&dep).await;
        // What support did while the operator was away.
        for f in self.owed_updates().await {
            self.send(socket, &f).await?;
        }
        Ok(())
    }

    async fn send(&self, socket: &mut WebSocket, frame: &Frame) -> Result<(), Outcome> {
        let text = frame
            .to_json()
            .map_err(|e| Outcome::Close(close::GOING_AWAY, format!("encode: {e}")))?;
        socket
            .send(Message::Text(Utf8Bytes::from(text)))
            .await
            .map_err(|e| Outcome::Gone(format!("send failed: {e}")))
    }

    fn read_error(&self, e: &axum::Error) -> Outcome {
        let text = e.to_string();
        // tungstenite reports its size limits as capacity errors.
        if text.contains("Space limit exceeded")
            || text.contains("too long")
            || text.contains("too big")
        {
            self.app.stats.frames_rejected.fetch_add(1, ORD);
            Outcome::Close(
                close::TOO_BIG,
                format!(
                    "frame exceeds the limit of {} bytes",
                    self.app.cfg.max_frame_bytes
                ),
            )
        } else {
            Outcome::Gone(format!("read failed: {text}"))
        }
    }

    /// `Ok(None)` for control messages that carry no frame.
    fn decode(&self, msg: Message) -> Result<Option<Frame>, Outcome> {
        match msg {
            Message::Text(t) if t.len() > self.app.cfg.max_frame_bytes => {
                self.app.stats.frames_rejected.fetch_add(1, ORD);
                Err(Outcome::Close(
                    close::TOO_BIG,
                    format!(
                        "frame exceeds the limit of {} bytes",
                        self.app.cfg.max_frame_bytes
                    ),
                ))
            }
            Message::Text(t) => match Frame::parse(t.as_str()) {
                Ok(f) => Ok(Some(f)),
                Err(e) => {
                    self.app.stats.frames_rejected.fetch_add(1, ORD);
                    Err(Outcome::Close(
                        close::PROTOCOL_ERROR,
                        format!("malformed frame: {e}"),
                    ))
                }
            },
            Message::Binary(_) => {
                self.app.stats.frames_rejected.fetch_add(1, ORD);
                Err(Outcome::Close(
                    close::UNSUPPORTED_DATA,
                    "binary messages are not supported; send JSON text frames".into(),
                ))
            }
            Message::Close(Some(c)) if c.code == close::NORMAL => Err(Outcome::Bye(format!(
                "closed by peer: {} {}",
                c.code,
                c.reason.as_str()
            ))),
            Message::Close(c) => Err(Outcome::Gone(match c {
                Some(c) => format!("closed by peer: {} {}", c.code, c.reason.as_str()),
                None => "closed by peer".into(),
            })),
            Message::Ping(_) | Message::Pong(_) => Ok(None),
        }
    }

    async fn serve(
        &mut self,
        socket: &mut WebSocket,
        mut rx: mpsc::UnboundedReceiver<ToSocket>,
    ) -> Outcome {
        let cfg = self.app.cfg.clone();
        let mut ping = tokio::time::interval(cfg.ping_interval);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut awaiting_pong: Option<Instant> = None;
        let mut shutdown = self.app.shutdown.subscribe();
        let mut retry = tokio::time::interval(updates::RETRY);
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                // `wait_for`, not `changed`: a socket that subscribed after
                // the flag was set still sees it.
                () = stopped(&mut shutdown) => {
                    return Outcome::Close(close::GOING_AWAY, SHUTDOWN_REASON.into());
                }
                msg = socket.recv() => {
                    let msg = match msg {
                        None => return Outcome::Gone("socket ended".into()),
                        Some(Err(e)) => return self.read_error(&e),
                        Some(Ok(m)) => m,
                    };
                    if matches!(msg, Message::Pong(_)) {
                        awaiting_pong = None;
                        continue;
                    }
                    match self.decode(msg) {
                        Err(o) => return o,
                        Ok(None) => {}
                        Ok(Some(frame)) => {
                            if let Err(o) = self.on_frame(frame).await {
                                return o;
                            }
                        }
                    }
                }
                cmd = rx.recv() => match cmd {
                    None => return Outcome::Gone("registry dropped the connection".into()),
                    Some(ToSocket::Close(code, reason)) => return Outcome::Close(code, reason),
                    Some(ToSocket::Send(frame)) => {
                        if let Err(o) = self.send(socket, &frame).await {
                            return o;
                        }
                    }
                    Some(ToSocket::LookForUpdates) => {
                        // A burst of nudges (one per support action) is one
                        // look; what else is queued is kept, in order.
                        let mut after = Vec::new();
                        while let Ok(m) = rx.try_recv() {
                            if !matches!(m, ToSocket::LookForUpdates) {
                                after.push(m);
                            }
                        }
                        for f in self.owed_updates().await {
                            if let Err(o) = self.send(socket, &f).await {
                                return o;
                            }
                        }
                        for m in after {
                            match m {
                                ToSocket::Close(code, reason) => return Outcome::Close(code, reason),
                                ToSocket::Send(frame) => {
                                    if let Err(o) = self.send(socket, &frame).await {
                                        return o;
                                    }
                                }
                                ToSocket::LookForUpdates => {}
                            }
                        }
                    }
                },
                _ = retry.tick(), if self.updates.waiting() => {
                    for f in self.owed_updates().await {
                        if let Err(o) = self.send(socket, &f).await {
                            return o;
                        }
                    }
                }
                _ = ping.tick() => {
                    if let Some(since) = awaiting_pong
                        && since.elapsed() >= cfg.pong_timeout
                    {
                        return Outcome::Close(close::PING_TIMEOUT, close::PING_TIMEOUT_REASON.into());
                    }
                    if awaiting_pong.is_none() {
                        awaiting_pong = Some(Instant::now());
                    }
                    if socket.send(Message::Ping(Default::default())).await.is_err() {
                        return Outcome::Gone("ping send failed".into());
                    }
                }
            }
        }
    }
}

/// How long the HTTP API waits at most for a command result.
pub const MAX_COMMAND_TIMEOUT: Duration = Duration::from_secs(300);

/// Re-checks the tokens of every live connection each `interval` with one
/// query, and closes those whose token was revoked or expired (4002). One
/// query for all instead of one per connection keeps 10k connections cheap
/// (BENCHMARKS.md, "Upstream").
pub async fn token_checker(app: Arc<App>) {
    let mut tick = tokio::time::interval(app.cfg.token_check_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let valid = match app.store.valid_token_ids().await {
            Ok(v) => v,
            Err(e) => {
                warn!(error = %e, "token re-check failed");
                continue;
            }
        };
        for (dep, session, token_id) in app.live.sessions() {
            if !valid.contains(&token_id) {
                app.live.close_session(
                    &dep,
                    &session,
                    close::TOKEN_REVOKED,
                    close::TOKEN_REVOKED_REASON,
                );
            }
        }
    }
}
