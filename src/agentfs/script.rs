//! What runs inside the pod (pure): POSIX `sh` scripts for each volume
//! operation, and parsers for what they print.
//!
//! Every script is run as `sh -c SCRIPT sh NAMESPACE POD MOUNT ARGS...`:
//! arguments are never pasted into the script text. `EXO_POD_ROOT`, when
//! the exec environment sets it, prefixes the mount path (the kwok test
//! environment runs execs on the host; see `tests/testenv/provisioner`).
//! Paths are walked one folder at a time from the volume's root and a
//! symbolic link anywhere on the way is refused, so no operation reaches
//! outside the volume through a link planted in it. Needs `sh`, `stat`,
//! `df`, `awk`, `tar`, `find`, `sha256sum`, `mv`, `ls` (busybox has them all).

use crate::wire::fs::{EntryKind, FsEntry, FsUsage};

/// The prologue every script starts with: `$R` is the volume root, `$@`
/// the operation's own arguments, and `go PATH [mk]` changes into PATH
/// (creating missing folders with `mk`).
const PROLOGUE: &str = r#"set -f
R="${EXO_POD_ROOT:+$EXO_POD_ROOT/$1/$2}$3"
shift 3
go() {
  cd -- "$R" 2>/dev/null || { echo "exo: the volume is not mounted in this pod" >&2; exit 3; }
  o=$IFS; IFS=/
  for c in $1; do
    [ -n "$c" ] || continue
    if [ -L "$c" ]; then echo "exo: $1: $c is a symbolic link; links are not followed" >&2; exit 4; fi
    if [ ! -e "$c" ] && [ "$2" = mk ]; then mkdir -- "$c" || exit 5; fi
    if [ ! -d "$c" ]; then
      if [ -e "$c" ]; then echo "exo: $1: $c is not a folder" >&2; else echo "exo: $1: no such file or folder" >&2; fi
      exit 3
    fi
    cd -- "$c" || exit 3
  done
  IFS=$o
}
"#;

/// `ls PATH`: a `usage <total> <used> <avail>` line (KiB, from `df`),
/// then one record per entry: `<raw mode hex> <size> <mtime>\n<name>\0`.
const LS: &str = r#"go "$1"
printf 'usage '
df -Pk . | awk 'NR==2 {print $2, $3, $4}'
set +f
for f in .* *; do
  case $f in .|..) continue;; esac
  [ -e "$f" ] || [ -L "$f" ] || continue
  stat -c '%f %s %Y' -- "$f" && printf '%s\0' "$f"
done
"#;

/// `mkdir PATH`, parents included.
const MKDIR: &str = r#"go "$1" mk
"#;

/// `touch PARENT NAME`.
const TOUCH: &str = r#"go "$1"
if [ -L "$2" ]; then echo "exo: $2 is a symbolic link; links are not followed" >&2; exit 4; fi
if [ -d "$2" ]; then echo "exo: $2 is a folder" >&2; exit 5; fi
touch -- "$2"
"#;

/// `stage ID TOP STALL`: unpack the tar on stdin into `.exo-part-ID` at
/// the volume root, then print the `sha256sum` listing of what landed.
/// `tar` runs as its own process whose pid is kept in `.exo-part-ID.pid`,
/// so an abort can stop it even where closing the exec's stdin does not
/// reach it. For the same reason a sender that vanishes may never end
/// tar's input: a guard stops `tar` once the staging folder has not grown
/// for STALL seconds, and the folder goes. Staging folders an hour old are
/// left from copies cut off before their clean-up ran; they go first.
const STAGE: &str = r#"go /
find . -maxdepth 1 -name '.exo-part-*' -mmin +60 -exec rm -rf -- {} + 2>/dev/null
S=".exo-part-$1"
mkdir -- "$S" || exit 5
exec 3<&0
( cd -- "$S" && exec tar -x -o -f - ) <&3 &
p=$!
echo "$p" > "$S.pid"
( n=0; last=
  while kill -0 "$p" 2>/dev/null; do
    sleep 1
    now=$(du -sk "$S" 2>/dev/null)
    if [ "$now" = "$last" ]; then n=$((n+1)); else n=0; last=$now; fi
    if [ "$n" -ge "$3" ]; then kill "$p" 2>/dev/null; exit 0; fi
  done ) </dev/null >/dev/null 2>&1 &
