//! N `serve` replicas on one PostgreSQL database: who holds which
//! deployment's connection, and which replicas are alive.
//!
//! Tables (PostgreSQL schema migration 2, `store::pg::schema`): `replicas` (id, the URL peers
//! reach it at, its lease) and `connections` (per deployment: the session
//! holding it, on which replica, since when, the last frame's time and the
//! `hello`).
//!
//! Guarantees:
//! - **Last writer wins across replicas.** A registration takes the
//!   deployment's row under a transaction-scoped advisory lock; the previous
//!   holder, when on another replica, is told in the same transaction
//!   (`NOTIFY exo_evict`, delivered on commit) and closes its socket with the
//!   eviction code and reason. Within one replica the claim and the
//!   in-memory registration run under a per-deployment lock, which the
//!   eviction handler takes too, so the database's order is the sockets'.
//! - **Compare-and-delete.** Releasing a row names the session; a late
//!   cleanup never releases a successor.
//! - **Leases.** Each replica renews its lease every third of it. Every
//!   replica reaps expired leases once a second, releasing their
//!   connections in the same statement. A replica that finds its own lease
//!   gone (it was frozen, or cut off from the database) closes every socket
//!   it holds, so their operators reconnect to a live replica, and takes a
//!   new lease.
//! - **Missed notifications are repaired:** every lease period each replica
//!   compares the sockets it holds with the rows, and closes any it no
//!   longer owns.
//! - Frame times reach the row at most [`FLUSH`] after the frame, in one
//!   statement per second for all of a replica's deployments.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tracing::info;

use super::store::pg::Pg;
use super::store::{StoreError, to_i64, to_u64};
use crate::wire::token::{TokenError, Verifier};
use crate::wire::{Hello, now_ms};

mod tasks;

pub use tasks::{LEASE_LOST_REASON, leave, listen, maintain};

/// The channel evictions are announced on.
pub const CHANNEL: &str = "exo_evict";

/// How often frame times are written to the rows.
pub const FLUSH: Duration = Duration::from_secs(1);

/// How often expired leases are looked for. No faster: one cheap
/// statement per replica per second.
pub const REAP: Duration = Duration::from_secs(1);

/// A replica whose lease is not renewed for this long is dead.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(15);

/// Advisory-lock namespace of deployment claims.
const CLAIM_LOCK: i32 = 0x6578_6f01;

#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("postgres: {0}")]
    Pg(#[from] tokio_postgres::Error),
    #[error("hello of {0} does not encode: {1}")]
    Hello(String, serde_json::Error),
    #[error(transparent)]
    Random(#[from] TokenError),
}

/// What `NOTIFY exo_evict` carries.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Eviction {
    /// The replica whose socket must close.
    pub replica: String,
    pub deployment: String,
    pub session: String,
    /// The replica the newer connection is on.
    pub by: String,
}

/// The previous holder a claim displaced.
#[derive(Debug, Clone, PartialEq)]
pub struct Previous {
    pub replica: String,
    pub session: String,
}

/// A deployment's row, as any replica reads it.
#[derive(Debug, Clone)]
pub struct Holding {
    pub deployment: String,
    /// `None` once released.
    pub session: Option<String>,
    pub replica: String,
    /// Whether `replica` holds a live lease.
    pub replica_alive: bool,
    pub replica_url: Option<String>,
    pub taken_ms: u64,
    pub last_frame_ms: u64,
    pub hello: Option<Hello>,
    pub last_close: Option<String>,
    pub connections: u64,
    pub evictions: u64,
    pub disconnects: u64,
}

impl Holding {
    /// Connected on a live replica.
    pub fn connected(&self) -> bool {
        self.session.is_some() && self.replica_alive
    }
}

/// The columns [`holding`] reads, the holder's liveness judged at the time
/// in `$2`; callers add the `WHERE`.
const HOLDING_SELECT: &str = "SELECT c.deployment, c.session, c.replica,
       r.lease_until_ms IS NOT NULL AND r.lease_until_ms >= $2, r.url, c.taken_ms,
       c.last_frame_ms, c.hello, c.last_close, c.connections, c.evictions, c.disconnects
     FROM connections c LEFT JOIN replicas r ON r.id = c.replica";

fn holding(r: &tokio_postgres::Row) -> Holding {
    Holding {
        deployment: r.get(0),
        session: r.get(1),
        replica: r.get(2),
        replica_alive: r.get(3),
        replica_url: r.get(4),
        taken_ms: to_u64(r.get(5)),
        last_frame_ms: to_u64(r.get(6)),
        hello: serde_json::from_value(r.get::<_, serde_json::Value>(7)).ok(),
        last_close: r.get(8),
        connections: to_u64(r.get(9)),
        evictions: to_u64(r.get(10)),
        disconnects: to_u64(r.get(11)),
    }
}

