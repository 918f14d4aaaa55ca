//! The git side: signatures read from commits, `head` and `all-since`
//! walks (merges, no applied commit, a force push). Commits are made
//! with git2 and signed in-process (sshsig, namespace `git`) by keys
//! derived from fixed seeds; tests/fleet_signatures.rs signs with the
//! real ssh-keygen and gpg.

use std::collections::BTreeMap;

use git2::{Oid, Repository, Signature};
use ssh_key::private::Ed25519Keypair;
use ssh_key::{HashAlg, LineEnding, PrivateKey};

use super::*;

fn key(seed: u8) -> PrivateKey {
    PrivateKey::from(Ed25519Keypair::from_seed(&[seed; 32]))
}

fn trusting(k: &PrivateKey) -> TrustedKeys {
    let line = format!("ci@example.com {}", k.public_key().to_openssh().unwrap());
    let data: BTreeMap<String, Vec<u8>> = [("allowed_signers".to_owned(), line.into_bytes())]
        .into_iter()
        .collect();
    TrustedKeys::parse(&data).unwrap()
}

struct Repo {
    _dir: tempfile::TempDir,
    repo: Repository,
    n: i64,
}

impl Repo {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        Repo {
            _dir: dir,
            repo,
            n: 0,
        }
    }

    /// A commit on `parents` (each commit a new file), signed by `by`.
    fn commit(&mut self, parents: &[Oid], by: Option<&PrivateKey>) -> Oid {
        self.n += 1;
        let blob = self.repo.blob(format!("{}", self.n).as_bytes()).unwrap();
        let mut tb = self.repo.treebuilder(None).unwrap();
        tb.insert(format!("f{}", self.n), blob, 0o100644).unwrap();
        let tree = self.repo.find_tree(tb.write().unwrap()).unwrap();
        let who = Signature::new(
            "ci",
            "ci@example.com",
            &git2::Time::new(1_700_000_000 + self.n, 0),
        )
        .unwrap();
        let parents: Vec<git2::Commit<'_>> = parents
            .iter()
            .map(|p| self.repo.find_commit(*p).unwrap())
            .collect();
        let refs: Vec<&git2::Commit<'_>> = parents.iter().collect();
        let buf = self
            .repo
            .commit_create_buffer(&who, &who, &format!("c{}", self.n), &tree, &refs)
            .unwrap();
        let text = buf.as_str().unwrap();
        match by {
            None => {
                let id = self.repo.odb().unwrap();
                id.write(git2::ObjectType::Commit, text.as_bytes()).unwrap()
            }
            Some(k) => {
                let sig = k
                    .sign("git", HashAlg::Sha512, text.as_bytes())
                    .unwrap()
                    .to_pem(LineEnding::LF)
                    .unwrap();
                self.repo.commit_signed(text, &sig, None).unwrap()
            }
        }
    }
}

/// Mode `all-since` from `applied` to `head`.
fn since(
    r: &Repo,
    head: Oid,
    applied: Option<&str>,
    keys: &TrustedKeys,
) -> Result<Verified, VerifyError> {
    verify(&r.repo, head, VerifyMode::AllSince, applied, keys)
}

/// `Scope::Since` after `applied`, `count` commits.
fn after(applied: Oid, count: usize) -> Scope {
    Scope::Since {
        applied: applied.to_string(),
        count,
    }
}

#[test]
fn head_mode_checks_the_head_alone() {
    let (alice, mallory) = (key(1), key(2));
    let keys = trusting(&alice);
    let mut r = Repo::new();
    let a = r.commit(&[], None);
    let b = r.commit(&[a], Some(&alice));
    let v = verify(&r.repo, b, VerifyMode::Head, Some(&a.to_string()), &keys).unwrap();
    assert_eq!(v.scope, Scope::Head);
    assert_eq!(v.head, b.to_string());
    assert_eq!(v.signer.name, "ci@example.com");
    let m = v.message();
    assert!(
        m.starts_with(&format!(
            "commit {} signed by ci@example.com (SSH key SHA256:",
            short(&b.to_string())
        )),
        "{m}"
    );

    let c = r.commit(&[b], None);
    let e = verify(&r.repo, c, VerifyMode::Head, None, &keys).unwrap_err();
    assert_eq!(e.reason(), "Unsigned");
    assert_eq!(e.commit(), c.to_string());
    assert_eq!(
        e.to_string(),
        format!("commit {}: unsigned", short(&c.to_string()))
    );

    let d = r.commit(&[c], Some(&mallory));
    let e = verify(&r.repo, d, VerifyMode::Head, None, &keys).unwrap_err();
    assert_eq!(e.reason(), "UntrustedSigner");
    let fp = mallory
        .public_key()
        .fingerprint(HashAlg::Sha256)
        .to_string();
    assert!(e.to_string().contains(&fp), "{e}");
}

