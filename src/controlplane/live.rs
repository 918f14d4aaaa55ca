//! Live state per deployment: the registered connection, the server's own
//! receive time of the last frame, the resource view and pending requests.
//!
//! Guarantees:
//! - Registration is last-writer-wins: registering evicts the previous
//!   connection of the deployment (its socket task is told to close with
//!   `evicted by newer connection`).
//! - Unregistering is compare-and-delete on the session id, so the late
//!   cleanup of an evicted connection never removes its successor, and never
//!   counts as a disconnect.
//! - Online / degraded / offline is judged only from the server's receive
//!   time of application frames (pongs do not count), against thresholds
//!   given at start (`health`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use super::bus::{Bus, Change};
use super::model::{DeploymentView, Health, Thresholds};
use super::resources::{ResourceError, ResourceView};
use crate::wire::{CommandResult, Delta, Frame, Hello, Resource, SnapshotChunk};

/// What the socket task of a connection is told to do.
#[derive(Debug)]
pub enum ToSocket {
    Send(Box<Frame>),
    Close(u16, String),
    /// Look for `incident_update`s owed to the operator (`ws::updates`).
    LookForUpdates,
}

#[derive(Debug)]
struct Conn {
    session: String,
    token_id: String,
    hello: Hello,
    connected_ms: u64,
    tx: mpsc::UnboundedSender<ToSocket>,
}

#[derive(Debug, Default)]
struct Dep {
    conn: Option<Conn>,
    last_frame: Option<Instant>,
    resources: ResourceView,
    connections: u64,
    evictions: u64,
    disconnects: u64,
    last_close: Option<String>,
    last_hello: Option<Hello>,
    /// Evicted by a connection on another replica: that replica speaks for
    /// the deployment now (health checks here skip it).
    moved: bool,
}

type Waiter = (String, String, oneshot::Sender<CommandResult>);

#[derive(Debug)]
pub struct Live {
    deps: Mutex<HashMap<String, Dep>>,
    waiters: Mutex<HashMap<String, Waiter>>,
    pub thresholds: Thresholds,
    /// Where registrations, snapshots and deltas are announced.
    bus: Bus,
}

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("deployment {0} is offline (no live connection); refused")]
    Offline(String),
    #[error("internal lock poisoned")]
    Poisoned,
}

impl Live {
    pub fn new(thresholds: Thresholds, bus: Bus) -> Self {
        Self {
            deps: Mutex::new(HashMap::new()),
            waiters: Mutex::new(HashMap::new()),
            thresholds,
            bus,
        }
    }

