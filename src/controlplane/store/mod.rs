//! Durable control-plane state: deployments, hashed tokens, admin tokens,
//! the session audit log and the alerts (history and active set), behind
//! one [`Store`] whatever the backend.
//!
//! The backend is chosen once, at open: one SQLite file (`sqlite`, one
//! server) or a PostgreSQL database (`pg`, shared by N replicas). Each is
//! complete on its own, with its own schema and migrations, and the same
//! behaviour (the tests in `tests` run on both). Values are encoded alike
//! (`codec`).
//!
//! Guarantees: token clear text never reaches the database (only
//! `sha256:<hex>`); every write is one statement or one transaction; audit
//! records and new alerts are announced on the store's bus once committed.

mod codec;
mod error;
pub mod incidents;
pub mod pg;
mod sqlite;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use codec::{to_i64, to_u64};
pub use error::StoreError;
pub use incidents::Act;

use super::bus::{Bus, Change};
use super::model::{
    ADMIN_TOKEN_PREFIX, ActiveAlert, AdminTokenInfo, AlertRow, AlertSummary, AuditRow,
    Authenticated, DeploymentRow, IncidentRow, LaneRow, NewAudit, Origin, PendingUpdate,
    RolloutRow, Scope, StoredRollout, TenantRecord, TokenInfo,
};
use crate::wire::token::SecretToken;
use crate::wire::{Alert, IncidentRecord, LaneState, Registration, Severity, now_ms};

/// Where the data lives.
#[derive(Clone)]
enum Backend {
    Sqlite(sqlite::Sqlite),
    /// Behind an `Arc`: a pool and its settings, far larger than the
    /// SQLite variant, and cloned with every `Store`.
    Pg(Arc<pg::Pg>),
}

/// Runs one method on the backend this store was opened on. SQLite's are
/// synchronous (short calls under the connection's lock), PostgreSQL's
/// are awaited.
macro_rules! on_backend {
    ($store:ident . $method:ident ( $($arg:expr),* )) => {
        match &$store.backend {
            Backend::Sqlite(s) => s.$method($($arg),*),
            Backend::Pg(p) => p.$method($($arg),*).await,
        }
    };
}

/// The `lane_uid` of a lane set by hand, before the admin token's id: a
/// lane registered by an operator (with its `Tenant`'s uid) is not
/// overwritten by hand, and one set by hand gives way to the operator's.
const ASSIGNED_BY_ADMIN: &str = "admin:";

#[derive(Clone)]
pub struct Store {
    backend: Backend,
    /// Announces audit records and alerts (`bus`).
    bus: Bus,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store")
    }
}

