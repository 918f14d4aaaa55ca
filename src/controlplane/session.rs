//! Dashboard sessions: what a browser holds after logging in with an admin
//! token.
//!
//! Guarantees:
//! - The cookie holds a random session id, never the admin token. The
//!   server keeps only the id's SHA-256, so neither a log nor a dump of this
//!   map gives a usable cookie.
//! - A session carries its own CSRF token; a state-changing request made
//!   with the cookie must present it (`authn`).
//! - A session ends at its expiry, at logout, when the admin token it was
//!   opened with is revoked (the caller re-checks that hash on every
//!   request), and with the process.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::wire::token::{SecretToken, hash_token};

/// The header a state-changing request made with the cookie carries.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The session cookie's name.
pub const COOKIE: &str = "exo_session";

/// One logged-in browser.
#[derive(Clone)]
pub struct Session {
    /// Sent with every state-changing request (`X-CSRF-Token`); shown to
    /// the page in the HTML it is served, never in a log.
    pub csrf: SecretToken,
    /// The SHA-256 of the admin token the session was opened with.
    pub admin_hash: String,
    expires: Instant,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Whether `presented` is this session's CSRF token (compared as
    /// hashes, so the comparison's timing says nothing about the token).
    pub fn csrf_matches(&self, presented: &str) -> bool {
        !presented.is_empty() && hash_token(presented) == self.csrf.hash()
    }
}

#[derive(Debug)]
pub struct Sessions {
    ttl: Duration,
    by_hash: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            by_hash: Mutex::new(HashMap::new()),
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Opens a session for the admin token with this hash; returns the
    /// cookie value (the session id), exactly once.
    pub fn open(&self, admin_hash: String) -> Option<SecretToken> {
        let id = SecretToken::generate_with_prefix("exo_s_").ok()?;
        let csrf = SecretToken::generate_with_prefix("exo_c_").ok()?;
        let now = Instant::now();
        let mut map = self.by_hash.lock().ok()?;
        map.retain(|_, s| s.expires > now);
        map.insert(
            id.hash(),
            Session {
                csrf,
                admin_hash,
                expires: now + self.ttl,
            },
        );
        Some(id)
    }

    /// The live session with this id; an expired one is removed.
    pub fn get(&self, id: &str) -> Option<Session> {
        let key = hash_token(id);
        let mut map = self.by_hash.lock().ok()?;
        match map.get(&key) {
            Some(s) if s.expires > Instant::now() => Some(s.clone()),
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Ends a session (logout).
    pub fn close(&self, id: &str) {
        if let Ok(mut map) = self.by_hash.lock() {
            map.remove(&hash_token(id));
        }
    }
}

/// The session id in a `Cookie` header, if any.
pub fn from_cookie_header(header: &str) -> Option<&str> {
    header.split(';').find_map(|part| {
        let (k, v) = part.trim().split_once('=')?;
        (k == COOKIE && !v.is_empty()).then_some(v)
    })
}

/// The `Set-Cookie` value that stores a session for `ttl`.
pub fn set_cookie(id: &SecretToken, ttl: Duration, secure: bool) -> String {
    format!(
        "{COOKIE}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict{}",
        id.expose(),
        ttl.as_secs().max(1),
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that removes the session cookie.
pub fn clear_cookie(secure: bool) -> String {
    format!(
        "{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{}",
        if secure { "; Secure" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_found_by_its_id_until_it_expires_or_closes() {
        let s = Sessions::new(Duration::from_millis(50));
        let id = s.open("h".into()).unwrap();
        let got = s.get(id.expose()).unwrap();
        assert_eq!(got.admin_hash, "h");
        assert!(got.csrf_matches(got.csrf.expose()));
        assert!(!got.csrf_matches(""));
        assert!(!got.csrf_matches("exo_c_other"));
        assert!(s.get("exo_s_unknown").is_none());
        // The map is keyed by the hash: the id itself is not stored.
        let dump = format!("{:?}", s);
        assert!(!dump.contains(id.expose()), "{dump}");
        std::thread::sleep(Duration::from_millis(60));
        assert!(s.get(id.expose()).is_none(), "expired");

        let s = Sessions::new(Duration::from_secs(60));
        let id = s.open("h".into()).unwrap();
        s.close(id.expose());
        assert!(s.get(id.expose()).is_none(), "closed");
    }

    #[test]
    fn cookies_are_parsed_and_built_with_their_flags() {
        assert_eq!(
            from_cookie_header("a=b; exo_session=exo_s_1; c=d"),
            Some("exo_s_1")
        );
        assert_eq!(from_cookie_header("exo_session="), None);
        assert_eq!(from_cookie_header("exo_sessionx=1"), None);
        let id = SecretToken::new("exo_s_abc");
        let c = set_cookie(&id, Duration::from_secs(3600), false);
        assert_eq!(
            c,
            "exo_session=exo_s_abc; Path=/; Max-Age=3600; HttpOnly; SameSite=Strict"
        );
        assert!(set_cookie(&id, Duration::from_secs(5), true).ends_with("; Secure"));
        assert!(clear_cookie(false).contains("Max-Age=0"));
    }
}
