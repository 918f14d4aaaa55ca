//! The one table layout of the CLI (`exo release`, `exo fs`): left-aligned
//! columns sized to their widest cell, two spaces apart, the last column
//! unpadded. Widths count characters, so a non-ASCII name does not shift
//! the columns after it.

use std::fmt::Write as _;

/// Seconds as people read them: `45s`, `12m`, `3h`, `2d`; `-` for none.
pub fn age(secs: Option<i64>) -> String {
    match secs {
        None => "-".into(),
        Some(s) if s < 120 => format!("{}s", s.max(0)),
        Some(s) if s < 7200 => format!("{}m", s / 60),
        Some(s) if s < 172_800 => format!("{}h", s / 3600),
        Some(s) => format!("{}d", s / 86_400),
    }
}

/// `header` over `rows`. A cell beyond the header's columns is not
/// measured.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    layout(header, rows, false)
}

/// [`render`] with trailing white space cut from every row, so an empty
/// last cell leaves no padding behind (`exo fs`).
pub fn render_trimmed(header: &[&str], rows: &[Vec<String>]) -> String {
    layout(header, rows, true)
}

fn layout(header: &[&str], rows: &[Vec<String>], trim: bool) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        let mut row = String::new();
        let n = cells.len();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == n {
                row.push_str(c);
            } else {
                let _ = write!(row, "{c:<w$}  ", w = widths[i]);
            }
        }
        out.push_str(if trim { row.trim_end() } else { &row });
        out.push('\n');
    };
    let head: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    line(&head, &mut out);
    for r in rows {
        line(r, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fit_the_widest_cell_and_only_trimmed_drops_trailing_blanks() {
        let rows = vec![
            vec!["größe".to_owned(), "x".to_owned(), String::new()],
            vec!["a".to_owned(), "longer".to_owned(), "last".to_owned()],
        ];
        assert_eq!(
            render(&["K", "V", "NOTE"], &rows),
            "K      V       NOTE\ngröße  x       \na      longer  last\n"
        );
        assert_eq!(
            render_trimmed(&["K", "V", "NOTE"], &rows),
            "K      V       NOTE\ngröße  x\na      longer  last\n"
        );
    }

    #[test]
    fn ages() {
        let cases = [
            (None, "-"),
            (Some(-3), "0s"),
            (Some(59), "59s"),
            (Some(600), "10m"),
            (Some(7200), "2h"),
            (Some(200_000), "2d"),
        ];
        for (secs, want) in cases {
            assert_eq!(age(secs), want, "{secs:?}");
        }
    }
}
