//! The release's signing keys (`spec.signatures`), and the findings of an
//! online signature check (`exo release lint --verify-signatures`). Pure:
//! the registry is asked by the caller (`crate::signatures`).

use std::collections::BTreeSet;
use std::path::Path;

use super::{Finding, Findings, Rule};
use crate::fleet::release::{Release, ReleaseSpec};
use crate::fleet::{Fleet, Sourced};
use crate::signatures::{self, TrustedKey};

/// Every key parses and is named once; a `signatures` block has keys.
pub(super) fn lint_keys(f: &mut Findings<'_>, file: &Path, spec: &ReleaseSpec) {
    let Some(s) = &spec.signatures else {
        return;
    };
    if s.keys.is_empty() {
        f.add(
            file,
            "spec.signatures.keys",
            Rule::BadSigningKey,
            "no keys: name the cosign public key(s) the images are signed with, or drop `signatures`".into(),
        );
    }
    let mut names = BTreeSet::new();
    for (i, k) in s.keys.iter().enumerate() {
        let field = format!("spec.signatures.keys[{i}]");
        if k.name.trim().is_empty() {
            f.add(
                file,
                format!("{field}.name"),
                Rule::BadSigningKey,
                "empty name".into(),
            );
        } else if !names.insert(k.name.as_str()) {
            f.add(
                file,
                format!("{field}.name"),
                Rule::BadSigningKey,
                format!("key {:?} is named twice", k.name),
            );
        }
        if let Err(e) = TrustedKey::parse(&k.name, &k.public_key) {
            f.add(
                file,
                format!("{field}.publicKey"),
                Rule::BadSigningKey,
                e.to_string(),
            );
        }
    }
}

/// What one release's images are checked with: its keys, or why it
/// cannot be checked (a finding). Keys that do not parse are
/// [`lint_keys`]' findings; the release is then not checked.
pub fn keys_for(
    fleet: &Fleet,
    release: &Sourced<Release>,
) -> Result<Vec<TrustedKey>, Option<Finding>> {
    let Some(s) = &release.value.spec.signatures else {
        return Err(Some(Finding {
            file: fleet.rel(&release.path).to_owned(),
            field: "spec.signatures".into(),
            rule: Rule::Signature,
            message: "names no keys, so its signatures cannot be verified; add `signatures.keys` (cosign public keys)".into(),
        }));
    };
    signatures::parse_keys(&s.keys).map_err(|_| None)
}

/// One finding per component whose image did not verify: `images[i]` is
/// what component `i` runs (the release's pin, or the digest `pin` just
/// resolved).
pub fn findings(
    fleet: &Fleet,
    release: &Sourced<Release>,
    images: &[String],
    results: &signatures::Results,
) -> Vec<Finding> {
    release
        .value
        .spec
        .components
        .iter()
        .zip(images)
        .enumerate()
        .filter_map(|(i, (c, image))| {
            let e = results.get(image)?.as_ref().err()?;
            Some(Finding {
                file: fleet.rel(&release.path).to_owned(),
                field: format!("spec.components[{i}].image"),
                rule: Rule::Signature,
                message: format!("component {}: {e}", c.name),
            })
        })
        .collect()
}
