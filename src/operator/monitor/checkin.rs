//! The check-in endpoint's pure core: `POST /checkin/<namespace>/<agent>`
//! with `Authorization: Bearer <token>`, the token being the Agent's own
//! (its Secret `agent-token-<agent>`, key `token`, which the agentlet gets
//! as `EXO_AGENT_TOKEN`).
//!
//! Guarantees:
//! - the token is compared in constant time, as HMAC-SHA256 tags under a
//!   key drawn at start: the cache holds tags, never a token;
//! - an unknown agent, a missing or malformed header and a wrong token
//!   (another agent's included) get the same 401, so the answer tells
//!   nothing about which agents exist;
//! - the time of a check-in is kept in memory ([`Book`]) and written to
//!   the Agent's `autonomic.sh/last-checkin` annotation at most once per
//!   write interval, so the leader learns of check-ins any replica took.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hyper::{HeaderMap, StatusCode};

use crate::names::{is_dns1123_label, is_dns1123_subdomain};
pub use crate::wire::token::Verifier;

/// Every check-in path starts with this.
pub const PATH_PREFIX: &str = "/checkin/";
/// How long a Secret's token tag is trusted before the Secret is read again.
pub const TOKEN_TTL: Duration = Duration::from_secs(60);
/// A token that does not match a cached tag older than this reads the
/// Secret again (a re-created Agent has a new token); at most once per this.
pub const RECHECK_AFTER: Duration = Duration::from_secs(5);
/// Entries kept at most in each in-memory map; beyond it the oldest half goes.
const MAX_ENTRIES: usize = 10_000;

/// The Agent a check-in path names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AgentRef {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for AgentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// `/checkin/<namespace>/<agent>` with valid Kubernetes names -> the Agent.
pub fn parse_path(path: &str) -> Option<AgentRef> {
    let rest = path.strip_prefix(PATH_PREFIX)?;
    let (namespace, name) = rest.split_once('/')?;
    (is_dns1123_label(namespace) && is_dns1123_subdomain(name)).then(|| AgentRef {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive).
pub fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let v = headers.get(hyper::header::AUTHORIZATION)?.as_bytes();
    let (scheme, rest) = v.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// What a check-in is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Accepted,
    /// Unknown agent, no or malformed header, wrong token: one answer.
    Unauthorized,
    NoRoute,
    MethodNotAllowed,
    /// The apiserver could not be asked; the detail is only in the log.
    Unavailable,
}

impl Outcome {
    pub fn status(self) -> StatusCode {
        match self {
            Outcome::Accepted => StatusCode::NO_CONTENT,
            Outcome::Unauthorized => StatusCode::UNAUTHORIZED,
            Outcome::NoRoute => StatusCode::NOT_FOUND,
            Outcome::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Outcome::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Log field and metric label (a fixed set).
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Unauthorized => "unauthorized",
            Outcome::NoRoute => "no_route",
            Outcome::MethodNotAllowed => "method_not_allowed",
            Outcome::Unavailable => "unavailable",
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Outcome::Accepted => "",
            Outcome::Unauthorized => "unauthorized\n",
            Outcome::NoRoute => "not found\n",
            Outcome::MethodNotAllowed => "use POST\n",
            Outcome::Unavailable => "the apiserver is unavailable; try again\n",
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Cached {
    /// `None`: the Secret (or its key) does not exist.
    tag: Option<[u8; 32]>,
    fetched: Instant,
}

/// What the cache knows of an Agent's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// Read within [`TOKEN_TTL`]: `None` when there is no token.
    Fresh(Option<[u8; 32]>),
    /// Not cached or too old: read the Secret.
    Unknown,
}

/// Token tags by Agent, with the read times.
#[derive(Debug, Default)]
pub struct TokenCache {
    entries: Mutex<HashMap<AgentRef, Cached>>,
}

impl TokenCache {
    pub fn get(&self, agent: &AgentRef, now: Instant) -> Known {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match entries.get(agent) {
            Some(c) if now.duration_since(c.fetched) < TOKEN_TTL => Known::Fresh(c.tag),
            _ => Known::Unknown,
        }
    }

    /// Whether a token that did not match may cause a fresh read.
    pub fn may_recheck(&self, agent: &AgentRef, now: Instant) -> bool {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(agent)
            .is_none_or(|c| now.duration_since(c.fetched) >= RECHECK_AFTER)
    }

    pub fn put(&self, agent: &AgentRef, tag: Option<[u8; 32]>, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, c| now.duration_since(c.fetched) < TOKEN_TTL);
        }
        if entries.len() < MAX_ENTRIES {
            entries.insert(agent.clone(), Cached { tag, fetched: now });
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    last_ms: i64,
    written_ms: Option<i64>,
}

/// Check-in times this replica took, and when each was last written to
/// the Agent's annotation.
#[derive(Debug)]
pub struct Book {
    write_every: Duration,
    entries: Mutex<HashMap<AgentRef, Entry>>,
}

impl Book {
    pub fn new(write_every: Duration) -> Self {
        Self {
            write_every,
            entries: Mutex::default(),
        }
    }

    /// Records a check-in at `now_ms`; `true` when the annotation is due.
    pub fn record(&self, agent: &AgentRef, now_ms: i64) -> bool {
        let every = i64::try_from(self.write_every.as_millis()).unwrap_or(i64::MAX);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(agent) {
            let mut times: Vec<i64> = entries.values().map(|e| e.last_ms).collect();
            times.sort_unstable();
            let cut = times[times.len() / 2];
            entries.retain(|_, e| e.last_ms > cut);
        }
        let e = entries.entry(agent.clone()).or_default();
        e.last_ms = e.last_ms.max(now_ms);
        e.written_ms
            .is_none_or(|w| now_ms.saturating_sub(w) >= every)
    }

    /// The annotation now says `at_ms`.
    pub fn written(&self, agent: &AgentRef, at_ms: i64) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = entries.get_mut(agent) {
            e.written_ms = Some(at_ms);
        }
    }

    /// The last check-in this replica took for the Agent.
    pub fn last(&self, agent: &AgentRef) -> Option<i64> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.get(agent).map(|e| e.last_ms)
    }
}

/// Everything the endpoint keeps: the verifier, the token cache and the
/// check-in book. One per process, shared by the HTTP server and the
/// leader's `silent` monitor.
#[derive(Debug)]
pub struct Checkins {
    pub verifier: Verifier,
    pub tokens: TokenCache,
    pub book: Book,
}

impl Checkins {
    /// With a fresh random key; the annotation is written at most once per
    /// `write_every` per Agent.
    pub fn new(write_every: Duration) -> Result<Self, getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        Ok(Self::with_key(key, write_every))
    }

    pub fn with_key(key: [u8; 32], write_every: Duration) -> Self {
        Self {
            verifier: Verifier::new(key),
            tokens: TokenCache::default(),
            book: Book::new(write_every),
        }
    }
}

