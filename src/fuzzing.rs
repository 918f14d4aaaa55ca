//! The bodies of the cargo-fuzz targets (`fuzz/fuzz_targets/`), here in the
//! library so the corpus replay test (`tests/fuzz_corpus.rs`) runs exactly
//! the same code on the stable toolchain: a crash `scripts/fuzz` found,
//! saved under `fuzz/regressions/<target>/`, fails `cargo test` until fixed.
//!
//! Each function takes arbitrary bytes and panics only when a guarantee of
//! the code under test is broken (the module comments of `crate::yaml`,
//! `wire` and `agentfs::tarstream` state them). Refusing the input is
//! always a fine outcome; panicking, or accepting something a guarantee
//! rules out, is not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use crate::agentfs::tarstream::{Event, Limits, Manifest, StreamError, WalkError, Walker};
use crate::crd::tenant::TenantDoc;
use crate::crd::{Agent, AgentFS, Tool};
use crate::fleet::{Fleet, Sourced, Tenant};
use crate::release::{Release, WavePointers, lint, plan};
use crate::wire::{AlertError, Frame, close};
use crate::yaml::{self, MAX_DOCUMENT_BYTES, YamlError};

/// The file every fuzzed document claims to be, so errors can be checked
/// for naming it.
const FILE: &str = "fuzz/doc.yaml";
/// The tenant folder a fuzzed manifest lies in.
const TENANT: &str = "fuzz";
/// `crate::yaml`'s depth and node budgets: an accepted document never
/// nests deeper or holds more nodes, aliases expanded.
use crate::yaml::{MAX_DEPTH as YAML_MAX_DEPTH, MAX_NODES as YAML_MAX_NODES};

/// The fleet loader's reading of one file: the `kind` probe, then every
/// type `fleet::load` reads (Release, WavePointers, Agent, Tool, AgentFS,
/// Tenant), then what the CLI does with a loaded fleet (`lint`, `plan`).
///
/// Checks: nothing panics; an accepted document stays inside the depth
/// and node budgets; an oversized one is refused before parsing; every
/// error is one line that names the file.
pub fn fleet_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.len() > MAX_DOCUMENT_BYTES {
        let refused = yaml::from_str::<serde_json::Value>(Path::new(FILE), text);
        assert!(
            matches!(refused, Err(YamlError::TooLarge { .. })),
            "a document of {} bytes was not refused as too large",
            text.len()
        );
        return;
    }
    if let Some(value) = parse::<serde_json::Value>(text) {
        let (depth, nodes) = shape(&value);
        assert!(
            depth <= YAML_MAX_DEPTH,
            "an accepted document nests {depth} deep; the budget is {YAML_MAX_DEPTH}"
        );
        assert!(
            nodes <= YAML_MAX_NODES,
            "an accepted document holds {nodes} nodes; the budget is {YAML_MAX_NODES}"
        );
    }
    let _ = parse::<Kinded>(text).map(|k| k.kind);

    let mut tenant = Tenant {
        name: TENANT.to_owned(),
        ..Tenant::default()
    };
    if let Some(doc) = parse::<TenantDoc>(text)
        && doc.problems(TENANT).is_empty()
    {
        tenant.settings = doc.spec;
    }
    tenant.agents.extend(parse::<Agent>(text).map(in_tenant));
    tenant.tools.extend(parse::<Tool>(text).map(in_tenant));
    tenant
        .filesystems
        .extend(parse::<AgentFS>(text).map(in_tenant));
    let fleet = Fleet {
        root: PathBuf::new(),
        releases: parse::<Release>(text).map(sourced).into_iter().collect(),
        waves: parse::<WavePointers>(text).map(sourced),
        tiers: parse::<crate::crd::tenant::tiers::TiersDoc>(text).map(sourced),
        tenants: BTreeMap::from([(TENANT.to_owned(), std::sync::Arc::new(tenant))]),
        baselines: Vec::new(),
        clusters: parse::<crate::fleet::cluster::ClusterDoc>(text).map(|c| vec![sourced(c)]),
    };
    let _ = lint::lint_fleet(&fleet);
    for r in &fleet.releases {
        let _ = plan::plan(&fleet, &r.value);
        let _ = plan::diff(&fleet, &r.value, &r.value);
    }
}