impl Store {
    /// Opens (or creates) a SQLite file and runs its migrations.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Ok(Self::on(Backend::Sqlite(sqlite::Sqlite::open(path)?)))
    }

    /// Opens `--db`: a `postgres://` or `postgresql://` URL, or else the
    /// path of a SQLite file. Runs the migrations either way.
    pub async fn connect(db: &str) -> Result<Self, StoreError> {
        if pg::is_url(db) {
            Ok(Self::on(Backend::Pg(Arc::new(pg::Pg::connect(db).await?))))
        } else {
            Self::open(Path::new(db))
        }
    }

    fn on(backend: Backend) -> Self {
        Self {
            backend,
            bus: Bus::default(),
        }
    }

    /// The PostgreSQL backend, when this store is one: what replicas share
    /// (`replica`).
    pub fn pg(&self) -> Option<&pg::Pg> {
        match &self.backend {
            Backend::Pg(p) => Some(p),
            Backend::Sqlite(_) => None,
        }
    }

    /// Where this store announces what it wrote; the server's live state
    /// publishes on the same bus.
    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    /// Publishes a lane's change on this server's bus and, on PostgreSQL,
    /// to the other replicas (`NOTIFY`; they publish it on theirs,
    /// [`heard`](Self::heard)). Only [`Change::Lane`],
    /// [`Change::IncidentUpdates`] and [`Change::Fleet`] cross; a failed
    /// notice is logged (the other replicas' periodic looks still find the
    /// change).
    async fn announce(&self, c: Change) {
        if let Backend::Pg(p) = &self.backend {
            let payload = match &c {
                Change::Lane(l) => Some(format!("lane:{l}")),
                Change::IncidentUpdates(d) => Some(format!("updates:{d}")),
                Change::Fleet(d) => Some(format!("fleet:{d}")),
                _ => None,
            };
            if let Some(payload) = payload
                && let Err(e) = p.notify(&payload).await
            {
                tracing::warn!(error = %e, "change notice to the other replicas failed");
            }
        }
        self.bus.publish(c);
    }

    /// Publishes on this server's bus what another replica announced.
    pub fn heard(&self, payload: &str) {
        let c = match payload.split_once(':') {
            Some(("lane", l)) => Change::Lane(l.to_owned()),
            Some(("updates", d)) => Change::IncidentUpdates(d.to_owned()),
            Some(("fleet", d)) => Change::Fleet(d.to_owned()),
            _ => {
                tracing::debug!(payload, "unknown change notice");
                return;
            }
        };
        self.bus.publish(c);
    }

    /// Creates a deployment and its first token. The token is returned in
    /// clear exactly once; only its hash is kept.
    pub async fn create_deployment(
        &self,
        name: &str,
    ) -> Result<(TokenInfo, SecretToken), StoreError> {
        if !crate::names::is_dns1123_label(name) {
            return Err(StoreError::BadName(name.to_owned()));
        }
        on_backend!(self.create_deployment(name))
    }

    pub async fn list_deployments(&self) -> Result<Vec<DeploymentRow>, StoreError> {
        on_backend!(self.list_deployments())
    }

    pub async fn deployment_exists(&self, name: &str) -> Result<bool, StoreError> {
        on_backend!(self.deployment_exists(name))
    }

    /// Issues a new token and lets every other still-valid token of the
    /// deployment expire after `overlap`, so a running operator can switch
    /// without a gap. An `overlap` of zero ends them at once.
    pub async fn rotate(
        &self,
        deployment: &str,
        overlap: Duration,
    ) -> Result<(TokenInfo, SecretToken), StoreError> {
        on_backend!(self.rotate(deployment, overlap))
    }

    /// Revokes one token, or every token of the deployment when `token_id`
    /// is `None`. Returns how many were revoked.
    pub async fn revoke(
        &self,
        deployment: &str,
        token_id: Option<&str>,
    ) -> Result<usize, StoreError> {
        on_backend!(self.revoke(deployment, token_id))
    }

    pub async fn list_tokens(&self, deployment: &str) -> Result<Vec<TokenInfo>, StoreError> {
        on_backend!(self.list_tokens(deployment))
    }

    /// Looks a presented token up by its hash; `None` when unknown, revoked
    /// or expired.
    pub async fn authenticate(
        &self,
        token: &SecretToken,
    ) -> Result<Option<Authenticated>, StoreError> {
        on_backend!(self.authenticate(token))
    }

    /// The ids of every token valid now: one query re-checks all live
    /// connections at once.
    pub async fn valid_token_ids(&self) -> Result<HashSet<String>, StoreError> {
        on_backend!(self.valid_token_ids())
    }

    /// Whether a token (by id) is still valid now.
    pub async fn token_valid(&self, token_id: &str) -> Result<bool, StoreError> {
        on_backend!(self.token_valid(token_id))
    }

    /// Creates an admin token (limited to one support lane when `lane`
    /// is given); the clear text is returned exactly once.
    pub async fn create_admin_token(
        &self,
        lane: Option<&str>,
    ) -> Result<(AdminTokenInfo, SecretToken), StoreError> {
        if let Some(l) = lane
            && !crate::names::is_dns1123_label(l)
        {
            return Err(StoreError::BadLane(l.to_owned()));
        }
        let secret = SecretToken::generate_with_prefix(ADMIN_TOKEN_PREFIX)?;
        let info = AdminTokenInfo {
            id: format!("adm_{}", &crate::wire::random_id()[..12]),
            created_ms: now_ms(),
            revoked_ms: None,
            lane: lane.map(str::to_owned),
        };
        let hash = secret.hash();
        on_backend!(self.insert_admin_token(&info, &hash))?;
        Ok((info, secret))
    }

    pub async fn list_admin_tokens(&self) -> Result<Vec<AdminTokenInfo>, StoreError> {
        on_backend!(self.list_admin_tokens())
    }

    /// Revokes one admin token; it stops working at the next request.
    pub async fn revoke_admin_token(&self, id: &str) -> Result<(), StoreError> {
        if on_backend!(self.revoke_admin_token(id))? {
            Ok(())
        } else {
            Err(StoreError::NoAdminToken(id.to_owned()))
        }
    }

    /// Whether any admin token was ever created. Revoked ones count: once
    /// enabled, admin authentication stays on, so revoking the last token
    /// locks the API rather than opening it.
    pub async fn admin_auth_enabled(&self) -> Result<bool, StoreError> {
        on_backend!(self.admin_auth_enabled())
    }

    /// Whether `token` is an admin token that is not revoked.
    pub async fn admin_token_valid(&self, token: &SecretToken) -> Result<bool, StoreError> {
        self.admin_hash_valid(&token.hash()).await
    }

    /// Whether the admin token with this SHA-256 exists and is not revoked.
    pub async fn admin_hash_valid(&self, hash: &str) -> Result<bool, StoreError> {
        Ok(self.admin_hash_scope(hash).await?.is_some())
    }

    /// The id of the admin token with this SHA-256 and what it may
    /// reach; `None` when it does not exist or is revoked.
    pub async fn admin_hash_scope(
        &self,
        hash: &str,
    ) -> Result<Option<(String, Scope)>, StoreError> {
        Ok(on_backend!(self.admin_hash_scope(hash))?.map(|(id, lane)| (id, Scope::of(lane))))
    }

    pub async fn append_audit(&self, a: &NewAudit<'_>) -> Result<(), StoreError> {
        self.append_audit_at(a, now_ms()).await
    }

    /// Writes one record (committed when this returns) and announces it.
    pub async fn append_audit_at(&self, a: &NewAudit<'_>, at_ms: u64) -> Result<(), StoreError> {
        let id = on_backend!(self.append_audit_at(a, at_ms))?;
        self.bus
            .publish(Change::Audit(Box::new(a.stored(id, at_ms))));
        Ok(())
    }

    /// The newest `limit` audit records of a deployment, oldest first.
    pub async fn list_audit(
        &self,
        deployment: &str,
        limit: usize,
    ) -> Result<Vec<AuditRow>, StoreError> {
        self.list_audit_before(deployment, limit, None).await
    }

    /// The newest `limit` audit records of a deployment older than the
    /// record `before` (all when `None`), oldest first.
    pub async fn list_audit_before(
        &self,
        deployment: &str,
        limit: usize,
        before: Option<i64>,
    ) -> Result<Vec<AuditRow>, StoreError> {
        on_backend!(self.list_audit_before(deployment, limit, before))
    }

    /// Stores an alert unless its id is already stored for the deployment,
    /// applies a new one to the active set and trims the deployment to its
    /// newest [`MAX_ALERTS_PER_DEPLOYMENT`](super::model::MAX_ALERTS_PER_DEPLOYMENT)
    /// alerts, in one transaction ("newest" is the order of receipt, not
    /// the operator's clock). Returns whether it was new; a resent alert
    /// is recognised and changes nothing.
    pub async fn insert_alert(&self, origin: &Origin<'_>, a: &Alert) -> Result<bool, StoreError> {
        let new = on_backend!(self.insert_alert(origin, a))?;
        if new {
            let d = origin.deployment.to_owned();
            self.bus.publish(Change::Alerts(d.clone()));
            // Its count of active alerts may have changed.
            self.bus.publish(Change::Deployment(d));
        }
        Ok(new)
    }

    /// Stores a tenant registration (`tenant_register`, `support_lane`),
    /// unless a newer record of its kind is stored for the tenant: either
    /// way the operator may be told it is stored.
    pub async fn register(&self, deployment: &str, r: &Registration) -> Result<(), StoreError> {
        on_backend!(self.register(deployment, r))?;
        self.bus.publish(Change::Deployment(deployment.to_owned()));
        if let Registration::Support(s) = r {
            if let Some(l) = &s.lane {
                self.announce(Change::Lane(l.clone())).await;
            }
            self.announce(Change::IncidentUpdates(deployment.to_owned()))
                .await;
        }
        Ok(())
    }

    /// Stores an incident in its tenant's support lane (its detail masked
    /// once more), unless it is stored already; returns the lane it is
    /// in, none while the tenant has no lane.
    pub async fn insert_incident(
        &self,
        deployment: &str,
        i: &IncidentRecord,
    ) -> Result<Option<String>, StoreError> {
        let detail = crate::redact::for_lane(&i.detail, &[]);
        let lane = on_backend!(self.insert_incident(deployment, i, &detail))?;
        self.bus.publish(Change::Deployment(deployment.to_owned()));
        if let Some(l) = &lane {
            self.announce(Change::Lane(l.clone())).await;
        }
        Ok(lane)
    }

    /// A lane's incidents (in one state when given), newest first, at most
    /// `limit` (itself at most
    /// [`MAX_INCIDENTS_LIMIT`](super::model::MAX_INCIDENTS_LIMIT)).
    pub async fn lane_incidents(
        &self,
        lane: &str,
        state: Option<LaneState>,
        limit: usize,
    ) -> Result<Vec<IncidentRow>, StoreError> {
        let limit = limit.min(super::model::MAX_INCIDENTS_LIMIT);
        on_backend!(self.lane_incidents(lane, state, limit))
    }

    /// The incidents of a lane with this id: one per deployment that has
    /// it (one deployment's when given).
    pub async fn lane_incident(
        &self,
        lane: &str,
        id: &str,
        deployment: Option<&str>,
    ) -> Result<Vec<IncidentRow>, StoreError> {
        on_backend!(self.lane_incident(lane, id, deployment))
    }

    /// Moves an incident forward (acknowledged, resolved; never back).
    /// Returns the row after it and whether this call moved it; `None`
    /// when there is no such incident. A move owes the operator an
    /// `incident_update`, announced on the bus.
    pub async fn act_on_incident(
        &self,
        a: &Act<'_>,
    ) -> Result<Option<(IncidentRow, bool)>, StoreError> {
        if a.note.len() > super::model::MAX_NOTE {
            return Err(StoreError::NoteTooLong(a.note.len()));
        }
        let out = on_backend!(self.act_on_incident(a))?;
        if let Some((row, true)) = &out {
            self.announce(Change::IncidentUpdates(row.deployment.clone()))
                .await;
            if let Some(l) = &row.lane {
                self.announce(Change::Lane(l.clone())).await;
            }
        }
        Ok(out)
    }

    /// Up to `limit` updates the deployment's operator has not confirmed,
    /// oldest first.
    pub async fn pending_updates(
        &self,
        deployment: &str,
        limit: usize,
    ) -> Result<Vec<PendingUpdate>, StoreError> {
        on_backend!(self.pending_updates(deployment, limit))
    }

    /// Records the operator's `incident_update_ack`; returns whether it
    /// settled an owed update.
    pub async fn mark_delivered(
        &self,
        deployment: &str,
        id: &str,
        state: LaneState,
    ) -> Result<bool, StoreError> {
        on_backend!(self.mark_delivered(deployment, id, state))
    }

    /// Every support lane (one when `only` is given): its tenants and its
    /// incidents by state, by name.
    pub async fn lanes(&self, only: Option<&str>) -> Result<Vec<LaneRow>, StoreError> {
        Ok(on_backend!(self.lane_counts(only))?.lanes())
    }

    /// Sets a tenant's support lane by hand (`exo support lane create`)
    /// and puts the tenant's unrouted incidents in it; returns how many.
    /// Refused when the tenant's operator registered another lane (from
    /// its `Tenant`): that one is changed there.
    pub async fn assign_lane(
        &self,
        deployment: &str,
        tenant: &str,
        lane: &str,
        contacts: &[String],
        by: &str,
    ) -> Result<usize, StoreError> {
        if !crate::names::is_dns1123_label(lane) {
            return Err(StoreError::BadLane(lane.to_owned()));
        }
        if !crate::names::is_dns1123_label(tenant) {
            return Err(StoreError::BadTenant(tenant.to_owned()));
        }
        if !self.deployment_exists(deployment).await? {
            return Err(StoreError::NoDeployment(deployment.to_owned()));
        }
        if let Some((Some(current), uid)) = on_backend!(self.tenant_lane(deployment, tenant))?
            && current != lane
            && !uid.is_empty()
            && !uid.starts_with(ASSIGNED_BY_ADMIN)
        {
            return Err(StoreError::LaneFromOperator {
                tenant: tenant.to_owned(),
                lane: current,
            });
        }
        let contacts = serde_json::to_string(contacts).unwrap_or_default();
        let by = format!("{ASSIGNED_BY_ADMIN}{by}");
        let n = on_backend!(self.assign_lane(deployment, tenant, lane, &contacts, &by))?;
        self.announce(Change::Lane(lane.to_owned())).await;
        self.announce(Change::IncidentUpdates(deployment.to_owned()))
            .await;
        self.bus.publish(Change::Deployment(deployment.to_owned()));
        Ok(n)
    }

    /// A deployment's incidents (one tenant's when given), newest first.
    pub async fn list_incidents(
        &self,
        deployment: &str,
        tenant: Option<&str>,
    ) -> Result<Vec<IncidentRow>, StoreError> {
        on_backend!(self.list_incidents(deployment, tenant))
    }

    /// Makes `rows` the deployment's Rollouts in the fleet projection: a
    /// completed snapshot of `session`, which becomes the one session
    /// whose deltas the projection takes for the deployment. An unchanged
    /// row is not written; returns how many rows changed, and announces
    /// the change to every replica when any did.
    pub async fn replace_rollouts(
        &self,
        deployment: &str,
        session: &str,
        rows: &[RolloutRow],
    ) -> Result<u64, StoreError> {
        let n = on_backend!(self.replace_rollouts(deployment, session, rows))?;
        if n > 0 {
            self.announce(Change::Fleet(deployment.to_owned())).await;
        }
        Ok(n)
    }

    /// One Rollout's delta in the fleet projection: upserted (`Some`,
    /// the wire `Resource` as JSON) or removed (`None`), only while
    /// `session` is the deployment's source (a delta of an evicted
    /// connection, late, changes nothing). Returns whether a row changed,
    /// and announces it to every replica.
    pub async fn put_rollout(
        &self,
        deployment: &str,
        session: &str,
        namespace: &str,
        name: &str,
        resource: Option<&str>,
    ) -> Result<bool, StoreError> {
        let changed =
            on_backend!(self.put_rollout(deployment, session, namespace, name, resource))?;
        if changed {
            self.announce(Change::Fleet(deployment.to_owned())).await;
        }
        Ok(changed)
    }

    /// Tells every replica that the deployment's place in the fleet view
    /// changed without a row changing (its connection came or went).
    pub async fn fleet_changed(&self, deployment: &str) {
        self.announce(Change::Fleet(deployment.to_owned())).await;
    }

    /// Every deployment's Rollouts (one tenant namespace's when given), by
    /// deployment, namespace and name.
    pub async fn fleet_rollouts(
        &self,
        namespace: Option<&str>,
    ) -> Result<Vec<StoredRollout>, StoreError> {
        on_backend!(self.fleet_rollouts(namespace))
    }

    /// A deployment's registered tenants, by name.
    pub async fn list_tenants(&self, deployment: &str) -> Result<Vec<TenantRecord>, StoreError> {
        on_backend!(self.list_tenants(deployment))
    }

    /// Up to `limit` alerts of a deployment received before the alert
    /// `before` (all when `None`), newest first.
    pub async fn list_alerts(
        &self,
        deployment: &str,
        limit: usize,
        before: Option<i64>,
    ) -> Result<Vec<AlertRow>, StoreError> {
        on_backend!(self.list_alerts(deployment, limit, before))
    }

    /// How many alerts a deployment holds and the newest one.
    pub async fn alert_summary(&self, deployment: &str) -> Result<AlertSummary, StoreError> {
        on_backend!(self.alert_summary(deployment))
    }

    /// A deployment's active alerts, longest active first.
    pub async fn list_active(&self, deployment: &str) -> Result<Vec<ActiveAlert>, StoreError> {
        on_backend!(self.list_active(deployment))
    }

    /// The active alert of one key.
    pub async fn active(
        &self,
        deployment: &str,
        key: &str,
    ) -> Result<Option<ActiveAlert>, StoreError> {
        on_backend!(self.active(deployment, key))
    }

    /// How many alerts are active, per deployment (absent: none).
    pub async fn active_counts(&self) -> Result<HashMap<String, u64>, StoreError> {
        on_backend!(self.active_counts())
    }

    /// The severity of every deployment's active alert under `key`.
    pub async fn active_severities(
        &self,
        key: &str,
    ) -> Result<HashMap<String, Severity>, StoreError> {
        on_backend!(self.active_severities(key))
    }
}

#[cfg(test)]
mod tests;