#[test]
fn all_since_names_an_unsigned_commit_below_a_signed_head() {
    let alice = key(1);
    let keys = trusting(&alice);
    let mut r = Repo::new();
    let a = r.commit(&[], Some(&alice));
    let b = r.commit(&[a], None);
    let c = r.commit(&[b], Some(&alice));
    let e = since(&r, c, Some(&a.to_string()), &keys).unwrap_err();
    assert_eq!(e.reason(), "Unsigned");
    assert_eq!(e.commit(), b.to_string());
    assert_eq!(
        e.to_string(),
        format!(
            "commit {} (before head {}): unsigned",
            short(&b.to_string()),
            short(&c.to_string())
        )
    );
    // Head mode lets the same head through.
    verify(&r.repo, c, VerifyMode::Head, Some(&a.to_string()), &keys).unwrap();
    // Once b is the applied commit, c alone is new.
    let v = since(&r, c, Some(&b.to_string()), &keys).unwrap();
    assert_eq!(v.scope, after(b, 1));
}

#[test]
fn all_since_walks_every_side_of_a_merge() {
    let alice = key(1);
    let keys = trusting(&alice);
    let mut r = Repo::new();
    let a = r.commit(&[], Some(&alice));
    let b = r.commit(&[a], Some(&alice));
    let side = r.commit(&[a], None);
    let merge = r.commit(&[b, side], Some(&alice));
    let e = since(&r, merge, Some(&a.to_string()), &keys).unwrap_err();
    assert_eq!(e.commit(), side.to_string());
    // An unsigned merge of signed commits is refused too.
    let mut r = Repo::new();
    let a = r.commit(&[], Some(&alice));
    let b = r.commit(&[a], Some(&alice));
    let s = r.commit(&[a], Some(&alice));
    let m = r.commit(&[b, s], None);
    let head = r.commit(&[m], Some(&alice));
    let e = since(&r, head, Some(&a.to_string()), &keys).unwrap_err();
    assert_eq!(e.commit(), m.to_string());
    // All signed: every commit since counted, the head included.
    let mut r = Repo::new();
    let a = r.commit(&[], None);
    let b = r.commit(&[a], Some(&alice));
    let s = r.commit(&[a], Some(&alice));
    let m = r.commit(&[b, s], Some(&alice));
    let v = since(&r, m, Some(&a.to_string()), &keys).unwrap();
    assert_eq!(v.scope, after(a, 3));
    assert!(v.message().contains("3 commit(s) since"), "{}", v.message());
}

#[test]
fn all_since_without_a_usable_applied_commit_checks_the_head_alone() {
    let alice = key(1);
    let keys = trusting(&alice);
    let mut r = Repo::new();
    let a = r.commit(&[], None);
    let b = r.commit(&[a], Some(&alice));
    // No commit applied yet.
    let v = since(&r, b, None, &keys).unwrap();
    assert_eq!(v.scope, Scope::HeadOnly { applied: None });
    assert!(
        v.message().contains("no commit applied yet"),
        "{}",
        v.message()
    );
    // A force push: the applied commit is not an ancestor of the head
    // (here: on another line of history), or not in the mirror at all.
    let other = r.commit(&[], None);
    let v = since(&r, b, Some(&other.to_string()), &keys).unwrap();
    assert_eq!(
        v.scope,
        Scope::HeadOnly {
            applied: Some(other.to_string())
        }
    );
    assert!(v.message().contains("force push"), "{}", v.message());
    let gone = "0123456789abcdef0123456789abcdef01234567";
    let v = since(&r, b, Some(gone), &keys).unwrap();
    assert_eq!(
        v.scope,
        Scope::HeadOnly {
            applied: Some(gone.to_owned())
        }
    );
    // The head is the applied commit: checked again, nothing else.
    let v = since(&r, b, Some(&b.to_string()), &keys).unwrap();
    assert_eq!(v.scope, after(b, 0));
}