/// The loader's first look at a file: which kind it is.
#[derive(Deserialize)]
struct Kinded {
    kind: Option<String>,
}

/// One strict read of `text` as `T`; an error must be one line naming the file.
fn parse<T: DeserializeOwned>(text: &str) -> Option<T> {
    match yaml::from_str::<T>(Path::new(FILE), text) {
        Ok(value) => Some(value),
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.starts_with(&format!("{FILE}: ")),
                "the error does not name the file: {message}"
            );
            assert!(
                !message.contains('\n'),
                "the error is not one line: {message:?}"
            );
            None
        }
    }
}

fn sourced<T>(value: T) -> Sourced<T> {
    Sourced {
        path: PathBuf::from(FILE),
        value,
    }
}

/// A workload as the loader keeps it: in its tenant's namespace.
fn in_tenant<T: kube::Resource>(mut value: T) -> Sourced<T> {
    value.meta_mut().namespace = Some(TENANT.to_owned());
    sourced(value)
}

/// Deepest nesting of sequences and mappings, and the number of values;
/// without recursion, so a value past the budget is measured, not a
/// stack overflow.
fn shape(value: &serde_json::Value) -> (usize, usize) {
    let (mut deepest, mut nodes) = (0, 0);
    let mut stack = vec![(value, 0)];
    while let Some((v, depth)) = stack.pop() {
        nodes += 1;
        match v {
            serde_json::Value::Array(items) => stack.extend(items.iter().map(|c| (c, depth + 1))),
            serde_json::Value::Object(map) => stack.extend(map.values().map(|c| (c, depth + 1))),
            _ => continue,
        }
        deepest = deepest.max(depth + 1);
    }
    (deepest, nodes)
}

/// One WebSocket text message as both ends read it (`Frame::parse`).
///
/// Checks: nothing panics; a refused frame's close reason fits a close
/// frame; a decoded frame encodes and decodes back equal (see
/// [`same_but_floats`] for the one narrowing); an alert's `validate`
/// answers, and `bounded` leaves no control character or over-long field
/// (and changes a valid alert not at all).
pub fn wire_frame(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let frame = match Frame::parse(text) {
        Ok(frame) => frame,
        Err(e) => {
            let reason = close::reason(&format!("malformed frame: {e}"));
            assert!(
                reason.len() <= close::MAX_REASON_BYTES,
                "close reason of {} bytes: {reason:?}",
                reason.len()
            );
            return;
        }
    };
    let encoded = match frame.to_json() {
        Ok(encoded) => encoded,
        Err(e) => panic!("a decoded {} frame does not encode: {e}", frame.kind()),
    };
    match Frame::from_json(&encoded) {
        Ok(decoded) if decoded == frame => {}
        Ok(decoded) => assert!(
            same_but_floats(&json(&decoded), &json(&frame)),
            "the round trip changed the frame: {text} -> {encoded}"
        ),
        // A float next to f64::MAX, read a few units low the first time,
        // can read back past it the second (see `same_but_floats`).
        Err(e) if e.to_string().starts_with("number out of range") => {}
        Err(e) => panic!("an encoded frame does not decode: {e}: {encoded}"),
    }
    if let Frame::Alert(alert) = &frame {
        let valid = alert.validate().is_ok();
        let bounded = alert.clone().bounded();
        if let Err(e @ (AlertError::ControlChar { .. } | AlertError::TooLong { .. })) =
            bounded.validate()
        {
            panic!("bounded() left an alert that validate() refuses: {e}");
        }
        if valid {
            assert_eq!(&bounded, alert, "bounded() changed a valid alert");
        }
    }
}

