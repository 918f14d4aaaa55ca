//! Pack and unpack against real folders in a temp dir.

use super::*;
use crate::agentfs::tarstream::tests::{end, raw_entry};
use crate::agentfs::tarstream::{Refusal, StreamError};
use std::os::unix::fs::{PermissionsExt, symlink};

fn pack_vec(src: &Path, limits: &Limits) -> (Result<Manifest, LocalError>, Vec<u8>) {
    let mut out = Vec::new();
    let m = pack(src, &mut out, limits, &mut |_| {});
    (m, out)
}

fn unpack_bytes(bytes: &[u8], dest: &Path) -> Result<Staged, LocalError> {
    unpack(bytes, dest, &Limits::default(), &mut |_| {})
}

/// Every name under `dir`, relative, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if fs::symlink_metadata(&p).unwrap().is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

fn tree(root: &Path) {
    fs::create_dir_all(root.join("sub/deeper")).unwrap();
    fs::create_dir_all(root.join("empty")).unwrap();
    fs::write(root.join("a.txt"), b"hello\n").unwrap();
    fs::write(root.join("sub/deeper/big"), vec![5u8; 300_000]).unwrap();
    fs::write(root.join(format!("sub/{}", "n".repeat(150))), b"long name").unwrap();
    fs::write(root.join("sub/private"), b"x").unwrap();
    fs::set_permissions(root.join("sub/private"), fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn a_folder_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src/T");
    tree(&src);
    let mut sent = 0;
    let mut out = Vec::new();
    let packed = pack(&src, &mut out, &Limits::default(), &mut |n| sent += n).unwrap();
    assert_eq!(sent, packed.bytes());
    assert_eq!(packed.bytes(), 6 + 300_000 + 9 + 1);
    // Deterministic: the same tree packs to the same bytes.
    assert_eq!(pack_vec(&src, &Limits::default()).1, out);

    let dst = tmp.path().join("dst");
    fs::create_dir(&dst).unwrap();
    let mut got = 0;
    let staged = unpack(&out[..], &dst, &Limits::default(), &mut |n| got += n).unwrap();
    assert_eq!(got, packed.bytes());
    assert_eq!(staged.manifest(), &packed);
    assert_eq!(staged.manifest().digest(), packed.digest());
    assert_eq!(staged.target(), dst.join("T"));
    // Nothing under the final name before the commit.
    assert!(!dst.join("T").exists());
    let done = staged.commit().unwrap();
    assert_eq!(done, dst.join("T"));
    assert_eq!(listing(&dst), listing(&tmp.path().join("src")));
    for f in packed.files.keys() {
        let rel = f.strip_prefix("T/").unwrap();
        assert_eq!(
            fs::read(src.join(rel)).unwrap(),
            fs::read(done.join(rel)).unwrap()
        );
    }
    let mode = fs::metadata(done.join("sub/private"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_file_copies_to_a_new_name_and_replaces_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("data.bin");
    fs::write(&src, b"payload").unwrap();
    let (m, out) = pack_vec(&src, &Limits::default());
    let m = m.unwrap();
    assert_eq!(m.top, "data.bin");
    assert!(m.dirs.is_empty());
    let target = tmp.path().join("renamed.bin");
    fs::write(&target, b"old").unwrap();
    let done = unpack_bytes(&out, &target).unwrap().commit().unwrap();
    assert_eq!(done, target);
    assert_eq!(fs::read(&target).unwrap(), b"payload");
    // Into an existing folder: keeps its name.
    let dir = tmp.path().join("into");
    fs::create_dir(&dir).unwrap();
    let done = unpack_bytes(&out, &dir).unwrap().commit().unwrap();
    assert_eq!(done, dir.join("data.bin"));
    assert_eq!(
        listing(tmp.path()),
        ["data.bin", "into", "into/data.bin", "renamed.bin"]
    );
}

#[test]
fn pack_refuses_before_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("T");
    tree(&src);
    let tight_bytes = Limits {
        max_bytes: 1000,
        ..Limits::default()
    };
    let tight_entries = Limits {
        max_entries: 3,
        ..Limits::default()
    };
    for (what, limits) in [("bytes", tight_bytes), ("entries", tight_entries)] {
        let (m, out) = pack_vec(&src, &limits);
        assert!(
            matches!(m, Err(LocalError::Refused { .. })),
            "{what}: {m:?}"
        );
        assert!(out.is_empty(), "{what}");
    }
    let (m, _) = pack_vec(&src, &tight_bytes);
    assert!(
        m.unwrap_err()
            .to_string()
            .contains("would pass the 1000 bytes transfer limit")
    );

    symlink("/etc/passwd", src.join("sub/link")).unwrap();
    let (m, out) = pack_vec(&src, &Limits::default());
    assert!(matches!(m, Err(LocalError::Symlink { path }) if path == src.join("sub/link")));
    assert!(out.is_empty());
    fs::remove_file(src.join("sub/link")).unwrap();

    let link = tmp.path().join("L");
    symlink(&src, &link).unwrap();
    let (m, out) = pack_vec(&link, &Limits::default());
    assert!(matches!(m, Err(LocalError::Symlink { .. })), "{m:?}");
    assert!(out.is_empty());

    let fifo = src.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let (m, out) = pack_vec(&src, &Limits::default());
    assert!(
        matches!(m, Err(LocalError::Special { kind: "fifo", .. })),
        "{m:?}"
    );
    assert!(out.is_empty());
    fs::remove_file(&fifo).unwrap();

    fs::write(src.join("bad\nname"), b"").unwrap();
    let (m, out) = pack_vec(&src, &Limits::default());
    assert!(
        matches!(
            &m,
            Err(LocalError::Refused {
                source: StreamError::Refused {
                    why: Refusal::ControlCharacter,
                    ..
                },
                ..
            })
        ),
        "{m:?}"
    );
    assert!(out.is_empty());
}

#[test]
fn unpack_refusals_leave_nothing() {
    let dir = |name: &[u8]| raw_entry(name, b'5', b"");
    let file = |name: &[u8]| raw_entry(name, b'0', b"evil");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("dotdot", [file(b"../x"), end()].concat()),
        (
            "inner dotdot",
            [dir(b"T/"), file(b"T/../../x"), end()].concat(),
        ),
        ("absolute", [file(b"/etc/x"), end()].concat()),
        (
            "symlink",
            [dir(b"T/"), raw_entry(b"T/l", b'2', b""), end()].concat(),
        ),
        (
            "outside top",
            [dir(b"T/"), file(b"T/a"), file(b"U/b"), end()].concat(),
        ),
        (
            "truncated",
            [dir(b"T/"), file(b"T/a")].concat()[..1100].to_vec(),
        ),
    ];
    for (what, bytes) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let err = unpack_bytes(&bytes, tmp.path()).unwrap_err();
        assert!(matches!(err, LocalError::Refused { .. }), "{what}: {err}");
        assert!(
            listing(tmp.path()).is_empty(),
            "{what}: {:?}",
            listing(tmp.path())
        );
    }
}