    fn deps(&self) -> Result<std::sync::MutexGuard<'_, HashMap<String, Dep>>, LiveError> {
        self.deps.lock().map_err(|_| LiveError::Poisoned)
    }

    /// Registers a connection; returns the session id of the evicted one.
    pub fn register(
        &self,
        deployment: &str,
        session: &str,
        token_id: &str,
        hello: Hello,
        tx: mpsc::UnboundedSender<ToSocket>,
    ) -> Result<Option<String>, LiveError> {
        let mut deps = self.deps()?;
        let dep = deps.entry(deployment.to_owned()).or_default();
        let old = dep.conn.take();
        let evicted = old.map(|c| {
            let _ = c.tx.send(ToSocket::Close(
                crate::wire::close::EVICTED,
                crate::wire::close::EVICTED_REASON.to_owned(),
            ));
            dep.evictions += 1;
            c.session
        });
        dep.last_hello = Some(hello.clone());
        dep.conn = Some(Conn {
            session: session.to_owned(),
            token_id: token_id.to_owned(),
            hello,
            connected_ms: crate::wire::now_ms(),
            tx,
        });
        dep.connections += 1;
        dep.moved = false;
        dep.last_frame = Some(Instant::now());
        dep.resources.new_connection();
        drop(deps);
        self.bus.publish(Change::Deployment(deployment.to_owned()));
        Ok(evicted)
    }

    /// Compare-and-delete: removes the connection only if `session` still
    /// holds the deployment. Returns whether it did.
    pub fn unregister(&self, deployment: &str, session: &str, reason: &str) -> bool {
        let Ok(mut deps) = self.deps() else {
            return false;
        };
        let Some(dep) = deps.get_mut(deployment) else {
            return false;
        };
        if dep.conn.as_ref().is_some_and(|c| c.session == session) {
            dep.conn = None;
            dep.disconnects += 1;
            dep.last_close = Some(reason.to_owned());
            drop(deps);
            self.bus.publish(Change::Deployment(deployment.to_owned()));
            true
        } else {
            false
        }
    }

    /// Evicts `session` for a newer connection on another replica: its
    /// socket is told to close with the eviction code, and its late cleanup
    /// finds nothing to unregister. Returns whether `session` held it.
    pub fn evict(&self, deployment: &str, session: &str) -> bool {
        let Ok(mut deps) = self.deps() else {
            return false;
        };
        let Some(dep) = deps.get_mut(deployment) else {
            return false;
        };
        if dep.conn.as_ref().is_none_or(|c| c.session != session) {
            return false;
        }
        if let Some(c) = dep.conn.take() {
            let _ = c.tx.send(ToSocket::Close(
                crate::wire::close::EVICTED,
                crate::wire::close::EVICTED_REASON.to_owned(),
            ));
        }
        dep.evictions += 1;
        dep.moved = true;
        drop(deps);
        self.bus.publish(Change::Deployment(deployment.to_owned()));
        true
    }

    /// Whether the deployment was last evicted by a connection on another
    /// replica (and has not registered here since).
    pub fn moved(&self, deployment: &str) -> bool {
        self.deps()
            .ok()
            .is_some_and(|d| d.get(deployment).is_some_and(|d| d.moved))
    }

    /// Applies a snapshot chunk if `session` still holds the deployment;
    /// the last chunk announces the new view.
    pub fn apply_chunk(
        &self,
        deployment: &str,
        session: &str,
        chunk: SnapshotChunk,
    ) -> Option<Result<(), ResourceError>> {
        let last = chunk.last;
        let r = self.with_session(deployment, session, |v| v.apply_chunk(chunk));
        if last && matches!(r, Some(Ok(()))) {
            self.bus.publish(Change::Resources(deployment.to_owned()));
            self.bus.publish(Change::Deployment(deployment.to_owned()));
        }
        r
    }

    /// Notes a heartbeat frame if `session` still holds the deployment, and
    /// announces it (pages count the heartbeat age from it).
    pub fn heartbeat(&self, deployment: &str, session: &str) -> Option<()> {
        let r = self.with_session(deployment, session, |_| ());
        if r.is_some() {
            self.bus.publish(Change::Heartbeat(deployment.to_owned()));
        }
        r
    }

    /// Applies a delta if `session` still holds the deployment, and
    /// announces it.
    pub fn apply_delta(
        &self,
        deployment: &str,
        session: &str,
        d: Delta,
    ) -> Option<Result<(), ResourceError>> {
        let (op, resource) = (d.op, Box::new(d.resource.clone()));
        let r = self.with_session(deployment, session, |v| v.apply_delta(d));
        if matches!(r, Some(Ok(()))) {
            self.bus.publish(Change::Resource {
                deployment: deployment.to_owned(),
                op,
                resource,
            });
        }
        r
    }

    /// Runs `f` on the deployment's state if `session` still holds it.
    pub fn with_session<T>(
        &self,
        deployment: &str,
        session: &str,
        f: impl FnOnce(&mut ResourceView) -> T,
    ) -> Option<T> {
        let mut deps = self.deps().ok()?;
        let dep = deps.get_mut(deployment)?;
        if dep.conn.as_ref().is_some_and(|c| c.session == session) {
            dep.last_frame = Some(Instant::now());
            Some(f(&mut dep.resources))
        } else {
            None
        }
    }

    /// Sessions whose tokens must be re-checked: (deployment, session, token id).
    pub fn sessions(&self) -> Vec<(String, String, String)> {
        let Ok(deps) = self.deps() else {
            return Vec::new();
        };
        deps.iter()
            .filter_map(|(name, d)| {
                d.conn
                    .as_ref()
                    .map(|c| (name.clone(), c.session.clone(), c.token_id.clone()))
            })
            .collect()
    }

    /// Tells a session's socket task to close (if it still holds the deployment).
    pub fn close_session(&self, deployment: &str, session: &str, code: u16, reason: &str) {
        if let Ok(deps) = self.deps()
            && let Some(c) = deps.get(deployment).and_then(|d| d.conn.as_ref())
            && c.session == session
        {
            let _ = c.tx.send(ToSocket::Close(code, reason.to_owned()));
        }
    }

    pub fn view(&self, deployment: &str) -> DeploymentView {
        let now = Instant::now();
        let deps = self.deps().ok();
        let dep = deps.as_ref().and_then(|d| d.get(deployment));
        let empty = Dep::default();
        let d = dep.unwrap_or(&empty);
        let hello = d.conn.as_ref().map(|c| &c.hello).or(d.last_hello.as_ref());
        let age = d.last_frame.map(|t| {
            u64::try_from(now.saturating_duration_since(t).as_millis()).unwrap_or(u64::MAX)
        });
        DeploymentView {
            name: deployment.to_owned(),
            state: Health::judge(d.last_frame, now, self.thresholds),
            connected: d.conn.is_some(),
            session: d.conn.as_ref().map(|c| c.session.clone()),
            connection_id: hello.map(|h| h.connection_id.clone()),
            boot_id: hello.map(|h| h.boot_id.clone()),
            agent_version: hello.map(|h| h.agent_version.clone()),
            hostname: hello.map(|h| h.host.hostname.clone()),
            connected_since_ms: d.conn.as_ref().map(|c| c.connected_ms),
            last_frame_age_ms: age,
            last_frame_at_ms: age.map(|a| crate::wire::now_ms().saturating_sub(a)),
            resources: d.resources.len(),
            snapshots_completed: d.resources.snapshots_completed,
            deltas_applied: d.resources.deltas_applied,
            snapshot_in_progress: d.resources.snapshot_in_progress(),
            connections: d.connections,
            evictions: d.evictions,
            disconnects: d.disconnects,
            last_close: d.last_close.clone(),
            capabilities: hello.map(|h| h.capabilities.clone()).unwrap_or_default(),
            active_alerts: 0,
            replica: None,
        }
    }

    /// Every deployment with a connection since this server started:
    /// `(name, connected now, state, hostname of the last hello)`.
    pub fn known(&self) -> Vec<(String, bool, Health, String)> {
        let now = Instant::now();
        let Ok(deps) = self.deps() else {
            return Vec::new();
        };
        deps.iter()
            .filter(|(_, d)| !d.moved)
            .map(|(name, d)| {
                let host = d
                    .last_hello
                    .as_ref()
                    .map(|h| h.host.hostname.clone())
                    .unwrap_or_default();
                (
                    name.clone(),
                    d.conn.is_some(),
                    Health::judge(d.last_frame, now, self.thresholds),
                    host,
                )
            })
            .collect()
    }

    /// Judges every deployment now and returns those whose state differs
    /// from `last`, which it updates. Allocates only for a change, so the
    /// health ticker costs little at 10,000 deployments.
    pub fn health_changes(&self, last: &mut HashMap<String, Health>) -> Vec<(String, Health)> {
        let now = Instant::now();
        let Ok(deps) = self.deps() else {
            return Vec::new();
        };
        let mut changed = Vec::new();
        for (name, d) in deps.iter() {
            let state = Health::judge(d.last_frame, now, self.thresholds);
            match last.get_mut(name) {
                Some(seen) if *seen == state => {}
                Some(seen) => {
                    *seen = state;
                    changed.push((name.clone(), state));
                }
                None => {
                    last.insert(name.clone(), state);
                    changed.push((name.clone(), state));
                }
            }
        }
        changed
    }

    /// Whether the deployment has a live connection now.
    pub fn is_connected(&self, deployment: &str) -> bool {
        self.deps()
            .ok()
            .is_some_and(|d| d.get(deployment).is_some_and(|d| d.conn.is_some()))
    }

    pub fn resources(&self, deployment: &str) -> Vec<Resource> {
        self.deps()
            .ok()
            .and_then(|d| {
                d.get(deployment)
                    .map(|d| d.resources.resources().cloned().collect())
            })
            .unwrap_or_default()
    }

    /// The capabilities of the deployment's live connection; `None` when
    /// it is offline.
    pub fn capabilities(&self, deployment: &str) -> Option<Vec<String>> {
        let deps = self.deps().ok()?;
        let conn = deps.get(deployment)?.conn.as_ref()?;
        Some(conn.hello.capabilities.clone())
    }

    /// Sends a request frame to the deployment's live connection and returns
    /// a receiver for its result. Refused when there is no live connection.
    pub fn request(
        &self,
        deployment: &str,
        id: &str,
        frame: Frame,
    ) -> Result<oneshot::Receiver<CommandResult>, LiveError> {
        let deps = self.deps()?;
        let conn = deps
            .get(deployment)
            .and_then(|d| d.conn.as_ref())
            .ok_or_else(|| LiveError::Offline(deployment.to_owned()))?;
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .map_err(|_| LiveError::Poisoned)?
            .insert(
                id.to_owned(),
                (deployment.to_owned(), conn.session.clone(), tx),
            );
        conn.tx
            .send(ToSocket::Send(Box::new(frame)))
            .map_err(|_| LiveError::Offline(deployment.to_owned()))?;
        Ok(rx)
    }

    /// Tells the deployment's connection on this replica, if any, to look
    /// for the incident updates its operator is owed.
    pub fn nudge(&self, deployment: &str) {
        if let Ok(deps) = self.deps()
            && let Some(c) = deps.get(deployment).and_then(|d| d.conn.as_ref())
        {
            let _ = c.tx.send(ToSocket::LookForUpdates);
        }
    }

    /// [`nudge`](Self::nudge) for every connection on this replica (after
    /// changes may have been missed).
    pub fn nudge_all(&self) {
        if let Ok(deps) = self.deps() {
            for c in deps.values().filter_map(|d| d.conn.as_ref()) {
                let _ = c.tx.send(ToSocket::LookForUpdates);
            }
        }
    }

    /// Sends a frame (no answer expected) to the deployment's live connection.
    pub fn send_frame(&self, deployment: &str, frame: Frame) -> Result<(), LiveError> {
        let deps = self.deps()?;
        let conn = deps
            .get(deployment)
            .and_then(|d| d.conn.as_ref())
            .ok_or_else(|| LiveError::Offline(deployment.to_owned()))?;
        conn.tx
            .send(ToSocket::Send(Box::new(frame)))
            .map_err(|_| LiveError::Offline(deployment.to_owned()))
    }

    /// Delivers a result; only the session the request was sent on may answer it.
    pub fn complete(&self, deployment: &str, session: &str, result: CommandResult) -> bool {
        let Ok(mut w) = self.waiters.lock() else {
            return false;
        };
        let matches = w
            .get(&result.id)
            .is_some_and(|(d, s, _)| d == deployment && s == session);
        if !matches {
            return false;
        }
        match w.remove(&result.id) {
            Some((_, _, tx)) => tx.send(result).is_ok(),
            None => false,
        }
    }

    /// Forgets a request (timed out or its connection went away).
    pub fn forget(&self, id: &str) {
        if let Ok(mut w) = self.waiters.lock() {
            w.remove(id);
        }
    }

    /// Drops the waiters of a closed session, so callers see it at once.
    pub fn fail_session(&self, session: &str) {
        if let Ok(mut w) = self.waiters.lock() {
            w.retain(|_, (_, s, _)| s != session);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::wire::HostMeta;

    fn hello(id: &str) -> Hello {
        Hello {
            protocol: 1,
            agent_version: "t".into(),
            boot_id: "b".into(),
            connection_id: id.into(),
            host: HostMeta::default(),
            capabilities: Vec::new(),
        }
    }

    const T: Thresholds = Thresholds {
        degraded_after: Duration::from_secs(90),
        offline_after: Duration::from_secs(300),
    };

    #[test]
    fn newer_connection_evicts_and_stale_cleanup_is_ignored() {
        let live = Live::new(T, Bus::default());
        let (tx1, mut rx1) = mpsc::unbounded_channel();
        let (tx2, _rx2) = mpsc::unbounded_channel();
        assert_eq!(
            live.register("d", "s1", "t", hello("c1"), tx1).unwrap(),
            None
        );
        assert_eq!(
            live.register("d", "s2", "t", hello("c2"), tx2).unwrap(),
            Some("s1".into())
        );
        match rx1.try_recv().unwrap() {
            ToSocket::Close(code, reason) => {
                assert_eq!(code, crate::wire::close::EVICTED);
                assert_eq!(reason, "evicted by newer connection");
            }
            other => panic!("{other:?}"),
        }
        // The evicted socket's cleanup runs late: it must not unregister s2.
        assert!(!live.unregister("d", "s1", "evicted"));
        let v = live.view("d");
        assert!(v.connected);
        assert_eq!(v.connection_id.as_deref(), Some("c2"));
        assert_eq!((v.disconnects, v.evictions), (0, 1));
        assert!(live.unregister("d", "s2", "bye"));
        assert_eq!(live.view("d").disconnects, 1);
    }

    #[test]
    fn only_health_transitions_are_reported() {
        let live = Live::new(
            Thresholds {
                degraded_after: Duration::from_millis(30),
                offline_after: Duration::from_secs(300),
            },
            Bus::default(),
        );
        let (tx, _rx) = mpsc::unbounded_channel();
        live.register("d", "s1", "t", hello("c"), tx).unwrap();
        let mut last = HashMap::new();
        assert_eq!(
            live.health_changes(&mut last),
            [("d".to_owned(), Health::Online)],
            "first sight is a change"
        );
        assert!(live.health_changes(&mut last).is_empty());
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(
            live.health_changes(&mut last),
            [("d".to_owned(), Health::Degraded)]
        );
        assert!(live.health_changes(&mut last).is_empty());
    }

    #[test]
    fn requests_are_refused_offline_and_answered_only_by_their_session() {
        let live = Live::new(T, Bus::default());
        let frame = Frame::Heartbeat(crate::wire::Heartbeat {
            sent_at_ms: 0,
            resources: 0,
        });
        assert!(matches!(
            live.request("d", "r1", frame.clone()),
            Err(LiveError::Offline(_))
        ));
        let (tx, _rx) = mpsc::unbounded_channel();
        live.register("d", "s1", "t", hello("c"), tx).unwrap();
        let mut rx = live.request("d", "r1", frame).unwrap();
        let res = CommandResult {
            id: "r1".into(),
            ok: true,
            result: serde_json::Value::Null,
            error: None,
        };
        assert!(!live.complete("d", "other", res.clone()));
        assert!(live.complete("d", "s1", res));
        assert!(rx.try_recv().unwrap().ok);
    }
}