w=$!
if ! wait "$p"; then kill "$w" 2>/dev/null; cd -- "$R" && rm -rf -- "$S" "$S.pid"; echo "exo: unpacking failed or stalled" >&2; exit 6; fi
kill "$w" 2>/dev/null
rm -f -- "$S.pid"
cd -- "$S" && find "$2" -type f -exec sha256sum -- {} +
"#;

/// `commit ID TOP PARENT NAME`: move the staged TOP to PARENT/NAME, or
/// into it when that is an existing folder (cp's rule). Prints
/// `into` or `as` so the caller knows the final path.
const COMMIT: &str = r#"go "$3" mk
d=$4; how=as
if [ -d "$d" ] && [ ! -L "$d" ]; then cd -- "$d" || exit 3; d=$2; how=into; fi
if [ -L "$d" ]; then echo "exo: $d is a symbolic link; it is not replaced" >&2; exit 4; fi
if [ -d "$d" ]; then echo "exo: $d exists as a folder; remove it first or copy to another name" >&2; exit 5; fi
mv -f -- "$R/.exo-part-$1/$2" "$d" || exit 6
rmdir -- "$R/.exo-part-$1"
echo "$how"
"#;

/// `abort ID`: stop the copy's `tar` if it still runs, remove its
/// staging folder.
const ABORT: &str = r#"cd -- "$R" || exit 3
if [ -f ".exo-part-$1.pid" ]; then kill "$(cat ".exo-part-$1.pid")" 2>/dev/null; fi
rm -rf -- ".exo-part-$1" ".exo-part-$1.pid"
"#;

/// A shell function, `foreign`, that prints the first entry at the volume
/// root (the current folder) that makes it not empty: anything but the
/// staging folders of copies and an empty `lost+found`. One rule for both
/// [`EMPTY`] and [`COMMIT_ROOT`]. (A macro, so `concat!` can join it.)
macro_rules! foreign_fn {
    () => {
        r#"foreign() {
  set +f
  for f in .* *; do
    case $f in .|..|.exo-part-*) continue;; esac
    [ -e "$f" ] || [ -L "$f" ] || continue
    if [ "$f" = lost+found ] && [ -d "$f" ] && [ ! -L "$f" ] && [ -z "$(ls -A -- "$f" 2>/dev/null)" ]; then continue; fi
    printf '%s\n' "$f"; break
  done
  set -f
}
"#
    };
}

/// `empty`: prints the first entry that makes the volume not empty
/// (nothing when it is empty).
const EMPTY: &str = concat!("go /\n", foreign_fn!(), "foreign\n");

/// `commit-root ID TOP`: a restore's end. The volume must still be empty
/// (the same rule as [`EMPTY`]); then everything in the staged TOP moves
/// to the volume's root (an empty folder there, `lost+found`, is
/// replaced), and the staging folder goes.
const COMMIT_ROOT: &str = concat!(
    "go /\n",
    foreign_fn!(),
    r#"x=$(foreign)
if [ -n "$x" ]; then echo "exo: the volume is not empty: it holds $x" >&2; exit 7; fi
S="$R/.exo-part-$1/$2"
if [ -L "$S" ] || [ ! -d "$S" ]; then echo "exo: nothing staged under $2" >&2; exit 6; fi
cd -- "$S" || exit 6
set +f
for f in .* *; do
  case $f in .|..) continue;; esac
  [ -e "$f" ] || [ -L "$f" ] || continue
  if [ -e "$R/$f" ] || [ -L "$R/$f" ]; then
    rmdir -- "$R/$f" 2>/dev/null || { echo "exo: $f exists in the volume" >&2; exit 7; }
  fi
  mv -f -- "$f" "$R/$f" || exit 6
done
cd -- "$R" && rm -rf -- ".exo-part-$1"
"#
);

