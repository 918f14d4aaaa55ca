//! Connection health for the operator's `/health` endpoint: a cheap,
//! cloneable handle the connection loop writes and the HTTP server reads.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

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
        })))
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut HealthWriter<'_>)) {
        if let Ok(mut g) = self.0.lock() {
            f(&mut HealthWriter(&mut g));
        }
    }

    pub fn report(&self) -> Option<HealthReport> {
        let g = self.0.lock().ok()?;
        Some(HealthReport {
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
