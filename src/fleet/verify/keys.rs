//! The trusted keys, read from the data of the Secret a Fleet's
//! `spec.verify.secretRef` names: `allowed_signers` (SSH signers, see
//! [`super::ssh`]) and every key ending `.asc` (armored OpenPGP public keys
//! or keyrings, see [`super::openpgp`]). Any other key, a line or key
//! that does not parse, or no key at all is refused whole: a Secret is
//! never half read. [`TrustedKeys::check`] checks one signature against
//! them, by its armor: SSH or OpenPGP. Pure.

use std::collections::BTreeMap;

use pgp::composed::SignedPublicKey;
use sha2::{Digest, Sha256};

use super::openpgp::{self, OpenPgpError};
use super::ssh::{self, AllowedSigner, LineError};
use super::verdict::{Bad, Problem, Signer};

/// The Secret key with the SSH signers.
pub const ALLOWED_SIGNERS: &str = "allowed_signers";
/// The suffix of the Secret keys with OpenPGP keys.
pub const OPENPGP_SUFFIX: &str = ".asc";

const SSH_ARMOR: &[u8] = b"-----BEGIN SSH SIGNATURE-----";
const OPENPGP_ARMOR: &[u8] = b"-----BEGIN PGP SIGNATURE-----";

/// What is wrong with the Secret's data; names the Secret key (and the
/// line), never key material.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error(
        "key {key:?} is neither {ALLOWED_SIGNERS:?} nor an OpenPGP key ending {OPENPGP_SUFFIX:?}"
    )]
    UnknownEntry { key: String },
    #[error("key {key:?} is not UTF-8 text")]
    NotText { key: String },
    #[error("key {key:?}, line {line}: {source}")]
    Line {
        key: String,
        line: usize,
        #[source]
        source: LineError,
    },
    #[error("key {key:?}: {source}")]
    OpenPgp {
        key: String,
        #[source]
        source: OpenPgpError,
    },
    #[error("no trusted key: {0}")]
    Empty(&'static str),
}

/// The keys a Fleet trusts, and the hash of the Secret data they were read
/// from (what a verified commit is remembered with).
#[derive(Debug, Clone, Default)]
pub struct TrustedKeys {
    pub ssh: Vec<AllowedSigner>,
    pub openpgp: Vec<SignedPublicKey>,
    pub hash: String,
}

/// sha256 over the keys and values, in key order: equal for equal data.
pub fn hash_of(data: &BTreeMap<String, Vec<u8>>) -> String {
    let mut h = Sha256::new();
    for (k, v) in data {
        h.update((k.len() as u64).to_be_bytes());
        h.update(k.as_bytes());
        h.update((v.len() as u64).to_be_bytes());
        h.update(v);
    }
    hex::encode(h.finalize())
}

impl TrustedKeys {
    /// Reads the Secret's data.
    pub fn parse(data: &BTreeMap<String, Vec<u8>>) -> Result<Self, KeysError> {
        let mut keys = TrustedKeys {
            hash: hash_of(data),
            ..TrustedKeys::default()
        };
        let text = |key: &str, value: &[u8]| {
            String::from_utf8(value.to_vec()).map_err(|_| KeysError::NotText {
                key: key.to_owned(),
            })
        };
        for (key, value) in data {
            if key == ALLOWED_SIGNERS {
                keys.ssh =
                    ssh::parse_allowed_signers(&text(key, value)?).map_err(|(line, source)| {
                        KeysError::Line {
                            key: key.clone(),
                            line,
                            source,
                        }
                    })?;
            } else if key.ends_with(OPENPGP_SUFFIX) {
                let found = openpgp::parse_keys(&text(key, value)?).map_err(|source| {
                    KeysError::OpenPgp {
                        key: key.clone(),
                        source,
                    }
                })?;
                keys.openpgp.extend(found);
            } else {
                return Err(KeysError::UnknownEntry { key: key.clone() });
            }
        }
        if keys.ssh.is_empty() && keys.openpgp.is_empty() {
            return Err(KeysError::Empty(if data.contains_key(ALLOWED_SIGNERS) {
                "allowed_signers lists no signer and no *.asc key is set"
            } else {
                "the Secret has neither allowed_signers nor a *.asc key"
            }));
        }
        Ok(keys)
    }

    /// Checks one commit's signature (`None`: unsigned) over `payload`
    /// (the commit without its signature header), made at `at` (the
    /// committer time, Unix seconds).
    pub fn check(
        &self,
        signature: Option<&[u8]>,
        payload: &[u8],
        at: i64,
    ) -> Result<Signer, Problem> {
        let Some(signature) = signature else {
            return Err(Problem::Unsigned);
        };
        let start = signature
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(signature.len());
        let armored = &signature[start..];
        if armored.starts_with(SSH_ARMOR) {
            ssh::check(&self.ssh, armored, payload, at)
        } else if armored.starts_with(OPENPGP_ARMOR) {
            openpgp::check(&self.openpgp, armored, payload)
        } else {
            Err(Problem::Bad {
                signer: None,
                why: Bad::UnknownFormat,
            })
        }
    }

    /// Every key's fingerprint, for a log line (never the keys).
    pub fn fingerprints(&self) -> Vec<String> {
        use pgp::types::KeyDetails;
        self.ssh
            .iter()
            .map(AllowedSigner::fingerprint)
            .chain(
                self.openpgp
                    .iter()
                    .map(|k| hex::encode_upper(k.fingerprint().as_bytes())),
            )
            .collect()
    }
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
