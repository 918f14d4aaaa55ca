//! SSH signing keys in git's `gpg.ssh.allowedSignersFile` format (the
//! `ALLOWED SIGNERS` section of ssh-keygen(1)), and a commit's SSH
//! signature (sshsig, namespace `git`) checked against them with the
//! `ssh-key` crate. Pure.
//!
//! A line is `principals [options] keytype base64-key [comment]`. The
//! options ssh-keygen knows are read: `namespaces="git,..."` (a key
//! listed with namespaces that leave out `git` is not trusted for
//! commits), `valid-after` and `valid-before` (against the commit's
//! committer time; read as UTC); `cert-authority` is refused (no
//! certificate is accepted: list each signing key itself), and an unknown
//! option is an error, as in ssh-keygen.

use ssh_key::{HashAlg, PublicKey, SshSig};

use super::verdict::{Bad, Problem, Signer, SignerKind, Untrusted};

/// The namespace git signs commits in.
pub const NAMESPACE: &str = "git";

/// The key types a line may name: those `ssh-key` verifies with the
/// features this crate enables.
pub const KEY_TYPES: [&str; 7] = [
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// One signer of `allowed_signers`.
#[derive(Debug, Clone)]
pub struct AllowedSigner {
    /// The principals as written (comma-separated patterns).
    pub principals: String,
    /// `namespaces=`: the namespaces the key may sign in (all when `None`).
    pub namespaces: Option<Vec<String>>,
    /// `valid-after=`, in Unix seconds.
    pub valid_after: Option<i64>,
    /// `valid-before=`, in Unix seconds.
    pub valid_before: Option<i64>,
    pub key: PublicKey,
}

impl AllowedSigner {
    /// `SHA256:...`, what ssh-keygen prints.
    pub fn fingerprint(&self) -> String {
        self.key.fingerprint(HashAlg::Sha256).to_string()
    }

    fn allows_namespace(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|n| n.iter().any(|x| x == namespace))
    }

    /// Why the key is not valid at `at` (Unix seconds), if it is not.
    fn invalid_at(&self, at: i64) -> Option<Untrusted> {
        if self.valid_after.is_some_and(|t| at < t) {
            return Some(Untrusted::NotYetValid);
        }
        if self.valid_before.is_some_and(|t| at > t) {
            return Some(Untrusted::Expired);
        }
        None
    }
}

/// What is wrong with one line of `allowed_signers`. Never quotes key
/// data.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("cert-authority is not supported: list each signing key itself")]
    CertAuthority,
    #[error("unknown key type {0:?} (known: {types})", types = KEY_TYPES.join(", "))]
    UnknownKeyType(String),
    #[error("no key type before the key data")]
    NoKeyType,
    #[error("no key after the principals")]
    NoKey,
    #[error("an unterminated quote")]
    UnterminatedQuote,
    #[error("empty principals")]
    NoPrincipals,
    #[error("unknown option {0:?} (known: namespaces, valid-after, valid-before)")]
    UnknownOption(String),
    #[error("option {option}: {reason}")]
    BadOption {
        option: &'static str,
        reason: &'static str,
    },
    /// The base64 data does not decode as a key of the type named.
    #[error("the {key_type} key does not decode: {source}")]
    BadKey {
        key_type: String,
        #[source]
        source: ssh_key::Error,
    },
}

/// Parses `allowed_signers`: every signer with its (1-based) line, or the
/// first line that is wrong. Blank lines and `#` comments are skipped.
pub fn parse_allowed_signers(text: &str) -> Result<Vec<AllowedSigner>, (usize, LineError)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(parse_line(line).map_err(|e| (i + 1, e))?);
    }
    Ok(out)
}

/// A word that names a key type (or tries to): what tells the key type
/// apart from an options word.
fn looks_like_key_type(word: &str) -> bool {
    KEY_TYPES.contains(&word)
        || ["ssh-", "ecdsa-", "sk-", "rsa-"]
            .iter()
            .any(|p| word.starts_with(p))
        || word.ends_with("@openssh.com")
}

