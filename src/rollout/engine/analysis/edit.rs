//! The commits an analysis outcome makes to `releases/waves.yaml`, pure:
//! the file's text at the branch's head in, the edited text out (the same
//! text when git already says so), and the messages.

use std::path::Path;

use crate::fleet::release::{WaveName, WavePointer, WavePointers};
use crate::release::waves_edit;

/// The waves file, relative to the repository's root.
pub fn waves_path() -> String {
    format!("releases/{}", crate::fleet::WAVES_FILE)
}

#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("{0} is missing at the branch's head")]
    Missing(String),
    #[error(transparent)]
    Yaml(#[from] crate::yaml::YamlError),
}

fn read(text: Option<&str>) -> Result<(String, &str, WavePointers), EditError> {
    let rel = waves_path();
    let text = text.ok_or_else(|| EditError::Missing(rel.clone()))?;
    let doc = crate::yaml::from_str::<WavePointers>(Path::new(&rel), text)?;
    Ok((rel, text, doc))
}

/// `wave`'s pointer set to `next(current)` in `text`; unchanged when
/// `wanted(current)` says git is past this edit already.
fn set(
    text: Option<&str>,
    wave: WaveName,
    wanted: impl Fn(&WavePointer) -> bool,
    next: impl Fn(&WavePointer) -> WavePointer,
) -> Result<String, EditError> {
    let (rel, text, doc) = read(text)?;
    let current = doc.spec.get(wave);
    if !wanted(current) {
        return Ok(text.to_owned());
    }
    Ok(waves_edit::set_pointer(
        Path::new(&rel),
        text,
        &doc,
        wave,
        &next(current),
    )?)
}

/// `wave` promoted to `release`; unchanged when it runs it already.
pub fn promote(text: Option<&str>, wave: WaveName, release: &str) -> Result<String, EditError> {
    set(
        text,
        wave,
        |c| c.release != release,
        |c| waves_edit::promoted(c, release),
    )
}

/// `wave` rolled back from `from` to `to`; unchanged when it no longer
/// runs `from` (someone moved it meanwhile: their word stands).
pub fn roll_back(
    text: Option<&str>,
    wave: WaveName,
    from: &str,
    to: &str,
) -> Result<String, EditError> {
    set(
        text,
        wave,
        |c| c.release == from,
        |c| waves_edit::rolled_back(c, to),
    )
}

/// The promotion's commit message.
pub fn promote_message(release: &str, next: WaveName, wave: WaveName, summary: &str) -> String {
    format!(
        "promote {release} to the {next} wave\n\nThe {wave} wave's analysis of {release} passed ({summary}); its autoPromote made this commit.\n"
    )
}

/// The rollback's commit message: the analysis result in it.
pub fn rollback_message(wave: WaveName, from: &str, to: &str, outcome: &str) -> String {
    format!("roll back the {wave} wave to {to}\n\nFrom: {from}\nThe {wave} wave's {outcome}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# which release each wave runs\napiVersion: autonomic.sh/v1alpha1\nkind: WavePointers\nspec:\n  canary:\n    release: r2   # the canary\n    history: [r1]\n  low-risk:\n    release: r1\n  fleet:\n    release: r1\n";

    fn pointers(text: &str) -> WavePointers {
        crate::yaml::from_str(Path::new("w"), text).unwrap()
    }

    #[test]
    fn promotion_and_rollback_edit_the_head_and_leave_what_git_says_already() {
        let promoted = promote(Some(TEXT), WaveName::LowRisk, "r2").unwrap();
        let p = pointers(&promoted);
        assert_eq!(p.spec.low_risk.release, "r2");
        assert_eq!(p.spec.low_risk.history, ["r1"]);
        assert!(promoted.contains("# the canary"), "{promoted}");
        assert_eq!(
            promote(Some(&promoted), WaveName::LowRisk, "r2").unwrap(),
            promoted
        );

        let back = roll_back(Some(TEXT), WaveName::Canary, "r2", "r1").unwrap();
        let p = pointers(&back);
        assert_eq!(p.spec.canary.release, "r1");
        assert_eq!(p.spec.canary.history, ["r2"]);
        // Moved by someone else meanwhile: left alone.
        assert_eq!(
            roll_back(Some(&back), WaveName::Canary, "r2", "r1").unwrap(),
            back
        );

        assert!(matches!(
            promote(None, WaveName::LowRisk, "r2"),
            Err(EditError::Missing(_))
        ));
        let e = promote(Some("spec: [\n"), WaveName::LowRisk, "r2").unwrap_err();
        assert!(e.to_string().contains("releases/waves.yaml"), "{e}");
    }

    #[test]
    fn the_rollback_message_carries_the_analysis_result() {
        let m = rollback_message(
            WaveName::Canary,
            "r2",
            "r1",
            "analysis failed: check crashloops: failed 1 time, more than the limit of 0",
        );
        assert!(
            m.starts_with("roll back the canary wave to r1\n\nFrom: r2\n"),
            "{m}"
        );
        assert!(m.contains("check crashloops"), "{m}");
    }
}
