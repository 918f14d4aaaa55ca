//! Canary secrets for the leak test (`tests/secrets.rs`): distinctive
//! values planted where secrets go, and a scan of everything a run
//! produced. A hit names the canary and the source, and shows the secret
//! only masked (its first 10 characters), so the test never prints one.
//!
//! A canary is found whole, as its fixed prefix plus the first 8 secret
//! characters (a "prefix" someone logged for debugging), as any 12
//! characters of its secret part (a clipped or wrapped message), and in
//! base64 (a serialized Secret, a docker config `auth`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::Duration;

struct Canary {
    what: String,
    value: String,
    /// Length of the fixed, public prefix (`exo_dt_`, `canary-git-…-`).
    public: usize,
}

impl Canary {
    fn needles(&self) -> Vec<String> {
        let v = self.value.as_str();
        let mut out = vec![v.to_owned()];
        let secret = &v[self.public..];
        if self.public > 0 && secret.len() > 8 {
            out.push(v[..self.public + 8].to_owned());
        }
        if secret.len() > 12 {
            let last = secret.len() - 12;
            let mut starts: Vec<usize> = (0..last).step_by(4).collect();
            starts.push(last);
            out.extend(starts.into_iter().map(|i| secret[i..i + 12].to_owned()));
        }
        // Base64, as a serialized Secret or an `auth` field holds it, at each
        // of the three alignments; the ends, which depend on the
        // neighbouring bytes, are left out.
        for pad in ["", "x", "xx"] {
            use base64::Engine as _;
            let b = base64::engine::general_purpose::STANDARD.encode(format!("{pad}{v}"));
            let skip = if pad.is_empty() { 0 } else { 4 };
            out.push(b[skip..b.len() - 4].to_owned());
        }
        out
    }
}

/// What a failure message may show of a secret: its first 10 characters.
pub fn mask(secret: &str) -> String {
    format!("{}…", secret.chars().take(10).collect::<String>())
}

/// The canaries of one run and the text it produced, both behind a lock so
/// polling closures can record what they fetched.
#[derive(Default)]
pub struct Canaries {
    canaries: Mutex<Vec<Canary>>,
    sources: Mutex<Vec<(String, String)>>,
}

impl Canaries {
    /// A fresh canary `<prefix>canary-<purpose>-<64 random hex>`, watched
    /// from now on.
    pub fn fresh(&self, prefix: &str, purpose: &str) -> String {
        let head = format!("{prefix}canary-{purpose}-");
        let value = exo::wire::token::SecretToken::generate_with_prefix(&head)
            .expect("the OS random source")
            .expose()
            .to_owned();
        self.watch(purpose, &value, head.len());
        value
    }

    /// Watches a secret made elsewhere (a token the CLI created, the
    /// registry's password); its first `public` characters are a fixed prefix.
    pub fn watch(&self, what: &str, value: &str, public: usize) {
        assert!(
            value.len() >= 8 && public < value.len(),
            "{what}: too short"
        );
        self.canaries.lock().unwrap().push(Canary {
            what: what.to_owned(),
            value: value.to_owned(),
            public,
        });
    }

    /// `text` with every canary replaced by its masked form, for a failure
    /// message that shows a command's output.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for c in self.canaries.lock().unwrap().iter() {
            out = out.replace(&c.value, &mask(&c.value));
        }
        out
    }

    /// Adds text the run produced to the scan.
    pub fn source(&self, name: impl Into<String>, text: impl Into<String>) {
        self.sources
            .lock()
            .unwrap()
            .push((name.into(), text.into()));
    }

    /// One HTTP/1.1 request (`Connection: close`), optionally with
    /// `Authorization: Bearer <bearer>`. The whole response, head and body,
    /// is added to the scan; returns its status and body.
    pub fn request(
        &self,
        addr: &str,
        method: &str,
        path: &str,
        bearer: Option<&str>,
    ) -> (u16, String) {
        let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let auth = bearer
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}Content-Length: 0\r\n\r\n"
        )
        .unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        let status = resp
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("{method} {path}: no HTTP status"));
        let body = resp.split_once("\r\n\r\n").map_or("", |x| x.1).to_owned();
        self.source(format!("{method} http://{addr}{path} -> {status}"), resp);
        (status, body)
    }

    /// Every (canary, source) hit, the canary masked: `what (masked) how
    /// in source`.
    pub fn hits(&self) -> Vec<String> {
        let canaries = self.canaries.lock().unwrap();
        let mut hits = Vec::new();
        for (name, text) in self.sources.lock().unwrap().iter() {
            for c in canaries.iter() {
                if let Some(n) = c.needles().into_iter().find(|n| text.contains(n.as_str())) {
                    let how = if n == c.value {
                        "whole"
                    } else {
                        "in part or encoded"
                    };
                    hits.push(format!("{} ({}) {how} in {name}", c.what, mask(&c.value)));
                }
            }
        }
        hits
    }

    /// Fails naming every hit; also fails on an empty source, so a scan
    /// cannot pass for having read nothing. Returns (sources, bytes, lines)
    /// scanned.
    pub fn assert_clean(&self) -> (usize, usize, usize) {
        let hits = self.hits();
        assert!(
            hits.is_empty(),
            "{} secret(s) leaked:\n  {}",
            hits.len(),
            hits.join("\n  ")
        );
        let sources = self.sources.lock().unwrap();
        for (name, text) in sources.iter() {
            assert!(!text.trim().is_empty(), "source {name:?} is empty");
        }
        let bytes = sources.iter().map(|(_, t)| t.len()).sum();
        let lines = sources.iter().map(|(_, t)| t.lines().count()).sum();
        (sources.len(), bytes, lines)
    }
}
