//! The incident dispatcher (leader only, managed operators): every
//! incident in the operator's namespace that has not reached the control
//! plane is handed to the upstream connection's incident outbox; once the
//! control plane has stored it in the tenant's lane and acknowledged it,
//! its status says `Routed` and names the lane. What support does next
//! (acknowledged, resolved) comes back down as `incident_update`s, which
//! the dispatcher records in the status, so the tenant's view follows.
//! Delivered incidents are deleted once they have not moved for the
//! retention.
//!
//! Guarantees:
//! - nothing is lost: an incident is marked routed only on the control
//!   plane's ack, and until then it is asked for again after every
//!   reconnect, restart and leader change (it is in the apiserver, and
//!   the next leader's watch lists it);
//! - nothing is duplicated: the lane keeps one incident per deployment and
//!   id, and the id is the `Incident`'s name;
//! - one watch of the operator's namespace's Incidents, no polling LIST;
//! - an `Incident` whose fields could not pass the wire's check (made by
//!   hand) is never sent, so it cannot break the connection; it is logged;
//! - an update is answered only once the status shows it (or the
//!   incident is gone); the state only moves forward, so an old update
//!   sent again changes nothing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use tracing::{debug, info, warn};

use crate::cluster::apply::Ctx;
use crate::cluster::metrics::Controller;
use crate::crd::{Incident, IncidentState, IncidentStatus};
use crate::meta::{LABEL_MANAGED_BY, MANAGED_BY};
use crate::upstream::inbox::IncidentInbox;
use crate::upstream::registrations::{Incidents, Progress};
use crate::wire::{IncidentRecord, IncidentUpdate, LaneState};

#[derive(Clone)]
pub struct DispatchConfig {
    /// The operator's namespace, where incidents are kept.
    pub home: String,
    pub outbox: Incidents,
    /// The updates coming down from the control plane.
    pub updates: IncidentInbox,
    /// How long a routed incident is kept after it last moved.
    pub retention: Duration,
}

/// The wire form of `inc`. Pure.
pub fn record_of(inc: &Incident) -> IncidentRecord {
    IncidentRecord {
        id: inc.metadata.name.clone().unwrap_or_default(),
        tenant: inc.spec.tenant.clone(),
        agent: inc.spec.agent.clone(),
        severity: inc.spec.severity.as_str().to_owned(),
        summary: inc.spec.summary.clone(),
        detail: inc.spec.detail.clone(),
        correlation_id: inc.spec.correlation_id.clone(),
        received_at: inc.spec.received_at.0.to_string(),
    }
}

/// What to do with one incident now. Pure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Not routed yet: ask the outbox.
    Deliver,
    /// Routed, and older than the retention: delete it.
    Expire,
    Keep,
}

pub fn next(inc: &Incident, now_s: i64, retention: Duration) -> Next {
    if inc.state() == IncidentState::Received {
        return Next::Deliver;
    }
    let routed = inc.last_moved().map(|t| t.0.as_second());
    let retention = i64::try_from(retention.as_secs()).unwrap_or(i64::MAX);
    match routed {
        Some(at) if now_s.saturating_sub(at) > retention => Next::Expire,
        _ => Next::Keep,
    }
}

/// The status that records `u`, or `None` when the status shows it
/// already (the state never moves back). Pure.
pub fn with_update(inc: &Incident, u: &IncidentUpdate) -> Option<IncidentStatus> {
    let target = match u.state {
        LaneState::Routed => IncidentState::Routed,
        LaneState::Acknowledged => IncidentState::Acknowledged,
        LaneState::Resolved => IncidentState::Resolved,
    };
    let current = inc.state();
    let mut status = inc
        .status
        .clone()
        .filter(|_| current != IncidentState::Received)
        .unwrap_or_default();
    let lane_news = u.lane.is_some() && u.lane != status.lane;
    if target.rank() <= current.rank() && !lane_news {
        return None;
    }
    let at =
        u.at.parse::<k8s_openapi::jiff::Timestamp>()
            .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)
            .unwrap_or_else(|_| crate::rollout::now());
    if target.rank() > current.rank() {
        status.state = Some(target);
    }
    if u.lane.is_some() {
        status.lane = u.lane.clone();
    }
    status.routed_at.get_or_insert_with(|| at.clone());
    match target {
        IncidentState::Acknowledged => {
            status.acknowledged_at.get_or_insert(at);
        }
        IncidentState::Resolved => {
            status.resolved_at.get_or_insert(at);
        }
        IncidentState::Received | IncidentState::Routed => {}
    }
    status.observed_generation = inc.metadata.generation;
    Some(status)
}

