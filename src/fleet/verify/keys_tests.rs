//! The Secret's data: what it may hold, and each refusal naming the key.

use super::*;

const ALICE: &str = include_str!("testdata/alice.pub");
const BOB: &str = include_str!("testdata/bob.asc");

fn data(entries: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
        .collect()
}

fn signers() -> String {
    format!("alice@example.com {}", ALICE.trim())
}

#[test]
fn ssh_and_openpgp_keys_are_read_together() {
    let s = signers();
    let keys = TrustedKeys::parse(&data(&[("allowed_signers", &s), ("bob.asc", BOB)])).unwrap();
    assert_eq!(keys.ssh.len(), 1);
    assert_eq!(keys.openpgp.len(), 1);
    let fps = keys.fingerprints();
    assert_eq!(fps.len(), 2);
    assert!(fps[0].starts_with("SHA256:"), "{fps:?}");
    // Either kind alone is enough.
    TrustedKeys::parse(&data(&[("allowed_signers", &s)])).unwrap();
    TrustedKeys::parse(&data(&[("team.asc", BOB)])).unwrap();
}

#[test]
fn the_hash_follows_the_data() {
    let s = signers();
    let a = TrustedKeys::parse(&data(&[("allowed_signers", &s)])).unwrap();
    let b = TrustedKeys::parse(&data(&[("allowed_signers", &s)])).unwrap();
    assert_eq!(a.hash, b.hash);
    let c = TrustedKeys::parse(&data(&[("allowed_signers", &s), ("bob.asc", BOB)])).unwrap();
    assert_ne!(a.hash, c.hash);
    // Moving bytes between a key's name and its value is another hash.
    assert_ne!(
        hash_of(&data(&[("ab", "c")])),
        hash_of(&data(&[("a", "bc")]))
    );
}

#[test]
fn each_refusal_names_the_secret_key() {
    let s = signers();
    let cases: Vec<(BTreeMap<String, Vec<u8>>, &str)> = vec![
        (
            data(&[("allowed_signers", &s), ("token", "x")]),
            "key \"token\" is neither \"allowed_signers\" nor an OpenPGP key ending \".asc\"",
        ),
        (
            data(&[("allowed_signers", &format!("{s}\nbob@x ssh-foo AAAAC3Nz"))]),
            "key \"allowed_signers\", line 2: unknown key type \"ssh-foo\"",
        ),
        (
            data(&[("allowed_signers", "# one comment\n\nbob@x ssh-ed25519\n")]),
            "key \"allowed_signers\", line 3: no key after the principals",
        ),
        (
            data(&[("allowed_signers", &s), ("team.asc", "garbage")]),
            "key \"team.asc\": not an armored OpenPGP public key",
        ),
        (
            data(&[("allowed_signers", "# nobody yet\n")]),
            "no trusted key: allowed_signers lists no signer and no *.asc key is set",
        ),
        (
            data(&[]),
            "no trusted key: the Secret has neither allowed_signers nor a *.asc key",
        ),
    ];
    for (d, want) in cases {
        let e = TrustedKeys::parse(&d).unwrap_err().to_string();
        assert!(e.starts_with(want), "{e}");
    }
    let mut bad = BTreeMap::new();
    bad.insert("allowed_signers".to_owned(), vec![0xff, 0xfe]);
    assert_eq!(
        TrustedKeys::parse(&bad).unwrap_err().to_string(),
        "key \"allowed_signers\" is not UTF-8 text"
    );
}

#[test]
fn no_signature_is_unsigned_and_an_unknown_one_is_bad() {
    let keys = TrustedKeys::default();
    assert!(matches!(
        keys.check(None, b"tree x\n", 0),
        Err(Problem::Unsigned)
    ));
    let x509 = b"-----BEGIN SIGNED MESSAGE-----\nMIIB\n-----END SIGNED MESSAGE-----\n";
    assert!(matches!(
        keys.check(Some(x509), b"tree x\n", 0),
        Err(Problem::Bad {
            why: Bad::UnknownFormat,
            ..
        })
    ));
}
