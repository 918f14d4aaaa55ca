//! Requests from the control plane on one connection: commands (and
//! streamed copies), pod control and shell attaches, each carried out in a
//! task of its own whose answers go through the writer's control queue;
//! acknowledgements of the alerts, registrations and incidents sent; and
//! incident updates, handed to the dispatcher and answered once recorded.

use std::collections::HashMap;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use super::Out;
use super::copy;
use super::writer::carry_out;
use crate::agentfs::helper::HelperOpts;
use crate::alerts::AlertQueue;
use crate::upstream::actions;
use crate::upstream::config::UpstreamConfig;
use crate::wire::{Frame, IncidentUpdateAck};

/// The requests of one connection. It holds what they need of the
/// connection (the client, the copy settings, the alerts to acknowledge)
/// rather than the session, so the session drives it and not the reverse.
pub(super) struct Requests {
    ctl_tx: mpsc::Sender<Out>,
    /// Every request's task; aborted when the connection ends.
    tasks: JoinSet<()>,
    attaches: HashMap<String, crate::upstream::attach::AttachHandle>,
    copies: HashMap<String, mpsc::Sender<copy::FromServer>>,
    client: kube::Client,
    fs_helper: HelperOpts,
    fs_max_bytes: u64,
    alerts: AlertQueue,
    registrations: crate::upstream::registrations::Registrations,
    incidents: crate::upstream::registrations::Incidents,
    updates: crate::upstream::inbox::IncidentInbox,
}

impl Requests {
    pub(super) fn new(
        ctl_tx: mpsc::Sender<Out>,
        client: kube::Client,
        cfg: &UpstreamConfig,
        alerts: AlertQueue,
    ) -> Self {
        Requests {
            ctl_tx,
            tasks: JoinSet::new(),
            attaches: HashMap::new(),
            copies: HashMap::new(),
            client,
            fs_helper: cfg.fs_helper.clone(),
            fs_max_bytes: cfg.fs_max_bytes,
            alerts,
            registrations: cfg.registrations.clone(),
            incidents: cfg.incidents.clone(),
            updates: cfg.incident_updates.clone(),
        }
    }

    pub(super) fn abort_all(&mut self) {
        self.tasks.abort_all();
    }

