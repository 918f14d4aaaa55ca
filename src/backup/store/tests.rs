//! The store's pure parts and local refusals; the registry itself is
//! `tests/backup_store.rs`'s.

use super::wire::next_link;
use super::*;
use crate::backup::Category;

#[test]
fn debug_never_shows_the_password() {
    let c = Credentials::new("backup", "s3cret-pw");
    let shown = format!("{c:?}");
    assert!(
        shown.contains("backup") && !shown.contains("s3cret"),
        "{shown}"
    );
    let r = Repository::new(
        "127.0.0.1:5000",
        "backups/team-a/work",
        Some(c.clone()),
        Options::default(),
    )
    .unwrap();
    if let Ok(mut m) = r.tokens.lock() {
        m.insert("x".into(), Arc::from("Bearer t0ken"));
    }
    let shown = format!("{r:?}");
    assert!(
        !shown.contains("s3cret") && !shown.contains("t0ken"),
        "{shown}"
    );
    let b64 = c.basic_header();
    assert!(!shown.contains(b64.trim_start_matches("Basic ")), "{shown}");
}

#[test]
fn names_are_checked_before_any_request() {
    let new = |reg: &str, path: &str| Repository::new(reg, path, None, Options::default());
    assert!(new("127.0.0.1:5000", "backups/a").is_ok());
    for (reg, path) in [
        ("127.0.0.1:5000", "Backups/a"),
        ("127.0.0.1:5000", "backups//a"),
        ("127.0.0.1:5000", ""),
        ("127.0.0.1:5000", "a/../b"),
        ("reg/istry", "a"),
        ("", "a"),
    ] {
        let e = new(reg, path).unwrap_err();
        assert_eq!(e.category(), Category::Invalid, "{reg} {path}: {e}");
    }
}

#[test]
fn loopback_registries_speak_plain_http() {
    let r = Repository::new("localhost:5000", "a", None, Options::default()).unwrap();
    assert_eq!(r.base, "http://localhost:5000");
    let r = Repository::new("registry.example.com", "a", None, Options::default()).unwrap();
    assert_eq!(r.base, "https://registry.example.com");
}

#[tokio::test]
async fn bad_digests_and_references_are_refused_locally() {
    let r = Repository::new("127.0.0.1:1", "a", None, Options::default()).unwrap();
    let e = r.blob_exists("sha256:abc", Blob::Any).await.unwrap_err();
    assert_eq!(e.category(), Category::Invalid, "{e}");
    let e = r.pull_manifest("../x").await.unwrap_err();
    assert_eq!(e.category(), Category::Invalid, "{e}");
}

#[tokio::test]
async fn an_unreachable_registry_is_named() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(1);
    let r = Repository::new(&format!("127.0.0.1:{port}"), "a", None, Options::default()).unwrap();
    let e = r.list_tags().await.unwrap_err();
    assert_eq!(e.category(), Category::Unreachable, "{e}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
}

#[test]
fn next_links_are_read() {
    assert_eq!(
        next_link(Some("</v2/a/tags/list?last=b&n=2>; rel=\"next\"")).as_deref(),
        Some("/v2/a/tags/list?last=b&n=2")
    );
    assert_eq!(next_link(Some("</v2/a>; rel=\"prev\"")), None);
    assert_eq!(next_link(None), None);
}
