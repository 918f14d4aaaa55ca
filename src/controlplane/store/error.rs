//! What a store call can fail with, on either backend.

use crate::wire::token::TokenError;

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
    #[error("invalid lane name {0:?}: use 1-63 characters a-z, 0-9 and '-'")]
    BadLane(String),
    #[error("invalid tenant name {0:?}: use 1-63 characters a-z, 0-9 and '-'")]
    BadTenant(String),
    #[error(
        "tenant {tenant:?} is in lane {lane:?}, registered by its operator from the Tenant's \
         spec.support; change it there"
    )]
    LaneFromOperator { tenant: String, lane: String },
    #[error("the note has {0} bytes; the limit is 2000")]
    NoteTooLong(usize),
    #[error("admin token {0:?} does not exist")]
    NoAdminToken(String),
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
