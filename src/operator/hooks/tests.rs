use super::*;
use hyper::header::HeaderValue;

/// Published HMAC-SHA256 vectors: (key, body, hex MAC). The first is the
/// example of GitHub's webhook documentation, the second RFC 4231 case 2.
const VECTORS: &[(&[u8], &[u8], &str)] = &[
    (
        b"It's a Secret to Everybody",
        b"Hello, World!",
        "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    ),
    (
        b"Jefe",
        b"what do ya want for nothing?",
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
    ),
];

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

fn fleet(ns: &str, name: &str) -> Option<FleetRef> {
    Some(FleetRef {
        namespace: ns.into(),
        name: name.into(),
    })
}

#[test]
fn paths() {
    let long = "a".repeat(64);
    let subdomain_254 = format!(
        "{}.{}.{}.{}",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(62)
    );
    let cases: Vec<(String, Option<FleetRef>)> = vec![
        ("/hooks/fleet/team-a/main".into(), fleet("team-a", "main")),
        ("/hooks/fleet/0ns/fleet.v2".into(), fleet("0ns", "fleet.v2")),
        (
            format!("/hooks/fleet/{}/x", "n".repeat(63)),
            fleet(&"n".repeat(63), "x"),
        ),
        ("/hooks/fleet/ns/".into(), None),
        ("/hooks/fleet/ns".into(), None),
        ("/hooks/fleet//name".into(), None),
        ("/hooks/fleet/ns/name/".into(), None),
        ("/hooks/fleet/ns/name/extra".into(), None),
        ("/hooks/fleet/ns/..".into(), None),
        ("/hooks/fleet/../name".into(), None),
        ("/hooks/fleet/ns/a..b".into(), None),
        ("/hooks/fleet/ns.x/name".into(), None),
        ("/hooks/fleet/NS/name".into(), None),
        ("/hooks/fleet/ns/Name".into(), None),
        ("/hooks/fleet/-ns/name".into(), None),
        ("/hooks/fleet/ns-/name".into(), None),
        ("/hooks/fleet/ns/name-".into(), None),
        ("/hooks/fleet/ns/na%2Fme".into(), None),
        ("/hooks/fleet/ns/na_me".into(), None),
        (format!("/hooks/fleet/{long}/name"), None),
        (format!("/hooks/fleet/ns/{subdomain_254}"), None),
        ("/hooks/fleets/ns/name".into(), None),
        ("/hooks/Fleet/ns/name".into(), None),
        ("/hook/fleet/ns/name".into(), None),
        ("//hooks/fleet/ns/name".into(), None),
        ("/healthz".into(), None),
        ("".into(), None),
    ];
    for (path, want) in cases {
        assert_eq!(parse_path(&path), want, "{path}");
    }
}

#[test]
fn published_vectors_verify_in_both_header_styles() {
    for (key, body, mac) in VECTORS {
        let github = headers(&[("X-Hub-Signature-256", &format!("sha256={mac}"))]);
        assert_eq!(verify(key, body, &github), Ok(()));
        let gitea = headers(&[("X-Gitea-Signature", mac)]);
        assert_eq!(verify(key, body, &gitea), Ok(()));
        // Hex case and surrounding blanks are the sender's business.
        let upper = headers(&[("x-gitea-signature", &format!(" {} ", mac.to_uppercase()))]);
        assert_eq!(verify(key, body, &upper), Ok(()));
    }
}

/// Headers sent, key, body, verdict.
type Case = (
    Vec<(&'static str, String)>,
    &'static [u8],
    &'static [u8],
    Result<(), SignatureError>,
);

#[test]
fn refusals() {
    let (key, body, mac) = VECTORS[0];
    let mut flipped = mac.to_owned();
    flipped.replace_range(0..1, "6");
    let short = &mac[..62];
    let github_malformed = Err(SignatureError::Malformed {
        header: HEADER_GITHUB,
        expected: "sha256=<64 hex digits>",
    });
    let gitea_malformed = Err(SignatureError::Malformed {
        header: HEADER_GITEA,
        expected: "<64 hex digits>",
    });
    let cases: Vec<Case> = vec![
        (vec![], key, body, Err(SignatureError::Missing)),
        (
            vec![("x-hub-signature", format!("sha1={mac}"))],
            key,
            body,
            Err(SignatureError::Missing),
        ),
        (
            vec![(HEADER_GITHUB, format!("sha256={flipped}"))],
            key,
            body,
            Err(SignatureError::Mismatch),
        ),
        (
            vec![(HEADER_GITEA, flipped.clone())],
            key,
            body,
            Err(SignatureError::Mismatch),
        ),
        (
            vec![(HEADER_GITHUB, format!("sha256={mac}"))],
            b"another key",
            body,
            Err(SignatureError::Mismatch),
        ),
        (
            vec![(HEADER_GITHUB, format!("sha256={mac}"))],
            key,
            b"Hello, World?",
            Err(SignatureError::Mismatch),
        ),
        (
            vec![(HEADER_GITHUB, format!("sha256={mac}"))],
            key,
            b"",
            Err(SignatureError::Mismatch),
        ),
        (
            vec![(HEADER_GITHUB, mac.to_owned())],
            key,
            body,
            github_malformed,
        ),
        (
            vec![(HEADER_GITHUB, format!("sha1={mac}"))],
            key,
            body,
            github_malformed,
        ),
        (
            vec![(HEADER_GITHUB, format!("SHA256={mac}"))],
            key,
            body,
            github_malformed,
        ),
        (
            vec![(HEADER_GITHUB, format!("sha256={short}"))],
            key,
            body,
            github_malformed,
        ),
        (
            vec![(HEADER_GITHUB, format!("sha256={mac}00"))],
            key,
            body,
            github_malformed,
        ),
        (
            vec![(HEADER_GITHUB, "sha256=".into())],
            key,
            body,
            github_malformed,
        ),
        (
            vec![(HEADER_GITEA, format!("sha256={mac}"))],
            key,
            body,
            gitea_malformed,
        ),
        (
            vec![(HEADER_GITEA, "zz".repeat(32))],
            key,
            body,
            gitea_malformed,
        ),
        // GitHub's header wins when both are sent: a wrong one is not
        // rescued by a right Gitea one.
        (
            vec![
                (HEADER_GITHUB, format!("sha256={flipped}")),
                (HEADER_GITEA, mac.to_owned()),
            ],
            key,
            body,
            Err(SignatureError::Mismatch),
        ),
        (
            vec![
                (HEADER_GITHUB, format!("sha256={mac}")),
                (HEADER_GITEA, flipped.clone()),
            ],
            key,
            body,
            Ok(()),
        ),
    ];
    for (pairs, key, body, want) in cases {
        let pairs: Vec<(&'static str, &str)> =
            pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(verify(key, body, &headers(&pairs)), want, "{pairs:?}");
    }
}

#[test]
fn a_header_that_is_not_text_is_malformed() {
    let mut h = HeaderMap::new();
    h.insert(HEADER_GITEA, HeaderValue::from_bytes(&[0xff; 64]).unwrap());
    assert!(matches!(
        signature(&h),
        Err(SignatureError::Malformed { .. })
    ));
}

#[test]
fn refusal_messages_never_carry_the_signature() {
    let (key, body, mac) = VECTORS[0];
    for value in [format!("sha256={mac}x"), mac.to_owned()] {
        let h = headers(&[(HEADER_GITHUB, &value)]);
        let e = verify(b"wrong", body, &h).unwrap_err();
        let text = Outcome::Unauthorized(e).message();
        assert!(!text.contains(mac), "{text}");
        assert!(!text.contains(std::str::from_utf8(key).unwrap()), "{text}");
    }
}

#[test]
fn secret_keys() {
    let cases: &[(&[u8], Option<&[u8]>)] = &[
        (b"s3cret", Some(b"s3cret")),
        (b"s3cret\n", Some(b"s3cret")),
        (b" s3 cret \r\n", Some(b"s3 cret")),
        (b"", None),
        (b" \n", None),
    ];
    for (raw, want) in cases {
        assert_eq!(key_from_secret(raw), *want, "{raw:?}");
    }
}

#[test]
fn stamps_are_rfc3339_with_nanoseconds() {
    let t = k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap();
    assert_eq!(sync_stamp(t), "2023-11-14T22:13:20.000000000Z");
    let later = t + k8s_openapi::jiff::SignedDuration::from_nanos(1);
    assert_ne!(sync_stamp(t), sync_stamp(later));
}

#[test]
fn outcomes() {
    let f = FleetRef {
        namespace: "team-a".into(),
        name: "main".into(),
    };
    let secret = |problem| Outcome::Secret {
        fleet: f.clone(),
        secret: "hook".into(),
        problem,
    };
    let cases: Vec<(Outcome, u16, &str, &str)> = vec![
        (Outcome::Accepted, 202, "accepted", "sync requested"),
        (Outcome::NoRoute, 404, "no_route", "not found"),
        (Outcome::MethodNotAllowed, 405, "method_not_allowed", "POST"),
        (Outcome::TooLarge, 413, "too_large", "1048576"),
        (Outcome::BadBody, 400, "bad_body", "body"),
        (
            Outcome::UnknownFleet(f.clone()),
            404,
            "unknown_fleet",
            "Fleet team-a/main not found",
        ),
        (
            Outcome::NoSecretRef(f.clone()),
            403,
            "no_secret_ref",
            "Fleet team-a/main has no spec.webhookSecretRef",
        ),
        (
            secret(SecretProblem::NotFound),
            503,
            "secret_unavailable",
            "Secret team-a/hook (spec.webhookSecretRef of Fleet team-a/main) not found",
        ),
        (
            secret(SecretProblem::InvalidName),
            503,
            "secret_unavailable",
            "spec.webhookSecretRef of Fleet team-a/main (\"hook\") is not a Secret name",
        ),
        (
            secret(SecretProblem::NoKey),
            503,
            "secret_unavailable",
            "Secret team-a/hook has no key token",
        ),
        (
            secret(SecretProblem::EmptyKey),
            503,
            "secret_unavailable",
            "Secret team-a/hook has an empty key token",
        ),
        (
            Outcome::Unauthorized(SignatureError::Missing),
            401,
            "no_signature",
            "X-Hub-Signature-256",
        ),
        (
            Outcome::Unauthorized(SignatureError::Mismatch),
            401,
            "bad_signature",
            "does not match",
        ),
        (
            Outcome::Unavailable {
                fleet: f.clone(),
                doing: Doing::ReadFleet,
            },
            503,
            "api_unavailable",
            "cannot read Fleet team-a/main",
        ),
        (
            Outcome::Unavailable {
                fleet: f.clone(),
                doing: Doing::PatchFleet,
            },
            503,
            "api_unavailable",
            "cannot annotate Fleet team-a/main",
        ),
    ];
    for (outcome, status, label, text) in cases {
        assert_eq!(outcome.status().as_u16(), status, "{outcome:?}");
        assert_eq!(outcome.label(), label, "{outcome:?}");
        assert!(
            outcome.message().contains(text),
            "{outcome:?}: {}",
            outcome.message()
        );
        assert!(outcome.message().ends_with('\n'));
    }
}