fn json(frame: &Frame) -> serde_json::Value {
    match serde_json::to_value(frame) {
        Ok(v) => v,
        Err(e) => panic!("a {} frame does not encode: {e}", frame.kind()),
    }
}

/// Equal, but for floats a few units apart. A frame's own fields are
/// strings, integers and booleans and round-trip exactly; a float can only
/// sit in its free-form JSON (`spec`, `status`, `result`, `detail`), and
/// serde_json, built without its `float_roundtrip` feature, reads decimal
/// text to the nearest f64 or one near it. So the shortest text that names
/// the f64 read the first time may read back a few units off.
fn same_but_floats(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            // Relative, with a floor for subnormals (whose units are large
            // relative to them); 1e-12 is some thousand units.
            (x - y).abs() <= 1e-12 * x.abs().max(y.abs()).max(f64::MIN_POSITIVE)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_but_floats(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kx, x), (ky, y))| kx == ky && same_but_floats(x, y))
        }
        _ => a == b,
    }
}

/// A walk's events as owned values; consecutive data slices merged, so
/// walks of different chunkings compare equal.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Dir(String, u32),
    Start(String, u64, u32),
    Data(Vec<u8>),
    End(String, String),
}

/// Top name a walk is given when the first input byte's lowest bit is set.
const TAR_TOP: &str = "T";
/// Small limits, chosen by the second-lowest bit, so the fuzzer reaches them.
const TAR_SMALL: Limits = Limits {
    max_bytes: 4096,
    max_entries: 8,
};

/// A tar stream through the `exo fs cp` walker, as the operator and the
/// laptop feed it. Input: one flags byte (bit 0: the top name is known,
/// bit 1: small limits, bits 5-7: how many chunk-size bytes follow), the
/// chunk sizes, then the archive.
///
/// Checks: nothing panics; the walk is the same fed whole or in the given
/// chunks (events, manifest, error); every event and manifest path is
/// relative, free of `..` and empty parts, without control characters,
/// and under the one top name; folders come before what is in them; a
/// file's data adds up to its size and its sha256; the manifest holds what
/// the events said.
pub fn tar_stream(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (sizes, archive) = rest.split_at(usize::from(flags >> 5).min(rest.len()));
    let top = (flags & 1 == 1).then_some(TAR_TOP);
    let limits = if flags & 2 == 2 {
        TAR_SMALL
    } else {
        Limits::default()
    };
    let whole = walk(archive, &[], top, limits);
    let chunked = walk(archive, sizes, top, limits);
    assert_eq!(chunked, whole, "the chunking changed the walk");
    let (result, events) = whole;
    check_events(&events, result.as_ref().ok(), top);
}

/// Walks `archive` in pieces sized by `sizes` in turn (whole when empty).
fn walk(
    archive: &[u8],
    sizes: &[u8],
    top: Option<&str>,
    limits: Limits,
) -> (Result<Manifest, StreamError>, Vec<Seen>) {
    let mut seen: Vec<Seen> = Vec::new();
    let mut sink = |e: Event<'_>| -> Result<(), std::convert::Infallible> {
        match (e, seen.last_mut()) {
            (Event::Data(d), Some(Seen::Data(prev))) => prev.extend_from_slice(d),
            (Event::Data(d), _) => seen.push(Seen::Data(d.to_vec())),
            (Event::Dir { path, mode }, _) => seen.push(Seen::Dir(path.into(), mode)),
            (Event::FileStart { path, size, mode }, _) => {
                seen.push(Seen::Start(path.into(), size, mode));
            }
            (Event::FileEnd { path, sha256 }, _) => {
                seen.push(Seen::End(path.into(), sha256.into()));
            }
        }
        Ok(())
    };
    let mut walker = Walker::new(top, limits);
    let mut rest = archive;
    let mut next_size = sizes.iter().cycle();
    while !rest.is_empty() {
        // 1 to 8129 bytes, small ones likelier: across and inside blocks.
        let n = next_size
            .next()
            .map_or(rest.len(), |&b| 1 + usize::from(b) * usize::from(b) / 8);
        let (piece, after) = rest.split_at(n.min(rest.len()));
        rest = after;
        match walker.feed(piece, &mut sink) {
            Ok(()) => {}
            Err(WalkError::Stream(e)) => return (Err(e), seen),
            Err(WalkError::Sink(never)) => match never {},
        }
    }
    (walker.finish(), seen)
}

