//! The PostgreSQL backend of [`Store`](super::Store): the same data as the
//! SQLite file, in a database that N `serve` replicas share.
//!
//! One module per concern, each an `impl Pg` block: `tokens` (deployments
//! and deployment tokens), `audit`, `alerts` (history and the active set),
//! `admin` (admin tokens) and `schema` (versioned migrations, the
//! replicas' tables among them; the `replica` module reads and writes
//! those).
//!
//! Guarantees: every method is one statement or one transaction; the URL's
//! password never appears in an error or a log line ([`redact`]). Results
//! come in SQLite's order: text sorts `COLLATE "C"` (bytes, as SQLite's
//! BINARY), whatever the database's own collation. Where N replicas could
//! interleave, row locks (token changes) and a per-deployment advisory lock
//! (alert inserts) keep the SQLite outcome; the modules say which.
//!
//! Caveat: PostgreSQL text cannot hold a NUL character, so a string with one
//! (an alert message, an audit field) fails to store here while SQLite keeps
//! it; `detail` is JSON text, where serde_json escapes NUL, so it is stored.

mod admin;
mod alerts;
mod audit;
mod fleet;
mod incidents;
pub mod schema;
mod tenants;
mod tokens;

use std::str::FromStr;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

use super::StoreError;

/// Connections in the pool: the server's requests are short, and the
/// replica's listener has its own connection besides these.
pub const POOL_SIZE: usize = 16;

/// Whether `--db` names a PostgreSQL database rather than a SQLite file.
pub fn is_url(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

/// `url` with its password replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (auth, host) = match rest.rsplit_once('@') {
        Some((a, h)) => (Some(a), h),
        None => (None, rest),
    };
    match auth {
        Some(a) => match a.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
            None => format!("{scheme}://{a}@{host}"),
        },
        None => format!("{scheme}://{host}"),
    }
}

/// The channel on which a replica tells the others about a change they
/// show live but did not make (a lane's incidents; updates owed to an
/// operator one of them holds). The payload is `Store::announce`'s.
pub const NOTICES: &str = "exo_notice";

#[derive(Clone)]
pub struct Pg {
    pool: Pool,
    config: tokio_postgres::Config,
    url: String,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg").field("url", &self.url).finish()
    }
}

impl Pg {
    /// Connects, checks the server answers, and runs the migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let redacted = redact(url);
        let config =
            tokio_postgres::Config::from_str(url).map_err(|source| StoreError::PgConnect {
                url: redacted.clone(),
                source,
            })?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|e| StoreError::Pool(e.to_string()))?;
        let pg = Self {
            pool,
            config,
            url: redacted,
        };
        let mut client = pg.client().await?;
        schema::migrate(&mut client).await?;
        Ok(pg)
    }

    /// A pooled connection. A database that cannot be reached is an error
    /// naming the (redacted) URL.
    pub async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(source) => StoreError::PgConnect {
                url: self.url.clone(),
                source,
            },
            other => StoreError::Pool(format!("{}: {other}", self.url)),
        })
    }

    /// A connection of its own, outside the pool (the replica's
    /// `LISTEN`), with the task that drives it.
    pub async fn dedicated(
        &self,
    ) -> Result<
        (
            tokio_postgres::Client,
            tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>,
        ),
        StoreError,
    > {
        self.config
            .connect(NoTls)
            .await
            .map_err(|source| StoreError::PgConnect {
                url: self.url.clone(),
                source,
            })
    }

    /// The URL, password redacted.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The rows of one statement outside a transaction, prepared once per
    /// pooled connection.
    async fn rows(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let c = self.client().await?;
        let st = c.prepare_cached(sql).await?;
        Ok(c.query(&st, params).await?)
    }

    /// Like [`Pg::rows`], for a statement of at most one row.
    async fn row(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, StoreError> {
        let c = self.client().await?;
        let st = c.prepare_cached(sql).await?;
        Ok(c.query_opt(&st, params).await?)
    }

    /// Tells the other replicas (`LISTEN exo_notice`).
    pub async fn notify(&self, payload: &str) -> Result<(), StoreError> {
        self.execute("SELECT pg_notify($1, $2)", &[&NOTICES, &payload])
            .await
            .map(|_| ())
    }

    /// Like [`Pg::rows`], for a statement that returns no rows: how many it
    /// changed.
    async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError> {
        let c = self.client().await?;
        let st = c.prepare_cached(sql).await?;
        Ok(c.execute(&st, params).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_apart_and_redacted() {
        assert!(is_url("postgres://h/db"));
        assert!(is_url("postgresql://h/db"));
        assert!(!is_url("cp.sqlite"));
        assert_eq!(
            redact("postgres://exo:s3cret@db:5432/cp"),
            "postgres://exo:***@db:5432/cp"
        );
        assert_eq!(redact("postgres://exo@db/cp"), "postgres://exo@db/cp");
        assert_eq!(redact("postgres://db/cp"), "postgres://db/cp");
    }
}
