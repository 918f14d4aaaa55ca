//! What a connection does with each frame its operator sends: snapshots,
//! deltas (and their Rollouts in the fleet projection, `fleet`), heartbeats, command answers, audit records, alerts, tenant
//! registrations, incidents and the answers to incident updates.

use tracing::{info, warn};

use super::{ORD, Outcome, Session};
use crate::controlplane::live::ToSocket;
use crate::controlplane::model::{NewAudit, Origin, Source};
use crate::wire::{
    Alert, AlertAck, Frame, IncidentAck, IncidentRecord, RegisterAck, Registration, close,
};

impl Session {
    /// Stores a valid alert and acknowledges it, also when it was stored
    /// before (a resend). A failed write is not acknowledged: the operator
    /// sends the alert again on its next connection.
    async fn store_alert(&self, dep: &str, a: &Alert) {
        let origin = Origin {
            deployment: dep,
            boot_id: self.boot_id.as_deref(),
            connection_id: self.connection_id.as_deref(),
            source: Source::Operator,
        };
        match self.app.store.insert_alert(&origin, a).await {
            Ok(new) => {
                if new {
                    info!(deployment = %dep, severity = a.severity.as_str(), reason = %a.reason, object = %a.object, key = %a.key, state = ?a.state, "alert");
                }
                if let Some(out) = self.out.as_ref().and_then(|w| w.upgrade()) {
                    let ack = Frame::AlertAck(AlertAck { id: a.id.clone() });
                    let _ = out.send(ToSocket::Send(Box::new(ack)));
                }
            }
            Err(e) => warn!(deployment = %dep, error = %e, "alert write failed; not acknowledged"),
        }
    }

    /// Stores a valid tenant registration and acknowledges it (also a
    /// resend, and one a newer record of its kind supersedes). A failed
    /// write is not acknowledged: the operator sends it again.
    async fn store_registration(&self, dep: &str, r: &Registration) {
        match self.app.store.register(dep, r).await {
            Ok(()) => {
                info!(deployment = %dep, tenant = %r.tenant_name(), kind = ?r.kind(), generation = r.generation(), "tenant registration");
                if let Some(out) = self.out.as_ref().and_then(|w| w.upgrade()) {
                    let ack = Frame::RegisterAck(RegisterAck {
                        id: r.id().to_owned(),
                    });
                    let _ = out.send(ToSocket::Send(Box::new(ack)));
                }
            }
            Err(e) => {
                warn!(deployment = %dep, error = %e, "tenant registration write failed; not acknowledged");
            }
        }
    }

    /// Stores a valid incident in its tenant's lane and acknowledges it
    /// with the lane (also a resend). A failed write is not acknowledged:
    /// the operator sends it again. Only ids and names are logged.
    async fn store_incident(&self, dep: &str, i: &IncidentRecord) {
        match self.app.store.insert_incident(dep, i).await {
            Ok(lane) => {
                info!(deployment = %dep, tenant = %i.tenant, incident = %i.id, severity = %i.severity, lane = lane.as_deref().unwrap_or("-"), "incident");
                if let Some(out) = self.out.as_ref().and_then(|w| w.upgrade()) {
                    let ack = Frame::IncidentAck(IncidentAck {
                        id: i.id.clone(),
                        lane,
                    });
                    let _ = out.send(ToSocket::Send(Box::new(ack)));
                }
            }
            Err(e) => {
                warn!(deployment = %dep, error = %e, "incident write failed; not acknowledged");
            }
        }
    }

    /// A frame the server stores and acknowledges (`alert`, the tenant
    /// registry's): refused when `valid` is an error, stored by `store`
    /// while the session is current, nothing when it was evicted meanwhile.
    async fn stored<E: std::fmt::Display>(
        &self,
        dep: &str,
        valid: Result<(), E>,
        store: impl std::future::Future<Output = ()>,
    ) -> Option<Result<(), String>> {
        if let Err(e) = valid {
            return Some(Err(e.to_string()));
        }
        self.app.live.with_session(dep, &self.session, |_| ())?;
        store.await;
        Some(Ok(()))
    }

