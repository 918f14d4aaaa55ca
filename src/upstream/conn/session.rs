//! One connection's session: the per-connection state, the hello and
//! snapshot, and folding watch events into deltas; requests are handed to
//! `requests`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::{info, warn};

use super::requests::Requests;
use super::writer::{Held, WriteError, send, writer};
use super::{End, Events, Out, classify_close, retry, silence};
use crate::alerts::AlertQueue;
use crate::upstream::config::UpstreamConfig;
use crate::upstream::health::{ConnState, HealthHandle, LossCause};
use crate::upstream::outbox::{DataItem, Outbox};
use crate::upstream::tracker::Tracker;
use crate::wire::{self, Frame, Hello, HostMeta, PROTOCOL_VERSION, ResourceKind, close};

/// One open connection as the session loop drives it: the writer task
/// and its two queues, the resource count its heartbeats carry, and the
/// requests being carried out.
pub(super) struct Link {
    pub(super) ctl_tx: mpsc::Sender<Out>,
    pub(super) data_tx: mpsc::Sender<DataItem>,
    pub(super) count: Arc<AtomicU64>,
    pub(super) writer: tokio::task::JoinHandle<Result<(), WriteError>>,
    pub(super) requests: Requests,
}

pub(super) struct Ctx {
    pub(super) client: kube::Client,
    pub(super) cfg: UpstreamConfig,
    pub(super) health: HealthHandle,
    pub(super) boot_id: String,
    pub(super) host: HostMeta,
    /// Hash of the token of the last dial, to notice a rotated token file.
    pub(super) dialled_with: std::sync::Mutex<Option<String>>,
    pub(super) alerts: AlertQueue,
}

impl Ctx {
    /// Whether the token file now holds a token other than the one of the
    /// last dial. A file that cannot be read counts as a change only when
    /// `unreadable_is_change` (a refused operator then dials and reports the
    /// problem; a connected one keeps its working connection).
    pub(super) fn token_changed(&self, unreadable_is_change: bool) -> bool {
        if self.cfg.token_file.is_none() {
            return false;
        }
        let Ok(now) = self.cfg.current_token() else {
            return unreadable_is_change;
        };
        let last = self.dialled_with.lock().map(|g| g.clone()).unwrap_or(None);
        last.is_some_and(|h| h != now.hash())
    }

