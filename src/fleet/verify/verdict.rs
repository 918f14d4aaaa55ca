//! What one commit's signature comes to: the signer, or why it is not
//! accepted, with a bounded reason (`Unsigned`, `UntrustedSigner`,
//! `BadSignature`) for the Fleet's `Verified` condition, its Event and the
//! metric's label. Types only (the check is `TrustedKeys::check`).

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
}
