//! The Prometheus text exposition format (version 0.0.4, what LiteLLM's
//! `prometheus_client` serves), read one sample at a time. Pure.
//!
//! What is read: `name{label="value",...} value [timestamp]` lines, with
//! the escapes `\\`, `\"` and `\n` in label values and Go's float syntax
//! (`NaN`, `+Inf`, `-Inf`) for values. Comments (`# HELP`, `# TYPE`, the
//! OpenMetrics `# EOF`) and blank lines are skipped, and so is an
//! OpenMetrics exemplar after the value (`# {...} 1`): nothing here needs
//! types or help. Like Prometheus, the first malformed line fails the
//! whole text, and the error names its line.
//!
//! Why not the `prometheus-parse` crate: its label reader splits on `,`
//! and `=` and stops at the first `}`, so a LiteLLM `api_base` label such
//! as `https://x.openai.azure.com/?api-version=2024-06-01` or an
//! `exception_class` with a comma is read wrongly; it skips malformed
//! values silently, does not unescape, and brings `regex`, `chrono`,
//! `itertools` and `once_cell` with it. This reader is about 150 lines,
//! borrows from the text and allocates only for escaped values.

use std::borrow::Cow;

/// One sample, borrowed from the text.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    /// In the order written.
    pub labels: Vec<(&'a str, Cow<'a, str>)>,
    pub value: f64,
}

impl Sample<'_> {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_ref())
    }
}

/// Why a text is not in the exposition format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct TextError {
    /// 1-based.
    pub line: usize,
    pub what: &'static str,
}

/// Every sample of `text`, in order; stops at the first malformed line.
pub fn samples(text: &str) -> impl Iterator<Item = Result<Sample<'_>, TextError>> {
    text.lines().enumerate().filter_map(|(i, line)| {
        let line = line.trim_matches([' ', '\t', '\r']);
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        Some(sample(line).map_err(|what| TextError { line: i + 1, what }))
    })
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

fn is_name_char(c: u8) -> bool {
    is_name_start(c) || c.is_ascii_digit()
}

/// A metric name at the start of `s`, and what follows it.
fn metric_name(s: &str) -> Result<(&str, &str), &'static str> {
    let b = s.as_bytes();
    if !b.first().is_some_and(|c| is_name_start(*c)) {
        return Err("a sample must start with a metric name");
    }
    let end = b.iter().position(|c| !is_name_char(*c)).unwrap_or(b.len());
    Ok(s.split_at(end))
}

/// A label name at the start of `s` (no `:` allowed), and what follows.
fn label_name(s: &str) -> Result<(&str, &str), &'static str> {
    let b = s.as_bytes();
    let ok_start = |c: u8| c.is_ascii_alphabetic() || c == b'_';
    if !b.first().is_some_and(|c| ok_start(*c)) {
        return Err("expected a label name");
    }
    let end = b
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
        .unwrap_or(b.len());
    Ok(s.split_at(end))
}

/// A quoted label value at the start of `s` (after its opening quote),
/// unescaped, and what follows its closing quote.
fn label_value(s: &str) -> Result<(Cow<'_, str>, &str), &'static str> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut owned: Option<String> = None;
    let mut run = 0; // start of the unescaped run not yet copied
    while i < b.len() {
        match b[i] {
            b'"' => {
                let value = match owned {
                    Some(mut o) => {
                        o.push_str(&s[run..i]);
                        Cow::Owned(o)
                    }
                    None => Cow::Borrowed(&s[..i]),
                };
                return Ok((value, &s[i + 1..]));
            }
            b'\\' => {
                let unescaped = match b.get(i + 1) {
                    Some(b'\\') => '\\',
                    Some(b'"') => '"',
                    Some(b'n') => '\n',
                    _ => return Err("invalid escape in a label value (only \\\\, \\\" and \\n)"),
                };
                let o = owned.get_or_insert_with(String::new);
                o.push_str(&s[run..i]);
                o.push(unescaped);
                i += 2;
                run = i;
            }
            _ => i += 1,
        }
    }
    Err("a label value is not closed")
}

fn skip_blanks(s: &str) -> &str {
    s.trim_start_matches([' ', '\t'])
}

type Labels<'a> = Vec<(&'a str, Cow<'a, str>)>;

/// The label set after `{`, and what follows the closing `}`.
fn label_set(mut s: &str) -> Result<(Labels<'_>, &str), &'static str> {
    let mut labels = Vec::new();
    loop {
        s = skip_blanks(s);
        if let Some(rest) = s.strip_prefix('}') {
            return Ok((labels, rest));
        }
        let (name, rest) = label_name(s)?;
        let rest = skip_blanks(rest)
            .strip_prefix('=')
            .ok_or("expected = after a label name")?;
        let rest = skip_blanks(rest)
            .strip_prefix('"')
            .ok_or("a label value must be quoted")?;
        let (value, rest) = label_value(rest)?;
        if labels.iter().any(|(k, _)| *k == name) {
            return Err("a label is repeated");
        }
        labels.push((name, value));
        s = skip_blanks(rest);
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err("expected , or } after a label value");
        }
    }
}

/// Go's float syntax as Prometheus writes it.
fn value(s: &str) -> Result<f64, &'static str> {
    let bad = "the value is not a number";
    match s {
        "NaN" => Ok(f64::NAN),
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        // Rust would also take "inf", "infinity" and "nan" in any case.
        _ if s
            .bytes()
            .any(|c| c.is_ascii_alphabetic() && !matches!(c, b'e' | b'E')) =>
        {
            Err(bad)
        }
        _ => s.parse().map_err(|_| bad),
    }
}

