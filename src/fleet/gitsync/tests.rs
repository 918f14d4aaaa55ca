//! The checkout's tests: URL policy, errors, and writing commits out.

use super::*;
use std::collections::BTreeMap;
use std::sync::Arc;

#[test]
fn url_policy() {
    assert!(check_url("https://git.example.com/fleet.git", false).is_ok());
    for bad in [
        "http://git.example.com/fleet.git",
        "git://git.example.com/fleet.git",
        "file:///srv/fleet",
        "https://127.0.0.1/fleet.git",
        "https://10.1.2.3/fleet.git",
        "https://192.168.0.10:8443/fleet.git",
        "https://[::1]/fleet.git",
        "https://localhost/fleet.git",
        "https://169.254.169.254/latest",
        "/srv/fleet",
    ] {
        assert!(check_url(bad, false).is_err(), "{bad}");
    }
    assert!(check_url("git://127.0.0.1:29418/fleet.git", true).is_ok());
    let err = check_url("https://user:hunter2@git.example.com/f.git", true)
        .unwrap_err()
        .to_string();
    assert!(!err.contains("hunter2"), "{err}");
}

/// The user reads git2's message alone; the git2 error is kept as the
/// source.
#[test]
fn a_failed_fetch_keeps_the_git_error_as_its_source() {
    let cache = tempfile::tempdir().unwrap();
    let missing = cache.path().join("no-such-repo");
    let source = source_at(format!("file://{}", missing.display()));
    let e = sync(&source, cache.path()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("fetch from {} failed: ", source.url)),
        "{text}"
    );
    assert!(!text.contains("class="), "{text}");
    let git = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<git2::Error>());
    assert!(git.is_some_and(|g| text.ends_with(g.message())), "{e:?}");
}

/// Commits `files` (path, content) as the whole tree of `main`.
fn commit_tree<'r>(repo: &'r Repository, files: &[(&str, &str)]) -> git2::Commit<'r> {
    let dir = repo.workdir().unwrap();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_name() == ".git" {
            continue;
        }
        if e.path().is_dir() {
            std::fs::remove_dir_all(e.path()).unwrap();
        } else {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    for (path, content) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    let mut index = repo.index().unwrap();
    index.clear().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@exo.invalid").unwrap();
    let parent = repo
        .find_reference("refs/heads/main")
        .ok()
        .and_then(|r| r.peel_to_commit().ok());
    let parents: Vec<_> = parent.iter().collect();
    let id = repo
        .commit(Some("refs/heads/main"), &sig, &sig, "c", &tree, &parents)
        .unwrap();
    repo.find_commit(id).unwrap()
}

fn read_all(dir: &Path, prefix: &str, out: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if e.path().is_dir() {
            read_all(&e.path(), &format!("{name}/"), out);
        } else {
            out.insert(name, std::fs::read_to_string(e.path()).unwrap());
        }
    }
}

