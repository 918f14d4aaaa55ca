//! Cosign image signatures, key-based: whether each image of a release was
//! signed by a trusted key, before the release is applied (the saga's
//! `signatures-verified` step), when it is pinned (`exo release pin
//! --verify-signatures`) and linted (`exo release lint
//! --verify-signatures`).
//!
//! Guarantees:
//! - an image verifies only by digest, and only when one of its signature
//!   payloads is signed by a trusted key (ECDSA P-256, RustCrypto's
//!   `p256`) *and* names that same digest: a signature copied from another
//!   image is refused, naming the digest it signs;
//! - every payload's bytes are checked against their digest before their
//!   signature is; sizes are bounded (`cosign::MAX_PAYLOAD_BYTES`,
//!   `cosign::MAX_SIGNATURES`);
//! - each image costs one manifest GET and one blob GET per signature,
//!   over one pooled client per run (`fleet::pin::Reader`), at most
//!   `max_in_flight` at once;
//! - keyless signatures (Fulcio certificates, Rekor entries) are not
//!   verified: they need a transparency log this tool does not reach. A
//!   keyless signature is not trusted, whatever its certificate says.
//!
//! `key` and `cosign` are pure; `fetch` is the registry I/O.

use std::collections::BTreeMap;

pub mod cosign;
mod fetch;
pub mod key;

pub use fetch::{open_for, verify_all, verify_sets, verify_with};
pub use key::{KeyError, TrustedKey};

use crate::fleet::pin::PinError;
use crate::fleet::release::{Release, SigningKey};

/// An image whose signature verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// `repository@sha256:…`, as the release pins it.
    pub image: String,
    /// The trusted key's name and id.
    pub key: String,
    pub key_id: String,
    /// The digest of the signed payload that verified.
    pub signature: String,
}

/// Why an image did not verify. Each names the image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("{image}: not pinned by a sha256 digest, so its signature cannot be looked up")]
    NotPinned { image: String },
    #[error("{image}: not signed (no cosign signature {tag} in its repository)")]
    Unsigned { image: String, tag: String },
    #[error("{image}: {tag} is not a cosign signature: {reason}")]
    NotCosign {
        image: String,
        tag: String,
        reason: String,
    },
    #[error("{image}: none of its {signatures} signature(s) verifies with a trusted key ({keys})")]
    Untrusted {
        image: String,
        signatures: usize,
        keys: String,
    },
    #[error(
        "{image}: signed by a trusted key, but the signature is for {signed}, not this image (a copied signature)"
    )]
    OtherDigest { image: String, signed: String },
    #[error("{0}")]
    Registry(PinError),
}

impl SignatureError {
    /// A bounded reason, for conditions, Events and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            SignatureError::NotPinned { .. } => "NotPinned",
            SignatureError::Unsigned { .. } => "Unsigned",
            SignatureError::NotCosign { .. } => "NotCosignSignature",
            SignatureError::Untrusted { .. } => "UntrustedSignature",
            SignatureError::OtherDigest { .. } => "CopiedSignature",
            SignatureError::Registry(_) => "RegistryError",
        }
    }

    /// Whether asking again may change the answer without anyone signing
    /// anything (the registry was down, say).
    pub fn transient(&self) -> bool {
        match self {
            SignatureError::Registry(e) => matches!(
                e,
                PinError::Unreachable { .. } | PinError::Registry { .. } | PinError::Auth { .. }
            ),
            _ => false,
        }
    }
}

/// A key of a release that does not parse: which one and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec.signatures.keys[{index}] ({name}): {source}")]
pub struct ReleaseKeyError {
    pub index: usize,
    pub name: String,
    #[source]
    pub source: KeyError,
}

/// The keys `keys` (a release's `spec.signatures.keys`), parsed.
pub fn parse_keys(keys: &[SigningKey]) -> Result<Vec<TrustedKey>, ReleaseKeyError> {
    keys.iter()
        .enumerate()
        .map(|(index, k)| {
            TrustedKey::parse(&k.name, &k.public_key).map_err(|source| ReleaseKeyError {
                index,
                name: k.name.clone(),
                source,
            })
        })
        .collect()
}

/// The keys a release's images must be signed with: `fleet_keys` when the
/// Fleet names some (the cluster's trust wins over what a commit says),
/// else the release's own; empty when neither asks for signatures.
pub fn required_keys(
    release: &Release,
    fleet_keys: Option<&[TrustedKey]>,
) -> Result<Vec<TrustedKey>, ReleaseKeyError> {
    match fleet_keys {
        Some(k) => Ok(k.to_vec()),
        None => match &release.spec.signatures {
            Some(s) => parse_keys(&s.keys),
            None => Ok(Vec::new()),
        },
    }
}

/// The distinct pinned images of `release`, in component order.
pub fn images_of(release: &Release) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    release
        .spec
        .components
        .iter()
        .filter(|c| seen.insert(c.image.as_str()))
        .map(|c| c.image.clone())
        .collect()
}

/// Per image, its result; what a whole release's check gives.
pub type Results = BTreeMap<String, Result<Verified, SignatureError>>;

/// The names of `keys`, for messages.
pub fn key_names(keys: &[TrustedKey]) -> String {
    keys.iter()
        .map(|k| format!("{} ({})", k.name, k.short_id()))
        .collect::<Vec<_>>()
        .join(", ")
}