/// Records one update from the control plane in its incident's status.
/// Returns whether it may be answered (recorded, shown already, or the
/// incident is gone).
async fn record_update(
    op: &Ctx,
    cfg: &DispatchConfig,
    incidents: &reflector::Store<Incident>,
    u: &IncidentUpdate,
) -> bool {
    let key = reflector::ObjectRef::new(&u.id).within(&cfg.home);
    let Some(inc) = incidents.get(&key) else {
        debug!(incident = %u.id, "update for an incident no longer kept");
        return true;
    };
    let Some(status) = with_update(&inc, u) else {
        return true;
    };
    match op
        .apply_status::<Incident>(Controller::Incident, &cfg.home, &u.id, &status)
        .await
    {
        Ok(()) => {
            info!(incident = %u.id, tenant = %inc.spec.tenant, state = u.state.as_str(), "incident moved by support");
            true
        }
        Err(e) => {
            warn!(incident = %u.id, error = %e, "cannot record the incident's update; the control plane sends it again");
            false
        }
    }
}

/// Runs for one leadership term.
pub async fn run(op: Arc<Ctx>, cfg: DispatchConfig) {
    let api: Api<Incident> = Api::namespaced(op.client.clone(), &cfg.home);
    let (store, writer) = reflector::store();
    let selector = format!("{LABEL_MANAGED_BY}={MANAGED_BY}");
    let mut changes = Box::pin(
        reflector(
            writer,
            watcher(api, watcher::Config::default().labels(&selector)),
        )
        .default_backoff()
        .touched_objects(),
    );
    // The store fills only while the stream is polled: drive it until the
    // first listing is in.
    let ready = store.wait_until_ready();
    tokio::pin!(ready);
    loop {
        tokio::select! {
            r = &mut ready => match r {
                Ok(()) => break,
                Err(_) => return,
            },
            ev = changes.next() => match ev {
                None => return,
                Some(Err(e)) => debug!(error = %e, "incident watch"),
                Some(Ok(_)) => {}
            },
        }
    }
    info!(namespace = %cfg.home, "incident dispatcher started");
    let mut inbox = cfg.updates.take().await;
    // Refusals already logged, so a held incident is logged once; and the
    // incidents this term marked routed that the watch does not show so
    // yet (a stale copy is not sent, acked and written again).
    let mut refused: BTreeSet<String> = BTreeSet::new();
    let mut routed: BTreeSet<String> = BTreeSet::new();
    loop {
        let pending = pass(&op, &cfg, &store.state(), &mut refused, &mut routed).await;
        // An ack arrives on the connection, not on the watch: look again
        // soon while something is on its way.
        let tick = if pending {
            Duration::from_millis(250)
        } else {
            Duration::from_secs(30)
        };
        tokio::select! {
            ev = changes.next() => match ev {
                Some(Err(e)) => debug!(error = %e, "incident watch"),
                None => return,
                Some(Ok(_)) => {}
            },
            got = inbox.recv() => {
                let Some((u, done)) = got else { return };
                if record_update(&op, &cfg, &store, &u).await {
                    let _ = done.send(());
                }
            }
            () = tokio::time::sleep(tick) => {}
        }
    }
}

