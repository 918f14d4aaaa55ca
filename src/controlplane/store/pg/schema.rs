//! Versioned migrations of the PostgreSQL schema.
//!
//! [`MIGRATIONS`] lists every schema change in order; a database records the
//! ones it has had in `schema_migrations`. Guarantees:
//! - Each migration runs in its own transaction, together with the row that
//!   records it: a failed one leaves nothing behind and is retried at the
//!   next start.
//! - Replicas that start at once apply each migration exactly once: every
//!   transaction here first takes the advisory lock [`MIGRATION_LOCK`] (held
//!   until it ends), then re-reads what is applied. The lock also covers the
//!   creation of `schema_migrations` itself, which `IF NOT EXISTS` alone does
//!   not make safe against a concurrent creator.
//!
//! Times are milliseconds since the epoch in `BIGINT`, as in SQLite.

use tokio_postgres::Client;

use crate::controlplane::store::{StoreError, to_i64};
use crate::wire::now_ms;

/// The advisory lock that serialises migrations across replicas ("ExoMigra"
/// in ASCII). Any other advisory lock of the project needs another key.
pub const MIGRATION_LOCK: i64 = 0x4578_6f4d_6967_7261;

const BOOKKEEPING: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version BIGINT PRIMARY KEY,
    applied_ms BIGINT NOT NULL
)";

/// Every schema change, in order; migration `i` is version `i + 1`.
/// Append new ones at the end; never edit or reorder one that shipped, since
/// databases already at its version will not run it again.
pub const MIGRATIONS: &[&str] = &[
    // 1: deployments, deployment tokens, the audit log, admin tokens, the
    // alert history and the active set (SQLite's schema at the time).
    "
    CREATE TABLE deployments (
        name TEXT PRIMARY KEY,
        created_ms BIGINT NOT NULL
    );
    CREATE TABLE tokens (
        id TEXT PRIMARY KEY,
        deployment TEXT NOT NULL REFERENCES deployments(name),
        hash TEXT NOT NULL UNIQUE,
        created_ms BIGINT NOT NULL,
        expires_ms BIGINT,
        revoked_ms BIGINT
    );
    CREATE INDEX tokens_by_deployment ON tokens(deployment);
    -- detail is JSON text, as written by serde_json: JSONB would refuse
    -- some strings that SQLite keeps (an escaped NUL).
    CREATE TABLE audit (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        deployment TEXT NOT NULL,
        connection_id TEXT,
        at_ms BIGINT NOT NULL,
        source TEXT NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        target TEXT NOT NULL,
        outcome TEXT NOT NULL,
        detail TEXT
    );
    CREATE INDEX audit_by_deployment ON audit(deployment, id);
    CREATE TABLE admin_tokens (
        id TEXT PRIMARY KEY,
        hash TEXT NOT NULL UNIQUE,
        created_ms BIGINT NOT NULL,
        revoked_ms BIGINT
    );
    CREATE TABLE alerts (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        deployment TEXT NOT NULL,
        alert_id TEXT NOT NULL,
        boot_id TEXT,
        connection_id TEXT,
        received_ms BIGINT NOT NULL,
        at TEXT NOT NULL,
        severity TEXT NOT NULL,
        reason TEXT NOT NULL,
        namespace TEXT NOT NULL,
        object TEXT NOT NULL,
        message TEXT NOT NULL,
        alert_key TEXT NOT NULL DEFAULT '',
        alert_state TEXT NOT NULL DEFAULT 'firing',
        UNIQUE (deployment, alert_id)
    );
    CREATE INDEX alerts_by_deployment ON alerts(deployment, id);
    CREATE TABLE active_alerts (
        deployment TEXT NOT NULL,
        alert_key TEXT NOT NULL,
        since_ms BIGINT NOT NULL,
        id BIGINT NOT NULL,
        alert_id TEXT NOT NULL,
        boot_id TEXT,
        connection_id TEXT,
        received_ms BIGINT NOT NULL,
        at TEXT NOT NULL,
        severity TEXT NOT NULL,
        reason TEXT NOT NULL,
        namespace TEXT NOT NULL,
        object TEXT NOT NULL,
        message TEXT NOT NULL,
        alert_state TEXT NOT NULL DEFAULT 'firing',
        PRIMARY KEY (deployment, alert_key)
    );
    ",
    // 2: the replicas, their leases and who holds which connection.
    REPLICAS,
    // 3: the tenant registry.
    TENANTS,
    // 4: the support lanes' incidents.
    INCIDENTS,
    // 5: what support did with them; lane-scoped admin tokens.
    LANE_STATES,
    // 6: the fleet-wide projection of Rollouts.
    FLEET_ROLLOUTS,
];

/// Version 6: every deployment's Rollouts (the wire `Resource` as JSON
/// text), one row per deployment, namespace and name; and per deployment
/// the session whose snapshot the rows are from (deltas of another are
/// dropped).
const FLEET_ROLLOUTS: &str = "
CREATE TABLE fleet_rollouts (
    deployment TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    resource TEXT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (deployment, namespace, name)
);
CREATE INDEX fleet_rollouts_by_namespace ON fleet_rollouts (namespace);
CREATE TABLE fleet_sources (
    deployment TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);
";

