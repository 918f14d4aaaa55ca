#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `scripts/image`: the `exo` image is built without a container daemon,
//! pushed to the test registry, and what the registry serves is a working
//! program: unpacked, its `/exo` runs from its own root file system, as
//! user 65532, with no shell beside it. Two builds of one commit give one
//! digest. It is signed: the real `cosign verify` accepts it with the
//! committed development key (`deploy/signing/`) and refuses it with any
//! other, and it carries a signed CycloneDX SBOM of the binary's crates.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use support::copy_tree;
use support::cosign::Cosign;
use support::image::{Built, built, cosign, image_name, run_script, run_script_with};

fn ok(mut cmd: Command) -> String {
    let out = cmd.output().expect("spawn");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {text}",
        out.status
    );
    text
}

fn git(args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Every file and folder under `root`, as `/path`, sorted.
fn tree(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            out.push(format!("/{}", p.strip_prefix(root).unwrap().display()));
            if p.is_dir() && !p.is_symlink() {
                walk(root, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

#[test]
fn the_image_runs_from_its_own_root_file_system() {
    let img = built();
    let version = ok(img.command(&["--version"]));
    assert_eq!(
        version.trim(),
        format!("exo {}", env!("CARGO_PKG_VERSION")),
        "{version}"
    );
    let help = ok(img.command(&["operator", "run", "--help"]));
    assert!(help.contains("Usage: exo operator run"), "{help}");

    // The control plane serves from the read-only root, its database in
    // /tmp; without an admin token it may listen on loopback only.
    let mut serve = img
        .command(&[
            "control-plane",
            "--db",
            "/tmp/cp.sqlite",
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let line = support::first_stdout_line(&mut serve);
    let addr = line
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("control-plane serve printed {line:?}"))
        .to_owned();
    let answer = support::operator::http_get(&addr, "/healthz");
    let _ = serve.kill();
    let _ = serve.wait();
    let (status, body) = answer.expect("GET /healthz");
    assert_eq!((status, body.trim()), (200, "ok"));
}

#[test]
fn the_image_runs_as_65532_and_holds_no_shell() {
    let img = built();
    let config = &img.config["config"];
    assert_eq!(config["User"], "65532:65532", "{config}");
    assert_eq!(config["Entrypoint"], serde_json::json!(["/exo"]));
    assert_eq!(img.config["os"], "linux");

    let files = tree(&img.rootfs);
    for shell in ["/bin/sh", "/bin/bash", "/bin/busybox", "/usr/bin/sh"] {
        assert!(
            !files.contains(&shell.to_owned()),
            "{shell} is in the image"
        );
    }
    // The binary, the loader and libraries, the CA bundle and /etc: nothing
    // else (no package manager, no second program).
    for f in &files {
        let top = f.split('/').nth(1).unwrap_or_default();
        assert!(
            ["exo", "lib", "lib64", "etc", "tmp", "home"].contains(&top),
            "{f} is in the image: {files:?}"
        );
    }
    for needed in [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/passwd",
        "/lib64/ld-linux-x86-64.so.2",
    ] {
        assert!(
            files.contains(&needed.to_owned()),
            "{needed} missing: {files:?}"
        );
    }
    let passwd = std::fs::read_to_string(img.rootfs.join("etc/passwd")).unwrap();
    assert!(passwd.contains("nonroot:x:65532:65532:"), "{passwd}");

    // The OCI annotations, on the manifest and as labels.
    let commit = git(&["rev-parse", "HEAD"]);
    let labels = &config["Labels"];
    assert_eq!(labels["org.opencontainers.image.revision"], commit.as_str());
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        labels["org.opencontainers.image.source"]
            .as_str()
            .is_some_and(|s| s.starts_with("https://")),
        "{labels}"
    );
    assert_eq!(img.manifest["annotations"], *labels);
}

#[test]
fn two_builds_of_one_commit_give_one_digest() {
    let first: &Built = built();
    // The second from another checkout of the same commit, through its own
    // scripts/image: the export, keyed by the source, and the compiled
    // binary are shared through the cache (a second compile would double
    // the CI time); the layers, config and labels are made again. That the
    // compile itself is reproducible, scripts/image checks whenever it
    // compiles the same source again (its ledger; EXO_IMAGE_FRESH=1 forces
    // it), see ARCHITECTURE.md.
    let dir = tempfile::tempdir().unwrap();
    let clone = dir.path().join("clone");
    ok({
        let mut c = Command::new("git");
        c.args(["clone", "--quiet", "--shared", env!("CARGO_MANIFEST_DIR")])
            .arg(&clone);
        c
    });
    assert_eq!(
        ok({
            let mut c = Command::new("git");
            c.args(["rev-parse", "HEAD"]).current_dir(&clone);
            c
        })
        .trim(),
        git(&["rev-parse", "HEAD"])
    );
    let deploy = dir.path().join("deploy");
    copy_tree(&first.deploy, &deploy);
    let second = run_script(&clone, &deploy);
    eprintln!("first build:  {}\nsecond build: {second}", first.reference);
    assert_eq!(second, first.reference);
}

/// `cosign verify` of `reference` with the public key file `key`, as
/// docs/install.md shows it (plus `--allow-http-registry` for the test
/// registry): whether it passed, and its output.
fn cosign_verify(key: &str, reference: &str) -> (bool, String, String) {
    cosign(&[
        "verify",
        "--key",
        key,
        "--insecure-ignore-tlog",
        "--allow-http-registry",
        reference,
    ])
}

#[test]
fn the_image_is_signed_with_the_committed_development_key() {
    // The committed pair belongs together: the public key is the private
    // key's (whose password is empty, as deploy/signing/README.md says).
    let (ok, public, err) = cosign(&["public-key", "--key", "deploy/signing/dev-cosign.key"]);
    assert!(ok, "cosign public-key: {err}");
    let committed = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/signing/dev-cosign.pub"),
    )
    .unwrap();
    assert_eq!(public.trim(), committed.trim());

    let img = built();
    let (ok, out, err) = cosign_verify("deploy/signing/dev-cosign.pub", &img.reference);
    assert!(ok, "cosign verify {}: {out}{err}", img.reference);
    // One or more signatures (a second build of the same commit may add
    // one), each over this digest.
    let claims: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert!(!claims.is_empty(), "{out}");
    for c in &claims {
        assert_eq!(
            c["critical"]["image"]["docker-manifest-digest"],
            img.digest.as_str(),
            "{out}"
        );
        assert_eq!(
            c["critical"]["type"], "cosign container image signature",
            "{out}"
        );
    }

    // Another key, freshly made, does not verify it.
    let other = Cosign::new();
    let (ok, text) = other.verify(&img.reference);
    assert!(!ok, "an unrelated key verified {}: {text}", img.reference);
    assert!(text.contains("no matching signatures"), "{text}");
}

#[test]
fn no_sign_pushes_an_unsigned_image() {
    let first = built();
    let dir = tempfile::tempdir().unwrap();
    let deploy = dir.path().join("deploy");
    copy_tree(&first.deploy, &deploy);
    // Another repository, so the signature of the default push (which
    // lives beside the digest in its own repository) is not found.
    let name = format!("{}-unsigned", image_name());
    let reference = run_script_with(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        &deploy,
        &name,
        &["--no-sign", "--no-pin"],
    );
    assert_eq!(reference, format!("{name}@{}", first.digest));
    let (ok, out, err) = cosign_verify("deploy/signing/dev-cosign.pub", &reference);
    assert!(!ok, "cosign verify accepted {reference}: {out}");
    assert!(err.contains("no signatures found"), "{err}");
}

#[test]
fn the_image_carries_a_signed_sbom_of_its_crates() {
    use base64::Engine as _;
    let img = built();
    let attestation = |key: &str| {
        cosign(&[
            "verify-attestation",
            "--type",
            "cyclonedx",
            "--key",
            key,
            "--insecure-ignore-tlog",
            "--allow-http-registry",
            &img.reference,
        ])
    };
    let (ok, out, err) = attestation("deploy/signing/dev-cosign.pub");
    assert!(
        ok,
        "cosign verify-attestation {}: {out}{err}",
        img.reference
    );
    // One DSSE envelope per attestation: a second push of the same digest
    // replaces the SBOM rather than adding one.
    let envelopes: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(envelopes.len(), 1, "{out}");
    let envelope: serde_json::Value = serde_json::from_str(envelopes[0]).unwrap();
    assert_eq!(envelope["payloadType"], "application/vnd.in-toto+json");
    let payload = base64::engine::general_purpose::STANDARD
        .decode(envelope["payload"].as_str().unwrap())
        .unwrap();
    let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(statement["predicateType"], "https://cyclonedx.org/bom");
    assert_eq!(
        format!(
            "sha256:{}",
            statement["subject"][0]["digest"]["sha256"]
                .as_str()
                .unwrap_or_default()
        ),
        img.digest,
        "{statement}"
    );

    // The SBOM describes this exo, and lists the crates it is built from
    // (kube among them), not the test-only ones (oci-client is a
    // dev-dependency).
    let bom = &statement["predicate"];
    assert_eq!(bom["bomFormat"], "CycloneDX");
    let exo = &bom["metadata"]["component"];
    assert_eq!(exo["name"], "exo", "{exo}");
    assert_eq!(exo["version"], env!("CARGO_PKG_VERSION"), "{exo}");
    let crates: Vec<(&str, &str)> = bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default(),
                c["version"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        crates.iter().any(|(n, v)| *n == "kube" && !v.is_empty()),
        "no kube in the SBOM: {crates:?}"
    );
    assert!(
        !crates.iter().any(|(n, _)| *n == "oci-client"),
        "a dev-dependency in the SBOM: {crates:?}"
    );

    // Another key does not verify the attestation.
    let other = Cosign::new();
    let key = other.dir.path().join("cosign.pub");
    let (ok, out, err) = attestation(key.to_str().unwrap());
    assert!(!ok, "an unrelated key verified the SBOM: {out}");
    assert!(err.contains("no matching attestations"), "{err}");
}
