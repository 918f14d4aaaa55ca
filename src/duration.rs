//! One duration syntax for every knob: a Fleet's `interval` and
//! `reverifyInterval`, a release's soak time, the CLI's `--timeout`, the
//! control plane's flags. A number and a unit (`ms`, `s`, `m`, `h`, `d`),
//! compounds allowed (`1h30m`).

use std::time::Duration;

/// Parses `250ms`, `90s`, `10m`, `2h`, `1d` or `1h30m`. A unit is required.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let mut total = Duration::ZERO;
    let mut rest = text;
    if rest.is_empty() {
        return Err(format!(
            "{text:?}: expected a duration like 90s, 10m or 1h30m"
        ));
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
            return Err(format!(
                "{text:?}: expected a duration like 90s, 10m or 1h30m"
            ));
        }
        let n: u64 = number
            .parse()
            .map_err(|_| format!("{text:?}: expected a number before {unit:?}"))?;
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            _ => {
                return Err(format!(
                    "{text:?}: unknown unit {unit:?}; use ms, s, m, h or d"
                ));
            }
        };
        total = total.saturating_add(part);
        rest = next;
    }
    Ok(total)
}

/// Like [`parse`], and a bare number is seconds (command-line flags).
pub fn parse_or_seconds(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<u64>() {
        Ok(n) => Ok(Duration::from_secs(n)),
        Err(_) => parse(text),
    }
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
}
