//! OpenPGP public keys (armored, one key or a keyring) and a commit's
//! OpenPGP signature checked against them with the `pgp` crate (rPGP).
//! Pure.
//!
//! A signature is matched to a key by its issuer (fingerprint, or key id
//! when it names none): the primary key or a subkey whose binding allows
//! signing. A key's self-signatures are checked when it is read. Expiry
//! and revocation are not looked at: a key that must no longer sign is
//! removed from the Secret.

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey};
use pgp::types::{KeyDetails, VerifyingKey};

use super::verdict::{Bad, Problem, Signer, SignerKind, Untrusted};

/// What is wrong with an armored OpenPGP key. Never quotes key data.
#[derive(Debug, thiserror::Error)]
pub enum OpenPgpError {
    #[error("not an armored OpenPGP public key: {0}")]
    Parse(#[source] Box<pgp::errors::Error>),
    #[error("holds no public key")]
    Empty,
    #[error("the self-signatures of key {fingerprint} do not verify: {source}")]
    Bindings {
        fingerprint: String,
        #[source]
        source: Box<pgp::errors::Error>,
    },
}

/// Reads every public key of an armored key or keyring, or of several
/// armored blocks one after the other (exports pasted together).
pub fn parse_keys(text: &str) -> Result<Vec<SignedPublicKey>, OpenPgpError> {
    let mut keys = Vec::new();
    for block in armor_blocks(text) {
        let (found, _headers) = SignedPublicKey::from_armor_many(block.as_bytes())
            .map_err(|e| OpenPgpError::Parse(Box::new(e)))?;
        for k in found {
            keys.push(k.map_err(|e| OpenPgpError::Parse(Box::new(e)))?);
        }
    }
    if keys.is_empty() {
        return Err(OpenPgpError::Empty);
    }
    for k in &keys {
        k.verify_bindings()
            .map_err(|source| OpenPgpError::Bindings {
                fingerprint: hex(&k.fingerprint()),
                source: Box::new(source),
            })?;
    }
    Ok(keys)
}

/// The text cut before each armor header line (`-----BEGIN ...`); the
/// whole text when it has none, so that the parser says what is wrong.
fn armor_blocks(text: &str) -> Vec<&str> {
    let starts: Vec<usize> = text
        .match_indices("-----BEGIN ")
        .map(|(i, _)| i)
        .filter(|i| *i == 0 || text.as_bytes()[i - 1] == b'\n')
        .collect();
    if starts.is_empty() {
        return vec![text];
    }
    starts
        .iter()
        .enumerate()
        .map(|(n, from)| &text[*from..starts.get(n + 1).copied().unwrap_or(text.len())])
        .collect()
}

/// Upper-case hex, as gpg prints fingerprints and key ids.
fn hex(bytes: &impl AsRef<[u8]>) -> String {
    ::hex::encode_upper(bytes.as_ref())
}

/// The key's first user id, for messages.
fn user_id(key: &SignedPublicKey) -> String {
    key.details
        .users
        .first()
        .map(|u| String::from_utf8_lossy(u.id.id()).into_owned())
        .unwrap_or_else(|| "(no user id)".into())
}

/// Whether a component with fingerprint `fp` and key id `id` is the
/// signature's issuer.
fn issued_by(sig: &DetachedSignature, fp: &[u8], id: &[u8]) -> bool {
    let fps = sig.signature.issuer_fingerprint();
    if !fps.is_empty() {
        return fps.iter().any(|f| f.as_bytes() == fp);
    }
    sig.signature
        .issuer_key_id()
        .iter()
        .any(|k| k.as_ref() == id)
}

/// Checks an armored OpenPGP signature over `payload` against `keys`.
pub fn check(keys: &[SignedPublicKey], armored: &[u8], payload: &[u8]) -> Result<Signer, Problem> {
    let (sig, _headers) =
        DetachedSignature::from_armor_single(armored).map_err(|e| Problem::Bad {
            signer: None,
            why: Bad::OpenPgpMalformed(Box::new(e)),
        })?;
    let issuer = sig
        .signature
        .issuer_fingerprint()
        .first()
        .map(hex)
        .or_else(|| sig.signature.issuer_key_id().first().map(hex))
        .ok_or(Problem::Bad {
            signer: None,
            why: Bad::NoIssuer,
        })?;
    for key in keys {
        let primary = key.fingerprint();
        if issued_by(&sig, primary.as_bytes(), key.legacy_key_id().as_ref()) {
            return verified(&sig, key, key, payload);
        }
        for sub in &key.public_subkeys {
            if !issued_by(
                &sig,
                sub.key.fingerprint().as_bytes(),
                sub.key.legacy_key_id().as_ref(),
            ) {
                continue;
            }
            if !sub.signatures.iter().any(|b| b.key_flags().sign()) {
                return Err(Problem::Untrusted {
                    key: format!("OpenPGP key {}", hex(&sub.key.fingerprint())),
                    why: Untrusted::NotSigningKey,
                });
            }
            return verified(&sig, key, &sub.key, payload);
        }
    }
    Err(Problem::Untrusted {
        key: format!("OpenPGP key {issuer}"),
        why: Untrusted::NotListed,
    })
}

fn verified(
    sig: &DetachedSignature,
    key: &SignedPublicKey,
    signing: &impl VerifyingKey,
    payload: &[u8],
) -> Result<Signer, Problem> {
    let fingerprint = hex(&signing.fingerprint());
    sig.verify(signing, payload).map_err(|e| Problem::Bad {
        signer: Some(format!("{} (OpenPGP key {fingerprint})", user_id(key))),
        why: Bad::OpenPgpInvalid(Box::new(e)),
    })?;
    Ok(Signer {
        kind: SignerKind::OpenPgp,
        name: user_id(key),
        fingerprint,
    })
}

#[cfg(test)]
#[path = "openpgp_tests.rs"]
mod tests;