fn sample(line: &str) -> Result<Sample<'_>, &'static str> {
    let (name, rest) = metric_name(line)?;
    let rest = skip_blanks(rest);
    let (labels, rest) = match rest.strip_prefix('{') {
        Some(after) => label_set(after)?,
        None => (Vec::new(), rest),
    };
    let mut fields = rest.split([' ', '\t']).filter(|f| !f.is_empty());
    let v = value(fields.next().ok_or("a sample needs a value")?)?;
    match fields.next() {
        None => {}
        Some(f) if f.starts_with('#') => {} // an OpenMetrics exemplar
        Some(ts) => {
            if ts.parse::<i64>().is_err() && ts.parse::<f64>().is_err() {
                return Err("the timestamp is not a number");
            }
            if fields.next().is_some_and(|f| !f.starts_with('#')) {
                return Err("unexpected text after the timestamp");
            }
        }
    }
    Ok(Sample {
        name,
        labels,
        value: v,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Result<Vec<Sample<'_>>, TextError> {
        samples(text).collect()
    }

    #[test]
    fn litellm_shaped_text_is_read() {
        let text = r#"# HELP litellm_deployment_state LLM Deployment Analytics - The state of the deployment: 0 = healthy, 1 = partial outage, 2 = complete outage
# TYPE litellm_deployment_state gauge
litellm_deployment_state{api_base="https://eu.openai.azure.com/openai?api-version=2024-06-01",api_provider="azure",litellm_model_name="azure/gpt-4o",model_id="3f2a"} 2.0
# HELP litellm_deployment_successful_fallbacks_total LLM Deployment Analytics - Number of successful fallback requests from primary model -> fallback model
# TYPE litellm_deployment_successful_fallbacks_total counter
litellm_deployment_successful_fallbacks_total{api_key_alias="exo/t1/ab",exception_class="RateLimitError, retried",exception_status="429",fallback_model="claude",hashed_api_key="88dc",requested_model="gpt-4o",team="None",team_alias="None"} 3.0
litellm_deployment_successful_fallbacks_created{requested_model="gpt-4o"} 1.7e+09

process_start_time_seconds 1.7351e9 1735100000000
up{quote="a \"b\" \\ c\nd"} +Inf
"#;
        let s = all(text).unwrap();
        assert_eq!(s.len(), 5);
        assert_eq!(s[0].name, "litellm_deployment_state");
        assert_eq!(
            s[0].label("api_base"),
            Some("https://eu.openai.azure.com/openai?api-version=2024-06-01")
        );
        assert_eq!(s[0].label("model_id"), Some("3f2a"));
        assert_eq!(s[0].value, 2.0);
        assert_eq!(
            s[1].label("exception_class"),
            Some("RateLimitError, retried")
        );
        assert_eq!(s[1].labels.len(), 8);
        assert_eq!(s[2].value, 1.7e9);
        assert_eq!(
            (s[3].name, s[3].labels.len()),
            ("process_start_time_seconds", 0)
        );
        assert_eq!(s[4].label("quote"), Some("a \"b\" \\ c\nd"));
        assert_eq!(s[4].value, f64::INFINITY);
        assert!(matches!(s[4].labels[0].1, Cow::Owned(_)));
        assert!(matches!(s[0].labels[0].1, Cow::Borrowed(_)));
    }

    #[test]
    fn odd_but_valid_lines_are_read() {
        let cases: [(&str, f64, usize); 7] = [
            ("a 1", 1.0, 0),
            ("a{} 1", 1.0, 0),
            ("a{b=\"c\",} 1", 1.0, 1),
            ("a { b = \"}\" , c=\"{\" }\t-2.5e-3", -0.0025, 2),
            ("ns:sub_total{x=\"\"} -Inf 123", f64::NEG_INFINITY, 1),
            ("a 1 # {trace_id=\"x\"} 0.5", 1.0, 0),
            ("  a 7  ", 7.0, 0),
        ];
        for (line, v, n) in cases {
            let s = all(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            assert_eq!((s[0].value, s[0].labels.len()), (v, n), "{line:?}");
        }
        assert!(all("a NaN").unwrap()[0].value.is_nan());
    }

    #[test]
    fn a_malformed_line_fails_the_text_naming_its_line() {
        let cases = [
            ("9a 1", "a sample must start with a metric name"),
            ("a", "a sample needs a value"),
            ("a{b=c} 1", "a label value must be quoted"),
            ("a{b=\"c} 1", "a label value is not closed"),
            (
                "a{b=\"\\t\"} 1",
                "invalid escape in a label value (only \\\\, \\\" and \\n)",
            ),
            (
                "a{b=\"1\" c=\"2\"} 1",
                "expected , or } after a label value",
            ),
            ("a{b=\"1\",b=\"2\"} 1", "a label is repeated"),
            ("a{1b=\"1\"} 1", "expected a label name"),
            ("a{b} 1", "expected = after a label name"),
            ("a one", "the value is not a number"),
            ("a inf", "the value is not a number"),
            ("a 1 soon", "the timestamp is not a number"),
            ("a 1 2 3", "unexpected text after the timestamp"),
        ];
        for (line, what) in cases {
            let text = format!("# TYPE a gauge\nok 1\n{line}\nnever 1\n");
            let e = all(&text).unwrap_err();
            assert_eq!(e, TextError { line: 3, what }, "{line:?}");
            assert_eq!(e.to_string(), format!("line 3: {what}"));
        }
    }
}
