//! What must not be shown, found in free text, once. The audit's
//! credential rule and the incident path's redaction share these shapes:
//! - [`provider_of_value`]: does a value hold an upstream provider's key
//!   (`sk-ant-…`, `AKIA…`)? The audit asks this of env values and Secrets;
//! - [`for_lane`]: the technical detail as support may read it, with every
//!   key shape, bearer token, `password=`-like value and any secret the
//!   caller knows (the agent's own token) masked;
//! - [`for_tenant`]: a summary as a tenant may read it: no stack trace,
//!   URL, hostname, IP address, path, token or key.
//!
//! All pure; they work on text and never log what they mask.

use std::fmt::Write as _;
use std::ops::Range;

/// A key character: what a provider key is made of.
fn key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_'
}

/// How many key characters follow `at` in `v`.
fn run(v: &[u8], at: usize) -> usize {
    v[at..].iter().take_while(|c| key_char(**c)).count()
}

/// (prefix, provider, at least this many key characters after it, exact
/// length after it).
const SHAPES: &[(&[u8], &str, usize, Option<usize>)] = &[
    (b"sk-ant-", "Anthropic", 20, None),
    (b"sk-proj-", "OpenAI", 20, None),
    (b"sk-", "OpenAI", 32, None),
    (b"AKIA", "AWS", 16, Some(16)),
    (b"ASIA", "AWS", 16, Some(16)),
    (b"AIza", "Google", 35, Some(35)),
    (b"gsk_", "Groq", 40, None),
    (b"hf_", "Hugging Face", 30, None),
    (b"xai-", "xAI", 40, None),
];

/// Where provider keys are in `value`, by shape, and whose: byte ranges in
/// order, none overlapping.
pub fn key_spans(value: &[u8]) -> Vec<(Range<usize>, &'static str)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < value.len() {
        // Only at the start of a token; a Langfuse secret key (`sk-lf-…`)
        // is a tenant's own tracing key, not an upstream provider's.
        if (i > 0 && key_char(value[i - 1])) || value[i..].starts_with(b"sk-lf-") {
            i += 1;
            continue;
        }
        let found = SHAPES.iter().find_map(|(prefix, provider, min, exact)| {
            if !value[i..].starts_with(prefix) {
                return None;
            }
            let n = run(value, i + prefix.len());
            let body = &value[i + prefix.len()..i + prefix.len() + n];
            let ok = match exact {
                Some(e) => {
                    n == *e
                        && (*provider != "AWS"
                            || body
                                .iter()
                                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()))
                }
                None => n >= *min,
            };
            ok.then_some((i..i + prefix.len() + n, *provider))
        });
        match found {
            Some((span, provider)) => {
                i = span.end;
                out.push((span, provider));
            }
            None => i += 1,
        }
    }
    out
}

/// The provider whose key a value contains, by shape.
pub fn provider_of_value(value: &[u8]) -> Option<&'static str> {
    if let Some((_, provider)) = key_spans(value).first() {
        return Some(provider);
    }
    let text = String::from_utf8_lossy(value);
    if text.contains("\"private_key\"") && text.contains("service_account") {
        return Some("Google (service account key)");
    }
    if text.contains("AccountKey=") && text.contains("AccountName=") {
        return Some("Azure (storage account key)");
    }
    None
}

/// Names whose value is a secret in `name=value`, `name: value` or
/// `"name": "value"` (compared lower case, `-` as `_`).
const SECRET_NAMES: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "secret",
    "client_secret",
    "token",
    "access_token",
    "refresh_token",
    "api_key",
    "apikey",
    "private_key",
    "accountkey",
    "authorization",
];

/// Whether `word` names a secret (its tail after the last `.` counts, so
/// `db.password` does).
fn names_secret(word: &str) -> bool {
    let w = word
        .trim_matches(|c: char| c == '"' || c == '\'')
        .rsplit('.')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
        .replace('-', "_");
    SECRET_NAMES.contains(&w.as_str()) || w.ends_with("_password") || w.ends_with("_token")
}

/// A long opaque run (a token, a JWT, a hash-like secret): at least 24
/// characters of letters, digits and `+/=_-.`, with both letters and digits.
fn opaque(word: &str) -> bool {
    word.len() >= 24
        && word
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"+/=_-.".contains(&c))
        && word.bytes().any(|c| c.is_ascii_digit())
        && word.bytes().any(|c| c.is_ascii_alphabetic())
}

/// Masks, in `text`, every provider key by shape, every value named like a
/// secret, every `Bearer` token and every string of `known` (secrets the
/// caller holds, such as the agent's own token). What support reads: the
/// rest, stack traces and hostnames included, stays.
pub fn for_lane(text: &str, known: &[&str]) -> String {
    let mut text = text.to_owned();
    for k in known.iter().filter(|k| k.len() >= 8) {
        text = text.replace(k, "[masked: token]");
    }
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut at = 0;
    for (span, provider) in key_spans(bytes) {
        out.push_str(&text[at..span.start]);
        let _ = write!(out, "[masked: {provider} key]");
        at = span.end;
    }
    out.push_str(&text[at..]);
    mask_named_values(&out)
}

