//! The push receiver's pure core: which Fleet a hook path names, where the
//! signature is in the headers, whether it signs the body, and what each
//! outcome answers. The I/O (reading the Fleet and its Secret, stamping the
//! annotation) is in [`super::http`].
//!
//! Guarantees: a path that is not exactly `/hooks/fleet/<namespace>/<name>`
//! with valid Kubernetes names names no Fleet; the signature is compared in
//! constant time; no message or log label built here contains the key or
//! the signature.
//!
//! A hook only asks for a sync: the payload is authenticated but never read
//! for content, the engine fetches the repository itself.

use std::fmt;

use hmac::{Hmac, Mac};
use hyper::{HeaderMap, StatusCode};
use sha2::Sha256;

use crate::names::{is_dns1123_label, is_dns1123_subdomain};

/// Every hook path starts with this.
pub const PATH_PREFIX: &str = "/hooks/";
/// Largest body read; a larger one is answered 413 unread.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// GitHub: `sha256=<hex>`.
pub const HEADER_GITHUB: &str = "x-hub-signature-256";
/// Gitea (Forgejo sends it too): bare `<hex>`.
pub const HEADER_GITEA: &str = "x-gitea-signature";
/// The key of the Fleet's `webhookSecretRef` Secret that holds the HMAC key.
pub const SECRET_KEY: &str = "token";

/// Length of an HMAC-SHA256 in bytes.
const MAC_LEN: usize = 32;

/// The Fleet a hook path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetRef {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for FleetRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// `/hooks/fleet/<namespace>/<name>` -> the Fleet; anything else (other
/// segments, a trailing slash, names the apiserver would refuse) -> `None`.
pub fn parse_path(path: &str) -> Option<FleetRef> {
    let rest = path.strip_prefix(PATH_PREFIX)?.strip_prefix("fleet/")?;
    let (namespace, name) = rest.split_once('/')?;
    (is_dns1123_label(namespace) && is_dns1123_subdomain(name)).then(|| FleetRef {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

/// Why a hook's signature is not accepted (all answered 401).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("no X-Hub-Signature-256 or X-Gitea-Signature header")]
    Missing,
    /// The header's value is not what that sender writes. The value itself
    /// is never part of the message.
    #[error("header {header} is not {expected}")]
    Malformed {
        header: &'static str,
        expected: &'static str,
    },
    #[error("the signature does not match the body")]
    Mismatch,
}

/// The MAC a request carries: GitHub's header when present, Gitea's
/// otherwise. Only one is ever checked, so a bad one is not rescued by the
/// other.
pub fn signature(headers: &HeaderMap) -> Result<[u8; MAC_LEN], SignatureError> {
    if let Some(v) = headers.get(HEADER_GITHUB) {
        let hex = v
            .to_str()
            .ok()
            .and_then(|s| s.trim().strip_prefix("sha256="));
        return decode(HEADER_GITHUB, "sha256=<64 hex digits>", hex);
    }
    if let Some(v) = headers.get(HEADER_GITEA) {
        return decode(
            HEADER_GITEA,
            "<64 hex digits>",
            v.to_str().ok().map(str::trim),
        );
    }
    Err(SignatureError::Missing)
}

fn decode(
    header: &'static str,
    expected: &'static str,
    hex: Option<&str>,
) -> Result<[u8; MAC_LEN], SignatureError> {
    let malformed = SignatureError::Malformed { header, expected };
    let mut out = [0u8; MAC_LEN];
    hex::decode_to_slice(hex.ok_or(malformed)?, &mut out).map_err(|_| malformed)?;
    Ok(out)
}

/// Checks the request's signature over the raw `body` with `key`, in
/// constant time.
pub fn verify(key: &[u8], body: &[u8], headers: &HeaderMap) -> Result<(), SignatureError> {
    let sig = signature(headers)?;
    // HMAC takes keys of every length, so this error cannot happen; it is
    // still a refusal rather than a panic.
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).map_err(|_| SignatureError::Mismatch)?;
    mac.update(body);
    mac.verify_slice(&sig).map_err(|_| SignatureError::Mismatch)
}

/// The HMAC key as stored in the Secret: surrounding whitespace dropped,
/// since `kubectl create secret --from-file` keeps a file's final newline
/// and a sender's configured secret never has one. `None` when nothing is
/// left.
pub fn key_from_secret(raw: &[u8]) -> Option<&[u8]> {
    Some(raw.trim_ascii()).filter(|k| !k.is_empty())
}

/// The annotation value: RFC 3339 in UTC with nanoseconds, so two pushes in
/// the same second still differ and the engine sees a change.
pub fn sync_stamp(now: k8s_openapi::jiff::Timestamp) -> String {
    format!("{now:.9}")
}

/// What is wrong with the Fleet's `webhookSecretRef` Secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretProblem {
    /// `webhookSecretRef` is not a name a Secret can have.
    InvalidName,
    NotFound,
    NoKey,
    EmptyKey,
}

