//! The SQLite backend of [`Store`](super::Store): one file, one server (and
//! the admin CLI beside it).
//!
//! One module per concern, each an `impl Sqlite` block: `tokens`
//! (deployments and deployment tokens), `audit`, `alerts` (history and the
//! active set), `admin` (admin tokens) and `schema` (the tables and their
//! migrations).
//!
//! Guarantees: every write is one transaction; the database runs in WAL
//! mode with a busy timeout so the admin CLI and a running server can share
//! it (the server re-checks live tokens, so a revocation from the CLI reaches
//! it). Caveat: calls are synchronous and short; the server makes them from
//! async code under a mutex, fine for a reference control plane.

mod admin;
mod alerts;
mod audit;
mod fleet;
mod incidents;
mod schema;
mod tenants;
mod tokens;

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use super::StoreError;

/// The connection, shared by every clone of the store.
#[derive(Clone)]
pub struct Sqlite {
    conn: Arc<Mutex<Connection>>,
}

impl Sqlite {
    /// Opens (or creates) the file and runs the migrations it has not had.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let mut conn = Connection::open(path).map_err(|source| StoreError::Open {
            path: path.display().to_string(),
            source,
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(schema::SCHEMA)?;
        schema::migrate(&mut conn)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `f` on the connection, under its lock.
    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = self.conn.lock().map_err(|_| StoreError::Poisoned)?;
        f(&mut guard)
    }
}
