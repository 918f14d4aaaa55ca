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

use std::collections::{BTreeSet, HashMap};
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

/// Updates taken from the inbox at once, and written at most this many at
/// a time (one status write each).
const UPDATE_BATCH: usize = 256;
const UPDATE_WRITERS: usize = 8;

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

/// The cluster's state for a lane's.
pub fn state_of(s: LaneState) -> IncidentState {
    match s {
        LaneState::Routed => IncidentState::Routed,
        LaneState::Acknowledged => IncidentState::Acknowledged,
        LaneState::Resolved => IncidentState::Resolved,
    }
}

/// The status that records `u`, or `None` when the status shows it
/// already (the state never moves back). `written` is what this term
/// wrote last that the (possibly older) cached `inc` may not show yet.
/// Pure.
pub fn with_update(
    inc: &Incident,
    written: Option<IncidentState>,
    u: &IncidentUpdate,
) -> Option<IncidentStatus> {
    let target = state_of(u.state);
    let current = match written {
        Some(w) if w.rank() > inc.state().rank() => w,
        _ => inc.state(),
    };
    let mut status = inc
        .status
        .clone()
        .filter(|_| inc.state() != IncidentState::Received)
        .unwrap_or_default();
    let lane_news = u.lane.is_some() && u.lane != status.lane;
    if target.rank() <= current.rank() && !lane_news {
        return None;
    }
    let at =
        u.at.parse::<k8s_openapi::jiff::Timestamp>()
            .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)
            .unwrap_or_else(|_| crate::rollout::now());
    status.state = Some(if target.rank() > current.rank() {
        target
    } else {
        current
    });
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

/// The updates of one batch for one incident as one: the furthest state,
/// and the lane any of them names. Pure.
pub fn merge(updates: &[IncidentUpdate]) -> Option<IncidentUpdate> {
    let mut best = updates
        .iter()
        .max_by_key(|u| state_of(u.state).rank())?
        .clone();
    if best.lane.is_none() {
        best.lane = updates.iter().find_map(|u| u.lane.clone());
    }
    Some(best)
}

/// Records one update from the control plane in its incident's status.
/// Returns whether it may be answered (recorded, shown already, or the
/// incident is gone), and the state written.
async fn record_update(
    op: &Ctx,
    cfg: &DispatchConfig,
    incidents: &reflector::Store<Incident>,
    written: Option<IncidentState>,
    u: &IncidentUpdate,
) -> (bool, Option<IncidentState>) {
    let key = reflector::ObjectRef::new(&u.id).within(&cfg.home);
    let Some(inc) = incidents.get(&key) else {
        debug!(incident = %u.id, "update for an incident no longer kept");
        return (true, None);
    };
    let Some(status) = with_update(&inc, written, u) else {
        return (true, None);
    };
    let state = status.state;
    match op
        .apply_status::<Incident>(Controller::Incident, &cfg.home, &u.id, &status)
        .await
    {
        Ok(()) => {
            info!(incident = %u.id, tenant = %inc.spec.tenant, state = u.state.as_str(), "incident moved by support");
            (true, state)
        }
        Err(e) => {
            warn!(incident = %u.id, error = %e, "cannot record the incident's update; the control plane sends it again");
            (false, None)
        }
    }
}

