//! The SQLite schema: the tables as first shipped (version 0, created
//! when missing) and the migrations since, counted in `PRAGMA
//! user_version`.

use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::controlplane::store::StoreError;

/// Version 0: deployments, tokens, the audit log, admin tokens and the
/// alert history as they first shipped.
pub(super) const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS deployments (
    name TEXT PRIMARY KEY,
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    id TEXT PRIMARY KEY,
    deployment TEXT NOT NULL REFERENCES deployments(name),
    hash TEXT NOT NULL UNIQUE,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER,
    revoked_ms INTEGER
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    deployment TEXT NOT NULL,
    connection_id TEXT,
    at_ms INTEGER NOT NULL,
    source TEXT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS audit_by_deployment ON audit(deployment, id);
CREATE TABLE IF NOT EXISTS admin_tokens (
    id TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    created_ms INTEGER NOT NULL,
    revoked_ms INTEGER
);
CREATE TABLE IF NOT EXISTS alerts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    deployment TEXT NOT NULL,
    alert_id TEXT NOT NULL,
    boot_id TEXT,
    connection_id TEXT,
    received_ms INTEGER NOT NULL,
    at TEXT NOT NULL,
    severity TEXT NOT NULL,
    reason TEXT NOT NULL,
    namespace TEXT NOT NULL,
    object TEXT NOT NULL,
    message TEXT NOT NULL,
    UNIQUE (deployment, alert_id)
);
CREATE INDEX IF NOT EXISTS alerts_by_deployment ON alerts(deployment, id);
";

/// A schema change made after the tables above first shipped.
type Migration = fn(&rusqlite::Transaction<'_>) -> rusqlite::Result<()>;

/// Every migration in order; `PRAGMA user_version` is how many a database
/// has had. The `CREATE TABLE IF NOT EXISTS` batches above are version 0,
/// so a new database and one of an older version take the same path. Add
/// to the end, never change one that shipped.
const MIGRATIONS: &[Migration] = &[
    // 1: alert keys and states, the active set.
    migrate_v1, // 2: the tenant registry.
    migrate_v2, // 3: the support lanes' incidents.
    migrate_v3, // 4: what support did with them; lane-scoped admin tokens.
    migrate_v4, // 5: the fleet-wide projection of Rollouts.
    migrate_v5,
];

/// Runs the migrations a database has not had, each in an immediate
/// transaction that re-reads the version: the admin CLI and a server
/// opening an old file at once apply each migration once.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    for (i, m) in MIGRATIONS.iter().enumerate() {
        let version = i64::try_from(i + 1).unwrap_or(i64::MAX);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if current >= version {
            continue;
        }
        m(&tx)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
    }
    Ok(())
}

/// Schema version 1: keys and states in the history, and the active set.
/// Works on a database of the previous version (the columns are added,
/// with defaults that make every old alert a keyless firing one) and on a
/// new one; a column already there is left alone.
fn migrate_v1(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    add_column(tx, "alerts", "alert_key", "TEXT NOT NULL DEFAULT ''")?;
    add_column(
        tx,
        "alerts",
        "alert_state",
        "TEXT NOT NULL DEFAULT 'firing'",
    )?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS active_alerts (
            deployment TEXT NOT NULL,
            alert_key TEXT NOT NULL,
            since_ms INTEGER NOT NULL,
            id INTEGER NOT NULL,
            alert_id TEXT NOT NULL,
            boot_id TEXT,
            connection_id TEXT,
            received_ms INTEGER NOT NULL,
            at TEXT NOT NULL,
            severity TEXT NOT NULL,
            reason TEXT NOT NULL,
            namespace TEXT NOT NULL,
            object TEXT NOT NULL,
            message TEXT NOT NULL,
            alert_state TEXT NOT NULL DEFAULT 'firing',
            PRIMARY KEY (deployment, alert_key)
        );",
    )
}

/// Schema version 2: the tenant registry, one row per tenant of a
/// deployment (its enrollment and its support lane, each with the
/// generation it is for).
fn migrate_v2(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS tenants (
            deployment TEXT NOT NULL,
            tenant TEXT NOT NULL,
            enrolled INTEGER NOT NULL DEFAULT 0,
            tier TEXT NOT NULL DEFAULT '',
            wave TEXT NOT NULL DEFAULT '',
            generation INTEGER NOT NULL DEFAULT -1,
            updated_ms INTEGER NOT NULL,
            lane TEXT,
            contacts TEXT,
            lane_generation INTEGER NOT NULL DEFAULT -1,
            lane_updated_ms INTEGER,
            uid TEXT NOT NULL DEFAULT '',
            lane_uid TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (deployment, tenant)
        );",
    )
}

/// Schema version 3: the support lanes' incidents, one row per
/// deployment and incident id.
fn migrate_v3(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS incidents (
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
            stored_ms INTEGER NOT NULL,
            PRIMARY KEY (deployment, id)
        );
        CREATE INDEX IF NOT EXISTS incidents_by_time ON incidents (deployment, stored_ms);",
    )
}

/// Schema version 4: an incident's state in its lane (acknowledged,
/// resolved, by whom, support's note) and the state its operator last
/// confirmed; the lane an admin token is limited to.
fn migrate_v4(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    add_column(tx, "incidents", "state", "TEXT NOT NULL DEFAULT 'routed'")?;
    add_column(tx, "incidents", "acknowledged_ms", "INTEGER")?;
    add_column(tx, "incidents", "acknowledged_by", "TEXT")?;
    add_column(tx, "incidents", "resolved_ms", "INTEGER")?;
    add_column(tx, "incidents", "resolved_by", "TEXT")?;
    add_column(tx, "incidents", "note", "TEXT NOT NULL DEFAULT ''")?;
    add_column(
        tx,
        "incidents",
        "delivered_state",
        "TEXT NOT NULL DEFAULT 'routed'",
    )?;
    add_column(tx, "admin_tokens", "lane", "TEXT")?;
    tx.execute_batch(
        "CREATE INDEX IF NOT EXISTS incidents_undelivered ON incidents (deployment)
           WHERE delivered_state <> state;
         CREATE INDEX IF NOT EXISTS incidents_by_lane ON incidents (lane, stored_ms);",
    )
}

/// Schema version 5: every deployment's Rollouts (the wire `Resource` as
/// JSON text), one row per deployment, namespace and name; and per
/// deployment the session whose snapshot the rows are from.
fn migrate_v5(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS fleet_rollouts (
            deployment TEXT NOT NULL,
            namespace TEXT NOT NULL,
            name TEXT NOT NULL,
            resource TEXT NOT NULL,
            updated_ms INTEGER NOT NULL,
            PRIMARY KEY (deployment, namespace, name)
        );
        CREATE INDEX IF NOT EXISTS fleet_rollouts_by_namespace ON fleet_rollouts (namespace);
        CREATE TABLE IF NOT EXISTS fleet_sources (
            deployment TEXT PRIMARY KEY,
            session TEXT NOT NULL,
            updated_ms INTEGER NOT NULL
        );",
    )
}

fn add_column(tx: &Transaction<'_>, table: &str, column: &str, decl: &str) -> rusqlite::Result<()> {
    let exists: i64 = tx.query_row(
        &format!("SELECT count(*) FROM pragma_table_info('{table}') WHERE name = ?1"),
        [column],
        |r| r.get(0),
    )?;
    if exists == 0 {
        tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl};"))?;
    }
    Ok(())
}
