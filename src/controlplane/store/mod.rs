//! Durable control-plane state in embedded SQLite: deployments, hashed
//! tokens and the session audit log (admin tokens and alerts live in their
//! own modules, on the same database).
//!
//! Guarantees: token clear text never reaches the database (only
//! `sha256:<hex>`); every write is one transaction; the database runs in WAL
//! mode with a busy timeout so the admin CLI and a running server can share
//! it (the server re-checks live tokens, so a revocation from the CLI reaches
//! it). Caveat: calls are synchronous and short; the server makes them from
//! async code under a mutex, fine for a reference control plane.

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::model::{Authenticated, DeploymentRow, TokenInfo};
use crate::wire::now_ms;
use crate::wire::token::{SecretToken, TokenError, hash_token};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("database: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("deployment {0:?} already exists")]
    Exists(String),
    #[error("deployment {0:?} does not exist")]
    NoDeployment(String),
    #[error("invalid deployment name {0:?}: use 1-63 characters a-z, 0-9 and '-'")]
    BadName(String),
    #[error("token {0:?} does not exist in deployment {1:?}")]
    NoToken(String, String),
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("the database lock was poisoned by a panic")]
    Poisoned,
    #[error("postgres {url}: {source}")]
    PgConnect {
        /// The URL without its password.
        url: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("postgres: {0}")]
    Pg(#[from] tokio_postgres::Error),
    #[error("postgres pool: {0}")]
    Pool(String),
    #[error("postgres migration {version}: {source}")]
    Migrate {
        version: i64,
        #[source]
        source: tokio_postgres::Error,
    },
}

/// Where the data lives: one SQLite file (one server), or PostgreSQL
/// (shared by N replicas, `replica` module).
#[derive(Clone)]
enum Db {
    Sqlite(Arc<Mutex<Connection>>),
    /// Behind an `Arc`: a pool and its settings, far larger than the
    /// SQLite variant, and cloned with every `Store`.
    Postgres(Arc<super::pg::Pg>),
}

#[derive(Clone)]
pub struct Store {
    db: Db,
    /// Announces audit records and alerts (`events`).
    bus: super::bus::Bus,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store")
    }
}

const SCHEMA: &str = "
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
";

pub(super) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(super) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
}

impl Store {
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let mut conn = Connection::open(path).map_err(|source| StoreError::Open {
            path: path.display().to_string(),
            source,
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch(super::admin::SCHEMA)?;
        conn.execute_batch(super::alerts::SCHEMA)?;
        migrate(&mut conn)?;
        Ok(Self {
            bus: super::bus::Bus::default(),
            db: Db::Sqlite(Arc::new(Mutex::new(conn))),
        })
    }

    /// Opens `--db`: a `postgres://` or `postgresql://` URL, or else the
    /// path of a SQLite file. Runs the migrations either way.
    pub async fn connect(db: &str) -> Result<Self, StoreError> {
        if super::pg::is_url(db) {
            Ok(Self {
                bus: super::bus::Bus::default(),
                db: Db::Postgres(Arc::new(super::pg::Pg::connect(db).await?)),
            })
        } else {
            Self::open(Path::new(db))
        }
    }

    /// The PostgreSQL backend, when this store is one.
    pub fn pg(&self) -> Option<&super::pg::Pg> {
        match &self.db {
            Db::Postgres(p) => Some(p),
            Db::Sqlite(_) => None,
        }
    }

    /// Runs `f` on the SQLite connection. Only reached on the SQLite
    /// backend: every method asks [`Store::pg`] first.
    pub(super) fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let Db::Sqlite(conn) = &self.db else {
            return Err(StoreError::Pool(
                "a SQLite call on the PostgreSQL store".into(),
            ));
        };
        let mut guard = conn.lock().map_err(|_| StoreError::Poisoned)?;
        f(&mut guard)
    }

    /// Creates a deployment and its first token. The token is returned in
    /// clear exactly once; only its hash is kept.
    pub async fn create_deployment(
        &self,
        name: &str,
    ) -> Result<(TokenInfo, SecretToken), StoreError> {
        if !valid_name(name) {
            return Err(StoreError::BadName(name.to_owned()));
        }
        if let Some(p) = self.pg() {
            return p.create_deployment(name).await;
        }
        self.with(|c| {
            let tx = c.transaction()?;
            let exists: Option<String> = tx
                .query_row(
                    "SELECT name FROM deployments WHERE name = ?1",
                    [name],
                    |r| r.get(0),
                )
                .optional()?;
            if exists.is_some() {
                return Err(StoreError::Exists(name.to_owned()));
            }
            tx.execute(
                "INSERT INTO deployments (name, created_ms) VALUES (?1, ?2)",
                params![name, to_i64(now_ms())],
            )?;
            let issued = insert_token(&tx, name)?;
            tx.commit()?;
            Ok(issued)
        })
    }