/// This replica.
pub struct Replica {
    pub id: String,
    /// Where peers reach this replica (`--advertise-url`).
    pub url: String,
    pub lease: Duration,
    pg: Pg,
    /// The shared secret replicas present to each other (`hop`).
    peer_secret: String,
    /// Checks a presented secret against `peer_tag` in constant time.
    verifier: Verifier,
    peer_tag: [u8; 32],
    /// Per-deployment order of claims and evictions on this replica.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Frame times not yet written: deployment -> (session, ms).
    touched: Mutex<HashMap<String, (String, u64)>>,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica")
            .field("id", &self.id)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Replica {
    /// Joins the cluster: reads (or makes) the peer secret and takes a
    /// lease under `id`.
    pub async fn join(
        pg: Pg,
        id: String,
        url: String,
        lease: Duration,
    ) -> Result<Self, ReplicaError> {
        let client = pg.client().await?;
        let fresh = crate::wire::random_id() + &crate::wire::random_id();
        client
            .execute(
                "INSERT INTO cluster (key, value) VALUES ('peer_secret', $1)
                 ON CONFLICT (key) DO NOTHING",
                &[&fresh],
            )
            .await?;
        let peer_secret: String = client
            .query_one("SELECT value FROM cluster WHERE key = 'peer_secret'", &[])
            .await?
            .get(0);
        let now = now_ms();
        client
            .execute(
                "INSERT INTO replicas (id, url, started_ms, lease_until_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (id) DO UPDATE SET url = excluded.url,
                   started_ms = excluded.started_ms, lease_until_ms = excluded.lease_until_ms",
                &[&id, &url, &to_i64(now), &to_i64(now + ms(lease))],
            )
            .await?;
        // A replica restarted under the same id holds nothing any more.
        client
            .execute(
                "UPDATE connections SET session = NULL, released_ms = $2,
                   last_close = 'replica restarted', disconnects = disconnects + 1
                 WHERE replica = $1 AND session IS NOT NULL",
                &[&id, &to_i64(now)],
            )
            .await?;
        info!(replica = %id, %url, lease = ?lease, "joined the replica set");
        let verifier = Verifier::random()?;
        Ok(Self {
            id,
            url,
            lease,
            pg,
            peer_tag: verifier.tag(peer_secret.as_bytes()),
            verifier,
            peer_secret,
            locks: Mutex::new(HashMap::new()),
            touched: Mutex::new(HashMap::new()),
        })
    }

    /// Whether `presented` is the cluster's peer secret (constant time).
    pub fn is_peer(&self, presented: &str) -> bool {
        self.verifier.matches(presented.as_bytes(), &self.peer_tag)
    }

    /// The secret to present to a peer.
    pub fn peer_secret(&self) -> &str {
        &self.peer_secret
    }

    /// The per-deployment lock: hold it across a claim and the in-memory
    /// registration that follows.
    pub async fn lock(&self, deployment: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let m = {
            let mut locks = self
                .locks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            locks.entry(deployment.to_owned()).or_default().clone()
        };
        m.lock_owned().await
    }

    /// Takes the deployment for `session`; returns the holder it
    /// displaced, which is told to close when it is on another replica.
    pub async fn claim(
        &self,
        deployment: &str,
        session: &str,
        hello: &Hello,
    ) -> Result<Option<Previous>, ReplicaError> {
        let hello_json =
            serde_json::to_value(hello).map_err(|e| ReplicaError::Hello(deployment.into(), e))?;
        let mut client = self.pg.client().await?;
        let tx = client.transaction().await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))",
            &[&CLAIM_LOCK, &deployment],
        )
        .await?;
        let old = tx
            .query_opt(
                "SELECT session, replica FROM connections WHERE deployment = $1",
                &[&deployment],
            )
            .await?;
        let previous = old.and_then(|r| {
            let s: Option<String> = r.get(0);
            s.map(|session| Previous {
                session,
                replica: r.get(1),
            })
        });
        let now = to_i64(now_ms());
        tx.execute(
            "INSERT INTO connections (deployment, session, replica, connection_id, taken_ms,
               last_frame_ms, hello, connections)
             VALUES ($1, $2, $3, $4, $5, $5, $6, 1)
             ON CONFLICT (deployment) DO UPDATE SET session = excluded.session,
               replica = excluded.replica, connection_id = excluded.connection_id,
               taken_ms = excluded.taken_ms, last_frame_ms = excluded.last_frame_ms,
               hello = excluded.hello, released_ms = NULL,
               connections = connections.connections + 1,
               evictions = connections.evictions
                 + CASE WHEN connections.session IS NULL THEN 0 ELSE 1 END",
            &[
                &deployment,
                &session,
                &self.id,
                &hello.connection_id,
                &now,
                &hello_json,
            ],
        )
        .await?;
        if let Some(p) = previous.as_ref().filter(|p| p.replica != self.id) {
            let note = Eviction {
                replica: p.replica.clone(),
                deployment: deployment.to_owned(),
                session: p.session.clone(),
                by: self.id.clone(),
            };
            let payload = serde_json::to_string(&note).unwrap_or_default();
            tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
                .await?;
        }
        tx.commit().await?;
        Ok(previous)
    }

    /// Compare-and-delete: releases the row only if `session` holds it.
    pub async fn release(
        &self,
        deployment: &str,
        session: &str,
        reason: &str,
    ) -> Result<bool, ReplicaError> {
        let client = self.pg.client().await?;
        let n = client
            .execute(
                "UPDATE connections SET session = NULL, released_ms = $3, last_close = $4,
                   disconnects = disconnects + 1
                 WHERE deployment = $1 AND session = $2",
                &[&deployment, &session, &to_i64(now_ms()), &reason],
            )
            .await?;
        Ok(n > 0)
    }

    /// Notes a frame from `session`; written within [`FLUSH`].
    pub fn touch(&self, deployment: &str, session: &str) {
        let mut t = self
            .touched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match t.get_mut(deployment) {
            Some((s, at)) if s == session => *at = now_ms(),
            _ => {
                t.insert(deployment.to_owned(), (session.to_owned(), now_ms()));
            }
        }
    }

    /// Writes the noted frame times, one statement for all.
    async fn flush(&self) -> Result<usize, ReplicaError> {
        let batch = std::mem::take(
            &mut *self
                .touched
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if batch.is_empty() {
            return Ok(0);
        }
        let mut deps = Vec::with_capacity(batch.len());
        let mut sessions = Vec::with_capacity(batch.len());
        let mut times = Vec::with_capacity(batch.len());
        for (d, (s, t)) in batch {
            deps.push(d);
            sessions.push(s);
            times.push(to_i64(t));
        }
        let client = self.pg.client().await?;
        let n = client
            .execute(
                "UPDATE connections c SET last_frame_ms = GREATEST(c.last_frame_ms, v.t)
                 FROM unnest($1::text[], $2::text[], $3::int8[]) AS v(d, s, t)
                 WHERE c.deployment = v.d AND c.session = v.s",
                &[&deps, &sessions, &times],
            )
            .await?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Renews this replica's lease; `false` when it was lost (reaped).
    async fn renew(&self) -> Result<bool, ReplicaError> {
        let client = self.pg.client().await?;
        let n = client
            .execute(
                "UPDATE replicas SET lease_until_ms = $2 WHERE id = $1",
                &[&self.id, &to_i64(now_ms() + ms(self.lease))],
            )
            .await?;
        Ok(n > 0)
    }

    /// Deletes expired leases and releases their connections; returns the
    /// replicas reaped.
    async fn reap(&self) -> Result<Vec<String>, ReplicaError> {
        let client = self.pg.client().await?;
        let now = to_i64(now_ms());
        let rows = client
            .query(
                "WITH dead AS (DELETE FROM replicas WHERE lease_until_ms < $1 RETURNING id),
                 released AS (
                   UPDATE connections SET session = NULL, released_ms = $1,
                     last_close = 'replica ' || replica || ' lost its lease',
                     disconnects = disconnects + 1
                   WHERE replica IN (SELECT id FROM dead) AND session IS NOT NULL
                   RETURNING deployment)
                 SELECT id FROM dead",
                &[&now],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// The rows of the given deployments (all when `None`), with their
    /// replicas' liveness.
    pub async fn holdings(&self, only: Option<&str>) -> Result<Vec<Holding>, ReplicaError> {
        let client = self.pg.client().await?;
        let rows = client
            .query(
                &format!("{HOLDING_SELECT} WHERE $1::text IS NULL OR c.deployment = $1"),
                &[&only, &to_i64(now_ms())],
            )
            .await?;
        Ok(rows.iter().map(holding).collect())
    }

    /// The rows whose last holder is gone (its lease ended, or it left),
    /// when this replica is the one that watches them: the live replica
    /// with the lowest id. Empty on the others, so one replica raises the
    /// offline alert of a deployment nobody holds any more.
    pub async fn orphans(&self) -> Result<Vec<Holding>, ReplicaError> {
        let client = self.pg.client().await?;
        let now = to_i64(now_ms());
        let lowest: Option<String> = client
            .query_one(
                "SELECT min(id) FROM replicas WHERE lease_until_ms >= $1",
                &[&now],
            )
            .await?
            .get(0);
        if lowest.as_deref() != Some(self.id.as_str()) {
            return Ok(Vec::new());
        }
        let rows = client
            .query(
                &format!("{HOLDING_SELECT} WHERE r.id IS NULL OR r.lease_until_ms < $1"),
                &[&now, &now],
            )
            .await?;
        Ok(rows.iter().map(holding).collect())
    }

    /// The replica (id, url) that holds the deployment's live connection,
    /// if a live one does.
    pub async fn owner(&self, deployment: &str) -> Result<Option<(String, String)>, ReplicaError> {
        Ok(self
            .holdings(Some(deployment))
            .await?
            .into_iter()
            .find(Holding::connected)
            .and_then(|h| h.replica_url.map(|u| (h.replica, u))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_notices_round_trip() {
        let e = Eviction {
            replica: "a".into(),
            deployment: "d".into(),
            session: "s".into(),
            by: "b".into(),
        };
        let back: Eviction = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(back, e);
    }
}
