//! Test fixtures: one store per backend, so each behavioural store test
//! runs on SQLite (a file in a temporary folder) and on PostgreSQL (a fresh
//! database on the server `EXO_TEST_POSTGRES_URL` names, dropped again
//! afterwards).
//!
//! A missing `EXO_TEST_POSTGRES_URL` fails the test with the commands that
//! start the test environment; it never skips the PostgreSQL half.

use std::cell::Cell;
use std::path::PathBuf;

use tokio_postgres::NoTls;

use super::store::Store;
use super::store::pg::redact;

/// Where the tests find the PostgreSQL server (`scripts/testenv env`).
pub const POSTGRES_URL_ENV: &str = "EXO_TEST_POSTGRES_URL";

/// A store of one backend and what holds its data.
pub struct Backend {
    pub name: &'static str,
    store: Store,
    place: Place,
    /// Set once the test reaches the store: a panic while it is set was
    /// this backend's, and [`Drop`] says so.
    used: Cell<bool>,
}

enum Place {
    Sqlite(tempfile::TempDir),
    Postgres(FreshDb),
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if self.used.get() && std::thread::panicking() {
            eprintln!("the failure above was on the {} backend", self.name);
        }
    }
}

/// A store of every backend, SQLite first.
pub async fn backends() -> Vec<Backend> {
    vec![Backend::sqlite(), Backend::postgres().await]
}

impl Backend {
    /// A new SQLite file in a temporary folder.
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let store = Store::open(&sqlite_path(&dir)).expect("open a new SQLite store");
        Self::new("sqlite", store, Place::Sqlite(dir))
    }

    /// A new database on the test PostgreSQL server.
    pub async fn postgres() -> Self {
        let db = FreshDb::create().await;
        let store = Store::connect(&db.url)
            .await
            .unwrap_or_else(|e| panic!("open the PostgreSQL store: {e}"));
        Self::new("postgres", store, Place::Postgres(db))
    }

    fn new(name: &'static str, store: Store, place: Place) -> Self {
        Self {
            name,
            store,
            place,
            used: Cell::new(false),
        }
    }

    pub fn store(&self) -> &Store {
        self.used.set(true);
        &self.store
    }

    /// The same data opened again, as a restarted server opens it (the
    /// migrations run again).
    pub async fn reopen(&self) -> Store {
        self.used.set(true);
        match &self.place {
            Place::Sqlite(dir) => Store::open(&sqlite_path(dir)).expect("reopen the SQLite store"),
            Place::Postgres(db) => Store::connect(&db.url)
                .await
                .unwrap_or_else(|e| panic!("reopen the PostgreSQL store: {e}")),
        }
    }
}

fn sqlite_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("cp.sqlite")
}

/// The test server's URL, or a failure that says how to get one.
pub fn server_url() -> String {
    match std::env::var(POSTGRES_URL_ENV) {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "{POSTGRES_URL_ENV} is not set: the store tests also run on PostgreSQL. Start \
             the test environment with `scripts/testenv up`, then `eval \"$(scripts/testenv \
             env)\"` in this shell"
        ),
    }
}

/// A new, empty database on the test server, dropped with this value.
pub struct FreshDb {
    /// The database's URL.
    pub url: String,
    server: String,
    name: String,
}

impl FreshDb {
    pub async fn create() -> Self {
        let server = server_url();
        let name = format!("cp_{}", crate::wire::random_id());
        let client = connect(&server).await;
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        Self {
            url: with_dbname(&server, &name),
            server,
            name,
        }
    }

    /// A plain connection to the database (no pool, no migrations).
    pub async fn client(&self) -> tokio_postgres::Client {
        connect(&self.url).await
    }
}

impl Drop for FreshDb {
    /// Drops the database from a thread of its own: `Drop` cannot await,
    /// and the test's runtime may be the one blocked here.
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                let (client, conn) = tokio_postgres::connect(&server, NoTls)
                    .await
                    .map_err(|e| e.to_string())?;
                tokio::spawn(conn);
                // FORCE: the store's pooled connections may still be open.
                client
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
                    .map_err(|e| e.to_string())
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("drop the test database {}: {e}", self.name);
        }
    }
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "connect to {} ({POSTGRES_URL_ENV}): {e}; is `scripts/testenv up` running?",
                redact(url)
            )
        });
    tokio::spawn(conn);
    client
}

/// `url` naming the database `name` instead of its own.
fn with_dbname(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let (scheme, rest) = base.split_once("://").unwrap_or(("postgres", base));
    let authority = rest.split('/').next().unwrap_or(rest);
    match query {
        Some(q) => format!("{scheme}://{authority}/{name}?{q}"),
        None => format!("{scheme}://{authority}/{name}"),
    }
}

#[test]
fn urls_name_the_fresh_database() {
    let cases = [
        ("postgres://exo@h:1/postgres", "postgres://exo@h:1/cp_x"),
        ("postgres://exo@h:1", "postgres://exo@h:1/cp_x"),
        (
            "postgresql://u:p@h/db?sslmode=disable",
            "postgresql://u:p@h/cp_x?sslmode=disable",
        ),
    ];
    for (url, want) in cases {
        assert_eq!(with_dbname(url, "cp_x"), want, "{url}");
    }
}
