//! Every refusal of the walker, each on its own crafted archive.

use super::*;

#[test]
fn each_refusal_fires() {
    let tight = Limits {
        max_bytes: 100,
        max_entries: 3,
    };
    let d = Limits::default();
    let cat = |parts: &[Vec<u8>]| parts.concat();
    let t = raw_entry(b"T/", b'5', b"");
    let cases: Vec<(&str, Vec<u8>, Limits, &str, Refusal)> = vec![
        (
            "symlink",
            cat(&[t.clone(), raw_entry(b"T/link", b'2', b"")]),
            d,
            "T/link",
            Refusal::Link { typeflag: b'2' },
        ),
        (
            "hardlink",
            cat(&[t.clone(), raw_entry(b"T/hard", b'1', b"")]),
            d,
            "T/hard",
            Refusal::Link { typeflag: b'1' },
        ),
        (
            "char device",
            raw_entry(b"T/c", b'3', b""),
            d,
            "T/c",
            Refusal::Special { typeflag: b'3' },
        ),
        (
            "block device",
            raw_entry(b"T/b", b'4', b""),
            d,
            "T/b",
            Refusal::Special { typeflag: b'4' },
        ),
        (
            "fifo",
            raw_entry(b"T/p", b'6', b""),
            d,
            "T/p",
            Refusal::Special { typeflag: b'6' },
        ),
        (
            "GNU K",
            raw_entry(b"x", b'K', b"t"),
            d,
            "x",
            Refusal::Unsupported { typeflag: b'K' },
        ),
        (
            "GNU sparse",
            raw_entry(b"T/s", b'S', b""),
            d,
            "T/s",
            Refusal::Unsupported { typeflag: b'S' },
        ),
        (
            "dotdot",
            raw_entry(b"../etc/passwd", b'0', b"x"),
            d,
            "../etc/passwd",
            Refusal::ParentReference,
        ),
        (
            "inner dotdot",
            cat(&[t.clone(), raw_entry(b"T/../../x", b'0', b"")]),
            d,
            "T/../../x",
            Refusal::ParentReference,
        ),
        (
            "absolute",
            raw_entry(b"/etc/x", b'0', b"x"),
            d,
            "/etc/x",
            Refusal::Absolute,
        ),
        (
            "newline",
            raw_entry(b"T\nx", b'0', b""),
            d,
            "T\nx",
            Refusal::ControlCharacter,
        ),
        (
            "not utf-8",
            raw_entry(b"T\xff", b'0', b""),
            d,
            "T\u{fffd}",
            Refusal::NotUtf8,
        ),
        (
            "empty",
            raw_entry(b"./", b'5', b""),
            d,
            "./",
            Refusal::EmptyName,
        ),
        (
            "outside top",
            cat(&[t.clone(), raw_entry(b"U/x", b'0', b"")]),
            d,
            "U/x",
            Refusal::OutsideTop { top: "T".into() },
        ),
        (
            "duplicate",
            cat(&[
                raw_entry(b"T/a", b'0', b"1"),
                raw_entry(b"./T/a", b'0', b"2"),
            ]),
            d,
            "./T/a",
            Refusal::Duplicate,
        ),
        (
            "file then inside it",
            cat(&[raw_entry(b"T", b'0', b"1"), raw_entry(b"T/x", b'0', b"")]),
            d,
            "T/x",
            Refusal::ParentIsFile { parent: "T".into() },
        ),
        (
            "file then folder",
            cat(&[raw_entry(b"T/a", b'0', b""), raw_entry(b"T/a", b'5', b"")]),
            d,
            "T/a",
            Refusal::FileAndFolder,
        ),
        (
            "over bytes",
            cat(&[
                raw_entry(b"T/a", b'0', &[1; 60]),
                raw_entry(b"T/b", b'0', &[2; 41]),
            ]),
            tight,
            "T/b",
            Refusal::OverBytes {
                total: 101,
                limit: 100,
            },
        ),
        (
            "over entries",
            cat(&[t.clone(), t.clone(), t.clone(), t.clone()]),
            tight,
            "T/",
            Refusal::TooManyEntries { limit: 3 },
        ),
        (
            "long name too long",
            raw_header(b"././@LongLink", b'L', MAX_LONG_NAME + 1, None),
            d,
            "././@LongLink",
            Refusal::ExtensionTooLarge {
                size: MAX_LONG_NAME + 1,
                limit: MAX_LONG_NAME,
            },
        ),
        (
            "pax too long",
            raw_header(b"p", b'x', MAX_PAX + 1, None),
            d,
            "p",
            Refusal::ExtensionTooLarge {
                size: MAX_PAX + 1,
                limit: MAX_PAX,
            },
        ),
        (
            "two long names",
            cat(&[raw_entry(b"L", b'L', b"T/a"), raw_entry(b"L", b'L', b"T/b")]),
            d,
            "T/a",
            Refusal::TooManyExtensions,
        ),
        (
            "long name and pax",
            cat(&[
                raw_entry(b"L", b'L', b"T/a"),
                raw_entry(b"p", b'x', pax_record("path", "T/b").as_bytes()),
                raw_entry(b"f", b'0', b""),
            ]),
            d,
            "T/a",
            Refusal::LongNameAndPax,
        ),
        (
            "extension then end",
            cat(&[raw_entry(b"L", b'L', b"T/a"), end()]),
            d,
            "T/a",
            Refusal::ExtensionWithoutEntry,
        ),
        (
            "sparse pax",
            raw_entry(b"p", b'x', pax_record("GNU.sparse.major", "1").as_bytes()),
            d,
            "p",
            Refusal::Sparse,
        ),
        (
            "bad pax",
            raw_entry(b"p", b'x', b"9 a=b\n"),
            d,
            "p",
            Refusal::BadPax("a record length does not fit the header".into()),
        ),
        (
            "folder with data",
            raw_entry(b"T/", b'5', b"x"),
            d,
            "T/",
            Refusal::DirWithData { size: 1 },
        ),
        (
            "file ending in slash",
            raw_entry(b"T/a/", b'0', b""),
            d,
            "T/a/",
            Refusal::FileEndsInSlash,
        ),
        (
            "bad checksum",
            {
                let mut h = raw_entry(b"T/a", b'0', b"");
                h[0] = b'X';
                h
            },
            d,
            "X/a",
            Refusal::Checksum { offset: 0 },
        ),
        (
            "bad size",
            {
                let mut h = raw_header(b"T/a", b'0', 0, None);
                h[124] = b'9';
                h[148..156].copy_from_slice(b"        ");
                let s: u64 = h.iter().map(|&b| u64::from(b)).sum();
                h[148..156].copy_from_slice(format!("{s:06o}\0 ").as_bytes());
                h
            },
            d,
            "T/a",
            Refusal::BadNumber { field: "size" },
        ),
    ];
    for (what, bytes, limits, entry, why) in cases {
        assert_eq!(refusal(&bytes, limits), (entry.to_owned(), why), "{what}");
    }
}