/// The previous checkout is patched: unchanged folders and unchanged
/// files of a changed folder stay as they are, and every checkout holds
/// exactly its commit's files (a file that became a folder and back, one
/// removed, one added), also when git goes back to an older commit.
#[test]
fn each_checkout_holds_its_commit_with_unchanged_folders_moved_over() {
    let origin = tempfile::tempdir().unwrap();
    let repo = Repository::init(origin.path()).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let one: &[(&str, &str)] = &[
        ("manifests/a/keep.yaml", "k1"),
        ("manifests/a/x.yaml", "a1"),
        ("manifests/b/y.yaml", "b1"),
        ("manifests/b/deep/z.yaml", "z1"),
        ("releases/r.yaml", "r1"),
        ("swap", "a file"),
    ];
    let two: &[(&str, &str)] = &[
        ("manifests/a/keep.yaml", "k1"),
        ("manifests/a/x.yaml", "a2"),
        ("manifests/b/y.yaml", "b1"),
        ("manifests/b/deep/z.yaml", "z1"),
        ("manifests/c/new.yaml", "c1"),
        ("swap/inner.yaml", "now a folder"),
    ];
    use std::os::unix::fs::MetadataExt;
    let inode = |c: &Checkout, f: &str| std::fs::metadata(c.path.join(f)).unwrap().ino();
    let mut seen: Vec<Ids> = Vec::new();
    let mut inodes = Vec::new();
    for files in [one, two, one] {
        let known = seen.last();
        let c = materialise(&repo, &commit_tree(&repo, files), cache.path(), 1024, known).unwrap();
        let mut got = BTreeMap::new();
        read_all(&c.path, "", &mut got);
        assert_eq!(
            got.remove(".exo-complete").as_deref(),
            Some(c.commit.as_str())
        );
        let want: BTreeMap<_, _> = files
            .iter()
            .map(|(p, c)| ((*p).to_owned(), (*c).to_owned()))
            .collect();
        assert_eq!(got, want, "checkout of {}", c.commit);
        let left: Vec<_> = std::fs::read_dir(cache.path().join("checkouts"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from(&c.commit)]);
        inodes.push((
            inode(&c, "manifests/b/deep/z.yaml"),
            inode(&c, "manifests/a/keep.yaml"),
        ));
        seen.push(c.ids);
    }
    // manifests/b did not change: moved over, not written again.
    assert_eq!(inodes[0].0, inodes[1].0);
    assert_eq!(inodes[1].0, inodes[2].0);
    // manifests/a changed, its keep.yaml did not: left as it was.
    assert_eq!(inodes[0].1, inodes[1].1);
    assert_eq!(inodes[1].1, inodes[2].1);
    assert_eq!(seen[0].get("manifests/b"), seen[1].get("manifests/b"));
    assert_ne!(seen[0].get("manifests/a"), seen[1].get("manifests/a"));
    assert_eq!(
        seen[0].get("manifests/a/keep.yaml"),
        seen[1].get("manifests/a/keep.yaml")
    );
    assert_ne!(
        seen[0].get("manifests/a/x.yaml"),
        seen[1].get("manifests/a/x.yaml")
    );
    assert!(seen[1].get("manifests/c/new.yaml").is_some());
    // An unchanged folder's file list is shared, not listed again.
    assert!(Arc::ptr_eq(&seen[0].files["b"], &seen[1].files["b"]));
    // Its sizes were learnt when it was moved over.
    let b = seen[1].get("manifests/b").unwrap();
    assert_eq!(seen[1].sizes[&b].bytes, 4);
}

/// A folder moved over still counts against the size limits.
#[test]
fn a_folder_moved_over_counts_against_the_limits() {
    let origin = tempfile::tempdir().unwrap();
    let repo = Repository::init(origin.path()).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let files = |x: &'static str| {
        [
            ("manifests/a/big.yaml", "0123456789"),
            ("manifests/a/s", "1"),
            ("x", x),
        ]
    };
    let one = commit_tree(&repo, &files("1"));
    let first = materialise(&repo, &one, cache.path(), 1024, None).unwrap();
    let two = commit_tree(&repo, &files("2"));
    // Read from the object headers the first time it is moved over...
    let e = materialise(&repo, &two, cache.path(), 5, Some(&first.ids))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("manifests/a/big.yaml") && e.contains("file limit"),
        "{e}"
    );
    // A refused commit leaves no checkout to patch: the next is written
    // afresh, and the one after it moves the folder over and learns it.
    let second = materialise(&repo, &two, cache.path(), 1024, Some(&first.ids)).unwrap();
    let three = commit_tree(&repo, &files("3"));
    let third = materialise(&repo, &three, cache.path(), 1024, Some(&second.ids)).unwrap();
    // (The highest unchanged tree is the one remembered: `manifests`.)
    let m = three.tree().unwrap().get_name("manifests").unwrap().id();
    assert_eq!(
        third.ids.sizes[&m],
        Sizes {
            bytes: 11,
            largest: Some((10, "a/big.yaml".into()))
        }
    );
    // ...and from what the last checkout learnt after that: the same
    // refusal, naming the same file.
    let four = commit_tree(&repo, &files("4"));
    let e = materialise(&repo, &four, cache.path(), 5, Some(&third.ids))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("manifests/a/big.yaml") && e.contains("file limit"),
        "{e}"
    );
    let third = materialise(&repo, &three, cache.path(), 1024, Some(&second.ids)).unwrap();
    // The total limit counts a remembered folder's bytes.
    let mut planted = third.ids.clone();
    planted.sizes.insert(
        m,
        Sizes {
            bytes: MAX_TOTAL_BYTES + 1,
            largest: Some((1, "s".into())),
        },
    );
    let e = materialise(&repo, &four, cache.path(), 1024, Some(&planted))
        .unwrap_err()
        .to_string();
    assert!(e.contains("manifests") && e.contains("exceeds"), "{e}");
}