/// How one hook ended: its status, its body and its log label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Signed; the sync annotation is set.
    Accepted,
    /// The path names no Fleet.
    NoRoute,
    MethodNotAllowed,
    TooLarge,
    /// The body could not be read (the client went away, bad framing).
    BadBody,
    UnknownFleet(FleetRef),
    NoSecretRef(FleetRef),
    Secret {
        fleet: FleetRef,
        secret: String,
        problem: SecretProblem,
    },
    Unauthorized(SignatureError),
    /// The apiserver could not be asked (detail in the log only).
    Unavailable {
        fleet: FleetRef,
        doing: Doing,
    },
}

/// The apiserver call an [`Outcome::Unavailable`] was making.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doing {
    NoClient,
    ReadFleet,
    ReadSecret,
    PatchFleet,
}

impl Outcome {
    pub fn status(&self) -> StatusCode {
        match self {
            Outcome::Accepted => StatusCode::ACCEPTED,
            Outcome::NoRoute | Outcome::UnknownFleet(_) => StatusCode::NOT_FOUND,
            Outcome::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Outcome::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Outcome::BadBody => StatusCode::BAD_REQUEST,
            Outcome::NoSecretRef(_) => StatusCode::FORBIDDEN,
            Outcome::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Outcome::Secret { .. } | Outcome::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// A bounded label for logs.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::NoRoute => "no_route",
            Outcome::MethodNotAllowed => "method_not_allowed",
            Outcome::TooLarge => "too_large",
            Outcome::BadBody => "bad_body",
            Outcome::UnknownFleet(_) => "unknown_fleet",
            Outcome::NoSecretRef(_) => "no_secret_ref",
            Outcome::Secret { .. } => "secret_unavailable",
            Outcome::Unauthorized(SignatureError::Missing) => "no_signature",
            Outcome::Unauthorized(_) => "bad_signature",
            Outcome::Unavailable { .. } => "api_unavailable",
        }
    }

    /// The response body: names the Fleet, Secret and key, never a value.
    pub fn message(&self) -> String {
        match self {
            Outcome::Accepted => "sync requested\n".into(),
            Outcome::NoRoute => "not found\n".into(),
            Outcome::MethodNotAllowed => "use POST\n".into(),
            Outcome::TooLarge => format!("body over {MAX_BODY_BYTES} bytes\n"),
            Outcome::BadBody => "cannot read the request body\n".into(),
            Outcome::UnknownFleet(f) => format!("Fleet {f} not found\n"),
            Outcome::NoSecretRef(f) => format!("Fleet {f} has no spec.webhookSecretRef\n"),
            Outcome::Secret {
                fleet,
                secret,
                problem,
            } => {
                let ns = &fleet.namespace;
                match problem {
                    SecretProblem::InvalidName => format!(
                        "spec.webhookSecretRef of Fleet {fleet} ({secret:?}) is not a Secret name\n"
                    ),
                    SecretProblem::NotFound => format!(
                        "Secret {ns}/{secret} (spec.webhookSecretRef of Fleet {fleet}) not found\n"
                    ),
                    SecretProblem::NoKey => {
                        format!("Secret {ns}/{secret} has no key {SECRET_KEY}\n")
                    }
                    SecretProblem::EmptyKey => {
                        format!("Secret {ns}/{secret} has an empty key {SECRET_KEY}\n")
                    }
                }
            }
            Outcome::Unauthorized(e) => format!("{e}\n"),
            Outcome::Unavailable { fleet, doing } => match doing {
                Doing::NoClient => "the push receiver has no Kubernetes client\n".into(),
                Doing::ReadFleet => format!("cannot read Fleet {fleet} now; try again\n"),
                Doing::ReadSecret => {
                    format!("cannot read the webhook Secret of Fleet {fleet} now; try again\n")
                }
                Doing::PatchFleet => format!("cannot annotate Fleet {fleet} now; try again\n"),
            },
        }
    }
}

#[cfg(test)]
mod tests;
