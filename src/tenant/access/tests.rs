//! Keys, scopes, the actuator's Secret, and what a server's answer shows.

use super::keyserver::redact_keys;
use super::*;

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect()
}

#[test]
fn the_actuator_secret_is_read_field_by_field() {
    assert!(matches!(
        Actuator::from_secret("ops", None),
        Err(AccessError::NoActuator { .. })
    ));
    assert_eq!(
        Actuator::from_secret("ops", Some(&data(&[("type", "kubernetes")]))).unwrap(),
        Actuator::Kubernetes
    );
    let http = Actuator::from_secret(
        "ops",
        Some(&data(&[
            ("type", "http"),
            ("url", "http://keys.local:4000/"),
            ("token", "t0k"),
            ("maxBudget", "25"),
        ])),
    )
    .unwrap();
    assert_eq!(
        http,
        Actuator::Http {
            url: "http://keys.local:4000".into(),
            token: "t0k".into(),
            max_budget: Some(25.0)
        }
    );
    let cases = [
        (vec![("type", "vault")], "`type`: \"vault\" is not one of"),
        (vec![], "`type`: missing"),
        (vec![("type", "http"), ("token", "x")], "`url`: missing"),
        (
            vec![("type", "http"), ("url", "ftp://x"), ("token", "x")],
            "`url`: \"ftp://x\" is not an http(s) URL",
        ),
        (
            vec![("type", "http"), ("url", "http://x")],
            "`token`: missing",
        ),
        (
            vec![
                ("type", "http"),
                ("url", "http://x"),
                ("token", "t"),
                ("maxBudget", "lots"),
            ],
            "`maxBudget`: \"lots\" is not a number",
        ),
    ];
    for (fields, want) in cases {
        let e = Actuator::from_secret("ops", Some(&data(&fields)))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}");
        assert!(e.contains("ops/exo-key-actuator"), "{e}");
        assert!(!e.contains("t0k"));
    }
}

#[test]
fn fresh_keys_are_distinct_shaped_and_not_provider_keys() {
    let a = fresh_keys().unwrap();
    let b = fresh_keys().unwrap();
    assert_eq!(a.keys().map(String::as_str).collect::<Vec<_>>(), {
        let mut k = KEYS.to_vec();
        k.sort_unstable();
        k
    });
    for k in KEYS {
        assert_ne!(a[k], b[k]);
        // The audit must not take a tenant's own keys for an upstream
        // provider's.
        assert_eq!(
            crate::audit::credentials::provider_of_value(a[k].as_bytes()),
            None,
            "{k}"
        );
    }
    assert!(a[KEY_MODEL].starts_with("sk-") && a[KEY_MODEL].len() == 25);
    assert!(a[KEY_LANGFUSE_SECRET].starts_with("sk-lf-"));
}

#[test]
fn scopes_hash_ignores_order_and_repeats() {
    let s = |m: &[&str], c: &[&str]| {
        Scopes::of(&TenantSpec {
            models: m.iter().map(|x| (*x).to_owned()).collect(),
            capabilities: c.iter().map(|x| (*x).to_owned()).collect(),
            ..TenantSpec::default()
        })
    };
    assert_eq!(s(&["a", "b"], &[]).hash(), s(&["b", "a", "a"], &[]).hash());
    assert_ne!(s(&["a"], &[]).hash(), s(&[], &["a"]).hash());
    assert!(s(&[], &[]).is_empty());
}

#[test]
fn the_access_secret_holds_exactly_its_keys_for_its_scopes() {
    let scopes = Scopes {
        models: vec!["m".into()],
        capabilities: vec![],
    };
    let keys = fresh_keys().unwrap();
    let as_live = |s: Secret| Secret {
        data: s.string_data.clone().map(|d| {
            d.into_iter()
                .map(|(k, v)| (k, ByteString(v.into_bytes())))
                .collect()
        }),
        string_data: None,
        ..s
    };
    let minted = as_live(access_secret(
        "t",
        &keys,
        &scopes,
        "kubernetes",
        STATE_MINTED,
    ));
    assert_eq!(check_access(&minted, &scopes), Ok(()));
    let pending = as_live(access_secret(
        "t",
        &keys,
        &scopes,
        "kubernetes",
        STATE_PENDING,
    ));
    assert_eq!(
        check_access(&pending, &scopes),
        Err(AccessMismatch::NotMinted)
    );
    let other = Scopes {
        models: vec!["n".into()],
        capabilities: vec![],
    };
    assert!(matches!(
        check_access(&minted, &other),
        Err(AccessMismatch::Scopes { .. })
    ));
    let mut extra = minted.clone();
    extra
        .data
        .as_mut()
        .unwrap()
        .insert("OTHER_TENANT_KEY".into(), ByteString(b"x".to_vec()));
    let e = check_access(&extra, &scopes).unwrap_err();
    assert!(matches!(e, AccessMismatch::Keys { .. }), "{e}");
    assert!(e.to_string().contains("not exactly"), "{e}");
    // Retiring keeps every generation until revoked.
    let r1 = retiring_secret("t", &minted, None);
    let r2 = retiring_secret(
        "t",
        &as_live(access_secret(
            "t",
            &fresh_keys().unwrap(),
            &other,
            "kubernetes",
            STATE_MINTED,
        )),
        Some(&r1),
    );
    assert_eq!(model_keys(&r2).len(), 2);
    assert!(model_keys(&r2).contains(&keys[KEY_MODEL]));
    assert_eq!(model_keys(&minted), vec![keys[KEY_MODEL].clone()]);
}

#[test]
fn a_server_answer_is_shown_without_keys() {
    let t = redact_keys("{\"error\": \"key sk-abcdef123 exists\"}");
    assert!(!t.contains("abcdef"), "{t}");
    assert!(t.contains("[redacted]"), "{t}");
    assert_eq!(crate::net::query_value("sk-a+b/c"), "sk-a%2Bb%2Fc");
}