/// `pack PARENT NAME`: a tar of PARENT/NAME on stdout. The script then
/// waits for a line (or the end) on stdin, which the reader sends once it
/// has seen the archive's end: the exec's exit status can then never
/// overtake the archive's last bytes on their way out.
const PACK: &str = r#"go "$1"
if [ ! -e "$2" ] && [ ! -L "$2" ]; then echo "exo: $2: no such file or folder" >&2; exit 3; fi
tar -c -f - -- "$2" || exit 6
read -r _ || :
"#;

/// `pack-volume`: a tar of the whole volume on stdout, its one top entry
/// the volume's own folder (its physical name: a mount reached through a
/// link is packed as the folder, not as the link); then, like `pack`,
/// waits for a line on stdin (a backup reads the volume while its agents
/// keep running).
const PACK_VOLUME: &str = r#"cd -- "$R" 2>/dev/null || { echo "exo: the volume is not mounted in this pod" >&2; exit 3; }
cd -P -- . || exit 3
t=${PWD##*/}
cd -- .. || exit 3
tar -c -f - -- "$t" || exit 6
read -r _ || :
"#;

/// `sums PARENT NAME`: the `sha256sum` listing of NAME's files.
const SUMS: &str = r#"go "$1"
find "$2" -type f -exec sha256sum -- {} +
"#;

/// One operation and its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Ls,
    Mkdir,
    Touch,
    Stage,
    Commit,
    Abort,
    Pack,
    PackVolume,
    Sums,
    Empty,
    CommitRoot,
}

impl Op {
    fn body(self) -> &'static str {
        match self {
            Op::Ls => LS,
            Op::Mkdir => MKDIR,
            Op::Touch => TOUCH,
            Op::Stage => STAGE,
            Op::Commit => COMMIT,
            Op::Abort => ABORT,
            Op::Pack => PACK,
            Op::PackVolume => PACK_VOLUME,
            Op::Sums => SUMS,
            Op::Empty => EMPTY,
            Op::CommitRoot => COMMIT_ROOT,
        }
    }

    /// The full command line for an exec.
    pub fn command(self, namespace: &str, pod: &str, mount: &str, args: &[&str]) -> Vec<String> {
        let mut cmd = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!("{PROLOGUE}{}", self.body()),
            "sh".to_owned(),
            namespace.to_owned(),
            pod.to_owned(),
            mount.to_owned(),
        ];
        cmd.extend(args.iter().map(|a| (*a).to_owned()));
        cmd
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected output from the pod's {what}: {detail}")]
pub struct ParseError {
    pub what: &'static str,
    pub detail: String,
}

fn bad(what: &'static str, detail: impl Into<String>) -> ParseError {
    ParseError {
        what,
        detail: detail.into(),
    }
}

