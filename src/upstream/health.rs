//! Connection health for the operator's `/health` endpoint: a cheap,
//! cloneable handle the connection loop writes and the HTTP server reads.
//!
//! `/health` answers 503 when the socket is wedged: connected, but nothing
//! (frame or ping) received for longer than `wedged_after`
//! ([`is_wedged`]). It is judged from timestamps when asked, so it holds
//! even when the connection loop itself is stuck, which is what a liveness
//! probe is for. Every other state is 200 (a control plane that is down is
//! not cured by restarting the operator), and so is an unmanaged operator
//! ([`router`] with `None`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Default of `wedged_after`: the control plane pings every 15 s, the
/// connection gives a silent socket up after its 60 s `read_timeout`; 90 s
/// (six missed pings) means that did not happen.
pub const DEFAULT_WEDGED_AFTER: Duration = Duration::from_secs(90);

/// Why an established connection was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LossCause {
    /// Nothing arrived for `read_timeout`: a wedged socket, given up.
    Silent,
    /// The control plane closed it.
    Closed,
    /// A read or write failed, or the protocol was broken.
    Error,
}

/// Pure: connected, and nothing received for longer than `limit`.
pub fn is_wedged(state: ConnState, last_event_age: Option<Duration>, limit: Duration) -> bool {
    state == ConnState::Connected && last_event_age.is_some_and(|age| age > limit)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnState {
    /// Waiting for the first list of every watched kind.
    Starting,
    Connecting,
    Connected,
    /// Waiting to redial after a transient failure.
    Backoff,
    /// 401 at upgrade, or the token was revoked: slow retry only.
    Unauthorized,
    /// The server does not speak our protocol version: slow retry only.
    Incompatible,
    /// A newer connection took the deployment over: slow retry only.
    Evicted,
    Stopped,
}

/// What `/health` shows.
#[derive(Debug, Clone, Serialize)]
pub struct HealthReport {
    pub state: ConnState,
    pub connected: bool,
    pub deployment: Option<String>,
    pub connection_id: Option<String>,
    pub boot_id: String,
    /// Milliseconds since the last frame or ping received from the server.
    pub last_event_age_ms: Option<u64>,
    /// Milliseconds since the last watch event.
    pub last_watch_event_age_ms: Option<u64>,
    pub dial_attempts: u64,
    pub connects: u64,
    pub last_close: Option<String>,
    pub last_error: Option<String>,
    pub next_retry_in_ms: Option<u64>,
    pub resources: usize,
    pub snapshots_sent: u64,
    pub deltas_sent: u64,
    /// Connected, but nothing received for longer than `wedged_after_ms`:
    /// `/health` answers 503.
    pub wedged: bool,
    pub wedged_after_ms: u64,
    /// Established connections lost, by any cause.
    pub disconnects: u64,
    /// Of those, given up because nothing arrived for `read_timeout`.
    pub silent_drops: u64,
}

impl HealthReport {
    /// The status `/health` answers with.
    pub fn http_status(&self) -> u16 {
        if self.wedged { 503 } else { 200 }
    }
}

#[derive(Debug)]
struct Inner {
    state: ConnState,
    deployment: Option<String>,
    connection_id: Option<String>,
    boot_id: String,
    last_event: Option<Instant>,
    last_watch_event: Option<Instant>,
    dial_attempts: u64,
    connects: u64,
    last_close: Option<String>,
    last_error: Option<String>,
    next_retry_at: Option<Instant>,
    resources: usize,
    snapshots_sent: u64,
    deltas_sent: u64,
    wedged_after: Duration,
    disconnects: u64,
    silent_drops: u64,
}

#[derive(Debug, Clone)]
pub struct HealthHandle(Arc<Mutex<Inner>>);

fn age(t: Option<Instant>) -> Option<u64> {
    t.map(|t| u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX))
}

impl HealthHandle {
    pub fn new(boot_id: &str) -> Self {
        Self(Arc::new(Mutex::new(Inner {
            state: ConnState::Starting,
            deployment: None,
            connection_id: None,
            boot_id: boot_id.to_owned(),
            last_event: None,
            last_watch_event: None,
            dial_attempts: 0,
            connects: 0,
            last_close: None,
            last_error: None,
            next_retry_at: None,
            resources: 0,
            snapshots_sent: 0,
            deltas_sent: 0,
            wedged_after: DEFAULT_WEDGED_AFTER,
            disconnects: 0,
            silent_drops: 0,
        })))
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut HealthWriter<'_>)) {
        if let Ok(mut g) = self.0.lock() {
            f(&mut HealthWriter(&mut g));
        }
    }

    pub fn report(&self) -> Option<HealthReport> {
        let g = self.0.lock().ok()?;
        let last_event_age = g.last_event.map(|t| t.elapsed());
        Some(HealthReport {
            wedged: is_wedged(g.state, last_event_age, g.wedged_after),
            wedged_after_ms: u64::try_from(g.wedged_after.as_millis()).unwrap_or(u64::MAX),
            disconnects: g.disconnects,
            silent_drops: g.silent_drops,
            state: g.state,
            connected: g.state == ConnState::Connected,
            deployment: g.deployment.clone(),
            connection_id: g.connection_id.clone(),
            boot_id: g.boot_id.clone(),
            last_event_age_ms: age(g.last_event),
            last_watch_event_age_ms: age(g.last_watch_event),
            dial_attempts: g.dial_attempts,
            connects: g.connects,
            last_close: g.last_close.clone(),
            last_error: g.last_error.clone(),
            next_retry_in_ms: g.next_retry_at.map(|t| {
                u64::try_from(t.saturating_duration_since(Instant::now()).as_millis())
                    .unwrap_or(u64::MAX)
            }),
            resources: g.resources,
            snapshots_sent: g.snapshots_sent,
            deltas_sent: g.deltas_sent,
        })
    }

