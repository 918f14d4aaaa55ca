//! The walker over archives from the `tar` crate, GNU tar, and headers
//! crafted by hand (the crate will not write `..` or absolute names).

use super::*;
use crate::fleet::configmap::file_hash;
use std::convert::Infallible;
use std::process::Command;

mod refusals;

/// Events as owned values, to compare walks.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Dir(String, u32),
    Start(String, u64, u32),
    Data(Vec<u8>),
    End(String, String),
}

/// Walks `bytes` fed in `chunk`-sized pieces; consecutive data slices are
/// merged so walks of different chunkings compare equal.
fn walk_in(
    bytes: &[u8],
    chunk: usize,
    top: Option<&str>,
    limits: Limits,
) -> (Result<Manifest, StreamError>, Vec<Seen>) {
    let mut seen = Vec::new();
    let mut w = Walker::new(top, limits);
    let mut sink = |e: Event<'_>| -> Result<(), Infallible> {
        match (e, seen.last_mut()) {
            (Event::Data(d), Some(Seen::Data(prev))) => prev.extend_from_slice(d),
            (Event::Data(d), _) => seen.push(Seen::Data(d.to_vec())),
            (Event::Dir { path, mode }, _) => seen.push(Seen::Dir(path.into(), mode)),
            (Event::FileStart { path, size, mode }, _) => {
                seen.push(Seen::Start(path.into(), size, mode))
            }
            (Event::FileEnd { path, sha256 }, _) => {
                seen.push(Seen::End(path.into(), sha256.into()))
            }
        }
        Ok(())
    };
    for piece in bytes.chunks(chunk.max(1)) {
        if let Err(e) = w.feed(piece, &mut sink) {
            let WalkError::Stream(e) = e;
            return (Err(e), seen);
        }
    }
    (w.finish(), seen)
}

fn walk(bytes: &[u8]) -> Result<Manifest, StreamError> {
    walk_in(bytes, bytes.len(), None, Limits::default()).0
}

fn refusal(bytes: &[u8], limits: Limits) -> (String, Refusal) {
    match walk_in(bytes, 100, None, limits).0 {
        Err(StreamError::Refused { entry, why }) => (entry, why),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A header block made by hand: GNU magic unless `ustar_prefix` is given.
pub(crate) fn raw_header(
    name: &[u8],
    typeflag: u8,
    size: u64,
    ustar_prefix: Option<&[u8]>,
) -> Vec<u8> {
    let mut h = vec![0u8; 512];
    h[..name.len()].copy_from_slice(name);
    h[100..108].copy_from_slice(b"0000644\0");
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[156] = typeflag;
    match ustar_prefix {
        Some(prefix) => {
            h[257..265].copy_from_slice(b"ustar\x0000");
            h[345..345 + prefix.len()].copy_from_slice(prefix);
        }
        None => h[257..265].copy_from_slice(b"ustar  \0"),
    }
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

/// A hand-made entry: header, data, padding.
pub(crate) fn raw_entry(name: &[u8], typeflag: u8, data: &[u8]) -> Vec<u8> {
    let mut out = raw_header(name, typeflag, data.len() as u64, None);
    out.extend_from_slice(data);
    out.resize(out.len() + pad(data.len() as u64) as usize, 0);
    out
}

pub(crate) fn end() -> Vec<u8> {
    vec![0; 1024]
}

fn pax_record(key: &str, value: &str) -> String {
    // The length counts its own digits.
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while len != body.len() + len.to_string().len() {
        len = body.len() + len.to_string().len();
    }
    format!("{len}{body}")
}

/// A folder tree through the `tar` crate's Builder, as the laptop packs.
fn crate_archive() -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_mode(0o750);
    dir.set_size(0);
    b.append_data(&mut dir.clone(), "T", std::io::empty())
        .unwrap();
    let long = format!("T/{}/deep.txt", "d".repeat(150));
    let files: [(&str, &[u8]); 3] = [
        ("T/a.txt", b"hello\n"),
        ("T/sub/b.bin", &[7u8; 1500]),
        (&long, b""),
    ];
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o4755);
        b.append_data(&mut h, name, data).unwrap();
    }
    b.into_inner().unwrap()
}

