//! The `exo` image as `scripts/image` builds it, for the image and install
//! tests: built and pushed to the test registry once per test binary, then
//! pulled back with skopeo and unpacked, so the tests look at what the
//! registry serves. A missing skopeo, registry or toolchain fails the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::{copy_tree, env, repo_root};

/// The repository the tests push to, in the open test registry.
pub fn image_name() -> String {
    format!("{}/exo-test/exo", env().registry)
}

pub struct Built {
    /// What `scripts/image` printed: `name@sha256:...`.
    pub reference: String,
    pub digest: String,
    /// A copy of `deploy/` that `scripts/image --deploy` pinned.
    pub deploy: PathBuf,
    /// The image's root file system, unpacked from the registry.
    pub rootfs: PathBuf,
    pub config: serde_json::Value,
    pub manifest: serde_json::Value,
}

/// A scratch folder for this test binary under cargo's target tmp, emptied
/// first (the built image lives as long as the process).
fn scratch(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let stem = exe.file_stem().and_then(|s| s.to_str()).unwrap_or("test");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("image")
        .join(stem)
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch folder");
    dir
}

/// Runs `scripts/image` of the checkout `repo` (its progress goes to the
/// test's stderr) and returns what it printed on stdout. It signs with the
/// committed development key and the cosign of `tests/testenv/build.sh`,
/// as it does by default.
pub fn run_script(repo: &Path, deploy: &Path) -> String {
    run_script_with(repo, deploy, &image_name(), &[])
}

/// `run_script` with another image name and extra options (`--no-sign`).
pub fn run_script_with(repo: &Path, deploy: &Path, name: &str, options: &[&str]) -> String {
    let out = Command::new(repo.join("scripts/image"))
        .arg("--deploy")
        .arg(deploy)
        .args(options)
        .arg(name)
        .env("EXO_IMAGE_FRESH", "0")
        .env_remove("EXO_IMAGE_SIGNING_KEY")
        .env_remove("EXO_COSIGN")
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/image");
    assert!(
        out.status.success(),
        "scripts/image failed ({}); its output is above",
        out.status
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Runs the test environment's cosign (`EXO_TEST_COSIGN`) in the
/// repository's root, as a reader of docs/install.md would, with an empty
/// key password and a scratch TUF root (nothing here needs one).
pub fn cosign(args: &[&str]) -> (bool, String, String) {
    let bin = super::testenv_var("EXO_TEST_COSIGN")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .expect("EXO_TEST_COSIGN names no cosign binary: run scripts/testenv up");
    let tuf = super::scratch();
    let out = Command::new(bin)
        .args(args)
        .current_dir(repo_root())
        .env("COSIGN_PASSWORD", "")
        .env("TUF_ROOT", tuf.path())
        .output()
        .expect("run cosign");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Pulls `reference` with skopeo into a `dir:` copy and unpacks its layers
/// in order into `rootfs` (as root, so owners and modes are kept).
fn pull_and_unpack(
    reference: &str,
    blobs: &Path,
    rootfs: &Path,
) -> (serde_json::Value, serde_json::Value) {
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--src-tls-verify=false",
        &format!("docker://{reference}"),
        &format!("dir:{}", blobs.display()),
    ]));
    let manifest = read_json(&blobs.join("manifest.json"));
    let hex = |d: &serde_json::Value| d["digest"].as_str().unwrap()[7..].to_owned();
    let config = read_json(&blobs.join(hex(&manifest["config"])));
    std::fs::create_dir_all(rootfs).unwrap();
    for layer in manifest["layers"].as_array().unwrap() {
        run(Command::new("tar")
            .args(["-xzpf"])
            .arg(blobs.join(hex(layer)))
            .arg("--same-owner")
            .arg("-C")
            .arg(rootfs));
    }
    (manifest, config)
}

/// The image, built, pushed, pulled and unpacked once per test binary.
pub fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = scratch("built");
        let deploy = dir.join("deploy");
        copy_tree(&repo_root().join("deploy"), &deploy);
        let reference = run_script(&repo_root(), &deploy);
        let (name, digest) = reference
            .split_once('@')
            .unwrap_or_else(|| panic!("scripts/image printed {reference:?}, not name@digest"));
        assert_eq!(name, image_name(), "{reference}");
        let rootfs = dir.join("rootfs");
        let (manifest, config) = pull_and_unpack(&reference, &dir.join("blobs"), &rootfs);
        Built {
            digest: digest.to_owned(),
            reference,
            deploy,
            rootfs,
            config,
            manifest,
        }
    })
}

impl Built {
    /// A command that runs the image's `/exo` with `args` as a pod would:
    /// in a fresh mount namespace, chrooted into the root file system made
    /// read-only, with an empty /tmp, as user and group 65532, with only
    /// the image's environment.
    pub fn command(&self, args: &[&str]) -> Command {
        const SCRIPT: &str = r#"set -e
root=$1; shift
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
exec chroot --userspec=65532:65532 "$root" /exo "$@""#;
        let mut c = Command::new("unshare");
        // No --fork: unshare, sh and chroot each exec the next, so the
        // child is /exo itself and killing it leaves nothing behind.
        c.args(["--mount", "sh", "-c", SCRIPT, "sh"])
            .arg(&self.rootfs)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
        for kv in self.config["config"]["Env"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some((k, v)) = kv.as_str().and_then(|kv| kv.split_once('=')) {
                c.env(k, v);
            }
        }
        c
    }
}
