//! `exo release lint`: every rule a fleet repository must satisfy before any
//! of it is applied. Pure: takes a loaded [`Fleet`], returns findings.
//!
//! Each finding names the file, the field, a stable rule id, and what to do.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

use crate::fleet::configmap::version_name;
use crate::fleet::release::{
    API_VERSION, ImageRef, KIND_RELEASE, KIND_WAVES, Layer, Release, WaveName, parse_duration,
};
use crate::fleet::{Fleet, Sourced};

mod analysis;
mod clusters;
mod rule;
pub mod signatures;
mod tenants;
pub use rule::Rule;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub file: PathBuf,
    pub field: String,
    /// Its stable id renders as e.g. `mutable-tag`.
    pub rule: Rule,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {} [{}]",
            self.file.display(),
            self.field,
            self.message,
            self.rule
        )
    }
}

struct Findings<'a> {
    fleet: &'a Fleet,
    out: Vec<Finding>,
}

impl Findings<'_> {
    fn add(
        &mut self,
        file: &std::path::Path,
        field: impl Into<String>,
        rule: Rule,
        message: String,
    ) {
        self.out.push(Finding {
            file: self.fleet.rel(file).to_owned(),
            field: field.into(),
            rule,
            message,
        });
    }
}

/// Lints the whole repository: every release, the wave pointers, and the
/// images of every workload in `manifests/`.
pub fn lint_fleet(fleet: &Fleet) -> Vec<Finding> {
    let mut f = Findings {
        fleet,
        out: Vec::new(),
    };
    for release in &fleet.releases {
        lint_release(&mut f, release);
    }
    lint_waves_file(&mut f);
    lint_manifest_images(&mut f);
    tenants::lint_tenants(&mut f);
    clusters::lint_placement(&mut f);
    f.out
}

/// Lints one release against the rest of the repository.
pub fn lint_one(fleet: &Fleet, release: &Sourced<Release>) -> Vec<Finding> {
    let mut f = Findings {
        fleet,
        out: Vec::new(),
    };
    lint_release(&mut f, release);
    f.out
}

fn lint_image(f: &mut Findings<'_>, file: &std::path::Path, field: String, image: &str) {
    let r = ImageRef::parse(image);
    match &r.digest {
        None => f.add(
            file,
            field,
            Rule::MutableTag,
            format!("image {image:?} is not pinned by digest; run `exo release pin`"),
        ),
        Some(d) if !ImageRef::digest_is_valid(d) => f.add(
            file,
            field,
            Rule::MalformedDigest,
            format!("digest {d:?} is not sha256:<64 lowercase hex>"),
        ),
        Some(_) if r.tag.is_some() => f.add(
            file,
            field,
            Rule::TagInImage,
            format!("image {image:?} carries both a tag and a digest; write repository@digest and keep the tag in `tag:`"),
        ),
        Some(_) => {}
    }
}

