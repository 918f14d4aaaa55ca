//! A replica's background work: the eviction listener, the lease, reaper,
//! flush and reconcile loop, and joining again or leaving the set.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::{CHANNEL, Eviction, FLUSH, REAP, Replica, ReplicaError, ms};
use crate::controlplane::App;
use crate::controlplane::live::Live;
use crate::controlplane::store::pg::NOTICES;
use crate::controlplane::store::to_i64;
use crate::wire::{close, now_ms};

/// Applies one eviction notice to this replica's sockets.
async fn on_eviction(replica: &Replica, live: &Live, e: &Eviction) {
    if e.replica != replica.id {
        return;
    }
    let _order = replica.lock(&e.deployment).await;
    if live.evict(&e.deployment, &e.session) {
        info!(deployment = %e.deployment, session = %e.session, by = %e.by, "evicted by a newer connection on another replica");
    }
}

/// Closes the sockets this replica holds that the database says it does
/// not (a missed notification, or a lost lease).
async fn reconcile(replica: &Replica, live: &Live, reason: &str) -> Result<usize, ReplicaError> {
    let rows = replica.holdings(None).await?;
    let owned: HashMap<&str, Option<&str>> = rows
        .iter()
        .filter(|h| h.replica == replica.id)
        .map(|h| (h.deployment.as_str(), h.session.as_deref()))
        .collect();
    let mut closed = 0;
    for (dep, session, _) in live.sessions() {
        if owned.get(dep.as_str()).copied().flatten() != Some(session.as_str()) {
            let _order = replica.lock(&dep).await;
            // Re-read: the claim may have just landed.
            let now = replica.holdings(Some(&dep)).await?;
            let mine = now
                .first()
                .is_some_and(|h| h.replica == replica.id && h.session.as_deref() == Some(&session));
            if !mine {
                live.close_session(&dep, &session, close::GOING_AWAY, reason);
                closed += 1;
            }
        }
    }
    Ok(closed)
}

/// Listens for evictions on a dedicated connection, reconnecting with
/// backoff; after each (re)connect it reconciles, so nothing said while
/// it was away is missed.
pub async fn listen(replica: Arc<Replica>, app: Arc<App>) {
    let live = &app.live;
    let mut backoff = Duration::from_millis(200);
    loop {
        match replica.pg.dedicated().await {
            Err(e) => warn!(error = %e, "eviction listener: cannot connect"),
            Ok((client, mut conn)) => {
                let (tx, mut rx) = mpsc::unbounded_channel();
                let driver = tokio::spawn(async move {
                    let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
                    while let Some(m) = messages.next().await {
                        match m {
                            Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                                if tx
                                    .send((n.channel().to_owned(), n.payload().to_owned()))
                                    .is_err()
                                {
                                    break;
                                }
                            }
                            Ok(_) => {}
                            Err(e) => {
                                warn!(error = %e, "eviction listener connection failed");
                                break;
                            }
                        }
                    }
                });
                let listen = format!("LISTEN {CHANNEL}; LISTEN {NOTICES}");
                match client.batch_execute(&listen).await {
                    Err(e) => warn!(error = %e, "eviction listener: LISTEN failed"),
                    Ok(()) => {
                        backoff = Duration::from_millis(200);
                        if let Err(e) = reconcile(&replica, live, close::EVICTED_REASON).await {
                            warn!(error = %e, "reconcile after LISTEN failed");
                        }
                        // Notices said while it was away are lost: look
                        // for owed incident updates once on every socket.
                        live.nudge_all();
                        while let Some((channel, payload)) = rx.recv().await {
                            if channel == NOTICES {
                                app.store.heard(&payload);
                                continue;
                            }
                            match serde_json::from_str::<Eviction>(&payload) {
                                Ok(e) => on_eviction(&replica, live, &e).await,
                                Err(e) => warn!(error = %e, "unreadable eviction notice"),
                            }
                        }
                    }
                }
                driver.abort();
                drop(client);
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// The lease, reaper, flush and reconcile loop.
pub async fn maintain(replica: Arc<Replica>, app: Arc<App>) {
    let live = &app.live;
    let mut flush = tokio::time::interval(FLUSH);
    let mut reap = tokio::time::interval(REAP);
    let mut renew = tokio::time::interval(replica.lease / 3);
    let mut audit = tokio::time::interval(replica.lease);
    for t in [&mut flush, &mut reap, &mut renew, &mut audit] {
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    }
    loop {
        tokio::select! {
            _ = flush.tick() => {
                if let Err(e) = replica.flush().await {
                    warn!(error = %e, "frame times not written");
                }
            }
            _ = reap.tick() => match replica.reap().await {
                Ok(dead) if !dead.is_empty() => {
                    info!(?dead, "replicas lost their leases; their connections are released");
                }
                Ok(_) => {}
                Err(e) => warn!(error = %e, "lease reaping failed"),
            },
            _ = renew.tick() => match replica.renew().await {
                Ok(true) => {}
                Ok(false) => {
                    warn!(replica = %replica.id, "this replica's lease was lost; closing its sockets");
                    for (dep, session, _) in live.sessions() {
                        live.close_session(&dep, &session, close::GOING_AWAY, LEASE_LOST_REASON);
                    }
                    if let Err(e) = rejoin(&replica).await {
                        warn!(error = %e, "cannot take a new lease");
                    }
                }
                Err(e) => warn!(error = %e, "lease renewal failed"),
            },
            _ = audit.tick() => {
                if let Err(e) = reconcile(&replica, live, close::EVICTED_REASON).await {
                    warn!(error = %e, "ownership reconcile failed");
                }
            }
        }
    }
}

/// The close reason of the sockets of a replica that lost its lease.
pub const LEASE_LOST_REASON: &str = "control plane replica lost its lease";

async fn rejoin(replica: &Replica) -> Result<(), ReplicaError> {
    let client = replica.pg.client().await?;
    let now = now_ms();
    client
        .execute(
            "INSERT INTO replicas (id, url, started_ms, lease_until_ms) VALUES ($1, $2, $3, $4)
             ON CONFLICT (id) DO UPDATE SET lease_until_ms = excluded.lease_until_ms",
            &[
                &replica.id,
                &replica.url,
                &to_i64(now),
                &to_i64(now + ms(replica.lease)),
            ],
        )
        .await?;
    Ok(())
}

/// Leaves the set on a clean stop: the lease ends now, so the others do not
/// wait for it.
pub async fn leave(replica: &Replica) {
    let r = async {
        let client = replica.pg.client().await?;
        client
            .execute(
                "UPDATE connections SET session = NULL, released_ms = $2,
                   last_close = 'replica stopped', disconnects = disconnects + 1
                 WHERE replica = $1 AND session IS NOT NULL",
                &[&replica.id, &to_i64(now_ms())],
            )
            .await?;
        client
            .execute("DELETE FROM replicas WHERE id = $1", &[&replica.id])
            .await?;
        Ok::<_, ReplicaError>(())
    }
    .await;
    if let Err(e) = r {
        warn!(error = %e, "leaving the replica set failed; the lease will expire");
    }
}
