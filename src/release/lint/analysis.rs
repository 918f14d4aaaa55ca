//! A wave's `analysis` and `autoPromote`: the checks are planned as the
//! operator would plan them (`crate::analysis::plan`), and each problem
//! becomes a finding under the wave's field.

use std::path::Path;

use super::{Findings, Rule};
use crate::analysis::{self, ProblemKind};
use crate::fleet::release::{ReleaseSpec, Wave, WaveName, parse_duration};

pub(super) fn lint_wave(
    f: &mut Findings<'_>,
    file: &Path,
    field: &str,
    spec: &ReleaseSpec,
    w: &Wave,
) {
    // A soak time that does not parse is the next wave's finding
    // (`bad-soak-time`); the checks are planned as if there were none.
    let soak = spec.soak_of(w.name).and_then(|s| parse_duration(s).ok());
    if let Err(problems) = analysis::plan(&w.analysis, soak) {
        for p in problems {
            let rule = match p.kind {
                ProblemKind::UnknownBuiltin => Rule::UnknownBuiltin,
                ProblemKind::BadQuery => Rule::BadQuery,
                ProblemKind::BadCondition => Rule::BadCondition,
                ProblemKind::BadCheck => Rule::BadAnalysis,
            };
            f.add(file, format!("{field}.{}", p.field), rule, p.message);
        }
    }
    if w.auto_promote && w.name == WaveName::Fleet {
        f.add(
            file,
            format!("{field}.autoPromote"),
            Rule::BadAnalysis,
            "fleet is the last wave; no wave follows it to promote".into(),
        );
    }
}
