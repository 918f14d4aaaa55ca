//! The real cosign (`EXO_TEST_COSIGN`, built by `scripts/testenv`): a key
//! pair made by `cosign generate-key-pair`, images signed with it in the
//! test registry, and `cosign verify` as a second opinion beside exo's.
//! A missing cosign fails the test.

use std::path::PathBuf;
use std::process::{Command, Output};

use oci_client::secrets::RegistryAuth;

/// A cosign key pair in a scratch folder (the private key's password is
/// empty).
pub struct Cosign {
    pub bin: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Cosign {
    pub fn new() -> Self {
        let bin = super::testenv_var("EXO_TEST_COSIGN")
            .map(PathBuf::from)
            .filter(|p| p.is_file())
            .expect("EXO_TEST_COSIGN names no cosign binary: run scripts/testenv up");
        let dir = super::scratch();
        let c = Cosign { bin, dir };
        let o = c.run(&["generate-key-pair"]);
        assert!(o.status.success(), "cosign generate-key-pair: {}", text(&o));
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.bin)
            .args(args)
            .current_dir(self.dir.path())
            .env("COSIGN_PASSWORD", "")
            // Never reach for the public good instance's TUF root.
            .env("TUF_ROOT", self.dir.path().join("tuf"))
            .output()
            .expect("run cosign")
    }

    pub fn key_path(&self) -> PathBuf {
        self.dir.path().join("cosign.key")
    }

    pub fn public_key(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("cosign.pub")).unwrap()
    }

    /// Signs `image` (`repo@sha256:…`) in the plain-http test registry,
    /// without a transparency log.
    pub fn sign(&self, image: &str) {
        let o = self.run(&[
            "sign",
            "--key",
            "cosign.key",
            "--tlog-upload=false",
            "--allow-http-registry",
            "--yes",
            image,
        ]);
        assert!(o.status.success(), "cosign sign {image}: {}", text(&o));
    }

    /// Whether `cosign verify` accepts `image` with this key.
    pub fn verify(&self, image: &str) -> (bool, String) {
        let o = self.run(&[
            "verify",
            "--key",
            "cosign.pub",
            "--insecure-ignore-tlog",
            "--allow-http-registry",
            image,
        ]);
        (o.status.success(), text(&o))
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The components of a release file as `(name, tag)`, in order, read off
/// the example's layout (`- name:` then `image:` then `tag:`).
pub fn components(release: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut name = None;
    for line in release.lines().map(str::trim) {
        if let Some(n) = line.strip_prefix("- name: ") {
            name = Some(n.to_owned());
        } else if let Some(t) = line.strip_prefix("tag: ")
            && let Some(n) = name.take()
        {
            out.push((n, t.trim_matches('"').to_owned()));
        }
    }
    out
}

/// Pushes one small image per component of `release` (its tag, a payload
/// of its own) to `<registry>/<repo>/<name>` and returns name -> digest.
pub async fn push_components(
    repo: &str,
    release: &str,
) -> std::collections::BTreeMap<String, String> {
    let registry = &super::env().registry;
    let mut out = std::collections::BTreeMap::new();
    for (name, tag) in components(release) {
        let pushed = super::push_image(
            registry,
            &format!("{repo}/{name}"),
            &tag,
            format!("{repo} {name} {tag}").as_bytes(),
            &RegistryAuth::Anonymous,
        )
        .await;
        out.insert(name, pushed.digest);
    }
    out
}

/// `release` with its images moved to `<registry>/<repo>/<name>`, pinned
/// to `digests` (or left at `:tag` for `exo release pin` to resolve, with
/// `None`), and a `signatures` block naming `keys` (name, PEM).
pub fn rewrite(
    release: &str,
    repo: &str,
    digests: Option<&std::collections::BTreeMap<String, String>>,
    keys: &[(&str, &str)],
) -> String {
    let registry = &super::env().registry;
    let mut out = String::new();
    for line in release.lines() {
        if let Some(rest) = line.trim_start().strip_prefix("image: ") {
            let indent = &line[..line.len() - line.trim_start().len()];
            let name = rest
                .split('@')
                .next()
                .and_then(|r| r.rsplit('/').next())
                .unwrap()
                .to_owned();
            let image = match digests {
                Some(d) => format!("{registry}/{repo}/{name}@{}", d[&name]),
                // `pin` resolves the `tag:` field below it.
                None => format!("{registry}/{repo}/{name}@sha256:{}", "0".repeat(64)),
            };
            out.push_str(&format!("{indent}image: {image}\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !keys.is_empty() {
        out.push_str("  signatures:\n    keys:\n");
        for (name, pem) in keys {
            out.push_str(&format!("      - name: {name}\n        publicKey: |\n"));
            for l in pem.lines() {
                out.push_str(&format!("          {l}\n"));
            }
        }
    }
    out
}
