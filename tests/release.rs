#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `exo release lint|pin|plan|diff` and `exo config build` as a user runs
//! them: the real binary, real files, and the real registries of the test
//! environment.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use oci_client::secrets::RegistryAuth;
use support::copy_tree;

const EXO: &str = env!("CARGO_BIN_EXE_exo");

fn exo(dir: &Path, args: &[&str]) -> Output {
    Command::new(EXO)
        .args(args)
        .current_dir(dir)
        .env("DOCKER_CONFIG", dir.join(".docker"))
        .output()
        .expect("run exo")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A copy of the repository's example fleet in a scratch folder.
fn example_fleet() -> (tempfile::TempDir, PathBuf) {
    let tmp = support::scratch();
    let root = tmp.path().join("fleet");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for d in ["manifests", "releases", "configmaps"] {
        copy_tree(&repo.join(d), &root.join(d));
    }
    (tmp, root)
}

#[test]
fn lint_exit_codes_and_messages() {
    let (_tmp, root) = example_fleet();
    let o = exo(&root, &["release", "lint"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // A finding: exit 1, one line naming file, field and rule.
    let rel = root.join("releases/2026.11.1.yaml");
    let original = std::fs::read_to_string(&rel).unwrap();
    let bad = original.replacen("image: 127.0.0.1:25000/exo/broker@sha256:90208be6b66c8188ad151536d7b5bda60ad35488619d912d1dc407802d5a6b91", "image: 127.0.0.1:25000/exo/broker:1.5.0", 1);
    assert_ne!(bad, original);
    std::fs::write(&rel, &bad).unwrap();
    let o = exo(&root, &["release", "lint"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("releases/2026.11.1.yaml: spec.components[0].image: image \"127.0.0.1:25000/exo/broker:1.5.0\" is not pinned by digest"),
        "{}",
        text(&o)
    );

    // Unusable input: exit 2, naming the file and the line.
    let cases: &[(&str, &str)] = &[
        ("duplicate key", "apiVersion: a\napiVersion: b\n"),
        (
            "unknown field",
            "apiVersion: autonomic.sh/v1alpha1\nkind: Release\nmetadata: {name: x}\nspec: {components: [], waves: [], surprise: 1}\n",
        ),
        (
            "wrong type",
            "apiVersion: autonomic.sh/v1alpha1\nkind: Release\nmetadata: {name: x}\nspec: {components: 7, waves: []}\n",
        ),
        ("malformed", "kind: Release\nspec: [unclosed\n"),
    ];
    for (what, yaml) in cases {
        std::fs::write(&rel, yaml).unwrap();
        let o = exo(&root, &["release", "lint"]);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(2), "{what}: {out}");
        assert!(
            out.contains("2026.11.1.yaml") && out.contains("line"),
            "{what}: {out}"
        );
    }

    // A YAML bomb fails fast, with the file named.
    let mut bomb = String::from("kind: Release\na: &a [x,x,x,x,x,x,x,x,x,x]\n");
    for i in 1..12 {
        let (p, c) = ((b'a' + i - 1) as char, (b'a' + i) as char);
        bomb.push_str(&format!(
            "{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
        ));
    }
    std::fs::write(&rel, bomb).unwrap();
    let o = exo(&root, &["release", "lint"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("2026.11.1.yaml"), "{}", text(&o));
}

#[test]
fn plan_and_diff_show_per_wave_changes() {
    let (_tmp, root) = example_fleet();
    let o = exo(
        &root,
        &["release", "diff", "2026.11.0", "2026.11.1", "-o", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let waves: Vec<&str> = plan["waves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["wave"].as_str().unwrap())
        .collect();
    assert_eq!(waves, ["canary", "low-risk", "fleet"]);
    let acme = &plan["waves"][1]["tenants"][0];
    assert_eq!(acme["tenant"], "acme");
    // Capability first: the broker Tool is re-pointed before the agent.
    assert_eq!(acme["steps"][0]["name"], "broker");
    assert_eq!(acme["steps"][1]["name"], "assistant");
    let cms = plan["configMaps"].as_array().unwrap();
    assert!(
        cms.iter()
            .any(|c| c["name"] == "agent-baseline" && c["create"] == true)
    );

    let o = exo(&root, &["release", "plan", "2026.11.1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("canary    platform  1     Tool/broker"),
        "{table}"
    );

    let o = exo(&root, &["release", "plan", "nope"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn config_build_is_deterministic_and_immutable() {
    let (_tmp, root) = example_fleet();
    let a = exo(&root, &["config", "build"]);
    let b = exo(&root, &["config", "build"]);
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    assert_eq!(a.stdout, b.stdout);
    let out = String::from_utf8_lossy(&a.stdout);
    assert!(out.contains("immutable: true"));
    assert!(out.contains("name: agent-baseline-10c9acf82b"), "{out}");

    // One byte changes the name.
    let f = root.join("configmaps/platform-baseline/persona.md");
    let mut content = std::fs::read(&f).unwrap();
    content.push(b'!');
    std::fs::write(&f, content).unwrap();
    let c = exo(&root, &["config", "build"]);
    assert!(!String::from_utf8_lossy(&c.stdout).contains("platform-baseline-49950b1ebe"));

    let o = exo(&root, &["config", "build", "-o", "out"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::read_dir(root.join("out")).unwrap().count(), 3);
}

/// A fleet holding one release whose components are the given images.
fn release_fleet(images: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = support::scratch();
    let root = tmp.path().to_owned();
    std::fs::create_dir_all(root.join("releases")).unwrap();
    let mut yaml = String::from(
        "# pinned by exo release pin\napiVersion: autonomic.sh/v1alpha1\nkind: Release\nmetadata:\n  name: r1\nspec:\n  components:\n",
    );
    for (i, image) in images.iter().enumerate() {
        yaml.push_str(&format!(
            "    - name: c{i}   # component {i}\n      layer: capability\n      image: {image}\n"
        ));
    }
    yaml.push_str("  waves: []\n");
    std::fs::write(root.join("releases/r1.yaml"), yaml).unwrap();
    (tmp, root)
}

#[tokio::test]
async fn pin_resolves_single_and_multi_arch_images() {
    let env = support::env();
    let single = support::push_image(
        &env.registry,
        "pin/single",
        "1.0.0",
        b"single",
        &RegistryAuth::Anonymous,
    )
    .await;
    let multi = support::push_multiarch_image(
        &env.registry,
        "pin/multi",
        "2.0.0",
        &RegistryAuth::Anonymous,
    )
    .await;
    let (_tmp, root) = release_fleet(&[
        &format!("{}/pin/single:1.0.0", env.registry),
        &format!("{}/pin/multi:2.0.0", env.registry),
        &format!("{}/pin/single:1.0.0", env.registry),
    ]);
    let o = exo(&root, &["release", "pin"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("3 image(s) (2 distinct)"), "{}", text(&o));
    let pinned = std::fs::read_to_string(root.join("releases/r1.yaml")).unwrap();
    assert!(
        pinned.contains(&format!(
            "image: {}/pin/single@{}",
            env.registry, single.digest
        )),
        "{pinned}"
    );
    assert!(
        pinned.contains(&format!(
            "image: {}/pin/multi@{}",
            env.registry, multi.digest
        )),
        "{pinned}"
    );
    assert!(pinned.contains("tag: \"2.0.0\""), "{pinned}");
    assert!(pinned.contains("# component 1"), "comments kept: {pinned}");

    // Pinned files re-check clean; a moved tag is reported by --check.
    let o = exo(&root, &["release", "pin", "--check"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    support::push_image(
        &env.registry,
        "pin/single",
        "1.0.0",
        b"moved",
        &RegistryAuth::Anonymous,
    )
    .await;
    let o = exo(&root, &["release", "pin", "--check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(root.join("releases/r1.yaml")).unwrap(),
        pinned
    );
}

#[tokio::test]
async fn pin_failures_write_nothing() {
    let env = support::env();
    support::push_image(
        &env.registry,
        "pin/present",
        "1.0.0",
        b"present",
        &RegistryAuth::Anonymous,
    )
    .await;

    // A missing tag next to a present one: clear error, file untouched.
    let (_tmp, root) = release_fleet(&[
        &format!("{}/pin/present:1.0.0", env.registry),
        &format!("{}/pin/present:9.9.9", env.registry),
    ]);
    let before = std::fs::read_to_string(root.join("releases/r1.yaml")).unwrap();
    let o = exo(&root, &["release", "pin"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("pin/present:9.9.9: tag not found"),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("nothing written"));
    assert_eq!(
        std::fs::read_to_string(root.join("releases/r1.yaml")).unwrap(),
        before
    );

    // A registry that is not running.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (_tmp2, root2) = release_fleet(&[&format!("127.0.0.1:{port}/pin/x:1")]);
    let o = exo(&root2, &["release", "pin"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("unreachable"), "{}", text(&o));
}

#[tokio::test]
async fn pin_uses_docker_config_credentials() {
    let env = support::env();
    let auth = RegistryAuth::Basic(env.registry_user.clone(), env.registry_password.clone());
    let pushed = support::push_image(
        &env.registry_auth,
        "pin/private",
        "1.0.0",
        b"private",
        &auth,
    )
    .await;
    let (_tmp, root) = release_fleet(&[&format!("{}/pin/private:1.0.0", env.registry_auth)]);

    // Without credentials the registry refuses: a clear error, nothing written.
    let o = exo(&root, &["release", "pin"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("refused the credentials"), "{}", text(&o));

    // With the usual docker config it resolves, and the password never shows.
    use base64::Engine as _;
    let token = base64::engine::general_purpose::STANDARD
        .encode(format!("{}:{}", env.registry_user, env.registry_password));
    std::fs::create_dir_all(root.join(".docker")).unwrap();
    std::fs::write(
        root.join(".docker/config.json"),
        format!(
            r#"{{"auths":{{"{}":{{"auth":"{token}"}}}}}}"#,
            env.registry_auth
        ),
    )
    .unwrap();
    let o = exo(&root, &["release", "pin"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains(&env.registry_password));
    let pinned = std::fs::read_to_string(root.join("releases/r1.yaml")).unwrap();
    assert!(pinned.contains(&pushed.digest), "{pinned}");

    // Wrong password: refused, not retried into a lockout, not printed.
    std::fs::write(
        root.join(".docker/config.json"),
        format!(
            r#"{{"auths":{{"{}":{{"username":"{}","password":"wrong-pass-123"}}}}}}"#,
            env.registry_auth, env.registry_user
        ),
    )
    .unwrap();
    let o = exo(&root, &["release", "pin", "--check"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!text(&o).contains("wrong-pass-123"));
}

/// A Bearer-token registry (Gitea's, as GHCR, Docker Hub and Harbor
/// work): the challenge sends the pin to the token service with the docker
/// login, one token covers the repositories, the digests are the pushed
/// ones, and neither the login nor the token shows; a wrong login is
/// refused by name and writes nothing.
#[tokio::test]
async fn pin_speaks_the_bearer_token_flow() {
    let gitea = support::gitea::Gitea::get();
    let (user, token) = gitea.registry_login();
    let auth = RegistryAuth::Basic(user.clone(), token.clone());
    let mut pushed = Vec::new();
    for (repo, tag) in [
        ("pin-bearer-a", "1.0.0"),
        ("pin-bearer-a", "1.1.0"),
        ("pin-bearer-b", "2.0.0"),
    ] {
        let repo = format!("{user}/{repo}");
        let payload = format!("bearer {repo} {tag} {}", std::process::id());
        pushed.push(
            support::push_image(gitea.registry(), &repo, tag, payload.as_bytes(), &auth).await,
        );
    }
    let refs: Vec<&str> = pushed.iter().map(|p| p.reference.as_str()).collect();
    let (_tmp, root) = release_fleet(&refs);
    let before = std::fs::read_to_string(root.join("releases/r1.yaml")).unwrap();

    // A wrong login: refused by name, nothing written, nothing shown.
    std::fs::create_dir_all(root.join(".docker")).unwrap();
    let config = |password: &str| {
        format!(
            r#"{{"auths":{{"{}":{{"username":"{user}","password":"{password}"}}}}}}"#,
            gitea.registry()
        )
    };
    std::fs::write(root.join(".docker/config.json"), config("wrong-login-456")).unwrap();
    let o = exo(&root, &["release", "pin"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("refused the credentials"), "{}", text(&o));
    assert!(!text(&o).contains("wrong-login-456"), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(root.join("releases/r1.yaml")).unwrap(),
        before
    );

    std::fs::write(root.join(".docker/config.json"), config(&token)).unwrap();
    let o = exo(&root, &["release", "pin"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains(&token), "the login's token was printed");
    let pinned = std::fs::read_to_string(root.join("releases/r1.yaml")).unwrap();
    for p in &pushed {
        let repo = p.reference.rsplit_once(':').unwrap().0;
        assert!(
            pinned.contains(&format!("{repo}@{}", p.digest)),
            "{} not pinned:\n{pinned}",
            p.reference
        );
    }
    let o = exo(&root, &["release", "pin", "--check"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// The registry going away during `exo release pin`, then coming back (a
/// relay in front of the real registry drops every connection while
/// down): the pin fails naming the image and writes nothing, the pinned
/// release stays as it was, and the same pin succeeds once it is back.
#[tokio::test]
async fn pin_with_the_registry_down_writes_nothing_and_succeeds_once_it_is_back() {
    let env = support::env();
    let relay = support::balancer::Balancer::start(vec![env.registry.clone()]);
    let via = relay.base.trim_start_matches("http://").to_owned();
    let one = support::push_image(
        &env.registry,
        "pin/down-a",
        "1",
        b"a1",
        &RegistryAuth::Anonymous,
    )
    .await;
    let (_tmp, root) = release_fleet(&[&format!("{via}/pin/down-a:1")]);
    let o = exo(&root, &["release", "pin"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let good = std::fs::read_to_string(root.join("releases/r1.yaml")).unwrap();
    assert!(good.contains(&one.digest), "{good}");

    // A second release, not pinned yet, while the registry is down.
    let two = support::push_image(
        &env.registry,
        "pin/down-b",
        "2",
        b"b2",
        &RegistryAuth::Anonymous,
    )
    .await;
    let r2 = format!(
        "apiVersion: autonomic.sh/v1alpha1\nkind: Release\nmetadata:\n  name: r2\nspec:\n  components:\n    - name: c0\n      layer: capability\n      image: {via}/pin/down-b:2\n  waves: []\n"
    );
    std::fs::write(root.join("releases/r2.yaml"), &r2).unwrap();
    relay.set_down(true);
    let o = exo(&root, &["release", "pin"]);
    println!("with the registry down: {}", text(&o).trim());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("pin/down-b:2") && text(&o).contains("nothing written"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read_to_string(root.join("releases/r1.yaml")).unwrap(),
        good,
        "the pinned release changed"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("releases/r2.yaml")).unwrap(),
        r2,
        "the unpinned release was half-written"
    );

    relay.set_down(false);
    let o = exo(&root, &["release", "pin"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let pinned = std::fs::read_to_string(root.join("releases/r2.yaml")).unwrap();
    assert!(
        pinned.contains(&format!("image: {via}/pin/down-b@{}", two.digest)),
        "{pinned}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("releases/r1.yaml")).unwrap(),
        good
    );
}