    pub(super) async fn session<S>(
        &self,
        tracker: &mut Tracker,
        ev_rx: &mut Events,
        shutdown: &mut S,
    ) -> End
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
                cause: LossCause::Error,
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
                    cause: LossCause::Error,
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
            capabilities: cfg.capabilities.clone(),
        });
        if let Err(e) = send(&mut sink, &hello).await {
            return retry(e.to_string(), false);
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
        self.cfg.cluster_name.learn(&welcome.deployment);
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
        // Likewise the tenant registrations; an older control plane gets
        // none, and the sagas waiting on them say why.
        cfg.registrations.connected(welcome.accepts_registrations);
        if !welcome.accepts_registrations && !cfg.registrations.is_empty() {
            warn!(
                registrations = cfg.registrations.len(),
                "upstream: the control plane does not take tenant registrations; holding them"
            );
        }
        cfg.incidents.connected(welcome.accepts_incidents);
        if !welcome.accepts_incidents && !cfg.incidents.is_empty() {
            warn!(
                incidents = cfg.incidents.len(),
                "upstream: the control plane does not take incidents; holding them"
            );
        }
        let writer = tokio::spawn(writer(
            sink,
            ctl_rx,
            data_rx,
            cfg.heartbeat_interval,
            count.clone(),
            self.health.clone(),
            outbox,
            Held {
                alerts,
                registrations: cfg.registrations.clone(),
                incidents: cfg.incidents.clone(),
            },
        ));
        let mut link = Link {
            requests: Requests::new(
                ctl_tx.clone(),
                self.client.clone(),
                cfg,
                self.alerts.clone(),
            ),
            ctl_tx,
            data_tx,
            count,
            writer,
        };
        if !welcome.accepts_rollouts {
            info!("upstream: the control plane does not take Rollouts; not sending them");
        }
        if !welcome.accepts_tenants {
            info!("upstream: the control plane does not take Tenants; not sending them");
        }
        if !welcome.accepts_apps {
            info!("upstream: the control plane does not take Apps; not sending them");
        }
        if !welcome.accepts_analysis_runs {
            info!("upstream: the control plane does not take AnalysisRuns; not sending them");
        }
        let takes = Takes {
            rollouts: welcome.accepts_rollouts,
            tenants: welcome.accepts_tenants,
            apps: welcome.accepts_apps,
            analysis_runs: welcome.accepts_analysis_runs,
        };
        let steady = self.steady(tracker, ev_rx, shutdown, &mut stream, &mut link, takes);
        // Beside the session, so a session stuck on a blocked write is
        // given up too (dropping it ends the socket with the writer).
        let end = tokio::select! {
            end = steady => end,
            () = silence(&self.health, cfg.read_timeout) => End::Retry {
                reason: format!(
                    "nothing from the control plane for {} s",
                    cfg.read_timeout.as_secs()
                ),
                fatal: None,
                was_connected: true,
                cause: LossCause::Silent,
            },
        };
        link.requests.abort_all();
        cfg.registrations.disconnected();
        cfg.incidents.disconnected();
        let goodbye = match &end {
            End::Shutdown => Some("operator shutting down"),
            End::Redial(_) => Some("token rotated; reconnecting"),
            End::Retry { .. } => None,
        };
        if let Some(reason) = goodbye {
            let _ = link
                .ctl_tx
                .send(Out::Close(close::NORMAL, reason.into()))
                .await;
            let _ = tokio::time::timeout(Duration::from_secs(2), &mut link.writer).await;
        }
        link.writer.abort();
        end
    }

    async fn steady<S, R>(
        &self,
        tracker: &mut Tracker,
        ev_rx: &mut Events,
        shutdown: &mut S,
        stream: &mut R,
        link: &mut Link,
        takes: Takes,
    ) -> End
    where
        S: std::future::Future<Output = ()> + Unpin + futures::future::FusedFuture,
        R: futures::Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
    {
        let cfg = &self.cfg;
        if link
            .data_tx
            .send(DataItem::Snapshot(takes.all(tracker)))
            .await
            .is_err()
        {
            return retry("writer stopped", true);
        }
        let mut snapshot_tick = tokio::time::interval_at(
            tokio::time::Instant::now() + cfg.snapshot_interval,
            cfg.snapshot_interval,
        );
        let mut token_tick =
            tokio::time::interval(cfg.token_reload_interval.max(Duration::from_millis(10)));
        let watch_token = cfg.token_file.is_some();
        loop {
            tokio::select! {
                _ = &mut *shutdown => return End::Shutdown,
                res = &mut link.writer => {
                    return match res {
                        Ok(Ok(())) => retry("writer stopped", true),
                        Ok(Err(e)) => retry(e.to_string(), true),
                        Err(e) => retry(format!("writer task: {e}"), true),
                    };
                }
                ev = ev_rx.recv() => {
                    let Some((k, e)) = ev else {
                        return retry("watches ended", true);
                    };
                    let changes = tracker.on_event(k, e);
                    link.count.store(tracker.len() as u64, Ordering::Relaxed);
                    let n = tracker.len();
                    self.health.update(|h| h.watch_event(n));
                    for (op, r) in changes.into_iter().filter(|(_, r)| takes.kind(r.key.kind)) {
                        if link.data_tx.send(DataItem::Delta(op, r.into_json())).await.is_err() {
                            return retry("writer stopped", true);
                        }
                    }
                }
                _ = snapshot_tick.tick() => {
                    if link.data_tx.send(DataItem::Snapshot(takes.all(tracker))).await.is_err() {
                        return retry("writer stopped", true);
                    }
                }
                _ = token_tick.tick(), if watch_token => {
                    if self.token_changed(false) {
                        return End::Redial("the token file holds a new token".into());
                    }
                }
                msg = stream.next() => {
                    self.health.update(|h| h.event());
                    let msg = match msg {
                        None => return retry("connection closed without a close frame", true),
                        Some(Err(e)) => return retry(format!("read: {e}"), true),
                        Some(Ok(m)) => m,
                    };
                    match msg {
                        Message::Close(Some(cf)) => return classify_close(u16::from(cf.code), cf.reason.as_str()),
                        Message::Close(None) => return retry("closed by the control plane", true),
                        Message::Text(t) => match Frame::parse(t.as_str()) {
                            Ok(frame) => link.requests.on_frame(frame).await,
                            Err(e) => {
                                let reason = format!("malformed frame from the control plane: {e}");
                                let _ = link.ctl_tx.send(Out::Close(close::PROTOCOL_ERROR, reason.clone())).await;
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

/// The kinds the control plane said it takes: one older than a kind
/// closes the connection on it (4003), so it is never sent one.
#[derive(Debug, Clone, Copy)]
pub(super) struct Takes {
    pub rollouts: bool,
    pub tenants: bool,
    pub apps: bool,
    pub analysis_runs: bool,
}

impl Takes {
    fn kind(self, kind: ResourceKind) -> bool {
        match kind {
            ResourceKind::Rollout => self.rollouts,
            ResourceKind::Tenant => self.tenants,
            ResourceKind::App => self.apps,
            ResourceKind::AnalysisRun => self.analysis_runs,
            ResourceKind::Agent
            | ResourceKind::Tool
            | ResourceKind::AgentFS
            | ResourceKind::Pod => true,
        }
    }

    /// The tracker's content the control plane takes, for a snapshot
    /// (each object's packed text, shared with the tracker).
    fn all(self, tracker: &Tracker) -> Vec<Arc<str>> {
        tracker
            .all()
            .filter(|(kind, _)| self.kind(*kind))
            .map(|(_, json)| json.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::packed::Packed;
    use crate::upstream::tracker::WatchEvent;
    use crate::wire::Resource;

    #[test]
    fn a_kind_the_control_plane_did_not_announce_is_left_out() {
        use ResourceKind::{Agent, AnalysisRun, App, Rollout, Tenant};
        let mut t = Tracker::new([Agent, Rollout, Tenant, App, AnalysisRun]);
        for k in [Agent, Rollout, Tenant, App, AnalysisRun] {
            let r = Packed::new(&Resource::bare(k, "x", "1")).unwrap();
            t.on_event(k, WatchEvent::Apply(r));
        }
        let kinds = |takes: Takes| -> Vec<ResourceKind> {
            let mut k: Vec<_> = takes
                .all(&t)
                .iter()
                .map(|j| serde_json::from_str::<Resource>(j).unwrap().key.kind)
                .collect();
            k.sort();
            k
        };
        for (rollouts, tenants, apps, analysis_runs, want) in [
            (false, false, false, false, vec![Agent]),
            (true, false, false, false, vec![Agent, Rollout]),
            (false, true, false, false, vec![Agent, Tenant]),
            (false, false, true, false, vec![Agent, App]),
            (false, false, false, true, vec![Agent, AnalysisRun]),
            (
                true,
                true,
                true,
                true,
                vec![Agent, Rollout, Tenant, App, AnalysisRun],
            ),
        ] {
            let takes = Takes {
                rollouts,
                tenants,
                apps,
                analysis_runs,
            };
            assert_eq!(
                kinds(takes),
                want,
                "rollouts {rollouts}, tenants {tenants}, apps {apps}, runs {analysis_runs}"
            );
            assert!(takes.kind(Agent));
            assert_eq!(takes.kind(App), apps);
            assert_eq!(takes.kind(Tenant), tenants);
            assert_eq!(takes.kind(AnalysisRun), analysis_runs);
        }
    }
}