    pub async fn list_deployments(&self) -> Result<Vec<DeploymentRow>, StoreError> {
        if let Some(p) = self.pg() {
            return p.list_deployments().await;
        }
        self.with(|c| {
            let mut st = c.prepare("SELECT name, created_ms FROM deployments ORDER BY name")?;
            let rows = st
                .query_map([], |r| {
                    Ok(DeploymentRow {
                        name: r.get(0)?,
                        created_ms: to_u64(r.get(1)?),
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    pub async fn deployment_exists(&self, name: &str) -> Result<bool, StoreError> {
        if let Some(p) = self.pg() {
            return p.deployment_exists(name).await;
        }
        self.with(|c| {
            Ok(c.query_row(
                "SELECT count(*) FROM deployments WHERE name = ?1",
                [name],
                |r| r.get::<_, i64>(0),
            )? > 0)
        })
    }

    /// Issues a new token and lets every other still-valid token of the
    /// deployment expire after `overlap`, so a running operator can switch
    /// without a gap. An `overlap` of zero ends them at once.
    pub async fn rotate(
        &self,
        deployment: &str,
        overlap: std::time::Duration,
    ) -> Result<(TokenInfo, SecretToken), StoreError> {
        if let Some(p) = self.pg() {
            return p.rotate(deployment, overlap).await;
        }
        self.with(|c| {
            let tx = c.transaction()?;
            ensure_deployment(&tx, deployment)?;
            let until = now_ms().saturating_add(u64::try_from(overlap.as_millis()).unwrap_or(0));
            tx.execute(
                "UPDATE tokens SET expires_ms = ?2 WHERE deployment = ?1 AND revoked_ms IS NULL
                 AND (expires_ms IS NULL OR expires_ms > ?2)",
                params![deployment, to_i64(until)],
            )?;
            let issued = insert_token(&tx, deployment)?;
            tx.commit()?;
            Ok(issued)
        })
    }

    /// Revokes one token, or every token of the deployment when `token_id`
    /// is `None`. Returns how many were revoked.
    pub async fn revoke(
        &self,
        deployment: &str,
        token_id: Option<&str>,
    ) -> Result<usize, StoreError> {
        if let Some(p) = self.pg() {
            return p.revoke(deployment, token_id).await;
        }
        self.with(|c| {
            let tx = c.transaction()?;
            ensure_deployment(&tx, deployment)?;
            let n = match token_id {
                Some(id) => {
                    let n = tx.execute(
                        "UPDATE tokens SET revoked_ms = ?3 WHERE deployment = ?1 AND id = ?2
                         AND revoked_ms IS NULL",
                        params![deployment, id, to_i64(now_ms())],
                    )?;
                    let known: i64 = tx.query_row(
                        "SELECT count(*) FROM tokens WHERE deployment = ?1 AND id = ?2",
                        params![deployment, id],
                        |r| r.get(0),
                    )?;
                    if known == 0 {
                        return Err(StoreError::NoToken(id.to_owned(), deployment.to_owned()));
                    }
                    n
                }
                None => tx.execute(
                    "UPDATE tokens SET revoked_ms = ?2 WHERE deployment = ?1 AND revoked_ms IS NULL",
                    params![deployment, to_i64(now_ms())],
                )?,
            };
            tx.commit()?;
            Ok(n)
        })
    }

    /// Where this store announces what it wrote; the server's live state
    /// publishes on the same bus.
    pub fn bus(&self) -> &super::bus::Bus {
        &self.bus
    }

    pub async fn list_tokens(&self, deployment: &str) -> Result<Vec<TokenInfo>, StoreError> {
        if let Some(p) = self.pg() {
            return p.list_tokens(deployment).await;
        }
        self.with(|c| {
            ensure_deployment(c, deployment)?;
            let mut st = c.prepare(
                "SELECT id, deployment, created_ms, expires_ms, revoked_ms FROM tokens
                 WHERE deployment = ?1 ORDER BY created_ms, id",
            )?;
            let rows = st
                .query_map([deployment], row_to_token)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// Looks a presented token up by its hash; `None` when unknown, revoked
    /// or expired.
    pub async fn authenticate(
        &self,
        token: &SecretToken,
    ) -> Result<Option<Authenticated>, StoreError> {
        if let Some(p) = self.pg() {
            return p.authenticate(token).await;
        }
        let hash = token.hash();
        self.with(|c| {
            let row = c
                .query_row(
                    "SELECT id, deployment, created_ms, expires_ms, revoked_ms FROM tokens
                     WHERE hash = ?1",
                    [hash],
                    row_to_token,
                )
                .optional()?;
            Ok(row.and_then(|t| t.authenticates(now_ms())))
        })
    }

    /// The ids of every token valid now: one query re-checks all live
    /// connections at once.
    pub async fn valid_token_ids(&self) -> Result<std::collections::HashSet<String>, StoreError> {
        if let Some(p) = self.pg() {
            return p.valid_token_ids().await;
        }
        self.with(|c| {
            let mut st = c.prepare_cached(
                "SELECT id FROM tokens WHERE revoked_ms IS NULL
                 AND (expires_ms IS NULL OR expires_ms > ?1)",
            )?;
            let ids = st
                .query_map([to_i64(now_ms())], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            Ok(ids)
        })
    }

    /// Whether a token (by id) is still valid now.
    pub async fn token_valid(&self, token_id: &str) -> Result<bool, StoreError> {
        if let Some(p) = self.pg() {
            return p.token_valid(token_id).await;
        }
        self.with(|c| {
            let row = c
                .query_row(
                    "SELECT id, deployment, created_ms, expires_ms, revoked_ms FROM tokens
                     WHERE id = ?1",
                    [token_id],
                    row_to_token,
                )
                .optional()?;
            Ok(row.is_some_and(|t| t.is_valid_at(now_ms())))
        })
    }
}

/// A schema change made after the tables above first shipped.
type Migration = fn(&rusqlite::Transaction<'_>) -> rusqlite::Result<()>;

/// Every migration in order; `PRAGMA user_version` is how many a database
/// has had. The `CREATE TABLE IF NOT EXISTS` batches above are version 0,
/// so a new database and one of an older version take the same path. Add
/// to the end, never change one that shipped.
const MIGRATIONS: &[Migration] = &[
    // 1: alert keys and states, the active set.
    super::active::migrate_v1,
];

/// Runs the migrations a database has not had, each in an immediate
/// transaction that re-reads the version: the admin CLI and a server
/// opening an old file at once apply each migration once.
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
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

fn row_to_token(r: &rusqlite::Row<'_>) -> rusqlite::Result<TokenInfo> {
    Ok(TokenInfo {
        id: r.get(0)?,
        deployment: r.get(1)?,
        created_ms: to_u64(r.get(2)?),
        expires_ms: r.get::<_, Option<i64>>(3)?.map(to_u64),
        revoked_ms: r.get::<_, Option<i64>>(4)?.map(to_u64),
    })
}

fn ensure_deployment(c: &Connection, name: &str) -> Result<(), StoreError> {
    let n: i64 = c.query_row(
        "SELECT count(*) FROM deployments WHERE name = ?1",
        [name],
        |r| r.get(0),
    )?;
    if n == 0 {
        return Err(StoreError::NoDeployment(name.to_owned()));
    }
    Ok(())
}

/// A new deployment token: its metadata and its clear text, for either
/// backend to store (by hash).
pub(super) fn new_token(deployment: &str) -> Result<(TokenInfo, SecretToken), StoreError> {
    let secret = SecretToken::generate()?;
    let info = TokenInfo {
        id: format!("tok_{}", &crate::wire::random_id()[..12]),
        deployment: deployment.to_owned(),
        created_ms: now_ms(),
        expires_ms: None,
        revoked_ms: None,
    };
    Ok((info, secret))
}

fn insert_token(c: &Connection, deployment: &str) -> Result<(TokenInfo, SecretToken), StoreError> {
    let (info, secret) = new_token(deployment)?;
    c.execute(
        "INSERT INTO tokens (id, deployment, hash, created_ms) VALUES (?1, ?2, ?3, ?4)",
        params![
            info.id,
            deployment,
            hash_token(secret.expose()),
            to_i64(info.created_ms)
        ],
    )?;
    Ok((info, secret))
}

#[cfg(test)]
mod tests;
