//! Trusted cosign public keys: the PEM `PUBLIC KEY` block that `cosign
//! generate-key-pair` writes to `cosign.pub`, an ECDSA P-256 key in X.509
//! SubjectPublicKeyInfo form. Parsing and the curve arithmetic are
//! RustCrypto's (`p256`); this file only names what it found. Pure.
//!
//! A key's id is the sha256 of its SubjectPublicKeyInfo DER, the same bytes
//! whatever the PEM's line breaks: the status records it, so a reader can
//! tell which key verified an image without the key's name being unique
//! across releases.

use p256::ecdsa::VerifyingKey;
use p256::ecdsa::signature::Verifier as _;
use p256::pkcs8::DecodePublicKey as _;
use p256::pkcs8::der::{Decode as _, pem};
use p256::pkcs8::spki::SubjectPublicKeyInfoRef;
use sha2::Digest as _;

/// A key that may have signed an image.
#[derive(Clone)]
pub struct TrustedKey {
    /// What the release (or the Fleet's Secret) calls it.
    pub name: String,
    /// `sha256:` and the hex of its SubjectPublicKeyInfo DER.
    pub id: String,
    key: VerifyingKey,
}

impl std::fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustedKey")
            .field("name", &self.name)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Why a key was refused. Never carries the key's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("not a PEM block (-----BEGIN PUBLIC KEY----- ... -----END PUBLIC KEY-----): {0}")]
    NotPem(String),
    #[error(
        "a PEM {0:?} block is not a public key: give the public half (cosign.pub, -----BEGIN PUBLIC KEY-----)"
    )]
    NotPublic(String),
    #[error(
        "{0} keys are not supported: cosign keys here are ECDSA P-256 (cosign generate-key-pair)"
    )]
    UnsupportedType(String),
    #[error("not a valid ECDSA P-256 public key: {0}")]
    Malformed(String),
}

impl TrustedKey {
    /// Parses `pem` as the key `name`.
    pub fn parse(name: &str, pem_text: &str) -> Result<Self, KeyError> {
        // Each line trimmed and blank ones dropped: a key pasted into YAML
        // keeps its base64, whatever the indentation or line endings.
        let lines: Vec<&str> = pem_text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let text = lines.join("\n");
        let (label, der) =
            pem::decode_vec(text.as_bytes()).map_err(|e| KeyError::NotPem(e.to_string()))?;
        if label != "PUBLIC KEY" {
            return Err(KeyError::NotPublic(label.to_owned()));
        }
        let spki = SubjectPublicKeyInfoRef::from_der(&der)
            .map_err(|e| KeyError::Malformed(e.to_string()))?;
        let algorithm = spki.algorithm.oid.to_string();
        let curve = spki.algorithm.parameters_oid().ok().map(|o| o.to_string());
        match (algorithm.as_str(), curve.as_deref()) {
            (EC_PUBLIC_KEY, Some(P256)) => {}
            (EC_PUBLIC_KEY, Some(P384)) => {
                return Err(KeyError::UnsupportedType("ECDSA P-384".into()));
            }
            (EC_PUBLIC_KEY, other) => {
                return Err(KeyError::UnsupportedType(format!(
                    "ECDSA on curve {}",
                    other.unwrap_or("(none named)")
                )));
            }
            (RSA, _) => return Err(KeyError::UnsupportedType("RSA".into())),
            (ED25519, _) => return Err(KeyError::UnsupportedType("Ed25519".into())),
            (other, _) => {
                return Err(KeyError::UnsupportedType(format!("algorithm {other}")));
            }
        }
        let key = VerifyingKey::from_public_key_der(&der)
            .map_err(|e| KeyError::Malformed(e.to_string()))?;
        Ok(TrustedKey {
            name: name.to_owned(),
            id: format!("sha256:{:x}", sha2::Sha256::digest(&der)),
            key,
        })
    }

    /// Whether `signature` (ASN.1 DER, as cosign writes it) is this key's
    /// over `payload`.
    pub fn verifies(&self, payload: &[u8], signature: &[u8]) -> bool {
        p256::ecdsa::Signature::from_der(signature)
            .is_ok_and(|sig| self.key.verify(payload, &sig).is_ok())
    }

    /// The id's first 12 hex digits, for messages.
    pub fn short_id(&self) -> &str {
        let hex = self.id.strip_prefix("sha256:").unwrap_or(&self.id);
        &hex[..hex.len().min(12)]
    }
}

const EC_PUBLIC_KEY: &str = "1.2.840.10045.2.1";
const P256: &str = "1.2.840.10045.3.1.7";
const P384: &str = "1.3.132.0.34";
const RSA: &str = "1.2.840.113549.1.1.1";
const ED25519: &str = "1.3.101.112";

#[cfg(test)]
mod tests {
    use super::*;
    use p256::ecdsa::SigningKey;
    use p256::ecdsa::signature::Signer as _;
    use p256::pkcs8::EncodePublicKey as _;

    /// A key made here, from fixed bytes (no randomness in tests).
    pub(crate) fn key(seed: u8) -> (SigningKey, String) {
        let sk = SigningKey::from_slice(&[seed; 32]).unwrap();
        let pem = sk
            .verifying_key()
            .to_public_key_pem(p256::pkcs8::LineEnding::LF)
            .unwrap();
        (sk, pem)
    }

    #[test]
    fn a_p256_key_parses_and_verifies_its_own_signatures_only() {
        let (sk, pem) = key(7);
        let k = TrustedKey::parse("ci", &pem).unwrap();
        assert!(k.id.starts_with("sha256:") && k.id.len() == 71);
        assert_eq!(k.short_id().len(), 12);
        let sig: p256::ecdsa::Signature = sk.sign(b"payload");
        let der = sig.to_der();
        assert!(k.verifies(b"payload", der.as_bytes()));
        assert!(!k.verifies(b"other payload", der.as_bytes()));
        assert!(!k.verifies(b"payload", b"not der"));
        let (_, other) = key(8);
        let other = TrustedKey::parse("old", &other).unwrap();
        assert!(!other.verifies(b"payload", der.as_bytes()));
        assert_ne!(other.id, k.id);
        // Indented as YAML block scalars may leave it: the same key, the
        // same id.
        let indented: String = pem.lines().map(|l| format!("  {l}\n")).collect();
        assert_eq!(
            TrustedKey::parse("ci", &indented).map(|k| k.id).ok(),
            Some(k.id.clone())
        );
        assert!(!format!("{k:?}").contains("BEGIN"));
    }

    #[test]
    fn other_keys_are_named_not_taken() {
        assert!(matches!(
            TrustedKey::parse("x", "hello"),
            Err(KeyError::NotPem(_))
        ));
        let private = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
        assert_eq!(
            TrustedKey::parse("x", private).err(),
            Some(KeyError::NotPublic("ENCRYPTED SIGSTORE PRIVATE KEY".into()))
        );
        // An Ed25519 public key (RFC 8410's example).
        let ed = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n";
        assert_eq!(
            TrustedKey::parse("x", ed).err(),
            Some(KeyError::UnsupportedType("Ed25519".into()))
        );
        let broken = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAy\n-----END PUBLIC KEY-----\n";
        assert!(TrustedKey::parse("x", broken).is_err());
    }
}