/// One look at every incident. Returns whether any is on its way.
async fn pass(
    op: &Ctx,
    cfg: &DispatchConfig,
    incidents: &[Arc<Incident>],
    refused: &mut BTreeSet<String>,
    routed: &mut BTreeSet<String>,
) -> bool {
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let mut pending = false;
    // Forget what the watch now shows routed (or gone).
    let waiting: BTreeSet<&str> = incidents
        .iter()
        .filter(|i| i.state() == IncidentState::Received)
        .filter_map(|i| i.metadata.name.as_deref())
        .collect();
    routed.retain(|n| waiting.contains(n.as_str()));
    for inc in incidents {
        let name = inc.metadata.name.clone().unwrap_or_default();
        if routed.contains(&name) {
            continue;
        }
        match next(inc, now, cfg.retention) {
            Next::Keep => {}
            Next::Expire => {
                if let Err(e) = op
                    .delete::<Incident>(
                        Controller::Incident,
                        &cfg.home,
                        &name,
                        inc.metadata.uid.clone(),
                    )
                    .await
                {
                    warn!(incident = %name, error = %e, "cannot delete an expired incident");
                }
            }
            Next::Deliver => {
                let rec = record_of(inc);
                if let Err(e) = rec.validate() {
                    if refused.insert(name.clone()) {
                        warn!(incident = %name, error = %e, "incident not sent: it would not pass the wire's check");
                    }
                    continue;
                }
                match cfg.outbox.request(rec) {
                    Progress::Acked(lane) => {
                        let status = IncidentStatus {
                            state: Some(IncidentState::Routed),
                            lane: lane.clone(),
                            routed_at: Some(crate::rollout::now()),
                            observed_generation: inc.metadata.generation,
                            ..IncidentStatus::default()
                        };
                        match op
                            .apply_status::<Incident>(
                                Controller::Incident,
                                &cfg.home,
                                &name,
                                &status,
                            )
                            .await
                        {
                            Ok(()) => {
                                info!(incident = %name, tenant = %inc.spec.tenant, lane = lane.as_deref().unwrap_or("-"), "incident routed");
                                routed.insert(name);
                            }
                            Err(e) => {
                                // Asked again next pass: acked again at once.
                                warn!(incident = %name, error = %e, "cannot record the incident as routed");
                                pending = true;
                            }
                        }
                    }
                    Progress::InFlight(_) => pending = true,
                    Progress::Refused(why) => {
                        if refused.insert(name.clone()) {
                            warn!(incident = %name, reason = %why, "incident held");
                        }
                    }
                }
            }
        }
    }
    pending
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{IncidentSpec, Severity};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn incident(state: Option<IncidentState>, routed_at: Option<i64>, status_for: i64) -> Incident {
        let mut inc = Incident::new(
            "inc-0123456789abcdef01234567",
            IncidentSpec {
                tenant: "acme".into(),
                agent: "assistant".into(),
                severity: Severity::Warning,
                summary: "s".into(),
                detail: String::new(),
                correlation_id: String::new(),
                idempotency_key: "k".into(),
                received_at: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            },
        );
        inc.metadata.generation = Some(1);
        inc.status = state.map(|s| IncidentStatus {
            state: Some(s),
            routed_at: routed_at
                .map(|t| Time(k8s_openapi::jiff::Timestamp::from_second(t).unwrap_or_default())),
            observed_generation: Some(status_for),
            ..IncidentStatus::default()
        });
        inc
    }

    #[test]
    fn updates_move_the_status_forward_only() {
        let u = |state, lane: Option<&str>| IncidentUpdate {
            id: "inc-0123456789abcdef01234567".into(),
            state,
            at: "2026-12-06T10:00:00Z".into(),
            lane: lane.map(str::to_owned),
        };
        let mut routed = incident(Some(IncidentState::Routed), Some(1000), 1);
        routed.status.as_mut().unwrap().lane = Some("desk".into());
        let acked = with_update(&routed, &u(LaneState::Acknowledged, Some("desk"))).unwrap();
        assert_eq!(acked.state, Some(IncidentState::Acknowledged));
        assert_eq!(acked.lane.as_deref(), Some("desk"));
        assert_eq!(
            acked.routed_at.as_ref().map(|t| t.0.as_second()),
            Some(1000),
            "kept"
        );
        assert!(acked.acknowledged_at.is_some() && acked.resolved_at.is_none());
        let mut now_acked = routed.clone();
        now_acked.status = Some(acked);
        assert_eq!(
            with_update(&now_acked, &u(LaneState::Acknowledged, Some("desk"))),
            None,
            "shown already"
        );
        assert_eq!(
            with_update(&now_acked, &u(LaneState::Routed, None)),
            None,
            "never back"
        );
        let resolved = with_update(&now_acked, &u(LaneState::Resolved, None)).unwrap();
        assert_eq!(resolved.state, Some(IncidentState::Resolved));
        assert!(resolved.acknowledged_at.is_some() && resolved.resolved_at.is_some());
        // A lane given later to an unrouted incident is recorded.
        let unrouted = incident(Some(IncidentState::Routed), Some(1000), 1);
        let laned = with_update(&unrouted, &u(LaneState::Routed, Some("desk"))).unwrap();
        assert_eq!(laned.state, Some(IncidentState::Routed));
        assert_eq!(laned.lane.as_deref(), Some("desk"));
        // Retention counts from the last move.
        let mut moved = now_acked.clone();
        moved.status.as_mut().unwrap().resolved_at = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(5000).unwrap(),
        ));
        let day = Duration::from_secs(86_400);
        assert_eq!(next(&moved, 4000 + 86_400, day), Next::Keep);
    }

    #[test]
    fn received_goes_out_routed_stays_until_the_retention() {
        let day = Duration::from_secs(86_400);
        assert_eq!(next(&incident(None, None, 1), 1000, day), Next::Deliver);
        assert_eq!(
            next(
                &incident(Some(IncidentState::Routed), Some(1000), 2),
                1000,
                day
            ),
            Next::Deliver,
            "a status for another generation is not trusted"
        );
        assert_eq!(
            next(
                &incident(Some(IncidentState::Routed), Some(1000), 1),
                1000 + 86_400,
                day
            ),
            Next::Keep
        );
        assert_eq!(
            next(
                &incident(Some(IncidentState::Routed), Some(1000), 1),
                1001 + 86_400,
                day
            ),
            Next::Expire
        );
        let rec = record_of(&incident(None, None, 1));
        assert_eq!(rec.severity, "warning");
        assert_eq!(rec.received_at, "1970-01-01T00:00:00Z");
        assert_eq!(rec.validate(), Ok(()));
    }
}
