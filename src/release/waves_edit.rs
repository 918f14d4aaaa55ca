//! Promotion and rollback edit `releases/waves.yaml`. Like `pin_edit`, the
//! change is made on the text so comments survive, then checked by parsing;
//! an unfamiliar layout is re-rendered instead.

use std::path::Path;

use super::yaml_line::{indent_of, key_at, split_value};
use crate::fleet::release::{WaveName, WavePointer, WavePointers};
use crate::yaml::YamlError;

/// Sets `wave` to `pointer` in the document `text`. Fails only when the
/// fallback, re-rendering the whole document, does.
pub fn set_pointer(
    path: &Path,
    text: &str,
    doc: &WavePointers,
    wave: WaveName,
    pointer: &WavePointer,
) -> Result<String, YamlError> {
    let mut want = doc.clone();
    *want.spec.get_mut(wave) = pointer.clone();
    if let Some(edited) = edit(text, wave, pointer)
        && crate::yaml::from_str::<WavePointers>(path, &edited)
            .ok()
            .as_ref()
            == Some(&want)
    {
        return Ok(edited);
    }
    crate::yaml::to_string(&want)
}

fn edit(text: &str, wave: WaveName, p: &WavePointer) -> Option<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let key = format!("{}:", wave.as_str());
    let start = lines.iter().position(|l| {
        indent_of(l) == 2
            && l.trim_start().split('#').next().map(str::trim_end) == Some(key.as_str())
    })?;
    let end = (start + 1..lines.len())
        .find(|&i| {
            let t = lines[i].trim_start();
            !t.is_empty() && !t.starts_with('#') && indent_of(&lines[i]) <= 2
        })
        .unwrap_or(lines.len());
    let release_at = (start + 1..end).find(|&i| key_at(&lines[i], "release").is_some())?;
    let (col, rest) = key_at(&lines[release_at], "release")?;
    let (_, comment) = split_value(rest.trim_start());
    let comment = if comment.is_empty() {
        String::new()
    } else {
        format!(" {comment}")
    };
    lines[release_at] = format!("{}release: {}{comment}", " ".repeat(col), p.release);
    let history_at = (start + 1..end).find(|&i| key_at(&lines[i], "history").is_some());
    // A block-style history (one `- x` per line) is not edited in place.
    if let Some(h) = history_at
        && lines[h].trim_end().ends_with(':')
    {
        return None;
    }
    let history = format!("{}history: [{}]", " ".repeat(col), p.history.join(", "));
    match (history_at, p.history.is_empty()) {
        (Some(h), true) => {
            lines.remove(h);
        }
        (Some(h), false) => lines[h] = history,
        (None, true) => {}
        (None, false) => lines.insert(release_at + 1, history),
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    Some(out)
}

/// Promotion: `release` becomes current, the old one heads the history.
pub fn promoted(current: &WavePointer, release: &str) -> WavePointer {
    let mut history = vec![current.release.clone()];
    history.extend(
        current
            .history
            .iter()
            .filter(|h| *h != release && **h != current.release)
            .cloned(),
    );
    history.truncate(10);
    WavePointer {
        release: release.to_owned(),
        history,
    }
}

/// Rollback to `target` (taken out of the history).
pub fn rolled_back(current: &WavePointer, target: &str) -> WavePointer {
    let mut history = vec![current.release.clone()];
    history.extend(
        current
            .history
            .iter()
            .filter(|h| *h != target && **h != current.release)
            .cloned(),
    );
    history.truncate(10);
    WavePointer {
        release: target.to_owned(),
        history,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# which release each wave runs\napiVersion: autonomic.sh/v1alpha1\nkind: WavePointers\nspec:\n  canary:\n    release: r1   # the canary\n  low-risk:\n    release: r1\n    history: [r0]\n  fleet:\n    release: r1\n";

    #[test]
    fn promote_then_rollback_keeps_comments() {
        let p = Path::new("releases/waves.yaml");
        let doc: WavePointers = crate::yaml::from_str(p, TEXT).unwrap();
        let next = promoted(doc.spec.get(WaveName::Canary), "r2");
        assert_eq!(next.history, ["r1"]);
        let out = set_pointer(p, TEXT, &doc, WaveName::Canary, &next).unwrap();
        assert!(
            out.contains("    release: r2 # the canary\n    history: [r1]\n"),
            "{out}"
        );
        assert!(out.starts_with("# which release"));
        let doc2: WavePointers = crate::yaml::from_str(p, &out).unwrap();
        assert_eq!(doc2.spec.canary.release, "r2");
        assert_eq!(doc2.spec.low_risk, doc.spec.low_risk);

        let back = rolled_back(doc2.spec.get(WaveName::Canary), "r1");
        assert_eq!(
            (back.release.as_str(), back.history.as_slice()),
            ("r1", &["r2".to_owned()][..])
        );
        let out2 = set_pointer(p, &out, &doc2, WaveName::Canary, &back).unwrap();
        let doc3: WavePointers = crate::yaml::from_str(p, &out2).unwrap();
        assert_eq!(doc3.spec.canary.release, "r1");
        assert_eq!(doc3.spec.canary.history, ["r2"]);
    }
}