#[test]
fn any_chunking_gives_the_same_walk() {
    let bytes = crate_archive();
    let (whole, seen) = walk_in(&bytes, bytes.len(), None, Limits::default());
    let whole = whole.unwrap();
    for chunk in [1, 7, 511, 512, 513, 4096] {
        let (m, s) = walk_in(&bytes, chunk, None, Limits::default());
        assert_eq!(m.unwrap(), whole, "chunk {chunk}");
        assert_eq!(s, seen, "chunk {chunk}");
    }
    assert_eq!(whole.top, "T");
    assert_eq!(whole.files["T/a.txt"].sha256, file_hash(b"hello\n"));
    assert_eq!(whole.files["T/sub/b.bin"].size, 1500);
    assert_eq!(whole.bytes(), 1506);
    let long = format!("T/{}/deep.txt", "d".repeat(150));
    assert_eq!(whole.files[&long].sha256, file_hash(b""));
    let dirs: Vec<&str> = whole.dirs.iter().map(String::as_str).collect();
    assert_eq!(dirs, ["T", &long[..long.len() - 9], "T/sub"]);
    // Parents come before children; implied ones with 0o755; setuid dropped.
    assert_eq!(seen[0], Seen::Dir("T".into(), 0o750));
    assert!(seen.contains(&Seen::Dir("T/sub".into(), 0o755)));
    assert!(seen.contains(&Seen::Start("T/a.txt".into(), 6, 0o755)));
}

#[test]
fn names_are_normalised_and_extensions_honoured() {
    let mut bytes = raw_entry(b"./T/", b'5', b"");
    bytes.extend(raw_entry(b"./T//a/./f", b'0', b"x"));
    let long = format!("T/{}", "l".repeat(300));
    bytes.extend(raw_entry(
        b"././@LongLink",
        b'L',
        format!("{long}\0").as_bytes(),
    ));
    bytes.extend(raw_entry(b"trunc", b'0', b"long"));
    let pax_path = format!("T/{}", "p".repeat(200));
    let records =
        pax_record("path", &pax_path) + &pax_record("size", "3") + &pax_record("mtime", "1.5");
    bytes.extend(raw_entry(b"PaxHeaders/x", b'x', records.as_bytes()));
    // The header claims 0 bytes; the PAX size (3) is what counts.
    let mut h = raw_header(b"short", b'0', 0, None);
    h.extend_from_slice(b"pax");
    h.resize(1024, 0);
    bytes.extend(h);
    bytes.extend(raw_entry(
        b"g",
        b'g',
        pax_record("comment", "ignored").as_bytes(),
    ));
    let ustar = raw_header(b"u.txt", b'0', 0, Some(b"T/ustar"));
    bytes.extend(ustar);
    bytes.extend(end());
    for chunk in [1, 512, bytes.len()] {
        let m = walk_in(&bytes, chunk, Some("T"), Limits::default())
            .0
            .unwrap();
        let names: Vec<&str> = m.files.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["T/a/f", long.as_str(), pax_path.as_str(), "T/ustar/u.txt"]
        );
        assert_eq!(m.files[&pax_path].sha256, file_hash(b"pax"));
        assert_eq!(m.files[&long].sha256, file_hash(b"long"));
    }
}

#[test]
fn over_limit_is_refused_before_its_data() {
    let limits = Limits {
        max_bytes: 10,
        max_entries: 10,
    };
    let bytes = raw_entry(b"T", b'0', &[0; 11]);
    // Only the header has been fed: the refusal must come already.
    let (out, seen) = walk_in(&bytes[..512], 512, None, limits);
    assert!(matches!(
        out,
        Err(StreamError::Refused {
            why: Refusal::OverBytes { .. },
            ..
        })
    ));
    assert!(seen.is_empty(), "{seen:?}");
}

#[test]
fn messages_name_the_entry() {
    let cases: [(StreamError, &str); 4] = [
        (
            StreamError::Refused {
                entry: "T/link".into(),
                why: Refusal::Link { typeflag: b'2' },
            },
            r#"refused "T/link": symbolic links are not copied (entry type 2)"#,
        ),
        (
            StreamError::Refused {
                entry: "../etc/passwd".into(),
                why: Refusal::ParentReference,
            },
            r#"refused "../etc/passwd": the name leaves the target folder"#,
        ),
        (
            StreamError::Refused {
                entry: "T/big.bin".into(),
                why: Refusal::OverBytes {
                    total: 11 << 30,
                    limit: Limits::default().max_bytes,
                },
            },
            r#"refused "T/big.bin": 11.0 GiB would pass the 10.0 GiB transfer limit"#,
        ),
        (
            StreamError::Refused {
                entry: "T/\u{1b}[2J".into(),
                why: Refusal::ControlCharacter,
            },
            r#"refused "T/\u{1b}[2J": the name holds a control character"#,
        ),
    ];
    for (err, want) in cases {
        assert_eq!(err.to_string(), want);
    }
}