/// Parses what [`Op::Ls`] prints. Entries come back sorted by name.
pub fn parse_ls(out: &[u8]) -> Result<(FsUsage, Vec<FsEntry>), ParseError> {
    let text = String::from_utf8_lossy(out);
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let nums: Vec<u64> = first
        .strip_prefix("usage ")
        .ok_or_else(|| bad("df", first.chars().take(80).collect::<String>()))?
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| bad("df", first.to_owned()))?;
    let [total, used, avail] = nums[..] else {
        return Err(bad("df", first.to_owned()));
    };
    let usage = FsUsage {
        total_bytes: total * 1024,
        used_bytes: used * 1024,
        free_bytes: avail * 1024,
    };
    let mut entries = Vec::new();
    for rec in rest.split('\0').filter(|r| !r.trim().is_empty()) {
        let rec = rec.trim_start_matches('\n');
        let (meta, name) = rec
            .split_once('\n')
            .ok_or_else(|| bad("stat", rec.chars().take(80).collect::<String>()))?;
        let mut it = meta.split_whitespace();
        let (Some(mode), Some(size), Some(mtime)) = (it.next(), it.next(), it.next()) else {
            return Err(bad("stat", meta.to_owned()));
        };
        let mode = u32::from_str_radix(mode, 16).map_err(|_| bad("stat", meta.to_owned()))?;
        let kind = match mode & 0o170000 {
            0o100000 => EntryKind::File,
            0o040000 => EntryKind::Dir,
            0o120000 => EntryKind::Symlink,
            _ => EntryKind::Other,
        };
        entries.push(FsEntry {
            name: name.to_owned(),
            kind,
            size: size.parse().map_err(|_| bad("stat", meta.to_owned()))?,
            mtime: mtime.parse().map_err(|_| bad("stat", meta.to_owned()))?,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((usage, entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ls_output_parses_usage_kinds_and_odd_names() {
        let out = b"usage 1000 250 750\n81a4 12 1700000000\nb.txt\x0041ed 4096 1700000001\na dir\x00a1ff 5 1700000002\nline\nbreak\x00";
        let (usage, entries) = parse_ls(out).unwrap();
        assert_eq!(usage.total_bytes, 1_024_000);
        assert_eq!(usage.used_bytes, 256_000);
        assert_eq!(usage.free_bytes, 768_000);
        let got: Vec<_> = entries.iter().map(|e| (e.name.as_str(), e.kind)).collect();
        assert_eq!(
            got,
            [
                ("a dir", EntryKind::Dir),
                ("b.txt", EntryKind::File),
                ("line\nbreak", EntryKind::Symlink)
            ]
        );
        assert_eq!(entries[1].size, 12);
    }

    #[test]
    fn ls_refuses_garbage() {
        assert!(parse_ls(b"sh: df: not found\n").is_err());
        assert!(parse_ls(b"usage 1 2\n").is_err());
        assert!(parse_ls(b"usage 1 2 3\nzz 1 1\nx\x00").is_err());
    }

    #[test]
    fn arguments_are_not_pasted_into_the_script() {
        let cmd = Op::Touch.command("ns", "pod", "/mnt/fs/x", &["/", "$(rm -rf /)"]);
        assert_eq!(cmd[0], "sh");
        assert!(!cmd[2].contains("rm -rf /)"));
        assert_eq!(cmd.last().map(String::as_str), Some("$(rm -rf /)"));
    }

    /// Runs `op` with `sh` here, the volume being `root` (as kwok's exec
    /// does): (exit code, stdout, stderr).
    fn run_here(op: Op, root: &std::path::Path, args: &[&str]) -> (i32, String, String) {
        let cmd = op.command("ns", "pod", &root.display().to_string(), args);
        let out = std::process::Command::new(&cmd[0])
            .args(&cmd[1..])
            .env_remove("EXO_POD_ROOT")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// A restore fills only an empty volume (staging folders and an empty
    /// `lost+found` do not count), checked again at its commit, which
    /// moves the staged top's content to the root.
    #[test]
    fn a_restore_commits_into_an_empty_root_only() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("lost+found")).unwrap();
        let staged = root.join(".exo-part-r1/vol");
        std::fs::create_dir_all(staged.join("d")).unwrap();
        std::fs::write(staged.join("a.txt"), b"alpha").unwrap();
        std::fs::write(staged.join(".hidden"), b"h").unwrap();
        std::fs::write(staged.join("d/b"), b"beta").unwrap();
        assert_eq!(run_here(Op::Empty, root, &[]).1, "");

        std::fs::write(root.join(".junk"), b"x").unwrap();
        assert_eq!(run_here(Op::Empty, root, &[]).1, ".junk\n");
        let (code, _, err) = run_here(Op::CommitRoot, root, &["r1", "vol"]);
        assert_eq!(code, 7, "{err}");
        assert!(err.contains("not empty: it holds .junk"), "{err}");
        assert!(staged.join("a.txt").exists(), "nothing moved");

        std::fs::remove_file(root.join(".junk")).unwrap();
        let (code, _, err) = run_here(Op::CommitRoot, root, &["r1", "vol"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"alpha");
        assert_eq!(std::fs::read(root.join(".hidden")).unwrap(), b"h");
        assert_eq!(std::fs::read(root.join("d/b")).unwrap(), b"beta");
        assert!(!root.join(".exo-part-r1").exists());
        assert!(root.join("lost+found").is_dir());
        assert!(!run_here(Op::Empty, root, &[]).1.is_empty(), "filled now");
    }
}