/// Version 5: an incident's state in its lane (acknowledged, resolved, by
/// whom, support's note) and the state its operator last confirmed; the
/// lane an admin token is limited to.
const LANE_STATES: &str = "
ALTER TABLE incidents
    ADD COLUMN state TEXT NOT NULL DEFAULT 'routed',
    ADD COLUMN acknowledged_ms BIGINT,
    ADD COLUMN acknowledged_by TEXT,
    ADD COLUMN resolved_ms BIGINT,
    ADD COLUMN resolved_by TEXT,
    ADD COLUMN note TEXT NOT NULL DEFAULT '',
    ADD COLUMN delivered_state TEXT NOT NULL DEFAULT 'routed';
ALTER TABLE admin_tokens ADD COLUMN lane TEXT;
CREATE INDEX incidents_undelivered ON incidents (deployment) WHERE delivered_state <> state;
CREATE INDEX incidents_by_lane ON incidents (lane, stored_ms);
";

/// Version 4: the support lanes' incidents, one row per deployment and
/// incident id.
const INCIDENTS: &str = "
CREATE TABLE incidents (
    deployment TEXT NOT NULL,
    id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    agent TEXT NOT NULL,
    severity TEXT NOT NULL,
    summary TEXT NOT NULL,
    detail TEXT NOT NULL,
    correlation_id TEXT NOT NULL,
    received_at TEXT NOT NULL,
    lane TEXT,
    stored_ms BIGINT NOT NULL,
    PRIMARY KEY (deployment, id)
);
CREATE INDEX incidents_by_time ON incidents (deployment, stored_ms);
";

/// Version 3: the tenant registry, one row per tenant of a deployment
/// (its enrollment and its support lane, each with the generation it is
/// for).
const TENANTS: &str = "
CREATE TABLE tenants (
    deployment TEXT NOT NULL,
    tenant TEXT NOT NULL,
    enrolled BOOLEAN NOT NULL DEFAULT false,
    tier TEXT NOT NULL DEFAULT '',
    wave TEXT NOT NULL DEFAULT '',
    generation BIGINT NOT NULL DEFAULT -1,
    updated_ms BIGINT NOT NULL,
    lane TEXT,
    contacts TEXT,
    lane_generation BIGINT NOT NULL DEFAULT -1,
    lane_updated_ms BIGINT,
    uid TEXT NOT NULL DEFAULT '',
    lane_uid TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (deployment, tenant)
);
";

/// Version 2: the replicas, their leases and who holds which connection
/// (read and written by `crate::controlplane::replica`).
const REPLICAS: &str = "
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    started_ms BIGINT NOT NULL,
    lease_until_ms BIGINT NOT NULL
);
CREATE TABLE connections (
    deployment TEXT PRIMARY KEY,
    session TEXT,
    replica TEXT NOT NULL,
    connection_id TEXT NOT NULL,
    taken_ms BIGINT NOT NULL,
    last_frame_ms BIGINT NOT NULL,
    hello JSONB NOT NULL,
    released_ms BIGINT,
    last_close TEXT,
    connections BIGINT NOT NULL DEFAULT 0,
    evictions BIGINT NOT NULL DEFAULT 0,
    disconnects BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX connections_by_replica ON connections (replica) WHERE session IS NOT NULL;
CREATE TABLE cluster (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
";

/// Applies the migrations the database has not had, oldest first.
pub async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    // Step 0 creates the bookkeeping table; step `v` applies version `v`.
    for step in 0..=MIGRATIONS.len() {
        let version = i64::try_from(step).unwrap_or(i64::MAX);
        let err = |source| StoreError::Migrate { version, source };
        let tx = client.transaction().await.map_err(err)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(err)?;
        match step.checked_sub(1).and_then(|i| MIGRATIONS.get(i)) {
            None => tx.batch_execute(BOOKKEEPING).await,
            Some(sql) => apply(&tx, version, sql).await,
        }
        .map_err(err)?;
        tx.commit().await.map_err(err)?;
    }
    Ok(())
}

/// Applies one migration unless it is recorded, inside the locked
/// transaction; re-reading under the lock is what makes it exactly once.
async fn apply(
    tx: &tokio_postgres::Transaction<'_>,
    version: i64,
    sql: &str,
) -> Result<(), tokio_postgres::Error> {
    let applied = tx
        .query_opt(
            "SELECT 1 FROM schema_migrations WHERE version = $1",
            &[&version],
        )
        .await?;
    if applied.is_some() {
        return Ok(());
    }
    tx.batch_execute(sql).await?;
    tx.execute(
        "INSERT INTO schema_migrations (version, applied_ms) VALUES ($1, $2)",
        &[&version, &to_i64(now_ms())],
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::test_store::FreshDb;

    /// Three replicas starting at once on a new database: all succeed, and
    /// each version is recorded once (a second run of migration 1 would
    /// fail on its `CREATE TABLE`s). Starting again changes nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
    async fn concurrent_migrations_apply_each_version_once() {
        let db = FreshDb::create().await;
        let runs = (0..3).map(|_| {
            let url = db.url.clone();
            tokio::spawn(async move { super::super::Pg::connect(&url).await.map(|_| ()) })
        });
        for run in futures::future::join_all(runs).await {
            run.unwrap().unwrap();
        }
        let recorded = |c: tokio_postgres::Client| async move {
            c.query(
                "SELECT version, count(*) FROM schema_migrations GROUP BY version ORDER BY version",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1)))
            .collect::<Vec<_>>()
        };
        let want: Vec<(i64, i64)> = (1..=MIGRATIONS.len() as i64).map(|v| (v, 1)).collect();
        assert_eq!(recorded(db.client().await).await, want);
        let mut c = db.client().await;
        migrate(&mut c).await.unwrap();
        assert_eq!(recorded(c).await, want);
    }
}