#[test]
fn truncation_is_refused_and_boundaries_are_not() {
    let mut bytes = raw_entry(b"T/", b'5', b"");
    bytes.extend(raw_entry(b"T/a", b'0', b"abc"));
    let boundary = bytes.len();
    bytes.extend(end());
    for cut in [1, 511, 513, 1024 + 2, 1024 + 511] {
        let (out, _) = walk_in(&bytes[..cut], 1, None, Limits::default());
        assert!(
            matches!(
                out,
                Err(StreamError::Truncated { .. } | StreamError::TruncatedHeader { .. })
            ),
            "cut at {cut}: {out:?}"
        );
    }
    for cut in [512, boundary, boundary + 512, boundary + 1024] {
        assert!(walk(&bytes[..cut]).is_ok(), "cut at {cut}");
    }
    assert_eq!(walk(&[]), Err(StreamError::Empty));
    assert_eq!(walk(&end()), Err(StreamError::Empty));
    // GNU tar pads to a 10 KiB record with zeros; anything else after the end is refused.
    let mut padded = bytes.clone();
    padded.extend(vec![0; 8192]);
    assert!(walk(&padded).is_ok());
    padded.push(1);
    assert!(matches!(walk(&padded), Err(StreamError::AfterEnd { .. })));
    // at_end: only once the end-of-archive block is in, never before.
    let mut w = Walker::new(None, Limits::default());
    let mut sink = |_: Event<'_>| Ok::<(), Infallible>(());
    for (i, b) in bytes[..boundary + 512].chunks(512).enumerate() {
        assert!(!w.at_end(), "block {i}");
        w.feed(b, &mut sink).unwrap();
    }
    assert!(w.at_end());
}

#[test]
fn a_sink_error_stops_the_walk() {
    let bytes = crate_archive();
    let mut w = Walker::new(None, Limits::default());
    let mut sink = |e: Event<'_>| match e {
        Event::FileStart { path, .. } => Err(format!("cannot write {path}")),
        _ => Ok(()),
    };
    match w.feed(&bytes, &mut sink) {
        Err(WalkError::Sink(e)) => assert_eq!(e, "cannot write T/a.txt"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        w.feed(&[], &mut sink),
        Err(WalkError::Stream(StreamError::Stopped))
    ));
    assert_eq!(w.finish(), Err(StreamError::Stopped));
}

/// GNU tar's own output, and the digest against a real `sha256sum` listing.
#[test]
fn gnu_tar_output_and_sha256sum_digest_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("T");
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::write(root.join("a.txt"), b"hello\n").unwrap();
    std::fs::write(root.join("B.txt"), b"upper\n").unwrap();
    std::fs::write(root.join("sub/deeper/c"), vec![9u8; 70_000]).unwrap();
    std::fs::write(root.join("sub/empty"), b"").unwrap();
    std::fs::write(root.join(format!("sub/{}", "n".repeat(120))), b"long").unwrap();
    let listing = Command::new("sh")
        .arg("-c")
        .arg("find T -type f | LC_ALL=C sort | xargs sha256sum")
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(listing.status.success());
    let listing = String::from_utf8(listing.stdout).unwrap();
    let want = file_hash(listing.as_bytes());
    let parsed = crate::fleet::configmap::parse_listing(&listing).unwrap();
    assert_eq!(digest_of(&parsed), want);
    for name in ["T", "./T"] {
        let out = Command::new("tar")
            .args(["-C"])
            .arg(tmp.path())
            .args(["-cf", "-", name])
            .output()
            .unwrap();
        assert!(out.status.success());
        let (m, _) = walk_in(&out.stdout, 1000, Some("T"), Limits::default());
        let m = m.unwrap();
        assert_eq!(m.digest(), want, "{name}");
        assert_eq!(m.files.len(), 5);
        assert!(m.dirs.contains("T/sub/deeper"));
    }
    let posix = Command::new("tar")
        .args(["--format=posix", "-C"])
        .arg(tmp.path())
        .args(["-cf", "-", "T"])
        .output()
        .unwrap();
    assert_eq!(walk(&posix.stdout).unwrap().digest(), want, "posix");
}

/// Damaged streams: never a panic, and 1-byte chunking decides exactly
/// as one big chunk does.
#[test]
fn damage_is_judged_the_same_in_any_chunking() {
    let good = crate_archive();
    for i in (0..good.len()).step_by(37) {
        for flip in [0x01, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[i] ^= flip;
            let whole = walk_in(&bad, bad.len(), None, Limits::default());
            let bytewise = walk_in(&bad, 1, None, Limits::default());
            assert_eq!(whole, bytewise, "byte {i} ^ {flip:#x}");
        }
    }
}