/// The event order and path guarantees, and the manifest against them.
fn check_events(events: &[Seen], manifest: Option<&Manifest>, top: Option<&str>) {
    let mut dirs = BTreeSet::new();
    let mut files = BTreeMap::new();
    let mut open: Option<(&str, u64, Sha256, u64)> = None;
    let mut first_top: Option<&str> = top;
    for event in events {
        match event {
            Seen::Dir(path, mode) | Seen::Start(path, _, mode) => {
                assert!(open.is_none(), "{path:?} starts inside a file");
                assert_eq!(
                    mode & !0o777,
                    0,
                    "{path:?}: mode {mode:o} has more than permission bits"
                );
                let top = *first_top.get_or_insert(path.split('/').next().unwrap_or_default());
                check_path(path, top);
                if let Some((parent, _)) = path.rsplit_once('/') {
                    assert!(dirs.contains(parent), "{path:?} comes before its folder");
                }
                assert!(
                    !files.contains_key(path.as_str()),
                    "{path:?} is a file already"
                );
                if let Seen::Start(_, size, _) = event {
                    assert!(
                        !dirs.contains(path.as_str()),
                        "{path:?} is a folder already"
                    );
                    open = Some((path.as_str(), *size, Sha256::new(), 0));
                } else {
                    assert!(dirs.insert(path.as_str()), "{path:?} is reported twice");
                }
            }
            Seen::Data(bytes) => match &mut open {
                Some((_, _, hasher, got)) => {
                    hasher.update(bytes);
                    *got += bytes.len() as u64;
                }
                None => panic!("{} data bytes outside a file", bytes.len()),
            },
            Seen::End(path, sha256) => {
                let Some((started, size, hasher, got)) = open.take() else {
                    panic!("{path:?} ends but never started");
                };
                assert_eq!(path, started, "a file ends under another name");
                assert_eq!(got, size, "{path:?}: {got} data bytes for a size of {size}");
                let want = hex::encode(hasher.finalize());
                assert_eq!(sha256, &want, "{path:?}: the sha256 is not its data's");
                files.insert(path.as_str(), (size, want));
            }
        }
    }
    let Some(m) = manifest else {
        return;
    };
    assert!(open.is_none(), "the walk was accepted inside a file");
    assert_eq!(
        Some(m.top.as_str()),
        first_top,
        "the manifest's top is not the entries'"
    );
    for path in m.dirs.iter().chain(m.files.keys()) {
        check_path(path, &m.top);
    }
    let from_manifest: BTreeMap<&str, (u64, String)> = m
        .files
        .iter()
        .map(|(p, f)| (p.as_str(), (f.size, f.sha256.clone())))
        .collect();
    assert_eq!(
        from_manifest, files,
        "the manifest's files are not the events'"
    );
    let manifest_dirs: BTreeSet<&str> = m.dirs.iter().map(String::as_str).collect();
    assert_eq!(
        manifest_dirs, dirs,
        "the manifest's folders are not the events'"
    );
}

/// A name the walker may let through: relative, normalised, under `top`.
fn check_path(path: &str, top: &str) {
    assert!(!path.starts_with('/'), "{path:?} is absolute");
    assert!(
        path.split('/').all(|part| !matches!(part, "" | "." | "..")),
        "{path:?} has an empty, '.' or '..' part"
    );
    assert!(
        !path.chars().any(char::is_control),
        "{path:?} holds a control character"
    );
    assert!(
        path == top || path.strip_prefix(top).is_some_and(|r| r.starts_with('/')),
        "{path:?} is not under the top name {top:?}"
    );
}