/// `name=value`, `name: value`, `"name": "value"` and `Bearer value` with
/// the value masked.
fn mask_named_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut mask_next = false;
    for piece in split_keep(text) {
        if piece.chars().all(char::is_whitespace) {
            out.push_str(piece);
            continue;
        }
        if mask_next && piece.eq_ignore_ascii_case("bearer") {
            // `Authorization: Bearer <token>`: the token is what goes.
            out.push_str(piece);
            continue;
        }
        if mask_next {
            mask_next = false;
            let tail: String = piece
                .chars()
                .rev()
                .take_while(|c| matches!(c, ',' | ';' | ')' | '}'))
                .collect();
            out.push_str("[masked]");
            out.extend(tail.chars().rev());
            continue;
        }
        // `name=value` in one piece.
        if let Some((name, value)) = piece.split_once('=')
            && names_secret(name)
            && !value.is_empty()
        {
            out.push_str(name);
            out.push_str("=[masked]");
            continue;
        }
        // `name:` or `"name":` or `Bearer`: the next piece is the value.
        let bare = piece.trim_end_matches(':');
        if (piece.ends_with(':') && names_secret(bare)) || piece.eq_ignore_ascii_case("bearer") {
            mask_next = true;
        }
        out.push_str(piece);
    }
    out
}

/// `text` in pieces: runs of whitespace and runs of anything else.
fn split_keep(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = None;
    for (i, c) in text.char_indices() {
        let space = c.is_whitespace();
        if in_space.is_some_and(|s| s != space) {
            out.push(&text[start..i]);
            start = i;
        }
        in_space = Some(space);
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// Whether a line is part of a stack trace or a panic report.
fn trace_line(line: &str) -> bool {
    let t = line.trim_start();
    let frame_suffix = [".rs:", ".py:", ".go:", ".js:", ".ts:", ".java:", ".rb:"]
        .iter()
        .any(|s| t.contains(s));
    t.starts_with("Traceback (most recent call last)")
        || t.starts_with("File \"")
        || (t.starts_with("at ") && line.starts_with(char::is_whitespace))
        || t.starts_with("goroutine ")
        || t.contains("panicked at")
        || t.starts_with("stack backtrace")
        || t.split_once(": ").is_some_and(|(n, rest)| {
            n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() && rest.contains("::")
        })
        || frame_suffix
        || t.contains("Exception:")
        || (t.contains("Error: ") && t.contains("    at "))
}

/// What a tenant is told when all its summary said was technical.
pub const TENANT_FALLBACK: &str = "The agent ran into a problem. Support has the details.";

/// The longest summary a tenant is shown, in characters.
pub const TENANT_MAX_CHARS: usize = 500;

/// A summary as a tenant may read it: the lines before any stack trace,
/// with URLs, IP addresses, hostnames, paths, tokens and provider keys
/// replaced by a word in brackets; [`TENANT_FALLBACK`] when nothing is
/// left. At most [`TENANT_MAX_CHARS`] characters.
pub fn for_tenant(text: &str) -> String {
    let lines: Vec<&str> = text.lines().take_while(|l| !trace_line(l)).collect();
    let mut out = String::new();
    for (n, line) in lines.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        for piece in split_keep(line) {
            out.push_str(&tenant_piece(piece));
        }
    }
    let out = out.trim();
    let kept = !out.is_empty()
        && out
            .split_whitespace()
            .any(|w| !w.starts_with('[') && w.chars().any(char::is_alphabetic));
    if !kept {
        return TENANT_FALLBACK.to_owned();
    }
    match out.char_indices().nth(TENANT_MAX_CHARS) {
        Some((i, _)) => out[..i].to_owned(),
        None => out.to_owned(),
    }
}

/// One piece of a tenant-facing line, replaced when it must not be shown.
fn tenant_piece(piece: &str) -> String {
    if piece.chars().all(char::is_whitespace) {
        return piece.to_owned();
    }
    // Punctuation around a word stays.
    let lead = piece.len() - piece.trim_start_matches(['(', '[', '"', '\'', '<']).len();
    let core_end = piece
        .trim_end_matches(['.', ',', ';', ':', ')', ']', '"', '\'', '>', '!', '?'])
        .len();
    if core_end <= lead {
        return piece.to_owned();
    }
    let word = &piece[lead..core_end];
    let replaced = if !key_spans(word.as_bytes()).is_empty() {
        Some("[key]")
    } else if word.contains("://") {
        Some("[link]")
    } else if ip_address(word) {
        Some("[address]")
    } else if opaque(word) {
        Some("[token]")
    } else if word.starts_with('/') || word.starts_with("~/") || word.contains(":\\") {
        Some("[path]")
    } else if hostname(word) {
        Some("[host]")
    } else if word.contains('=') && word.split_once('=').is_some_and(|(n, _)| names_secret(n)) {
        Some("[secret]")
    } else {
        None
    };
    match replaced {
        Some(r) => format!("{}{r}{}", &piece[..lead], &piece[core_end..]),
        None => piece.to_owned(),
    }
}

/// An IPv4 address (with an optional `:port`) or an IPv6 one.
fn ip_address(word: &str) -> bool {
    let host = match word.rsplit_once(':') {
        Some((h, port)) if !h.contains(':') && port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => word,
    };
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return true;
    }
    let v6 = word
        .trim_start_matches('[')
        .split(']')
        .next()
        .unwrap_or(word);
    v6.matches(':').count() >= 2 && v6.parse::<std::net::Ipv6Addr>().is_ok()
}

