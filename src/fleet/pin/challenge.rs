//! A registry's `WWW-Authenticate` challenge (RFC 7235, as the OCI
//! distribution spec and docker's token flow use it). Pure.

/// How a registry wants to be asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// Nothing: the registry answered without credentials.
    Open,
    /// `Basic`: the docker config's user and password on every request.
    Basic,
    /// `Bearer`: a token from `realm` for a `repository:NAME:pull` scope.
    Bearer {
        realm: String,
        service: Option<String>,
    },
}

/// The challenge a `WWW-Authenticate` value names; `None` for a scheme
/// this resolver does not speak or a Bearer challenge without a realm.
pub fn parse(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header
        .split_once(|c: char| c.is_ascii_whitespace())
        .unwrap_or((header, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let params = params(rest);
    let get = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.clone())
    };
    Some(Challenge::Bearer {
        realm: get("realm").filter(|r| !r.is_empty())?,
        service: get("service"),
    })
}

/// `key="quoted, with \" escapes", key=token` pairs, in order.
fn params(mut rest: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    loop {
        rest = rest.trim_start_matches(|c: char| c == ',' || c.is_ascii_whitespace());
        let Some((key, after)) = rest.split_once('=') else {
            return out;
        };
        let key = key.trim().to_owned();
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => {
                let mut value = String::new();
                let mut chars = quoted.char_indices();
                let mut end = quoted.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, escaped)) = chars.next() {
                                value.push(escaped);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => value.push(c),
                    }
                }
                (value, &quoted[end.min(quoted.len())..])
            }
            None => {
                let end = after.find(',').unwrap_or(after.len());
                (after[..end].trim().to_owned(), &after[end..])
            }
        };
        out.push((key, value));
        rest = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges_name_their_realm_and_service() {
        assert_eq!(
            parse(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:team/app:pull""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
            })
        );
        // Unquoted values, spaces after commas, any case, an escaped quote.
        assert_eq!(
            parse(r#"bearer Realm=http://127.0.0.1:3000/v2/token, service="a \"b\"""#),
            Some(Challenge::Bearer {
                realm: "http://127.0.0.1:3000/v2/token".into(),
                service: Some("a \"b\"".into()),
            })
        );
        assert_eq!(
            parse(r#"Bearer realm="https://auth.example/token""#),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: None,
            })
        );
    }

    #[test]
    fn basic_and_unknown_schemes() {
        assert_eq!(
            parse(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(parse("Basic"), Some(Challenge::Basic));
        assert_eq!(parse(r#"Negotiate"#), None);
        assert_eq!(parse(r#"Bearer service="x""#), None, "no realm");
        assert_eq!(parse(r#"Bearer realm="""#), None, "an empty realm");
        assert_eq!(parse(""), None);
    }

    #[test]
    fn a_broken_value_ends_the_parameters_without_a_panic() {
        assert_eq!(
            parse(r#"Bearer realm="https://a/token"#),
            Some(Challenge::Bearer {
                realm: "https://a/token".into(),
                service: None,
            })
        );
        assert_eq!(parse("Bearer realm"), None);
        assert_eq!(
            parse(r#"Bearer realm="x\"#),
            Some(Challenge::Bearer {
                realm: "x".into(),
                service: None
            })
        );
    }
}