    /// Healthy for a readiness probe: connected now.
    pub fn is_connected(&self) -> bool {
        self.report().is_some_and(|r| r.connected)
    }

    /// Time since the last frame or ping from the server (or the welcome).
    pub fn last_event_age(&self) -> Option<Duration> {
        self.0.lock().ok()?.last_event.map(|t| t.elapsed())
    }
}

/// `GET /health`: the report as JSON, 503 while wedged. `None` (an
/// unmanaged operator, no upstream connection) answers 200
/// `{"managed": false, ...}`, so one liveness probe fits both.
pub fn router(health: Option<HealthHandle>) -> axum::Router {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    axum::Router::new().route(
        "/health",
        axum::routing::get(move || {
            let h = health.clone();
            async move {
                let Some(h) = h else {
                    let body = serde_json::json!({"managed": false, "state": "unmanaged", "wedged": false});
                    return axum::Json(body).into_response();
                };
                match h.report() {
                    Some(r) => {
                        let status =
                            StatusCode::from_u16(r.http_status()).unwrap_or(StatusCode::OK);
                        (status, axum::Json(r)).into_response()
                    }
                    // A panic while holding the lock: the process is not well.
                    None => (
                        StatusCode::SERVICE_UNAVAILABLE,
                        axum::Json(serde_json::json!({"error": "health state unavailable"})),
                    )
                        .into_response(),
                }
            }
        }),
    )
}

/// Binds `addr` and serves [`router`] in the background; returns the bound
/// address.
pub async fn serve(
    addr: std::net::SocketAddr,
    health: Option<HealthHandle>,
) -> std::io::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = router(health);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(bound)
}

/// Write access for the connection loop.
pub(crate) struct HealthWriter<'a>(&'a mut Inner);

impl HealthWriter<'_> {
    pub fn state(&mut self, s: ConnState) {
        self.0.state = s;
        if s != ConnState::Backoff
            && s != ConnState::Unauthorized
            && s != ConnState::Incompatible
            && s != ConnState::Evicted
        {
            self.0.next_retry_at = None;
        }
    }
    pub fn dialing(&mut self) {
        self.0.dial_attempts += 1;
        self.state(ConnState::Connecting);
    }
    pub fn connected(&mut self, deployment: &str, connection_id: &str) {
        self.0.connects += 1;
        self.0.deployment = Some(deployment.to_owned());
        self.0.connection_id = Some(connection_id.to_owned());
        self.0.last_event = Some(Instant::now());
        self.0.last_error = None;
        self.state(ConnState::Connected);
    }
    pub fn event(&mut self) {
        self.0.last_event = Some(Instant::now());
    }
    pub fn watch_event(&mut self, resources: usize) {
        self.0.last_watch_event = Some(Instant::now());
        self.0.resources = resources;
    }
    pub fn closed(&mut self, reason: &str) {
        self.0.last_close = Some(reason.to_owned());
    }
    /// An established connection was lost.
    pub fn lost(&mut self, cause: LossCause) {
        self.0.disconnects += 1;
        if cause == LossCause::Silent {
            self.0.silent_drops += 1;
        }
    }
    pub fn wedged_after(&mut self, limit: Duration) {
        self.0.wedged_after = limit;
    }
    pub fn error(&mut self, e: &str) {
        self.0.last_error = Some(e.to_owned());
    }
    pub fn retry_at(&mut self, s: ConnState, at: Instant) {
        self.state(s);
        self.0.next_retry_at = Some(at);
    }
    pub fn sent_snapshot(&mut self) {
        self.0.snapshots_sent += 1;
    }
    pub fn sent_delta(&mut self) {
        self.0.deltas_sent += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wedged_only_when_connected_and_silent_past_the_limit() {
        let limit = Duration::from_secs(90);
        let s = Duration::from_secs;
        let cases = [
            (ConnState::Connected, Some(s(91)), true),
            (ConnState::Connected, Some(s(90)), false),
            (ConnState::Connected, Some(s(3)), false),
            (ConnState::Connected, None, false),
            // A control plane that is down is not a wedged operator.
            (ConnState::Backoff, Some(s(600)), false),
            (ConnState::Connecting, Some(s(600)), false),
            (ConnState::Unauthorized, Some(s(600)), false),
            (ConnState::Starting, None, false),
        ];
        for (state, age, want) in cases {
            assert_eq!(is_wedged(state, age, limit), want, "{state:?} {age:?}");
        }
    }

    #[test]
    fn the_report_says_wedged_and_answers_503() {
        let h = HealthHandle::new("boot");
        h.update(|w| {
            w.wedged_after(Duration::from_millis(1));
            w.connected("d", "c");
        });
        std::thread::sleep(Duration::from_millis(5));
        let r = h.report().unwrap();
        assert!(r.wedged && r.connected, "{r:?}");
        assert_eq!((r.http_status(), r.wedged_after_ms), (503, 1));
        h.update(|w| {
            w.wedged_after(Duration::from_secs(60));
            w.event();
        });
        assert_eq!(h.report().unwrap().http_status(), 200);
        h.update(|w| {
            w.lost(LossCause::Silent);
            w.lost(LossCause::Closed);
            w.state(ConnState::Backoff);
        });
        let r = h.report().unwrap();
        assert_eq!((r.disconnects, r.silent_drops, r.wedged), (2, 1, false));
    }
}
