//! Tokens: generation, hashing and a redacting wrapper, shared by the
//! control plane (which issues and checks them) and the operator (which
//! presents one); here so that the client does not import the server.
//!
//! Guarantees: a token is 32 bytes from the OS random source; only its
//! SHA-256 is stored; [`SecretToken`]'s `Debug`/`Display` never show it, so a
//! stray `{:?}` in a log line cannot leak it. 256 random bits make a slow
//! password hash unnecessary: the stored digest cannot be brute-forced.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Prefix that makes a leaked token easy to recognise by secret scanners.
pub const TOKEN_PREFIX: &str = "exo_dt_";

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("the operating system random source failed: {0}")]
    Random(String),
}

/// A bearer token in clear. Only [`SecretToken::expose`] shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretToken(String);

impl SecretToken {
    /// A fresh random deployment token.
    pub fn generate() -> Result<Self, TokenError> {
        Self::generate_with_prefix(TOKEN_PREFIX)
    }

    /// A fresh random token with another prefix (admin tokens).
    pub fn generate_with_prefix(prefix: &str) -> Result<Self, TokenError> {
        let mut b = [0u8; 32];
        getrandom::fill(&mut b).map_err(|e| TokenError::Random(e.to_string()))?;
        Ok(Self(format!("{prefix}{}", hex::encode(b))))
    }

    /// Wraps a token received from a client or read from the environment.
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    /// The clear text, for the one place that must print or send it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The digest stored in the database: `sha256:<hex>`.
    pub fn hash(&self) -> String {
        hash_token(&self.0)
    }
}

impl std::fmt::Debug for SecretToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretToken(<redacted>)")
    }
}

impl std::fmt::Display for SecretToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

pub fn hash_token(token: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(token.as_bytes())))
}

/// Tags tokens under a per-process key, and checks a presented token
/// against a tag in constant time.
pub struct Verifier {
    key: [u8; 32],
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Verifier { .. }")
    }
}

impl Verifier {
    pub fn new(key: [u8; 32]) -> Self {
        Self { key }
    }

    /// Under a fresh key from the OS random source.
    pub fn random() -> Result<Self, TokenError> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| TokenError::Random(e.to_string()))?;
        Ok(Self { key })
    }

    fn mac(&self, token: &[u8]) -> Hmac<Sha256> {
        // HMAC takes a key of any length, so this cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(token);
        mac
    }

    pub fn tag(&self, token: &[u8]) -> [u8; 32] {
        self.mac(token).finalize().into_bytes().into()
    }

    /// Whether `presented` is the token `tag` was made from.
    pub fn matches(&self, presented: &[u8], tag: &[u8; 32]) -> bool {
        self.mac(presented).verify_slice(tag).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_prefixed_and_redacted() {
        let a = SecretToken::generate().unwrap();
        let b = SecretToken::generate().unwrap();
        assert_ne!(a, b);
        assert!(a.expose().starts_with(TOKEN_PREFIX));
        assert_eq!(a.expose().len(), TOKEN_PREFIX.len() + 64);
        let shown = format!("{a:?} {a}");
        assert!(!shown.contains(&a.expose()[TOKEN_PREFIX.len()..]));
        assert!(a.hash().starts_with("sha256:"));
        assert_ne!(a.hash(), b.hash());
    }

    #[test]
    fn tokens_match_only_themselves() {
        let v = Verifier::new([7; 32]);
        let tag = v.tag(b"token-a");
        assert!(v.matches(b"token-a", &tag));
        for wrong in [&b"token-b"[..], b"token-", b"token-aa", b""] {
            assert!(!v.matches(wrong, &tag), "{wrong:?}");
        }
        // Another process's key makes other tags.
        assert_ne!(Verifier::new([8; 32]).tag(b"token-a"), tag);
    }
}