/// Takes a batch of updates off the inbox and records them, a few at a
/// time, one write per incident; answers each once its incident's status
/// shows it.
async fn record_batch(
    op: &Ctx,
    cfg: &DispatchConfig,
    incidents: &reflector::Store<Incident>,
    batch: Vec<crate::upstream::inbox::Delivery>,
    written: &mut HashMap<String, IncidentState>,
) {
    let mut by_id: HashMap<String, (Vec<IncidentUpdate>, Vec<tokio::sync::oneshot::Sender<()>>)> =
        HashMap::new();
    for (u, done) in batch {
        let e = by_id.entry(u.id.clone()).or_default();
        e.0.push(u);
        e.1.push(done);
    }
    let jobs: Vec<_> = by_id
        .into_values()
        .filter_map(|(us, dones)| Some((merge(&us)?, dones)))
        .map(|(u, dones)| {
            let w = written.get(&u.id).copied();
            (u, w, dones)
        })
        .collect();
    let results: Vec<(String, Option<IncidentState>)> = futures::stream::iter(jobs)
        .map(|(u, w, dones)| async move {
            let (answer, wrote) = record_update(op, cfg, incidents, w, &u).await;
            if answer {
                for d in dones {
                    let _ = d.send(());
                }
            }
            (u.id, wrote)
        })
        .buffer_unordered(UPDATE_WRITERS)
        .collect()
        .await;
    for (id, wrote) in results {
        if let Some(s) = wrote {
            written.insert(id, s);
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
    // state this term wrote of each incident whose cached copy does not
    // show it yet (a stale copy is not sent, acked and marked routed
    // again, which would also undo what support did meanwhile).
    let mut refused: BTreeSet<String> = BTreeSet::new();
    let mut written: HashMap<String, IncidentState> = HashMap::new();
    loop {
        let pending = pass(&op, &cfg, &store.state(), &mut refused, &mut written).await;
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
                let Some(first) = got else { return };
                // What else has come meanwhile, in the same batch.
                let mut batch = vec![first];
                while batch.len() < UPDATE_BATCH
                    && let Ok(more) = inbox.try_recv()
                {
                    batch.push(more);
                }
                record_batch(&op, &cfg, &store, batch, &mut written).await;
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
    written: &mut HashMap<String, IncidentState>,
) -> bool {
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let mut pending = false;
    // Forget what the watch now shows (or shows gone).
    let seen: HashMap<&str, IncidentState> = incidents
        .iter()
        .filter_map(|i| Some((i.metadata.name.as_deref()?, i.state())))
        .collect();
    written.retain(|n, s| seen.get(n.as_str()).is_some_and(|c| c.rank() < s.rank()));
    for inc in incidents {
        let name = inc.metadata.name.clone().unwrap_or_default();
        if written.contains_key(&name) {
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
                                written.insert(name, IncidentState::Routed);
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
        let acked = with_update(&routed, None, &u(LaneState::Acknowledged, Some("desk"))).unwrap();
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
            with_update(&now_acked, None, &u(LaneState::Acknowledged, Some("desk"))),
            None,
            "shown already"
        );
        assert_eq!(
            with_update(&now_acked, None, &u(LaneState::Routed, None)),
            None,
            "never back"
        );
        let resolved = with_update(&now_acked, None, &u(LaneState::Resolved, None)).unwrap();
        assert_eq!(resolved.state, Some(IncidentState::Resolved));
        assert!(resolved.acknowledged_at.is_some() && resolved.resolved_at.is_some());
        // A lane given later to an unrouted incident is recorded.
        let unrouted = incident(Some(IncidentState::Routed), Some(1000), 1);
        let laned = with_update(&unrouted, None, &u(LaneState::Routed, Some("desk"))).unwrap();
        assert_eq!(laned.state, Some(IncidentState::Routed));
        assert_eq!(laned.lane.as_deref(), Some("desk"));
        // A stale cached copy does not undo what this term wrote.
        assert_eq!(
            with_update(
                &routed,
                Some(IncidentState::Resolved),
                &u(LaneState::Acknowledged, None)
            ),
            None
        );
        let resolved_over_stale = with_update(
            &routed,
            Some(IncidentState::Acknowledged),
            &u(LaneState::Resolved, None),
        )
        .unwrap();
        assert_eq!(resolved_over_stale.state, Some(IncidentState::Resolved));
        // One batch's updates of one incident are one, the furthest.
        let merged = merge(&[
            u(LaneState::Resolved, None),
            u(LaneState::Acknowledged, Some("desk")),
        ])
        .unwrap();
        assert_eq!(merged.state, LaneState::Resolved);
        assert_eq!(merged.lane.as_deref(), Some("desk"));
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
