#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Nothing unsigned reaches the fleet, on real components: images pushed to
//! the test registry, signed by the real cosign (built by scripts/testenv)
//! with a key pair it made, checked by `exo release pin|lint
//! --verify-signatures` and by the operator's `signatures-verified` step,
//! with `cosign verify` asked beside exo for a second opinion.
//!
//! - pin refuses a release with one unsigned image and writes nothing;
//!   once it is signed, pin writes and lint is clean;
//! - a signature copied from another image, and a non-cosign object at an
//!   image's signature tag, are refused naming the component;
//! - a malformed key, an unknown key type and a private key pasted as the
//!   public one are lint findings naming the release and field; a release
//!   without keys cannot be verified;
//! - the operator: a canary moved to a release with an unsigned image
//!   fails at `signatures-verified`, naming the image, and nothing of the
//!   tenant changes; signing the image lets the same release go on, and
//!   the Rollout's status records each image's key and signature; an
//!   operator killed (-9) while the saga holds there is followed by one
//!   that records nothing twice.

mod support;

use std::time::Duration;

use exo::crd::{Agent, RolloutPhase};
use oci_client::secrets::RegistryAuth;
use support::cosign::{Cosign, push_components, rewrite};
use support::fleet::{Fixture, Operator, example_files, out, tail};
use support::{eventually, unique_suffix};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const OLD: &str = "2026.11.0";
const NEW: &str = "2026.11.1";
const WAIT: Duration = Duration::from_secs(120);

