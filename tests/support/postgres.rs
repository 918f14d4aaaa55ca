//! A database of its own for each test, on the PostgreSQL server that
//! `scripts/testenv up` runs (loopback only, trust auth, superuser `exo`).
//! A missing server is a test failure with instructions, never a skip.
//! Databases a failed test leaves behind go with the next `scripts/testenv down`.

use std::path::PathBuf;

use tokio_postgres::{Client, NoTls};

use super::repo_root;

const URL_VAR: &str = "EXO_TEST_POSTGRES_URL";
const HOW_TO_START: &str =
    "Start the test environment with `scripts/testenv up` and `eval \"$(scripts/testenv env)\"`.";

/// The server's maintenance database, `postgres://exo@127.0.0.1:PORT/postgres`:
/// from the process environment, or else from the `env` file of the state
/// folder (as `super::env` reads the rest). Panics with instructions when
/// neither has it.
pub fn url() -> String {
    if let Some(url) = std::env::var(URL_VAR).ok().filter(|v| !v.is_empty()) {
        return url;
    }
    let state = std::env::var_os("EXO_TESTENV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".testenv"));
    let key = format!("{URL_VAR}=");
    std::fs::read_to_string(state.join("env"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix(key.as_str()).map(str::to_owned))
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "no PostgreSQL for the tests: {URL_VAR} is not set and {} has no env file \
                 naming it. {HOW_TO_START}",
                state.display()
            )
        })
}

/// Creates an empty database `{prefix}_{8 hex digits}` (the prefix cut down
/// to `[a-z0-9_]`, at most 40 characters) and returns its URL: the server's
/// URL with the database in the path.
pub async fn fresh_database(prefix: &str) -> String {
    let server = url();
    let name = format!("{}_{}", sanitize(prefix), random_hex());
    let client = connect(&server).await.unwrap_or_else(|e| {
        panic!(
            "cannot connect to the test PostgreSQL at {}: {}. {HOW_TO_START}",
            shown(&server),
            describe(&e)
        )
    });
    client
        .batch_execute(&format!("CREATE DATABASE {}", quote_ident(&name)))
        .await
        .unwrap_or_else(|e| panic!("create database {name}: {}", describe(&e)));
    with_database(&server, &name)
}

/// Drops the database `url` names, cutting off whoever is still connected.
/// Best effort: a failure is printed, not raised, since it only leaves a
/// database behind until the next `scripts/testenv down`.
pub async fn drop_database(url: &str) {
    let (_, name, _) = split(url);
    if name.is_empty() || matches!(name, "postgres" | "template0" | "template1") {
        return;
    }
    // The maintenance database of the same server: one cannot drop the
    // database one is connected to.
    let client = match connect(&with_database(url, "postgres")).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("drop database {name}: cannot connect: {}", describe(&e));
            return;
        }
    };
    let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", quote_ident(name));
    if let Err(e) = client.batch_execute(&sql).await {
        eprintln!("drop database {name}: {}", describe(&e));
    }
}

/// A client whose connection runs on its own task until the client is dropped.
async fn connect(url: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("test PostgreSQL connection: {}", describe(&e));
        }
    });
    Ok(client)
}

/// The server's own message when there is one, else the error with its
/// causes: `Error`'s Display alone says only "db error" or "error connecting
/// to server".
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return db.to_string();
    }
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

fn sanitize(prefix: &str) -> String {
    let name: String = prefix
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    if name.is_empty() {
        "test".to_owned()
    } else {
        name
    }
}

fn random_hex() -> String {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).expect("random bytes from the OS");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An identifier in double quotes, inner quotes doubled.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `scheme://authority`, the database (the path without its `/`) and
/// `?query` (or "") of a `postgres://` URL.
fn split(url: &str) -> (&str, &str, &str) {
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..]
        .find(['/', '?'])
        .map_or(url.len(), |i| start + i);
    let (base, rest) = url.split_at(end);
    let (path, query) = rest.split_at(rest.find('?').unwrap_or(rest.len()));
    (base, path.trim_start_matches('/'), query)
}

/// The same server, user and options with `database` in the path.
fn with_database(url: &str, database: &str) -> String {
    let (base, _, query) = split(url);
    format!("{base}/{database}{query}")
}

/// The URL for messages: a password in it, should one be set, is not shown.
fn shown(url: &str) -> String {
    let (base, path, query) = split(url);
    let start = base.find("://").map_or(0, |i| i + 3);
    let authority = &base[start..];
    let authority = match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    format!("{}{authority}/{path}{query}", &base[..start])
}