fn lint_release(f: &mut Findings<'_>, sourced: &Sourced<Release>) {
    let file = &sourced.path;
    let r = &sourced.value;
    let spec = &r.spec;
    tenants::lint_tenant_waves(f, r);
    if r.api_version != API_VERSION {
        f.add(
            file,
            "apiVersion",
            Rule::ApiVersion,
            format!("expected {API_VERSION:?}, found {:?}", r.api_version),
        );
    }
    if r.kind != KIND_RELEASE {
        f.add(
            file,
            "kind",
            Rule::Kind,
            format!("expected {KIND_RELEASE:?}, found {:?}", r.kind),
        );
    }
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if r.metadata.name != stem {
        f.add(
            file,
            "metadata.name",
            Rule::NameMismatch,
            format!(
                "release {:?} lives in a file named {stem:?}; name the file after the release",
                r.metadata.name
            ),
        );
    }

    // Components: pinning, names, dependencies, order.
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, c) in spec.components.iter().enumerate() {
        if index.insert(c.name.as_str(), i).is_some() {
            f.add(
                file,
                format!("spec.components[{i}].name"),
                Rule::DuplicateComponent,
                format!("component {:?} appears twice", c.name),
            );
        }
        lint_image(f, file, format!("spec.components[{i}].image"), &c.image);
    }
    if spec.components.is_empty() {
        f.add(
            file,
            "spec.components",
            Rule::NoComponents,
            "a release needs at least one component".into(),
        );
    }
    for (i, c) in spec.components.iter().enumerate() {
        for (j, dep) in c.depends_on.iter().enumerate() {
            let field = format!("spec.components[{i}].dependsOn[{j}]");
            match index.get(dep.as_str()) {
                None => f.add(
                    file,
                    field,
                    Rule::UnknownDependency,
                    format!(
                        "{:?} depends on {dep:?}, which is not a component of this release",
                        c.name
                    ),
                ),
                Some(&k) => {
                    let target = &spec.components[k];
                    if c.layer == Layer::Capability && target.layer == Layer::Consumer {
                        f.add(file, field.clone(), Rule::LayerInversion, format!("capability {:?} depends on consumer {dep:?}; capabilities may depend only on capabilities", c.name));
                    }
                    if k > i && target.name != c.name {
                        f.add(file, field, Rule::DependencyOrder, format!("{} {:?} is listed before {} {dep:?} that it depends on; list {dep:?} first", c.layer, c.name, target.layer));
                    }
                }
            }
        }
    }
    for cycle in cycles(spec) {
        f.add(
            file,
            "spec.components",
            Rule::DependencyCycle,
            format!("dependency cycle: {}", cycle.join(" -> ")),
        );
    }

    // ConfigMap versions against their sources.
    let mut seen = BTreeSet::new();
    for (i, cm) in spec.config_maps.iter().enumerate() {
        let field = format!("spec.configMaps[{i}]");
        if !seen.insert(cm.name.as_str()) {
            f.add(
                file,
                format!("{field}.name"),
                Rule::DuplicateConfigmap,
                format!("ConfigMap {:?} appears twice", cm.name),
            );
        }
        if cm.version != version_name(&cm.name, &cm.sha256) {
            f.add(
                file,
                format!("{field}.version"),
                Rule::ConfigmapVersion,
                format!(
                    "version {:?} does not match its sha256; expected {:?}",
                    cm.version,
                    version_name(&cm.name, &cm.sha256)
                ),
            );
        }
        let sources: Vec<_> = f
            .fleet
            .baselines
            .iter()
            .filter(|b| b.value.name == cm.name)
            .collect();
        if sources.is_empty() {
            f.add(
                file,
                format!("{field}.name"),
                Rule::ConfigmapSourceMissing,
                format!(
                    "no source folder configmaps/{}/ (or configmaps/{}@<label>/)",
                    cm.name, cm.name
                ),
            );
        } else if !sources.iter().any(|b| b.value.sha256 == cm.sha256) {
            let found: Vec<String> = sources
                .iter()
                .map(|b| {
                    format!(
                        "{} is {}",
                        f.fleet.rel(&b.path).display(),
                        b.value.version()
                    )
                })
                .collect();
            f.add(file, format!("{field}.sha256"), Rule::ConfigmapHashMismatch, format!("{} does not match any source ({}); run `exo config build` and record the new version, or keep the old source in configmaps/{}@<label>/", cm.version, found.join(", "), cm.name));
        }
    }

    // Waves: order, coverage, overlap, gates.
    let order: Vec<WaveName> = spec.waves.iter().map(|w| w.name).collect();
    if order != WaveName::ORDER {
        let got: Vec<&str> = order.iter().map(|w| w.as_str()).collect();
        f.add(
            file,
            "spec.waves",
            Rule::WaveOrder,
            format!(
                "waves must be exactly canary -> low-risk -> fleet, found {}",
                if got.is_empty() {
                    "none".to_owned()
                } else {
                    got.join(" -> ")
                }
            ),
        );
    }
    let tenants = &f.fleet.tenants;
    let mut covered: BTreeMap<String, WaveName> = BTreeMap::new();
    for (i, w) in spec.waves.iter().enumerate() {
        let field = format!("spec.waves[{i}]");
        let mut selected = Vec::new();
        for (j, t) in w.tenants.iter().enumerate() {
            if !tenants.contains_key(t) {
                f.add(
                    file,
                    format!("{field}.tenants[{j}]"),
                    Rule::UnknownTenant,
                    format!(
                        "wave {} names tenant {t:?}, which has no folder under manifests/",
                        w.name
                    ),
                );
            }
            selected.push(t.clone());
        }
        if w.remaining {
            let explicit: BTreeSet<&String> = spec.waves.iter().flat_map(|w| &w.tenants).collect();
            selected.extend(
                tenants
                    .keys()
                    .filter(|t| !covered.contains_key(*t) && !explicit.contains(t))
                    .cloned(),
            );
        }
        if selected.is_empty() {
            f.add(
                file,
                field.clone(),
                Rule::EmptyWave,
                format!("wave {} selects no tenant", w.name),
            );
        }
        for t in selected {
            if let Some(prev) = covered.insert(t.clone(), w.name)
                && prev != w.name
            {
                f.add(
                    file,
                    field.clone(),
                    Rule::TenantInTwoWaves,
                    format!("tenant {t:?} is in wave {prev} and wave {}", w.name),
                );
            }
        }
        if let Some(soak) = &w.gates.soak_time
            && let Err(e) = parse_duration(soak)
        {
            f.add(
                file,
                format!("{field}.gates.soakTime"),
                Rule::BadSoakTime,
                e.to_string(),
            );
        }
        analysis::lint_wave(f, file, &field, spec, w);
    }
    signatures::lint_keys(f, file, spec);
    for t in tenants.keys() {
        if !covered.contains_key(t) {
            f.add(file, "spec.waves", Rule::UncoveredTenant, format!("tenant {t:?} (manifests/{t}/) is in no wave; name it in a wave or set `remaining: true` on fleet"));
        }
    }

    // Compatibility with the previous release.
    if let Some(prev_name) = &spec.compatible_with {
        if *prev_name == r.metadata.name {
            f.add(
                file,
                "spec.compatibleWith",
                Rule::Compatibility,
                "a release cannot be compatible with itself".into(),
            );
        } else if let Some(prev) = f.fleet.release(prev_name) {
            for c in prev
                .value
                .spec
                .components
                .iter()
                .filter(|c| c.layer == Layer::Capability)
            {
                if !index.contains_key(c.name.as_str()) {
                    f.add(file, "spec.components", Rule::Compatibility, format!("capability {:?} of {prev_name} is dropped; capabilities stay for at least one release so {prev_name}'s consumers keep working", c.name));
                }
            }
        } else {
            f.add(
                file,
                "spec.compatibleWith",
                Rule::UnknownRelease,
                format!("{prev_name:?} is not a release in releases/"),
            );
        }
    }
}