#[test]
fn credentials_debug_is_redacted() {
    let c = Credentials {
        username: "u".into(),
        password: "hunter2".into(),
    };
    assert!(!format!("{c:?}").contains("hunter2"));
}

/// `git daemon` serving one bare repository over `git://` on a free
/// loopback port, pushes allowed; stopped when dropped.
struct GitDaemon {
    child: std::process::Child,
    port: u16,
    name: String,
}

impl GitDaemon {
    fn serve(repo: &Path) -> GitDaemon {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let base = repo.parent().unwrap();
        // The daemon itself, not `git daemon`: that one runs it as a child,
        // which killing `git` would leave behind, holding the test's output.
        let exec_path = std::process::Command::new("git")
            .arg("--exec-path")
            .output()
            .expect("git (installed by scripts/deps)");
        let exec_path = String::from_utf8(exec_path.stdout).unwrap();
        let child = std::process::Command::new(Path::new(exec_path.trim()).join("git-daemon"))
            .args(["--reuseaddr", "--export-all", "--enable=receive-pack"])
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("git-daemon (git is installed by scripts/deps)");
        let up = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(25));
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "git daemon did not listen on {port}");
        GitDaemon {
            child,
            port,
            name: repo.file_name().unwrap().to_string_lossy().into_owned(),
        }
    }

    fn url(&self) -> String {
        format!("git://127.0.0.1:{}/{}", self.port, self.name)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Commits `files` into the bare repository `repo` on `main`, on top of
/// its head.
fn commit_bare(repo: &Repository, files: &[(&str, &str)], message: &str) -> git2::Oid {
    let parent = repo
        .find_reference("refs/heads/main")
        .ok()
        .and_then(|r| r.peel_to_commit().ok());
    let base = match &parent {
        Some(p) => p.tree().unwrap(),
        None => repo
            .find_tree(repo.treebuilder(None).unwrap().write().unwrap())
            .unwrap(),
    };
    let mut update = git2::build::TreeUpdateBuilder::new();
    for (path, content) in files {
        let blob = repo.blob(content.as_bytes()).unwrap();
        update.upsert(*path, blob, git2::FileMode::Blob);
    }
    let tree = repo
        .find_tree(update.create_updated(repo, &base).unwrap())
        .unwrap();
    let sig = git2::Signature::now("t", "t@exo.invalid").unwrap();
    let parents: Vec<_> = parent.iter().collect();
    repo.commit(
        Some("refs/heads/main"),
        &sig,
        &sig,
        message,
        &tree,
        &parents,
    )
    .unwrap()
}

fn file_at(repo: &Repository, commit: git2::Oid, path: &str) -> String {
    let tree = repo.find_commit(commit).unwrap().tree().unwrap();
    let blob = tree
        .get_path(Path::new(path))
        .unwrap()
        .to_object(repo)
        .unwrap()
        .peel_to_blob()
        .unwrap();
    String::from_utf8(blob.content().to_vec()).unwrap()
}

fn main_of(repo: &Repository) -> git2::Oid {
    repo.find_reference("refs/heads/main")
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .id()
}

/// The operator's own commit: one file changed on the fetched head and
/// pushed; the same edit again commits nothing; a push that lost a race is
/// made again on the new head; a refused edit names the file.
#[test]
fn a_one_file_commit_is_pushed_on_the_head_and_retried_after_a_race() {
    let origin_dir = tempfile::tempdir().unwrap();
    let origin = Repository::init_bare(origin_dir.path()).unwrap();
    let first = commit_bare(
        &origin,
        &[
            ("releases/waves.yaml", "canary: r1\n"),
            ("manifests/a/x.yaml", "x"),
        ],
        "first",
    );
    let cache = tempfile::tempdir().unwrap();
    // The mirror fetches shallow, which git's local transport refuses: a
    // real `git daemon` serves the bare repository, pushes allowed.
    let daemon = GitDaemon::serve(origin_dir.path());
    let source = source_at(daemon.url());
    let to_r2 = |old: Option<&str>| -> Result<String, std::convert::Infallible> {
        Ok(old.unwrap_or_default().replace("r1", "r2"))
    };
    let who = ("exo-operator", "exo-operator@exo.invalid");
    let Committed::Pushed(id) = commit_file(
        &source,
        cache.path(),
        "releases/waves.yaml",
        to_r2,
        "promote r2",
        who,
    )
    .unwrap() else {
        panic!("the edit changes the file: a commit is pushed");
    };
    let id = git2::Oid::from_str(&id).unwrap();
    assert_eq!(main_of(&origin), id);
    let pushed = origin.find_commit(id).unwrap();
    assert_eq!(pushed.parent_id(0).unwrap(), first);
    assert_eq!(pushed.message().ok(), Some("promote r2"));
    assert_eq!(file_at(&origin, id, "releases/waves.yaml"), "canary: r2\n");
    assert_eq!(file_at(&origin, id, "manifests/a/x.yaml"), "x");

    // Nothing to change: no commit.
    assert_eq!(
        commit_file(
            &source,
            cache.path(),
            "releases/waves.yaml",
            to_r2,
            "again",
            who
        )
        .unwrap(),
        Committed::Unchanged(id.to_string())
    );
    assert_eq!(main_of(&origin), id);

    // Someone else pushes between our fetch and our push, once.
    let raced = std::cell::Cell::new(false);
    let racing = |old: Option<&str>| -> Result<String, std::convert::Infallible> {
        if !raced.replace(true) {
            commit_bare(&origin, &[("manifests/a/x.yaml", "y")], "someone else");
        }
        Ok(old.unwrap_or_default().replace("r2", "r3"))
    };
    let Committed::Pushed(third) = commit_file(
        &source,
        cache.path(),
        "releases/waves.yaml",
        racing,
        "promote r3",
        who,
    )
    .unwrap() else {
        panic!("a commit after the race");
    };
    let third = git2::Oid::from_str(&third).unwrap();
    assert_eq!(main_of(&origin), third);
    let parent = origin.find_commit(third).unwrap().parent_id(0).unwrap();
    assert_eq!(
        origin.find_commit(parent).unwrap().message().ok(),
        Some("someone else"),
        "made again on the head that won the race"
    );
    assert_eq!(file_at(&origin, third, "manifests/a/x.yaml"), "y");
    assert_eq!(
        file_at(&origin, third, "releases/waves.yaml"),
        "canary: r3\n"
    );

    // A refused edit: the path and the reason, nothing pushed.
    let refuse = |_: Option<&str>| -> Result<String, &str> { Err("no wave canary") };
    let e = commit_file(
        &source,
        cache.path(),
        "releases/waves.yaml",
        refuse,
        "x",
        who,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("releases/waves.yaml") && e.contains("no wave canary"),
        "{e}"
    );
    assert_eq!(main_of(&origin), third);
}

/// `full_history` (a Fleet verifying `all-since`): a mirror fetched
/// shallow before is deepened, so the commits since the applied one are
/// there to walk; without it the mirror stays shallow.
#[test]
fn a_full_history_fetch_deepens_a_shallow_mirror() {
    let origin_dir = tempfile::tempdir().unwrap();
    let origin = Repository::init_bare(origin_dir.path()).unwrap();
    let first = commit_bare(&origin, &[("a", "1")], "first");
    let second = commit_bare(&origin, &[("a", "2")], "second");
    let daemon = GitDaemon::serve(origin_dir.path());
    let cache = tempfile::tempdir().unwrap();
    let mut source = source_at(daemon.url());
    let fetched = fetch(&source, cache.path()).unwrap();
    assert_eq!(fetched.head(), second);
    assert!(fetched.repo().is_shallow());
    assert!(fetched.repo().find_commit(first).is_err(), "depth 1");
    let third = commit_bare(&origin, &[("a", "3")], "third");
    source.full_history = true;
    let fetched = fetch(&source, cache.path()).unwrap();
    assert_eq!(fetched.head(), third);
    assert!(!fetched.repo().is_shallow());
    assert!(
        fetched.repo().graph_descendant_of(third, first).unwrap(),
        "the whole history"
    );
}

/// `main` of `url`, insecure allowed, the default file limit, shallow.
fn source_at(url: String) -> Source {
    Source {
        url,
        branch: "main".into(),
        credentials: None,
        allow_insecure: true,
        max_file_bytes: DEFAULT_MAX_FILE_BYTES,
        full_history: false,
    }
}
