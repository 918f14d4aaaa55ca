//! `allowed_signers` lines, every refusal, and SSH signatures made by
//! ssh-keygen (`testdata/`, `ssh-keygen -Y sign -n git|file`) checked.

use super::*;

const ALICE: &str = include_str!("testdata/alice.pub");
const EC: &str = include_str!("testdata/ec.pub");
const RSA: &str = include_str!("testdata/rsa.pub");
const MALLORY: &str = include_str!("testdata/mallory.pub");
const PAYLOAD: &[u8] = include_bytes!("testdata/payload");
const ALICE_GIT: &[u8] = include_bytes!("testdata/alice.git.sig");
const ALICE_FILE: &[u8] = include_bytes!("testdata/alice.file.sig");
const RSA_GIT: &[u8] = include_bytes!("testdata/rsa.git.sig");
const EC_GIT: &[u8] = include_bytes!("testdata/ec.git.sig");
const MALLORY_GIT: &[u8] = include_bytes!("testdata/mallory.git.sig");
/// The payload's committer time.
const AT: i64 = 1_700_000_000;

/// `type base64` of a `.pub` file (its comment dropped).
fn key(pubfile: &str) -> String {
    pubfile
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

fn base64_of(pubfile: &str) -> &str {
    pubfile.split_whitespace().nth(1).unwrap()
}

fn one(line: &str) -> AllowedSigner {
    let mut all = parse_allowed_signers(line).unwrap();
    assert_eq!(all.len(), 1);
    all.remove(0)
}

fn refused(text: &str) -> (usize, LineError) {
    match parse_allowed_signers(text) {
        Ok(s) => panic!("accepted {} signer(s) from {text:?}", s.len()),
        Err(e) => e,
    }
}

#[test]
fn every_key_type_comments_and_options_are_read() {
    let text = format!(
        "# trusted signers\n\n{}\n\"bob@example.com,ci@example.com\" namespaces=\"git,file\" {} a comment\n\
         rsa@example.com valid-after=\"20200101\",valid-before=\"203001011200Z\" {}\n",
        format_args!("alice@example.com {}", key(ALICE)),
        key(EC),
        key(RSA),
    );
    let all = parse_allowed_signers(&text).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0].principals, "alice@example.com");
    assert_eq!(all[0].namespaces, None);
    assert!(all[0].fingerprint().starts_with("SHA256:"));
    assert_eq!(all[1].principals, "bob@example.com,ci@example.com");
    assert_eq!(
        all[1].namespaces,
        Some(vec!["git".to_owned(), "file".to_owned()])
    );
    assert_eq!(all[2].valid_after, Some(1_577_836_800));
    assert_eq!(all[2].valid_before, Some(1_893_499_200));
    // Option names are case-insensitive, as ssh-keygen reads them.
    let s = one(&format!("a NAMESPACES=\"git\" {}", key(ALICE)));
    assert_eq!(s.namespaces, Some(vec!["git".to_owned()]));
}

#[test]
fn every_malformed_line_is_refused_with_its_number() {
    let alice = key(ALICE);
    let b64 = base64_of(ALICE);
    let cases: Vec<(String, usize, &str)> = vec![
        (
            format!("# c\na@x cert-authority {alice}"),
            2,
            "cert-authority is not supported",
        ),
        (
            format!("a@x cert-authority,namespaces=\"git\" {alice}"),
            1,
            "cert-authority is not supported",
        ),
        (
            format!("\n\na@x ssh-foo {b64}"),
            3,
            "unknown key type \"ssh-foo\"",
        ),
        (
            format!("a@x foo-bar {b64}"),
            1,
            "unknown key type \"foo-bar\"",
        ),
        (
            format!("a@x ssh-dss {b64}"),
            1,
            "unknown key type \"ssh-dss\"",
        ),
        (format!("a@x {b64}"), 1, "no key type before the key data"),
        (
            format!("a@x namespaces=\"git\" {b64}"),
            1,
            "no key type before the key data",
        ),
        ("a@x".to_owned(), 1, "no key after the principals"),
        (
            "a@x ssh-ed25519".to_owned(),
            1,
            "no key after the principals",
        ),
        (format!("\"a@x {alice}"), 1, "an unterminated quote"),
        (
            format!("a@x namespaces=\"git {alice}"),
            1,
            "an unterminated quote",
        ),
        (format!("a@x,,b@x {alice}"), 1, "empty principals"),
        (
            format!("a@x no-touch-required {alice}"),
            1,
            "unknown option \"no-touch-required\"",
        ),
        (
            format!("a@x namespaces=\"\" {alice}"),
            1,
            "option namespaces: names no namespace",
        ),
        (
            format!("a@x namespaces {alice}"),
            1,
            "option namespaces: needs a value",
        ),
        (
            format!("a@x valid-after=\"yesterday\" {alice}"),
            1,
            "option valid-after: not a time",
        ),
        (
            format!("a@x valid-before=\"20231399\" {alice}"),
            1,
            "option valid-before: not a time",
        ),
        (
            "a@x ssh-ed25519 AAAAnotbase64!!".to_owned(),
            1,
            "the ssh-ed25519 key does not decode",
        ),
        (
            // The data is an ed25519 key, the line says RSA.
            format!("a@x ssh-rsa {b64}"),
            1,
            "the ssh-rsa key does not decode",
        ),
    ];
    for (text, line, want) in cases {
        let (n, e) = refused(&text);
        assert_eq!(n, line, "{text:?}: {e}");
        let msg = e.to_string();
        assert!(msg.contains(want), "{text:?}: {msg}");
        // Key data is never quoted back.
        assert!(!msg.contains(&b64[..20]), "{msg}");
    }
}

