//! A Prometheus check's query is a template, pure: `{{tenants}}` (the
//! wave's tenants as a regex alternation, each regex-escaped),
//! `{{release}}` and `{{wave}}`. Every value is also escaped for a PromQL
//! double-quoted string, which is where the variables belong:
//!
//! ```text
//! sum(rate(http_requests_total{namespace=~"{{tenants}}",code=~"5.."}[5m]))
//! ```
//!
//! Lint renders a template with [`Vars::sample`] and parses the result with
//! `promql-parser`, so a bad template is refused before a wave runs it.

use super::AnalysisError;

/// The names a template may use.
pub const VARIABLES: [&str; 3] = ["tenants", "release", "wave"];

/// What a template's variables stand for in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vars<'a> {
    pub tenants: &'a [String],
    pub release: &'a str,
    pub wave: &'a str,
}

impl Vars<'static> {
    /// The values lint renders a template with.
    pub fn sample() -> Vars<'static> {
        static TENANTS: std::sync::LazyLock<Vec<String>> =
            std::sync::LazyLock::new(|| vec!["tenant-a".into(), "tenant-b".into()]);
        Vars {
            tenants: &TENANTS,
            release: "2026.1.0",
            wave: "canary",
        }
    }
}

/// `template` with its variables replaced. An unknown or unclosed
/// placeholder, or `{{tenants}}` with no tenant (an empty alternation
/// would match series without the label), is an error.
pub fn render(template: &str, vars: &Vars<'_>) -> Result<String, AnalysisError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let close = after.find("}}").ok_or_else(|| AnalysisError::Template {
            reason: format!(
                "`{{{{` at byte {} is never closed",
                template.len() - rest.len() + open
            ),
        })?;
        let name = after[..close].trim();
        let value = match name {
            "tenants" => {
                if vars.tenants.is_empty() {
                    return Err(AnalysisError::Template {
                        reason: "{{tenants}} with no tenant in the wave".into(),
                    });
                }
                vars.tenants
                    .iter()
                    .map(|t| regex_escape(t))
                    .collect::<Vec<_>>()
                    .join("|")
            }
            "release" => vars.release.to_owned(),
            "wave" => vars.wave.to_owned(),
            other => {
                return Err(AnalysisError::Template {
                    reason: format!(
                        "unknown variable {:?}; use {}",
                        super::clip(other, 40),
                        VARIABLES.map(|v| format!("{{{{{v}}}}}")).join(", ")
                    ),
                });
            }
        };
        out.push_str(&string_escape(&value));
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Parses a rendered query as PromQL.
pub fn parse_promql(query: &str) -> Result<(), AnalysisError> {
    promql_parser::parser::parse(query)
        .map(drop)
        .map_err(|message| AnalysisError::Promql {
            message: super::clip(message.trim(), 300).to_owned(),
        })
}

/// `s` with RE2's metacharacters escaped.
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `s` as the inside of a PromQL double-quoted string.
fn string_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(tenants: &'a [String]) -> Vars<'a> {
        Vars {
            tenants,
            release: "2026.11.1",
            wave: "low-risk",
        }
    }

    #[test]
    fn variables_are_replaced_and_escaped() {
        let tenants = vec!["acme".to_string(), "a.b".to_string()];
        let got = render(
            r#"up{namespace=~"{{tenants}}",release="{{ release }}",wave="{{wave}}"}"#,
            &vars(&tenants),
        )
        .unwrap();
        // The regex is a\.b; in a PromQL string its backslash is doubled.
        assert_eq!(
            got,
            r#"up{namespace=~"acme|a\\.b",release="2026.11.1",wave="low-risk"}"#
        );
        parse_promql(&got).unwrap();
        assert_eq!(render("up", &vars(&tenants)).unwrap(), "up");
    }

    #[test]
    fn bad_templates_are_refused() {
        let tenants = vec!["acme".to_string()];
        for (template, want) in [
            ("up{x=\"{{tenant}}\"}", "unknown variable \"tenant\""),
            ("up{x=\"{{tenants\"}", "never closed"),
        ] {
            match render(template, &vars(&tenants)) {
                Err(AnalysisError::Template { reason }) => {
                    assert!(reason.contains(want), "{template}: {reason}")
                }
                other => panic!("{template}: {other:?}"),
            }
        }
        match render("up{x=~\"{{tenants}}\"}", &vars(&[])) {
            Err(AnalysisError::Template { reason }) => assert!(reason.contains("no tenant")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn promql_is_parsed() {
        parse_promql(r#"sum(rate(exo_x_total{namespace=~"a|b"}[5m])) / 2"#).unwrap();
        for bad in ["sum(rate(x[5m])", "up{", "rate(up)", "up +"] {
            match parse_promql(bad) {
                Err(AnalysisError::Promql { message }) => assert!(!message.is_empty(), "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
