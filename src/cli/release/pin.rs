//! `exo release pin`: resolve every component's tag to a digest against the
//! registry and write it back. Nothing is written unless every image of
//! every file resolved (and, with `--verify-signatures`, verified against
//! its release's `signatures.keys`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use clap::Args;

use crate::cli::exit;
use crate::cli::release::common::{
    RegistryArgs, RootArg, check_signatures, load_fleet, registry_credentials, release_at,
};
use crate::fleet::pin;
use crate::release::pin_edit;

#[derive(Debug, Args)]
pub struct PinArgs {
    /// Release files to pin; default: every release in the repository.
    pub releases: Vec<PathBuf>,
    #[command(flatten)]
    pub root: RootArg,
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Only check that every pin still matches the registry; write nothing.
    /// Exit 1 when a tag now resolves to another digest.
    #[arg(long)]
    pub check: bool,
    /// Also verify that every resolved image carries a cosign signature by
    /// one of its release's `signatures.keys`; nothing is written unless
    /// every one does.
    #[arg(long)]
    pub verify_signatures: bool,
}

pub fn run(args: &PinArgs) -> u8 {
    let fleet = match load_fleet(&args.root.root, "pin") {
        Ok(f) => f,
        Err(code) => return code,
    };
    let selected: Vec<_> = if args.releases.is_empty() {
        fleet.releases.iter().collect()
    } else {
        let mut out = Vec::new();
        for p in &args.releases {
            match release_at(&fleet, p) {
                Some(r) => out.push(r),
                None => {
                    eprintln!(
                        "exo release pin: {}: not a release under releases/",
                        p.display()
                    );
                    return exit::UNUSABLE;
                }
            }
        }
        out
    };

    // What to resolve, per file and component.
    let mut problems = Vec::new();
    let mut wanted: Vec<(usize, BTreeMap<usize, pin::TagRef>)> = Vec::new();
    for (f, r) in selected.iter().enumerate() {
        let mut per = BTreeMap::new();
        for (i, c) in r.value.spec.components.iter().enumerate() {
            match pin_edit::tag_ref(&c.image, c.tag.as_deref()) {
                Ok(t) => {
                    per.insert(i, t);
                }
                Err(e) => problems.push(format!(
                    "{}: spec.components[{i}].image: {e}",
                    fleet.rel(&r.path).display()
                )),
            }
        }
        wanted.push((f, per));
    }
    if !problems.is_empty() {
        for p in problems {
            eprintln!("exo release pin: {p}");
        }
        return exit::UNUSABLE;
    }

    let creds = match registry_credentials("pin") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let refs: Vec<pin::TagRef> = wanted
        .iter()
        .flat_map(|(_, m)| m.values().cloned())
        .collect();
    let distinct: BTreeSet<&pin::TagRef> = refs.iter().collect();
    eprintln!(
        "exo release pin: resolving {} image(s) ({} distinct), at most {} at a time",
        refs.len(),
        distinct.len(),
        args.registry.max_in_flight
    );
    let opts = args.registry.options();
    let runtime = match super::cluster::runtime("exo release pin") {
        Ok(r) => r,
        Err(code) => return code,
    };
    let resolved = runtime.block_on(pin::resolve_all(&refs, &creds, &opts));
    let failures: BTreeSet<String> = resolved
        .values()
        .filter_map(|r| r.as_ref().err())
        .map(ToString::to_string)
        .collect();
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("exo release pin: {f}");
        }
        eprintln!("exo release pin: nothing written");
        return exit::UNUSABLE;
    }

    if args.verify_signatures {
        // Each component's image as it will be pinned.
        let releases: Vec<_> = wanted
            .iter()
            .map(|(f, per)| {
                let r = selected[*f];
                let images = r.value.spec.components.iter().enumerate().map(|(i, c)| {
                    per.get(&i)
                        .and_then(|t| Some((t, resolved.get(t)?.as_ref().ok()?)))
                        .map_or_else(|| c.image.clone(), |(t, d)| format!("{}@{d}", t.repository))
                });
                (r, images.collect())
            })
            .collect();
        let findings = check_signatures(&fleet, &releases, &creds, &args.registry, &runtime, "pin");
        if !findings.is_empty() {
            for f in &findings {
                eprintln!("exo release pin: {f}");
            }
            eprintln!("exo release pin: nothing written");
            return exit::FINDINGS;
        }
        eprintln!("exo release pin: every image's signature verified");
    }

    // Render every file first; write only when all rendered.
    let mut writes = Vec::new();
    let mut drift = Vec::new();
    for (f, per) in &wanted {
        let r = selected[*f];
        let digests: BTreeMap<usize, (pin::TagRef, String)> = per
            .iter()
            .filter_map(|(i, t)| {
                resolved
                    .get(t)
                    .and_then(|d| d.as_ref().ok())
                    .map(|d| (*i, (t.clone(), d.clone())))
            })
            .collect();
        for (i, (t, d)) in &digests {
            let c = &r.value.spec.components[*i];
            let now = format!("{}@{d}", t.repository);
            if c.image != now || c.tag.as_deref() != Some(t.tag.as_str()) {
                drift.push(format!(
                    "{}: {} {t} -> {d}",
                    fleet.rel(&r.path).display(),
                    c.name
                ));
            }
        }
        let text = match std::fs::read_to_string(&r.path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("exo release pin: {}: {e}", r.path.display());
                return exit::UNUSABLE;
            }
        };
        match pin_edit::rewrite(&r.path, &text, &r.value, &digests) {
            Ok((new, kept)) => {
                if new != text {
                    writes.push((r.path.clone(), new, kept));
                }
            }
            Err(e) => {
                eprintln!("exo release pin: {}: {e}", r.path.display());
                return exit::UNUSABLE;
            }
        }
    }
    if args.check {
        for d in &drift {
            println!("{d}");
        }
        if drift.is_empty() {
            eprintln!("exo release pin: every pin matches the registry");
            return exit::OK;
        }
        eprintln!(
            "exo release pin: {} pin(s) differ from the registry",
            drift.len()
        );
        return exit::FINDINGS;
    }
    for (path, content, kept) in &writes {
        // Write beside, then rename: a reader never sees half a file.
        let tmp = path.with_extension("yaml.pin-tmp");
        if let Err(e) = std::fs::write(&tmp, content).and_then(|()| std::fs::rename(&tmp, path)) {
            let _ = std::fs::remove_file(&tmp);
            eprintln!("exo release pin: {}: {e}", path.display());
            return exit::UNUSABLE;
        }
        if *kept {
            eprintln!("pinned {}", fleet.rel(path).display());
        } else {
            eprintln!(
                "pinned {} (its layout was re-rendered: comments could not be kept)",
                fleet.rel(path).display()
            );
        }
    }
    for d in &drift {
        println!("{d}");
    }
    if writes.is_empty() {
        eprintln!("exo release pin: already pinned; nothing to write");
    }
    exit::OK
}
