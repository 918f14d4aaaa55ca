//! Line-level helpers for editing YAML text in place (pin and wave
//! pointer edits keep the user's comments and layout); the callers re-parse
//! the result and fall back to re-rendering when a layout is not understood.

/// Columns of leading spaces.
pub fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Splits `key: value  # comment` after the key into (value, comment tail).
pub fn split_value(rest: &str) -> (&str, &str) {
    // A '#' starts a comment only after whitespace and outside quotes.
    let mut quote = None;
    let bytes = rest.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match (quote, b) {
            (None, b'"') | (None, b'\'') => quote = Some(b),
            (Some(q), c) if c == q => quote = None,
            (None, b'#') if i == 0 || bytes[i - 1].is_ascii_whitespace() => {
                return (rest[..i].trim_end(), &rest[i..]);
            }
            _ => {}
        }
    }
    (rest.trim_end(), "")
}

pub fn unquote(v: &str) -> &str {
    v.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(v)
}

/// Finds `key:` on a line (optionally after `- `); returns the column of the
/// key and the text after the colon.
pub fn key_at<'a>(line: &'a str, key: &str) -> Option<(usize, &'a str)> {
    let ind = indent_of(line);
    let mut body = &line[ind..];
    let mut col = ind;
    if let Some(rest) = body.strip_prefix("- ") {
        let extra = rest.len() - rest.trim_start().len();
        col += 2 + extra;
        body = rest.trim_start();
    }
    let rest = body.strip_prefix(key)?.strip_prefix(':')?;
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    Some((col, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_start_after_whitespace_outside_quotes() {
        assert_eq!(split_value("a # c"), ("a", "# c"));
        assert_eq!(split_value("\"a # b\" # c"), ("\"a # b\"", "# c"));
        assert_eq!(split_value("a#b"), ("a#b", ""));
        assert_eq!(unquote("'x'"), "x");
        assert_eq!(
            key_at("  - release: r1 # now", "release"),
            Some((4, " r1 # now"))
        );
        assert_eq!(key_at("  releases: x", "release"), None);
        assert_eq!(indent_of("    x"), 4);
    }
}