#[test]
fn a_long_unknown_key_type_is_cut() {
    let (_, e) = refused(&format!("a@x ssh-{} AAAA", "x".repeat(100)));
    let msg = e.to_string();
    assert!(msg.contains("...\""), "{msg}");
    assert!(!msg.contains(&"x".repeat(41)), "{msg}");
}

#[test]
fn signatures_by_listed_keys_verify_for_each_key_type() {
    let signers = parse_allowed_signers(&format!(
        "alice@example.com {}\nec@example.com {}\nrsa@example.com {}\n",
        key(ALICE),
        key(EC),
        key(RSA)
    ))
    .unwrap();
    for (sig, who) in [
        (ALICE_GIT, "alice@example.com"),
        (EC_GIT, "ec@example.com"),
        (RSA_GIT, "rsa@example.com"),
    ] {
        let s = check(&signers, sig, PAYLOAD, AT).unwrap();
        assert_eq!(s.name, who);
        assert_eq!(s.kind, SignerKind::Ssh);
        assert!(s.fingerprint.starts_with("SHA256:"), "{s}");
    }
}

#[test]
fn an_unlisted_key_is_untrusted_and_named_by_fingerprint() {
    let signers = parse_allowed_signers(&format!("alice@example.com {}", key(ALICE))).unwrap();
    let mallory = one(&format!("m {}", key(MALLORY)));
    match check(&signers, MALLORY_GIT, PAYLOAD, AT) {
        Err(Problem::Untrusted {
            key,
            why: Untrusted::NotListed,
        }) => assert_eq!(key, format!("SSH key {}", mallory.fingerprint())),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_changed_commit_does_not_verify() {
    let signers = parse_allowed_signers(&format!("alice@example.com {}", key(ALICE))).unwrap();
    let mut changed = PAYLOAD.to_vec();
    changed.extend_from_slice(b"more\n");
    let e = check(&signers, ALICE_GIT, &changed, AT).unwrap_err();
    assert!(
        matches!(
            e,
            Problem::Bad {
                why: Bad::SshInvalid(_),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("alice@example.com (SSH key SHA256:"),
        "{e}"
    );
}

#[test]
fn namespaces_are_respected_both_ways() {
    // A signature made for another namespace does not count.
    let signers = parse_allowed_signers(&format!("alice@example.com {}", key(ALICE))).unwrap();
    let e = check(&signers, ALICE_FILE, PAYLOAD, AT).unwrap_err();
    assert!(
        matches!(&e, Problem::Bad { why: Bad::Namespace(n), .. } if n == "file"),
        "{e:?}"
    );
    // A key listed only for other namespaces is not trusted for git.
    let signers = parse_allowed_signers(&format!(
        "alice@example.com namespaces=\"file,email\" {}",
        key(ALICE)
    ))
    .unwrap();
    let e = check(&signers, ALICE_GIT, PAYLOAD, AT).unwrap_err();
    assert!(
        matches!(
            e,
            Problem::Untrusted {
                why: Untrusted::OtherNamespaces,
                ..
            }
        ),
        "{e:?}"
    );
    // The same key listed twice, once for git: trusted.
    let signers = parse_allowed_signers(&format!(
        "a namespaces=\"file\" {k}\nb namespaces=\"git\" {k}",
        k = key(ALICE)
    ))
    .unwrap();
    assert_eq!(check(&signers, ALICE_GIT, PAYLOAD, AT).unwrap().name, "b");
}

#[test]
fn validity_times_are_checked_against_the_commit_time() {
    let listed = |opts: &str| {
        parse_allowed_signers(&format!("alice@example.com {opts} {}", key(ALICE))).unwrap()
    };
    // 1700000000 is 2023-11-14T22:13:20Z.
    let e = check(&listed("valid-after=\"20231115\""), ALICE_GIT, PAYLOAD, AT).unwrap_err();
    assert!(
        matches!(
            e,
            Problem::Untrusted {
                why: Untrusted::NotYetValid,
                ..
            }
        ),
        "{e:?}"
    );
    let e = check(&listed("valid-before=\"20231114\""), ALICE_GIT, PAYLOAD, AT).unwrap_err();
    assert!(
        matches!(
            e,
            Problem::Untrusted {
                why: Untrusted::Expired,
                ..
            }
        ),
        "{e:?}"
    );
    check(
        &listed("valid-after=\"20231114\",valid-before=\"202311142214\""),
        ALICE_GIT,
        PAYLOAD,
        AT,
    )
    .unwrap();
}

#[test]
fn a_signature_that_does_not_parse_is_bad() {
    let signers = parse_allowed_signers(&format!("alice@example.com {}", key(ALICE))).unwrap();
    let garbled = b"-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n";
    let e = check(&signers, garbled, PAYLOAD, AT).unwrap_err();
    assert!(
        matches!(
            e,
            Problem::Bad {
                signer: None,
                why: Bad::SshMalformed(_)
            }
        ),
        "{e:?}"
    );
}