/// How often a check-in is written to the annotation: a quarter of the
/// `silent` threshold, at most a minute, at least a second.
pub fn write_interval(silent_after: Duration) -> Duration {
    (silent_after / 4).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let ok = |ns: &str, n: &str| {
            Some(AgentRef {
                namespace: ns.into(),
                name: n.into(),
            })
        };
        let cases = [
            ("/checkin/t1/writer", ok("t1", "writer")),
            ("/checkin/t1/a.b", ok("t1", "a.b")),
            ("/checkin/t1", None),
            ("/checkin/t1/", None),
            ("/checkin/t1/a/b", None),
            ("/checkin/T1/a", None),
            ("/checkin/../a", None),
            ("/hooks/fleet/t1/a", None),
        ];
        for (path, want) in cases {
            assert_eq!(parse_path(path), want, "{path}");
        }
    }

    #[test]
    fn bearer_tokens() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(hyper::header::AUTHORIZATION, v.parse().unwrap());
            h
        };
        let cases: [(HeaderMap, Option<&[u8]>); 6] = [
            (with("Bearer abc"), Some(b"abc")),
            (with("bearer  abc "), Some(b"abc")),
            (with("Basic abc"), None),
            (with("Bearer "), None),
            (with("Bearer"), None),
            (HeaderMap::new(), None),
        ];
        for (h, want) in cases {
            assert_eq!(bearer(&h), want, "{h:?}");
        }
    }

    #[test]
    fn the_token_cache_expires_and_rechecks_sparingly() {
        let c = TokenCache::default();
        let a = AgentRef {
            namespace: "t1".into(),
            name: "a".into(),
        };
        let t0 = Instant::now();
        assert_eq!(c.get(&a, t0), Known::Unknown);
        assert!(c.may_recheck(&a, t0));
        c.put(&a, Some([1; 32]), t0);
        assert_eq!(
            c.get(&a, t0 + Duration::from_secs(59)),
            Known::Fresh(Some([1; 32]))
        );
        assert_eq!(c.get(&a, t0 + TOKEN_TTL), Known::Unknown);
        assert!(!c.may_recheck(&a, t0 + Duration::from_secs(1)));
        assert!(c.may_recheck(&a, t0 + RECHECK_AFTER));
        c.put(&a, None, t0);
        assert_eq!(c.get(&a, t0), Known::Fresh(None));
    }

    #[test]
    fn the_book_throttles_annotation_writes() {
        let book = Book::new(Duration::from_secs(60));
        let a = AgentRef {
            namespace: "t1".into(),
            name: "a".into(),
        };
        // (time in s, written after, due)
        let steps = [
            (0, true, true),
            (10, false, false),
            (59, false, false),
            (60, true, true),
            (61, false, false),
            (200, false, true),
        ];
        for (t, write, due) in steps {
            assert_eq!(book.record(&a, t * 1000), due, "at {t}s");
            if write {
                book.written(&a, t * 1000);
            }
            assert_eq!(book.last(&a), Some(t * 1000));
        }
        assert_eq!(
            write_interval(Duration::from_secs(900)),
            Duration::from_secs(60)
        );
        assert_eq!(
            write_interval(Duration::from_secs(20)),
            Duration::from_secs(5)
        );
        assert_eq!(
            write_interval(Duration::from_secs(2)),
            Duration::from_secs(1)
        );
    }
}
