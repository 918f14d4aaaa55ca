//! Operator errors and their bounded categories.
//!
//! Categories (not messages) become Event reasons and metric labels, so the
//! label set stays small. Transient categories requeue with backoff;
//! permanent ones wait for a change of the object.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API call failed: {context}: {source}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "the {kind} CRD is not installed (apply deploy/crds or `exo crd | kubectl apply -f -`)"
    )]
    CrdMissing { kind: &'static str },
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    #[error("object has no {0}")]
    MissingField(&'static str),
    #[error("could not serialize {what}")]
    Serialize {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("no randomness available for a token")]
    Random(#[source] getrandom::Error),
    #[error(
        "not written: this replica's lease is not current (it lost or is losing the leadership)"
    )]
    NotLeader,
}

/// A bounded set of error categories for Event reasons and metric labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCategory {
    Api,
    Conflict,
    Forbidden,
    NotFound,
    CrdMissing,
    InvalidSpec,
    Internal,
}

impl ErrorCategory {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::Api => "api",
            ErrorCategory::Conflict => "conflict",
            ErrorCategory::Forbidden => "forbidden",
            ErrorCategory::NotFound => "not_found",
            ErrorCategory::CrdMissing => "crd_missing",
            ErrorCategory::InvalidSpec => "invalid_spec",
            ErrorCategory::Internal => "internal",
        }
    }

    /// How long to wait before retrying: short for races, longer for
    /// problems a human must fix.
    pub fn requeue_after(self) -> Duration {
        match self {
            ErrorCategory::Conflict | ErrorCategory::NotFound => Duration::from_secs(1),
            ErrorCategory::Api => Duration::from_secs(5),
            ErrorCategory::Forbidden | ErrorCategory::CrdMissing => Duration::from_secs(60),
            ErrorCategory::InvalidSpec | ErrorCategory::Internal => Duration::from_secs(300),
        }
    }
}

impl Error {
    pub fn kube(context: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube {
            context: context.into(),
            source,
        }
    }

    pub fn category(&self) -> ErrorCategory {
        match self {
            Error::Kube { source, .. } => match api_code(source) {
                Some(409) => ErrorCategory::Conflict,
                Some(401 | 403) => ErrorCategory::Forbidden,
                Some(404) => ErrorCategory::NotFound,
                Some(400 | 422) => ErrorCategory::InvalidSpec,
                _ => ErrorCategory::Api,
            },
            Error::CrdMissing { .. } => ErrorCategory::CrdMissing,
            Error::NotLeader => ErrorCategory::Conflict,
            Error::InvalidSpec(_) => ErrorCategory::InvalidSpec,
            Error::MissingField(_) | Error::Serialize { .. } | Error::Random(_) => {
                ErrorCategory::Internal
            }
        }
    }
}

/// The HTTP status of an API error, if the apiserver answered.
pub fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

pub fn is_not_found(e: &kube::Error) -> bool {
    api_code(e) == Some(404)
}

/// Whether a list was refused because the kind cannot be listed at all:
/// its CRD is not installed (404) or RBAC does not allow it (403). A watch
/// of it would only retry.
pub fn is_unlistable(e: &kube::Error) -> bool {
    matches!(api_code(e), Some(404 | 403))
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_are_bounded_and_requeue_differs() {
        let cats = [
            ErrorCategory::Api,
            ErrorCategory::Conflict,
            ErrorCategory::Forbidden,
            ErrorCategory::NotFound,
            ErrorCategory::CrdMissing,
            ErrorCategory::InvalidSpec,
            ErrorCategory::Internal,
        ];
        let names: std::collections::BTreeSet<_> = cats.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), cats.len());
        assert!(
            ErrorCategory::Conflict.requeue_after() < ErrorCategory::InvalidSpec.requeue_after()
        );
        assert_eq!(
            Error::InvalidSpec("x".into()).category(),
            ErrorCategory::InvalidSpec
        );
    }
}