#[test]
fn a_cut_transfer_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src/T");
    tree(&src);
    let (_, out) = pack_vec(&src, &Limits::default());
    let dst = tmp.path().join("dst");
    fs::create_dir(&dst).unwrap();
    for cut in [100, out.len() / 2, out.len() - 1500] {
        let err = unpack_bytes(&out[..cut], &dst).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
        assert!(listing(&dst).is_empty());
    }
    // Staged and dropped without commit: gone too.
    let staged = unpack_bytes(&out, &dst).unwrap();
    assert_eq!(fs::read_dir(&dst).unwrap().count(), 1, "the staging folder");
    drop(staged);
    assert!(listing(&dst).is_empty());
}

#[test]
fn existing_targets_that_cannot_be_replaced_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src/T");
    tree(&src);
    let (_, folder) = pack_vec(&src, &Limits::default());
    let dst = tmp.path().join("dst");
    fs::create_dir_all(dst.join("T")).unwrap();
    let err = unpack_bytes(&folder, &dst).unwrap_err();
    assert!(
        matches!(&err, LocalError::TargetIsDir { path } if *path == dst.join("T")),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}: already exists as a folder; remove it or copy to another name",
            dst.join("T").display()
        )
    );
    assert_eq!(listing(&dst), ["T"]);
    // A folder copy onto an existing file.
    let file = tmp.path().join("f");
    fs::write(&file, b"keep").unwrap();
    let err = unpack_bytes(&folder, &file).unwrap_err();
    assert!(matches!(err, LocalError::TargetIsFile { .. }), "{err}");
    assert_eq!(fs::read(&file).unwrap(), b"keep");
    // A target whose folder does not exist.
    let err = unpack_bytes(&folder, &tmp.path().join("no/such")).unwrap_err();
    assert!(matches!(err, LocalError::NoParent { .. }), "{err}");
    // A folder appearing at the target between unpack and commit.
    let staged = unpack_bytes(&folder, &tmp.path().join("late")).unwrap();
    fs::create_dir(tmp.path().join("late")).unwrap();
    assert!(matches!(
        staged.commit(),
        Err(LocalError::TargetIsDir { .. })
    ));
    assert!(!listing(tmp.path()).iter().any(|n| n.contains(".exo-part-")));
}
