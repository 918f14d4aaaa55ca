//! What a registry call can fail with, and the refusal read from an
//! answer: its status and the distribution spec's error codes, never its
//! body's text.

use hyper::Response;
use hyper::StatusCode;
use hyper::body::Incoming;

use super::Repository;
use super::wire::{ReadError, read_hashed};
use crate::backup::Category;

/// Which blob a call is about, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blob {
    Config,
    Layer(usize),
    /// A blob pushed or checked outside a manifest's order.
    Any,
}

impl std::fmt::Display for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blob::Config => f.write_str("the config blob"),
            Blob::Layer(i) => write!(f, "layer {i}"),
            Blob::Any => f.write_str("blob"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("backup repository {repository:?}: {why}")]
    Invalid { repository: String, why: String },
    #[error("registry {registry} is unreachable ({what}): {reason}")]
    Unreachable {
        registry: String,
        what: String,
        reason: String,
    },
    #[error("registry {registry} gave no answer in {secs}s ({what})")]
    Deadline {
        registry: String,
        what: String,
        secs: u64,
    },
    #[error("registry {registry} refused the credentials for {repository} ({what})")]
    Auth {
        registry: String,
        repository: String,
        what: String,
    },
    #[error("{what} is not in {repository}")]
    NotFound { repository: String, what: String },
    #[error("registry {registry} answered {what} with HTTP {status}{codes}")]
    Registry {
        registry: String,
        what: String,
        status: u16,
        codes: String,
    },
    #[error(
        "{registry} is not an OCI registry: GET /v2/ answered HTTP {status} without Docker-Distribution-API-Version: registry/2.0"
    )]
    NotRegistry { registry: String, status: u16 },
    #[error("registry {registry} does not allow {what} (HTTP {status})")]
    Unsupported {
        registry: String,
        what: String,
        status: u16,
    },
    #[error(
        "{what} ({digest}) does not match its digest: the registry sent {bytes} bytes hashing to {found}"
    )]
    Mismatch {
        what: String,
        digest: String,
        found: String,
        bytes: u64,
    },
    #[error("{what} ({digest}) is longer than the {limit} bytes it should have")]
    TooLong {
        what: String,
        digest: String,
        limit: u64,
    },
}

impl StoreError {
    pub fn category(&self) -> Category {
        match self {
            StoreError::Invalid { .. }
            | StoreError::Unsupported { .. }
            | StoreError::NotRegistry { .. } => Category::Invalid,
            StoreError::Unreachable { .. } | StoreError::Deadline { .. } => Category::Unreachable,
            StoreError::Auth { .. } => Category::Auth,
            StoreError::NotFound { .. } => Category::NotFound,
            StoreError::Registry { .. } => Category::Registry,
            StoreError::Mismatch { .. } | StoreError::TooLong { .. } => Category::Integrity,
        }
    }
}

impl Repository {
    /// A request that cannot be formed: a URL or header value (a realm, a
    /// token) a request cannot carry. The value is never shown.
    pub(super) fn malformed(&self, _: hyper::http::Error) -> StoreError {
        self.invalid("cannot form the request (a URL or header value is malformed)".into())
    }

    pub(super) fn invalid(&self, why: String) -> StoreError {
        StoreError::Invalid {
            repository: self.name(),
            why,
        }
    }

    pub(super) fn unreachable(&self, what: &str, reason: &str) -> StoreError {
        StoreError::Unreachable {
            registry: self.registry.clone(),
            what: what.to_owned(),
            reason: reason.to_owned(),
        }
    }

    pub(super) fn auth_error(&self, what: &str) -> StoreError {
        StoreError::Auth {
            registry: self.registry.clone(),
            repository: self.path.clone(),
            what: what.to_owned(),
        }
    }

    pub(super) fn read_error(
        &self,
        e: ReadError,
        what: &str,
        digest: &str,
        limit: u64,
    ) -> StoreError {
        match e {
            ReadError::TooLong => StoreError::TooLong {
                what: what.to_owned(),
                digest: digest.to_owned(),
                limit,
            },
            ReadError::Broken(reason) => self.unreachable(what, &reason),
        }
    }

    /// A refusal, from its status and the distribution spec's error
    /// envelope (`{"errors":[{"code":"BLOB_UNKNOWN",…}]}`): its codes only.
    pub(super) async fn refused(&self, resp: Response<Incoming>, what: &str) -> StoreError {
        let status = resp.status();
        let body = read_hashed(resp.into_body(), 64 << 10)
            .await
            .map(|(b, _)| b)
            .unwrap_or_default();
        #[derive(serde::Deserialize)]
        struct Envelope {
            errors: Vec<Entry>,
        }
        #[derive(serde::Deserialize)]
        struct Entry {
            code: String,
        }
        let codes: Vec<String> = serde_json::from_slice::<Envelope>(&body)
            .map(|e| e.errors.into_iter().map(|e| e.code).collect())
            .unwrap_or_default();
        let has = |c: &str| codes.iter().any(|x| x.eq_ignore_ascii_case(c));
        if status == StatusCode::UNAUTHORIZED
            || status == StatusCode::FORBIDDEN
            || has("UNAUTHORIZED")
            || has("DENIED")
        {
            return self.auth_error(what);
        }
        if status == StatusCode::NOT_FOUND {
            return StoreError::NotFound {
                repository: self.name(),
                what: what.to_owned(),
            };
        }
        if status == StatusCode::METHOD_NOT_ALLOWED || has("UNSUPPORTED") {
            return StoreError::Unsupported {
                registry: self.registry.clone(),
                what: what.to_owned(),
                status: status.as_u16(),
            };
        }
        StoreError::Registry {
            registry: self.registry.clone(),
            what: what.to_owned(),
            status: status.as_u16(),
            codes: if codes.is_empty() {
                String::new()
            } else {
                format!(": {}", codes.join(", "))
            },
        }
    }
}