    /// Takes one frame from the control plane.
    pub(super) async fn on_frame(&mut self, frame: Frame) {
        match frame {
            Frame::Command(req) if req.command.streams() => {
                self.copies.retain(|_, tx| !tx.is_closed());
                let (ftx, frx) = mpsc::channel(2 * crate::wire::fs::WINDOW as usize);
                self.copies.insert(req.id.clone(), ftx);
                let client = self.client.clone();
                let helper = self.fs_helper.clone();
                let cap = self.fs_max_bytes;
                let tx = self.ctl_tx.clone();
                self.tasks.spawn(async move {
                    let target = serde_json::to_value(&req.command).unwrap_or_default();
                    let id = req.id.clone();
                    // The deadline is for the copy's arrival; the copy itself
                    // ends on its own idle timeout.
                    let deadline = if req.deadline_ms <= crate::wire::now_ms() {
                        req.deadline_ms
                    } else {
                        crate::wire::now_ms() + 7 * 24 * 3600 * 1000
                    };
                    let r = carry_out(&tx, &id, &req.actor, "command", target, deadline, async {
                        copy::run(
                            client,
                            req.id.clone(),
                            req.command.clone(),
                            helper,
                            cap,
                            frx,
                            tx.clone(),
                        )
                        .await
                    })
                    .await;
                    debug!(id, ok = r, "copy done");
                });
            }
            f @ (Frame::FsChunk(_) | Frame::FsChunkAck(_) | Frame::FsAbort(_)) => {
                if let Some((id, m)) = copy::FromServer::route(f)
                    && let Some(tx) = self.copies.get(&id)
                    && tx.send(m).await.is_err()
                {
                    self.copies.remove(&id);
                }
            }
            Frame::Command(req) => {
                let client = self.client.clone();
                let helper = self.fs_helper.clone();
                let tx = self.ctl_tx.clone();
                self.tasks.spawn(async move {
                    let target = serde_json::to_value(&req.command).unwrap_or_default();
                    let id = req.id.clone();
                    let r = carry_out(
                        &tx,
                        &id,
                        &req.actor,
                        "command",
                        target,
                        req.deadline_ms,
                        async { actions::run_command(&client, &req.command, &helper).await },
                    )
                    .await;
                    debug!(id, ok = r, "command done");
                });
            }
            Frame::PodControl(req) => {
                let client = self.client.clone();
                let tx = self.ctl_tx.clone();
                self.tasks.spawn(async move {
                    let target = serde_json::json!({"namespace": req.namespace, "agent": req.agent, "action": req.action});
                    let id = req.id.clone();
                    let r = carry_out(&tx, &id, &req.actor, &format!("pod_control.{}", req.action.as_str()), target, req.deadline_ms, async {
                        actions::pod_control(&client, req.action, &req.namespace, &req.agent).await
                    }).await;
                    debug!(id, ok = r, "pod control done");
                });
            }
            Frame::AttachOpen(open) => {
                let tx = self.ctl_tx.clone();
                let id = open.session.clone();
                info!(session = %id, namespace = %open.namespace, agent = %open.agent, actor = %open.actor, "attach opened");
                let h = crate::upstream::attach::spawn(
                    &mut self.tasks,
                    self.client.clone(),
                    open,
                    move |f| {
                        let tx = tx.clone();
                        Box::pin(async move {
                            let _ = tx.send(Out::Frame(Box::new(f))).await;
                        })
                    },
                );
                self.attaches.insert(id, h);
            }
            Frame::AttachData(d) => {
                let bytes = base64::Engine::decode(
                    &base64::engine::general_purpose::STANDARD,
                    d.data.as_bytes(),
                );
                match (self.attaches.get(&d.session), bytes) {
                    (Some(h), Ok(b)) => {
                        if h.stdin.send(b).await.is_err() {
                            self.attaches.remove(&d.session);
                        }
                    }
                    _ => debug!(session = %d.session, "attach data for no session"),
                }
            }
            Frame::AttachResize(r) => {
                if let Some(h) = self.attaches.get(&r.session) {
                    let _ = h.resize.try_send((r.cols, r.rows));
                }
            }
            Frame::AttachClose(c) => {
                // Dropping stdin ends the session's task.
                self.attaches.remove(&c.session);
            }
            Frame::AlertAck(a) => {
                if !self.alerts.ack(&a.id) {
                    debug!(id = %a.id, "ack for an alert not held");
                }
            }
            Frame::IncidentAck(a) => {
                if !self.incidents.ack(&a.id, a.lane) {
                    debug!(id = %a.id, "ack for an incident not held");
                }
            }
            Frame::IncidentUpdate(u) => {
                if let Err(e) = u.validate() {
                    // Not answered: nothing is recorded from a bad update.
                    warn!(id = %u.id, error = %e, "incident update refused");
                    return;
                }
                let (id, state) = (u.id.clone(), u.state);
                let Some(recorded) = self.updates.offer(u) else {
                    debug!(%id, "incident update inbox full; the control plane sends it again");
                    return;
                };
                let tx = self.ctl_tx.clone();
                self.tasks.spawn(async move {
                    match tokio::time::timeout(crate::upstream::inbox::ANSWER_WITHIN, recorded)
                        .await
                    {
                        Ok(Ok(())) => {
                            let ack = Frame::IncidentUpdateAck(IncidentUpdateAck { id, state });
                            let _ = tx.send(Out::Frame(Box::new(ack))).await;
                        }
                        _ => debug!(%id, "incident update not recorded in time; left unanswered"),
                    }
                });
            }
            Frame::RegisterAck(a) => {
                if !self.registrations.ack(&a.id, None) {
                    debug!(id = %a.id, "ack for a registration not held");
                }
            }
            other => debug!(kind = other.kind(), "ignored frame from the control plane"),
        }
    }
}