/// A key type word fit to quote in a message: short, and never key data.
fn quotable(word: &str) -> String {
    let cut: String = word.chars().take(40).collect();
    if cut.len() < word.len() {
        format!("{cut}...")
    } else {
        cut
    }
}

fn parse_line(line: &str) -> Result<AllowedSigner, LineError> {
    let words = split_words(line)?;
    let mut words = words.iter().map(String::as_str);
    let principals = words.next().unwrap_or_default().trim_matches('"');
    if principals.is_empty() || principals.split(',').any(str::is_empty) {
        return Err(LineError::NoPrincipals);
    }
    let second = words.next().ok_or(LineError::NoKey)?;
    let rest: Vec<&str> = words.collect();
    // `principals [options] keytype key`: an options word is one that is
    // followed by a key type, or that holds `=` or the one flag.
    let (options, key_type, key) = if looks_like_key_type(second) {
        (None, second, rest.first().copied())
    } else if rest.first().is_some_and(|w| looks_like_key_type(w))
        || second.contains('=')
        || second.eq_ignore_ascii_case("cert-authority")
    {
        (
            Some(second),
            rest.first().copied().unwrap_or_default(),
            rest.get(1).copied(),
        )
    } else {
        (None, second, rest.first().copied())
    };
    let options = match options {
        Some(o) => parse_options(o)?,
        None => Options::default(),
    };
    if key_type.is_empty() {
        return Err(LineError::NoKey);
    }
    if key_type.starts_with("AAAA") {
        return Err(LineError::NoKeyType);
    }
    if !KEY_TYPES.contains(&key_type) {
        return Err(LineError::UnknownKeyType(quotable(key_type)));
    }
    let key = key.ok_or(LineError::NoKey)?;
    let key = PublicKey::from_openssh(&format!("{key_type} {key}")).map_err(|source| {
        LineError::BadKey {
            key_type: key_type.to_owned(),
            source,
        }
    })?;
    Ok(AllowedSigner {
        principals: principals.to_owned(),
        namespaces: options.namespaces,
        valid_after: options.valid_after,
        valid_before: options.valid_before,
        key,
    })
}

/// Splits on blanks outside double quotes; quotes are kept.
fn split_words(line: &str) -> Result<Vec<String>, LineError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                word.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if quoted {
        return Err(LineError::UnterminatedQuote);
    }
    if !word.is_empty() {
        words.push(word);
    }
    Ok(words)
}

#[derive(Default)]
struct Options {
    namespaces: Option<Vec<String>>,
    valid_after: Option<i64>,
    valid_before: Option<i64>,
}

/// `name[="value"],...`, names case-insensitive (as ssh-keygen reads them).
fn parse_options(text: &str) -> Result<Options, LineError> {
    let mut opts = Options::default();
    for (name, value) in split_options(text)? {
        match name.to_ascii_lowercase().as_str() {
            "cert-authority" => return Err(LineError::CertAuthority),
            "namespaces" => {
                let value = value.ok_or(LineError::BadOption {
                    option: "namespaces",
                    reason: "needs a value, e.g. namespaces=\"git\"",
                })?;
                let list: Vec<String> = value
                    .split(',')
                    .map(|n| n.trim().to_owned())
                    .filter(|n| !n.is_empty())
                    .collect();
                if list.is_empty() {
                    return Err(LineError::BadOption {
                        option: "namespaces",
                        reason: "names no namespace",
                    });
                }
                opts.namespaces = Some(list);
            }
            "valid-after" => opts.valid_after = Some(time_option("valid-after", value)?),
            "valid-before" => opts.valid_before = Some(time_option("valid-before", value)?),
            _ => return Err(LineError::UnknownOption(quotable(&name))),
        }
    }
    Ok(opts)
}