fn exo(root: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_exo"))
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

/// The example release NEW's text, its tenants prefixed `sig` as
/// `example_files("sig")` names them.
fn example_new() -> String {
    String::from_utf8(example_files("sig")[&format!("releases/{NEW}.yaml")].clone()).unwrap()
}

/// A fleet checkout on disk with `files` (path -> content).
fn checkout(files: &std::collections::BTreeMap<String, Vec<u8>>) -> tempfile::TempDir {
    let dir = support::scratch();
    for (path, content) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    dir
}

#[tokio::test]
async fn pin_and_lint_verify_every_image_against_the_release_keys() {
    let repo = format!("sig-cli-{}", unique_suffix());
    let cosign = Cosign::new();
    let key = cosign.public_key();
    let digests = push_components(&repo, &example_new()).await;
    let registry = &support::env().registry;
    let image = |name: &str| format!("{registry}/{repo}/{name}@{}", digests[name]);
    for name in ["broker", "router", "agentlet"] {
        cosign.sign(&image(name));
    }

    // A release of tags to pin, with the key; agent-runtime unsigned.
    let mut files = example_files("sig");
    let path = format!("releases/{NEW}.yaml");
    files.insert(
        path.clone(),
        rewrite(&example_new(), &repo, None, &[("ci", &key)]).into_bytes(),
    );
    let dir = checkout(&files);
    let file = dir.path().join(&path);
    let before = std::fs::read(&file).unwrap();
    let arg = file.to_str().unwrap();
    let o = exo(dir.path(), &["release", "pin", "--verify-signatures", arg]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("spec.components[3].image")
            && text.contains("component agent-runtime")
            && text.contains(&format!("{}: not signed", image("agent-runtime")))
            && text.contains("[signature]")
            && text.contains("nothing written"),
        "{text}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), before, "nothing written");
    // cosign agrees on both.
    assert!(cosign.verify(&image("broker")).0);
    assert!(!cosign.verify(&image("agent-runtime")).0);

    cosign.sign(&image("agent-runtime"));
    let o = exo(dir.path(), &["release", "pin", "--verify-signatures", arg]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(
        out(&o).contains("every image's signature verified"),
        "{}",
        out(&o)
    );
    let pinned = std::fs::read_to_string(&file).unwrap();
    for name in digests.keys() {
        assert!(pinned.contains(&image(name)), "{name} pinned: {pinned}");
    }
    let o = exo(dir.path(), &["release", "lint", "--verify-signatures", arg]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));

    // A signature copied from broker under router's signature tag: it
    // verifies with the key, but signs broker's digest.
    let sig_tag = |name: &str| format!("sha256-{}.sig", &digests[name]["sha256:".len()..]);
    let copy = std::process::Command::new("skopeo")
        .args([
            "copy",
            "--quiet",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
        ])
        .arg(format!(
            "docker://{registry}/{repo}/broker:{}",
            sig_tag("broker")
        ))
        .arg(format!(
            "docker://{registry}/{repo}/router:{}",
            sig_tag("router")
        ))
        .output()
        .expect("run skopeo");
    assert!(copy.status.success(), "{}", out(&copy));
    // Something that is not a cosign signature at agentlet's tag.
    support::push_image(
        registry,
        &format!("{repo}/agentlet"),
        &sig_tag("agentlet"),
        b"not a signature",
        &RegistryAuth::Anonymous,
    )
    .await;
    let o = exo(dir.path(), &["release", "lint", "--verify-signatures", arg]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("spec.components[1].image")
            && text.contains("component router")
            && text.contains(&format!("the signature is for {}", digests["broker"]))
            && text.contains("a copied signature"),
        "{text}"
    );
    assert!(
        text.contains("spec.components[2].image")
            && text.contains("component agentlet")
            && text.contains("is not a cosign signature")
            && text.contains("application/vnd.oci.image.layer.v1.tar"),
        "{text}"
    );
    assert!(!text.contains("component broker"), "{text}");
    assert!(
        !cosign.verify(&image("router")).0,
        "cosign refuses the copy too"
    );

    // A key of another cosign: the signatures are not trusted.
    let other = Cosign::new();
    files.insert(
        path.clone(),
        rewrite(
            &example_new(),
            &repo,
            Some(&digests),
            &[("other", &other.public_key())],
        )
        .into_bytes(),
    );
    let dir = checkout(&files);
    let file = dir.path().join(&path);
    let o = exo(
        dir.path(),
        &[
            "release",
            "lint",
            "--verify-signatures",
            file.to_str().unwrap(),
        ],
    );
    let text = out(&o);
    assert!(
        text.contains(&format!(
            "{}: none of its 1 signature(s) verifies with a trusted key (other (",
            image("broker")
        )),
        "{text}"
    );
}

#[tokio::test]
async fn bad_keys_are_lint_findings_naming_the_release_and_field() {
    let path = format!("releases/{NEW}.yaml");
    let ed25519 = std::process::Command::new("sh")
        .args([
            "-c",
            "openssl genpkey -algorithm ed25519 | openssl pkey -pubout",
        ])
        .output()
        .expect("run openssl");
    assert!(ed25519.status.success(), "{}", out(&ed25519));
    let ed25519 = String::from_utf8(ed25519.stdout).unwrap();
    let cosign = Cosign::new();
    let private = std::fs::read_to_string(cosign.key_path()).unwrap();
    let cases: [(&str, &str, &str); 3] = [
        (
            "broken",
            "-----BEGIN PUBLIC KEY-----\nnot base64 at all\n-----END PUBLIC KEY-----\n",
            "spec.signatures.keys[0].publicKey",
        ),
        ("ed", &ed25519, "Ed25519 keys are not supported"),
        ("private", &private, "is not a public key"),
    ];
    for (name, pem, wanted) in cases {
        let mut files = example_files("sig");
        files.insert(
            path.clone(),
            rewrite(&example_new(), "sig-bad", None, &[(name, pem)]).into_bytes(),
        );
        let dir = checkout(&files);
        let file = dir.path().join(&path);
        let o = exo(dir.path(), &["release", "lint", file.to_str().unwrap()]);
        let text = out(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {text}");
        assert!(
            text.contains(&format!("{path}: spec.signatures.keys[0].publicKey"))
                && text.contains(wanted)
                && text.contains("[bad-signing-key]"),
            "{name}: {text}"
        );
        assert!(
            !text.contains("PRIVATE KEY-----\n"),
            "no key material: {text}"
        );
    }
    // No keys at all: the images cannot be verified.
    let dir = checkout(&example_files("sig"));
    let file = dir.path().join(&path);
    let o = exo(
        dir.path(),
        &[
            "release",
            "lint",
            "--verify-signatures",
            file.to_str().unwrap(),
        ],
    );
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("{path}: spec.signatures: names no keys")),
        "{text}"
    );
}

#[tokio::test]
async fn the_saga_applies_nothing_until_every_image_verifies() {
    let _serial = SERIAL.lock().await;
    let prefix = &format!("sig-saga-{}", unique_suffix());
    let cosign = Cosign::new();
    let repo = prefix.clone();
    let digests = push_components(&repo, &example_new()).await;
    let registry = &support::env().registry;
    let image = |name: &str| format!("{registry}/{repo}/{name}@{}", digests[name]);
    for name in ["broker", "router", "agentlet"] {
        cosign.sign(&image(name));
    }
    // Every image of the example (manifests and releases) in this test's
    // repositories of the test registry, so NEW re-points the tenant's
    // workloads (by repository) to the images pushed here.
    let mut files = example_files(prefix);
    for content in files.values_mut() {
        if let Ok(text) = std::str::from_utf8(content) {
            *content = text
                .replace("127.0.0.1:25000/exo/", &format!("{registry}/{repo}/"))
                .into_bytes();
        }
    }
    let path = format!("releases/{NEW}.yaml");
    let text = String::from_utf8(files[&path].clone()).unwrap();
    files.insert(
        path,
        rewrite(
            &text,
            &repo,
            Some(&digests),
            &[("ci", &cosign.public_key())],
        )
        .into_bytes(),
    );
    let fx = Fixture::new(prefix, files).await;
    let mut op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    fx.wait_all(OLD, &op).await;
    let platform = format!("{prefix}-platform");
    let agents_before = runtimes(&fx, &platform).await;

    let o = fx.exo(&["release", "promote", NEW, "--wave", "canary"]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", out(&o), tail(&op.log()));
    let failed = fx
        .wait_phase(&platform, NEW, RolloutPhase::Failed, &op)
        .await;
    let status = failed.status.clone().unwrap();
    assert_eq!(status.current_step.as_deref(), Some("signatures-verified"));
    let message = status.message.clone().unwrap_or_default();
    assert!(
        message.contains(&format!("{}: not signed", image("agent-runtime")))
            && message.contains("1 of 4 image(s) not verified"),
        "{message}"
    );
    let step = |name: &str| {
        status
            .steps
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.state)
    };
    assert_eq!(step("network-isolated"), Some(exo::crd::StepState::Done));
    assert_eq!(
        step("configmaps-published"),
        Some(exo::crd::StepState::Pending)
    );
    assert!(status.signatures.is_empty());
    // Nothing of the tenant moved: its Agents run OLD's images still.
    assert_eq!(runtimes(&fx, &platform).await, agents_before);

    // kill -9 while the saga holds there: the next leader looks again,
    // finds the image still unsigned and records nothing new (the step as
    // it was, the failure written once), and applies nothing.
    let held = status
        .steps
        .iter()
        .find(|s| s.name == "signatures-verified")
        .cloned()
        .unwrap();
    op.kill9();
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "b");
    eventually("operator b to lead", WAIT, || async {
        op.log().contains("became leader identity=b").then_some(())
    })
    .await;
    // The new term's sync and first look at the Rollout (no timing is
    // asserted: the state must simply not have moved).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let again = fx.rollout(&platform).await.unwrap().status.unwrap();
    assert_eq!(again.phase, Some(RolloutPhase::Failed));
    assert_eq!(
        again.steps.iter().find(|s| s.name == "signatures-verified"),
        Some(&held),
        "the failure is recorded once"
    );
    assert_eq!(runtimes(&fx, &platform).await, agents_before);

    // Signing the image lets the same release go on.
    cosign.sign(&image("agent-runtime"));
    let verified = fx
        .wait_phase(&platform, NEW, RolloutPhase::Verified, &op)
        .await;
    let status = verified.status.unwrap();
    let key_id = exo::signatures::TrustedKey::parse("ci", &cosign.public_key())
        .unwrap()
        .id;
    assert_eq!(status.signatures.len(), 4, "{status:#?}");
    for s in &status.signatures {
        assert_eq!(s.key, "ci");
        assert_eq!(s.key_id, key_id);
        assert!(s.signature.starts_with("sha256:"), "{s:?}");
        assert!(
            digests.values().any(|d| s.image.ends_with(d.as_str())),
            "{s:?}"
        );
    }
    let agents = runtimes(&fx, &platform).await;
    assert!(
        agents
            .values()
            .any(|runtime| *runtime == image("agent-runtime")),
        "{agents:?}"
    );
}

/// Each Agent of the tenant's namespace -> the runtime image it asks for.
async fn runtimes(fx: &Fixture, tenant: &str) -> std::collections::BTreeMap<String, String> {
    let agents: kube::Api<Agent> = kube::Api::namespaced(fx.ns.client.clone(), tenant);
    eventually("the tenant's Agents", WAIT, || async {
        let list = agents.list(&Default::default()).await.ok()?;
        (!list.items.is_empty()).then(|| {
            list.items
                .iter()
                .map(|a| {
                    (
                        a.metadata.name.clone().unwrap_or_default(),
                        a.spec.runtime.image.clone(),
                    )
                })
                .collect()
        })
    })
    .await
}
