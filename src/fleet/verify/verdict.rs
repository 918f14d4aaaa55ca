//! What one commit's signature comes to: the signer, or why it is not
//! accepted, with a bounded reason (`Unsigned`, `UntrustedSigner`,
//! `BadSignature`) for the Fleet's `Verified` condition, its Event and the
//! metric's label. Pure.

use super::keys::TrustedKeys;
use super::{openpgp, ssh};

/// Who signed a commit whose signature verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    pub kind: SignerKind,
    /// The principals of the `allowed_signers` line (SSH), or the key's
    /// first user id (OpenPGP).
    pub name: String,
    /// `SHA256:...` (SSH) or the hex fingerprint of the key that signed
    /// (OpenPGP, the subkey's when a subkey signed).
    pub fingerprint: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignerKind {
    Ssh,
    OpenPgp,
}

impl std::fmt::Display for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            SignerKind::Ssh => "SSH",
            SignerKind::OpenPgp => "OpenPGP",
        };
        write!(f, "{} ({kind} key {})", self.name, self.fingerprint)
    }
}

/// Why a signature is not accepted.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("unsigned")]
    Unsigned,
    /// `key` names the key by fingerprint or key id only.
    #[error("signed by {key}, {why}")]
    Untrusted { key: String, why: Untrusted },
    #[error("the signature{} does not verify: {why}", .signer.as_ref().map(|s| format!(" by {s}")).unwrap_or_default())]
    Bad { signer: Option<String>, why: Bad },
}

impl Problem {
    /// The reason of the `Verified` condition and the metric's label.
    pub fn reason(&self) -> &'static str {
        match self {
            Problem::Unsigned => "Unsigned",
            Problem::Untrusted { .. } => "UntrustedSigner",
            Problem::Bad { .. } => "BadSignature",
        }
    }
}

/// Why a signer is not trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Untrusted {
    #[error("which the Secret does not list")]
    NotListed,
    #[error("which allowed_signers lists only for other namespaces than \"git\"")]
    OtherNamespaces,
    #[error("before its valid-after time")]
    NotYetValid,
    #[error("after its valid-before time")]
    Expired,
    #[error("a subkey that may not sign")]
    NotSigningKey,
}

/// Why a signature does not verify.
#[derive(Debug, thiserror::Error)]
pub enum Bad {
    #[error("neither an SSH nor an OpenPGP signature")]
    UnknownFormat,
    #[error("the SSH signature does not parse: {0}")]
    SshMalformed(#[source] Box<ssh_key::Error>),
    #[error("the SSH signature is for namespace {0:?}, not \"git\"")]
    Namespace(String),
    #[error("it does not match the commit: {0}")]
    SshInvalid(#[source] Box<ssh_key::Error>),
    #[error("the OpenPGP signature does not parse: {0}")]
    OpenPgpMalformed(#[source] Box<pgp::errors::Error>),
    #[error("the OpenPGP signature names no issuer")]
    NoIssuer,
    #[error("it does not match the commit: {0}")]
    OpenPgpInvalid(#[source] Box<pgp::errors::Error>),
}

const SSH_ARMOR: &[u8] = b"-----BEGIN SSH SIGNATURE-----";
const OPENPGP_ARMOR: &[u8] = b"-----BEGIN PGP SIGNATURE-----";

/// Checks one commit's signature (`None`: unsigned) over `payload` (the
/// commit without its signature header), made at `at` (the committer
/// time, Unix seconds), against `keys`.
pub fn check(
    keys: &TrustedKeys,
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
        ssh::check(&keys.ssh, armored, payload, at)
    } else if armored.starts_with(OPENPGP_ARMOR) {
        openpgp::check(&keys.openpgp, armored, payload)
    } else {
        Err(Problem::Bad {
            signer: None,
            why: Bad::UnknownFormat,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_stay_few_and_messages_say_why() {
        assert_eq!(Problem::Unsigned.reason(), "Unsigned");
        assert_eq!(Problem::Unsigned.to_string(), "unsigned");
        let p = Problem::Untrusted {
            key: "SSH key SHA256:abc".into(),
            why: Untrusted::NotListed,
        };
        assert_eq!(p.reason(), "UntrustedSigner");
        assert_eq!(
            p.to_string(),
            "signed by SSH key SHA256:abc, which the Secret does not list"
        );
        let p = Problem::Bad {
            signer: Some("alice".into()),
            why: Bad::Namespace("file".into()),
        };
        assert_eq!(p.reason(), "BadSignature");
        assert_eq!(
            p.to_string(),
            "the signature by alice does not verify: the SSH signature is for namespace \"file\", not \"git\""
        );
        let p = Problem::Bad {
            signer: None,
            why: Bad::UnknownFormat,
        };
        assert_eq!(
            p.to_string(),
            "the signature does not verify: neither an SSH nor an OpenPGP signature"
        );
    }

    #[test]
    fn no_signature_is_unsigned_and_an_unknown_one_is_bad() {
        let keys = TrustedKeys::default();
        assert!(matches!(
            check(&keys, None, b"tree x\n", 0),
            Err(Problem::Unsigned)
        ));
        let x509 = b"-----BEGIN SIGNED MESSAGE-----\nMIIB\n-----END SIGNED MESSAGE-----\n";
        assert!(matches!(
            check(&keys, Some(x509), b"tree x\n", 0),
            Err(Problem::Bad {
                why: Bad::UnknownFormat,
                ..
            })
        ));
    }
}