    pub(super) async fn on_frame(&mut self, frame: Frame) -> Result<(), Outcome> {
        let dep = self.auth.deployment.clone();
        let kind = frame.kind();
        let applied = match frame {
            Frame::Snapshot(chunk) => {
                let last = chunk.last;
                let r = self
                    .app
                    .live
                    .apply_chunk(&dep, &self.session, chunk)
                    .map(|r| r.map_err(|e| e.to_string()));
                if last && matches!(r, Some(Ok(()))) {
                    self.project_all().await;
                }
                r
            }
            Frame::Delta(d) => {
                let change = super::fleet::change(&d);
                let r = self
                    .app
                    .live
                    .apply_delta(&dep, &self.session, d)
                    .map(|r| r.map_err(|e| e.to_string()));
                if let (Some(c), Some(Ok(()))) = (change, &r) {
                    self.project_one(c).await;
                }
                r
            }
            Frame::Heartbeat(_) => {
                self.app.stats.heartbeats_received.fetch_add(1, ORD);
                self.app.live.heartbeat(&dep, &self.session).map(Ok)
            }
            Frame::CommandAck(_) => self.app.live.with_session(&dep, &self.session, |_| Ok(())),
            Frame::CommandResult(r) => {
                if !self.app.live.complete(&dep, &self.session, r) {
                    tracing::debug!("late or unknown command result");
                }
                self.app.live.with_session(&dep, &self.session, |_| Ok(()))
            }
            Frame::Audit(a) => {
                let record = NewAudit {
                    deployment: &dep,
                    connection_id: self.connection_id.as_deref(),
                    source: "operator",
                    actor: &a.actor,
                    action: &a.action,
                    target: &a.target,
                    outcome: &a.outcome,
                    detail: (!a.detail.is_null()).then_some(a.detail.clone()),
                };
                if let Err(e) = self.app.store.append_audit_at(&record, a.at_ms).await {
                    warn!(error = %e, "audit write failed");
                }
                self.app.live.with_session(&dep, &self.session, |_| Ok(()))
            }
            Frame::Alert(a) => {
                self.stored(&dep, a.validate(), self.store_alert(&dep, &a))
                    .await
            }
            Frame::Incident(i) => {
                self.stored(&dep, i.validate(), self.store_incident(&dep, &i))
                    .await
            }
            Frame::TenantRegister(t) => {
                let r = Registration::Tenant(t);
                self.stored(&dep, r.validate(), self.store_registration(&dep, &r))
                    .await
            }
            Frame::SupportLane(l) => {
                let r = Registration::Support(l);
                self.stored(&dep, r.validate(), self.store_registration(&dep, &r))
                    .await
            }
            Frame::IncidentUpdateAck(a) => match self.on_update_ack(&a).await {
                Err(e) => Some(Err(e.to_string())),
                Ok(more) => {
                    if more && let Some(out) = self.out.as_ref().and_then(|w| w.upgrade()) {
                        let _ = out.send(ToSocket::LookForUpdates);
                    }
                    self.app.live.with_session(&dep, &self.session, |_| Ok(()))
                }
            },
            f @ (Frame::FsChunk(_) | Frame::FsChunkAck(_) | Frame::FsAbort(_)) => {
                self.app.transfers.deliver(&dep, f);
                self.app.live.with_session(&dep, &self.session, |_| Ok(()))
            }
            f @ (Frame::AttachData(_) | Frame::AttachClose(_)) => {
                self.app.attaches.deliver(&dep, f);
                self.app.live.with_session(&dep, &self.session, |_| Ok(()))
            }
            Frame::Hello(_)
            | Frame::Welcome(_)
            | Frame::Command(_)
            | Frame::PodControl(_)
            | Frame::AttachOpen(_)
            | Frame::AttachResize(_)
            | Frame::AlertAck(_)
            | Frame::IncidentAck(_)
            | Frame::IncidentUpdate(_)
            | Frame::RegisterAck(_) => {
                self.app.stats.frames_rejected.fetch_add(1, ORD);
                return Err(Outcome::Close(
                    close::PROTOCOL_ERROR,
                    format!("unexpected {kind} frame from a client after hello"),
                ));
            }
        };
        match applied {
            // Evicted meanwhile: the close is already queued.
            None => Ok(()),
            Some(Ok(())) => {
                if let Some(r) = &self.app.replica {
                    r.touch(&dep, &self.session);
                }
                Ok(())
            }
            Some(Err(e)) => {
                self.app.stats.frames_rejected.fetch_add(1, ORD);
                Err(Outcome::Close(
                    close::PROTOCOL_ERROR,
                    format!("bad {kind}: {e}"),
                ))
            }
        }
    }
}
