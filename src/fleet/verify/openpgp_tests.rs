//! OpenPGP keys and detached signatures made by gpg (`testdata/`: Bob
//! signs with his ed25519 primary key, Carol with an ed25519 signing
//! subkey under a certify-only primary, Dave with RSA 3072).

use super::*;

const BOB: &str = include_str!("testdata/bob.asc");
const CAROL: &str = include_str!("testdata/carol.asc");
const DAVE: &str = include_str!("testdata/dave.asc");
const BOB_SIG: &[u8] = include_bytes!("testdata/bob.sig");
const CAROL_SIG: &[u8] = include_bytes!("testdata/carol.sig");
const DAVE_SIG: &[u8] = include_bytes!("testdata/dave.sig");
const BOB_FPR: &str = include_str!("testdata/bob.fpr");
const CAROL_SUB_FPR: &str = include_str!("testdata/carol-sub.fpr");
const PAYLOAD: &[u8] = include_bytes!("testdata/payload");

fn keys(texts: &[&str]) -> Vec<SignedPublicKey> {
    texts.iter().flat_map(|t| parse_keys(t).unwrap()).collect()
}

#[test]
fn a_primary_key_a_subkey_and_rsa_verify() {
    let all = keys(&[BOB, CAROL, DAVE]);
    let s = check(&all, BOB_SIG, PAYLOAD).unwrap();
    assert_eq!(s.name, "Bob <bob@example.com>");
    assert_eq!(s.fingerprint, BOB_FPR.trim());
    assert_eq!(s.kind, SignerKind::OpenPgp);
    let s = check(&all, CAROL_SIG, PAYLOAD).unwrap();
    assert_eq!(s.name, "Carol <carol@example.com>");
    assert_eq!(s.fingerprint, CAROL_SUB_FPR.trim(), "the subkey signed");
    assert_eq!(
        check(&all, DAVE_SIG, PAYLOAD).unwrap().name,
        "Dave <dave@example.com>"
    );
}

#[test]
fn a_keyring_of_several_keys_is_read() {
    let ring = format!("{BOB}\n{CAROL}");
    assert_eq!(parse_keys(&ring).unwrap().len(), 2);
}

#[test]
fn a_key_not_listed_is_untrusted_and_named_by_fingerprint() {
    let e = check(&keys(&[BOB]), CAROL_SIG, PAYLOAD).unwrap_err();
    match e {
        Problem::Untrusted {
            key,
            why: Untrusted::NotListed,
        } => assert_eq!(key, format!("OpenPGP key {}", CAROL_SUB_FPR.trim())),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_changed_commit_does_not_verify() {
    let mut changed = PAYLOAD.to_vec();
    changed.push(b'x');
    let e = check(&keys(&[BOB]), BOB_SIG, &changed).unwrap_err();
    assert!(
        matches!(
            e,
            Problem::Bad {
                why: Bad::OpenPgpInvalid(_),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("Bob <bob@example.com> (OpenPGP key"),
        "{e}"
    );
}

#[test]
fn what_is_not_a_public_key_is_refused() {
    for (text, want) in [
        ("not armored at all", "not an armored OpenPGP public key"),
        (
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAA\n-----END PGP PUBLIC KEY BLOCK-----\n",
            "not an armored OpenPGP public key",
        ),
        (
            std::str::from_utf8(BOB_SIG).unwrap(),
            "not an armored OpenPGP public key",
        ),
    ] {
        let e = parse_keys(text).unwrap_err();
        assert!(e.to_string().contains(want), "{text:?}: {e}");
    }
}

#[test]
fn a_signature_that_does_not_parse_is_bad() {
    let garbled = b"-----BEGIN PGP SIGNATURE-----\n\nAAAA\n-----END PGP SIGNATURE-----\n";
    let e = check(&keys(&[BOB]), garbled, PAYLOAD).unwrap_err();
    assert!(
        matches!(
            e,
            Problem::Bad {
                signer: None,
                why: Bad::OpenPgpMalformed(_)
            }
        ),
        "{e:?}"
    );
}
