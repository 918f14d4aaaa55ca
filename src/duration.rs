//! One duration syntax for every knob: a Fleet's `interval` and
//! `reverifyInterval`, a release's soak time, the CLI's `--timeout`, the
//! control plane's flags. A number and a unit (`ms`, `s`, `m`, `h`, `d`),
//! compounds allowed (`1h30m`).

use std::num::ParseIntError;
use std::time::Duration;

/// Why a text is not a duration; each names the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Empty, or a number without its unit.
    #[error("{text:?}: expected a duration like 90s, 10m or 1h30m")]
    NoUnit { text: String },
    #[error("{text:?}: expected a number before {unit:?}")]
    NoNumber {
        text: String,
        unit: String,
        #[source]
        source: ParseIntError,
    },
    #[error("{text:?}: unknown unit {unit:?}; use ms, s, m, h or d")]
    UnknownUnit { text: String, unit: String },
}

/// Parses `250ms`, `90s`, `10m`, `2h`, `1d` or `1h30m`. A unit is required.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    let mut total = Duration::ZERO;
    let mut rest = text;
    let no_unit = || DurationError::NoUnit {
        text: text.to_owned(),
    };
    if rest.is_empty() {
        return Err(no_unit());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(digits);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(no_unit());
        }
        let n: u64 = number.parse().map_err(|source| DurationError::NoNumber {
            text: text.to_owned(),
            unit: unit.to_owned(),
            source,
        })?;
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            _ => {
                return Err(DurationError::UnknownUnit {
                    text: text.to_owned(),
                    unit: unit.to_owned(),
                });
            }
        };
        total = total.saturating_add(part);
        rest = next;
    }
    Ok(total)
}

/// Like [`parse`], and a bare number is seconds (command-line flags).
pub fn parse_or_seconds(text: &str) -> Result<Duration, DurationError> {
    match text.trim().parse::<u64>() {
        Ok(n) => Ok(Duration::from_secs(n)),
        Err(_) => parse(text),
    }
}

/// `90s`, `10m`, `1h30m`: a duration as [`parse`] reads it back.
pub fn human(d: std::time::Duration) -> String {
    let total = d.as_secs();
    if total == 0 {
        return format!("{}ms", d.as_millis());
    }
    let (h, m, s) = (total / 3600, total / 60 % 60, total % 60);
    let mut out = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let s = Duration::from_secs;
        let cases: &[(&str, Option<Duration>)] = &[
            ("90s", Some(s(90))),
            ("1h30m", Some(s(5400))),
            ("0s", Some(Duration::ZERO)),
            ("250ms", Some(Duration::from_millis(250))),
            ("1d", Some(s(86_400))),
            ("10m", Some(s(600))),
            ("", None),
            ("10", None),
            ("5x", None),
            ("m", None),
            ("1h30", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).ok(), *want, "{text:?}");
        }
        assert_eq!(parse_or_seconds("2"), Ok(s(2)));
        assert_eq!(parse_or_seconds("5m"), Ok(s(300)));
        assert!(parse_or_seconds("x").is_err());
    }

    /// The messages the CLI and the Fleet status show.
    #[test]
    fn errors_name_the_text() {
        let cases = [
            ("", "\"\": expected a duration like 90s, 10m or 1h30m"),
            ("10", "\"10\": expected a duration like 90s, 10m or 1h30m"),
            ("m", "\"m\": expected a number before \"m\""),
            ("5x", "\"5x\": unknown unit \"x\"; use ms, s, m, h or d"),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).unwrap_err().to_string(), want, "{text:?}");
        }
    }

    #[test]
    fn human_durations_parse_back() {
        for (secs, text) in [(90, "1m30s"), (600, "10m"), (3600, "1h"), (5400, "1h30m")] {
            let d = std::time::Duration::from_secs(secs);
            assert_eq!(human(d), text);
            assert_eq!(parse(text), Ok(d));
        }
    }
}
