//! `exo release pin`: resolve every component's tag to a digest against the
//! registry and write it back. Nothing is written unless every image of
//! every file resolved.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use clap::Args;

use crate::cli::exit;
use crate::cli::release::common::{RootArg, load_fleet, release_at};
use crate::fleet::pin::{self, Credentials, ResolverOptions};
use crate::release::pin_edit;

#[derive(Debug, Args)]
pub struct PinArgs {
    /// Release files to pin; default: every release in the repository.
    pub releases: Vec<PathBuf>,
    #[command(flatten)]
    pub root: RootArg,
    /// Most registry requests in flight at once.
    #[arg(long, default_value_t = 16)]
    pub max_in_flight: usize,
    /// Registries (host:port) to reach over plain HTTP; loopback ones always are.
    #[arg(long = "plain-http")]
    pub plain_http: Vec<String>,
    /// Only check that every pin still matches the registry; write nothing.
    /// Exit 1 when a tag now resolves to another digest.
    #[arg(long)]
    pub check: bool,
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

    let creds = match Credentials::from_docker_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("exo release pin: {e}");
            return exit::UNUSABLE;
        }
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
        args.max_in_flight
    );
    let opts = ResolverOptions {
        max_in_flight: args.max_in_flight,
        plain_http: args.plain_http.iter().cloned().collect(),
        ..ResolverOptions::default()
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("exo release pin: cannot start the async runtime: {e}");
            return exit::UNUSABLE;
        }
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