/// Every elementary dependency cycle, each reported once from its smallest name.
fn cycles(spec: &crate::fleet::release::ReleaseSpec) -> Vec<Vec<String>> {
    let deps: BTreeMap<&str, Vec<&str>> = spec
        .components
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.depends_on.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    fn walk<'a>(
        node: &'a str,
        deps: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        found: &mut BTreeSet<Vec<String>>,
    ) {
        if let Some(pos) = path.iter().position(|n| *n == node) {
            let mut cycle: Vec<String> = path[pos..].iter().map(|s| s.to_string()).collect();
            // Rotate so the smallest name leads: one report per cycle.
            if let Some(min) = cycle
                .iter()
                .enumerate()
                .min_by_key(|(_, n)| n.as_str())
                .map(|(i, _)| i)
            {
                cycle.rotate_left(min);
            }
            let first = cycle[0].clone();
            cycle.push(first);
            found.insert(cycle);
            return;
        }
        if path.len() > deps.len() {
            return;
        }
        path.push(node);
        for next in deps.get(node).into_iter().flatten() {
            if deps.contains_key(next) {
                walk(next, deps, path, found);
            }
        }
        path.pop();
    }
    for start in deps.keys() {
        walk(start, &deps, &mut Vec::new(), &mut found);
    }
    found.into_iter().collect()
}

fn lint_waves_file(f: &mut Findings<'_>) {
    let Some(waves) = &f.fleet.waves else {
        let path = f.fleet.root.join("releases").join(crate::fleet::WAVES_FILE);
        f.add(
            &path,
            "spec",
            Rule::NoWavePointers,
            "missing; it records which release each wave runs".into(),
        );
        return;
    };
    let file = waves.path.clone();
    if waves.value.api_version != API_VERSION {
        f.add(
            &file,
            "apiVersion",
            Rule::ApiVersion,
            format!("expected {API_VERSION:?}"),
        );
    }
    if waves.value.kind != KIND_WAVES {
        f.add(
            &file,
            "kind",
            Rule::Kind,
            format!("expected {KIND_WAVES:?}"),
        );
    }
    for w in WaveName::ORDER {
        let p = waves.value.spec.get(w);
        if f.fleet.release(&p.release).is_none() {
            f.add(
                &file,
                format!("spec.{w}.release"),
                Rule::UnknownRelease,
                format!(
                    "wave {w} points at {:?}, which is not a release in releases/",
                    p.release
                ),
            );
        }
    }
}

fn lint_manifest_images(f: &mut Findings<'_>) {
    let fleet = f.fleet;
    for tenant in fleet.tenants.values() {
        for a in &tenant.agents {
            lint_image(
                f,
                &a.path,
                "spec.runtime.image".into(),
                &a.value.spec.runtime.image,
            );
            lint_image(
                f,
                &a.path,
                "spec.agentlet.image".into(),
                &a.value.spec.agentlet.image,
            );
        }
        for t in &tenant.tools {
            lint_image(
                f,
                &t.path,
                "spec.container.image".into(),
                &t.value.spec.container.image,
            );
        }
    }
}

#[cfg(test)]
mod tests;