/// Splits `a,b="x,y",c` at the commas outside quotes; a value loses its
/// quotes.
fn split_options(text: &str) -> Result<Vec<(String, Option<String>)>, LineError> {
    let mut parts = Vec::new();
    let mut part = String::new();
    let mut quoted = false;
    for c in text.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => parts.push(std::mem::take(&mut part)),
            c => part.push(c),
        }
    }
    if quoted {
        return Err(LineError::UnterminatedQuote);
    }
    parts.push(part);
    Ok(parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (p, None),
        })
        .collect())
}

/// ssh-keygen's `YYYYMMDD[HHMM[SS]][Z]`, read as UTC, in Unix seconds.
fn time_option(option: &'static str, value: Option<String>) -> Result<i64, LineError> {
    let bad = LineError::BadOption {
        option,
        reason: "not a time YYYYMMDD[HHMM[SS]][Z]",
    };
    let value = value.ok_or(LineError::BadOption {
        option,
        reason: "needs a value YYYYMMDD[HHMM[SS]][Z]",
    })?;
    let digits = value.strip_suffix(['Z', 'z']).unwrap_or(&value);
    if !matches!(digits.len(), 8 | 12 | 14) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad);
    }
    let field = |from: usize, to: usize| digits.get(from..to).and_then(|s| s.parse::<i16>().ok());
    let (Some(y), Some(mo), Some(d)) = (field(0, 4), field(4, 6), field(6, 8)) else {
        return Err(bad);
    };
    let (h, mi, s) = (
        field(8, 10).unwrap_or(0),
        field(10, 12).unwrap_or(0),
        field(12, 14).unwrap_or(0),
    );
    let at = k8s_openapi::jiff::civil::DateTime::new(
        y, mo as i8, d as i8, h as i8, mi as i8, s as i8, 0,
    )
    .and_then(|t| t.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC))
    .map_err(|_| bad)?;
    Ok(at.timestamp().as_second())
}

/// Checks an armored SSH signature (`-----BEGIN SSH SIGNATURE-----`)
/// over `payload`, made at `at` (the commit's time, Unix seconds).
pub fn check(
    signers: &[AllowedSigner],
    armored: &[u8],
    payload: &[u8],
    at: i64,
) -> Result<Signer, Problem> {
    let sig = SshSig::from_pem(armored).map_err(|e| Problem::Bad {
        signer: None,
        why: Bad::SshMalformed(Box::new(e)),
    })?;
    let fingerprint = sig.public_key().fingerprint(HashAlg::Sha256).to_string();
    let listed: Vec<&AllowedSigner> = signers
        .iter()
        .filter(|s| s.key.key_data() == sig.public_key())
        .collect();
    if listed.is_empty() {
        return Err(Problem::Untrusted {
            key: format!("SSH key {fingerprint}"),
            why: Untrusted::NotListed,
        });
    }
    if sig.namespace() != NAMESPACE {
        return Err(Problem::Bad {
            signer: Some(format!("SSH key {fingerprint}")),
            why: Bad::Namespace(sig.namespace().to_owned()),
        });
    }
    let Some(signer) = listed
        .iter()
        .find(|s| s.allows_namespace(NAMESPACE) && s.invalid_at(at).is_none())
    else {
        // Listed, but not for git or not at this time: say why of the first.
        let why = listed
            .iter()
            .find_map(|s| {
                if s.allows_namespace(NAMESPACE) {
                    s.invalid_at(at)
                } else {
                    None
                }
            })
            .unwrap_or(Untrusted::OtherNamespaces);
        return Err(Problem::Untrusted {
            key: format!("SSH key {fingerprint}"),
            why,
        });
    };
    signer
        .key
        .verify(NAMESPACE, payload, &sig)
        .map_err(|e| Problem::Bad {
            signer: Some(format!("{} (SSH key {fingerprint})", signer.principals)),
            why: Bad::SshInvalid(Box::new(e)),
        })?;
    Ok(Signer {
        kind: SignerKind::Ssh,
        name: signer.principals.clone(),
        fingerprint,
    })
}

#[cfg(test)]
#[path = "ssh_tests.rs"]
mod tests;