/// A DNS name with at least one dot whose last label is letters
/// (`db.internal`, `api.example.com`, `redis-0.redis.svc`), optionally with
/// a `:port`.
fn hostname(word: &str) -> bool {
    let host = match word.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) && !port.is_empty() => h,
        _ => word,
    };
    let labels: Vec<&str> = host.split('.').collect();
    labels.len() >= 2
        && labels
            .iter()
            .all(|l| !l.is_empty() && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'))
        && labels
            .last()
            .is_some_and(|l| l.len() >= 2 && l.bytes().all(|c| c.is_ascii_alphabetic()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANTHROPIC: &str = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123";
    const AWS: &str = "AKIAABCDEFGHIJKLMNOP";

    #[test]
    fn key_spans_find_every_key_and_only_keys() {
        let text = format!("a {ANTHROPIC} and {AWS}, not sk-lf-abcdefghijklmnopqrstuvwxyz0123");
        let spans = key_spans(text.as_bytes());
        let found: Vec<(&str, &str)> = spans.iter().map(|(r, p)| (&text[r.clone()], *p)).collect();
        assert_eq!(found, [(ANTHROPIC, "Anthropic"), (AWS, "AWS")]);
        assert!(key_spans(b"task-ant-api03-abcdefghijklmnopqrstuvwxyz0123").is_empty());
        assert_eq!(provider_of_value(ANTHROPIC.as_bytes()), Some("Anthropic"));
        assert_eq!(provider_of_value(b"nothing here"), None);
    }

    #[test]
    fn the_lane_keeps_the_detail_and_masks_secrets() {
        let token = "agent-token-0123456789abcdef";
        let detail = format!(
            "GET http://db.internal:5432 failed\n  at handler (/srv/app.js:10:3)\n\
             key {ANTHROPIC} password=hunter22 \"api_key\": \"abc123\", Authorization: Bearer eyJhbGciOi.x.y\n\
             presented {token}"
        );
        let lane = for_lane(&detail, &[token]);
        for gone in [ANTHROPIC, "hunter22", "abc123", "eyJhbGciOi.x.y", token] {
            assert!(!lane.contains(gone), "{gone} in {lane}");
        }
        for kept in [
            "db.internal:5432",
            "/srv/app.js:10:3",
            "[masked: Anthropic key]",
            "password=[masked]",
        ] {
            assert!(lane.contains(kept), "{kept} not in {lane}");
        }
        assert!(lane.contains("\"api_key\": [masked],"), "{lane}");
    }

    #[test]
    fn a_tenant_sees_no_trace_host_address_path_token_or_key() {
        let text = format!(
            "Could not reach the calendar at https://cal.corp.example/v2 (10.1.2.3:8443) from redis-0.redis.svc; \
             config /etc/agent/conf.yaml, key {ANTHROPIC}, session eyJhbGciOiJIUzI1NiJ9abc123def456\n\
             Traceback (most recent call last):\n  File \"x.py\", line 3\nValueError: boom"
        );
        let t = for_tenant(&text);
        for gone in [
            "https://",
            "cal.corp.example",
            "10.1.2.3",
            "redis-0",
            "/etc/agent",
            ANTHROPIC,
            "eyJhbG",
            "Traceback",
            "x.py",
            "ValueError",
        ] {
            assert!(!t.contains(gone), "{gone} in {t}");
        }
        assert!(
            t.starts_with("Could not reach the calendar at [link] ([address]) from [host];"),
            "{t}"
        );
        assert!(
            t.contains("config [path], key [key], session [token]"),
            "{t}"
        );
        assert_eq!(
            for_tenant("thread 'main' panicked at src/main.rs:3:5"),
            TENANT_FALLBACK
        );
        assert_eq!(for_tenant("10.0.0.1 db.internal"), TENANT_FALLBACK);
        assert_eq!(for_tenant("The report is ready."), "The report is ready.");
        assert_eq!(
            for_tenant(&"a".repeat(600)).chars().count(),
            TENANT_MAX_CHARS
        );
        assert!(ip_address("[fe80::1]") && ip_address("::ffff:10.0.0.1") && !ip_address("1.2.3"));
        assert!(hostname("db.internal") && !hostname("v1.2") && !hostname("e.g"));
    }
}
