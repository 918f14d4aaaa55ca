#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Signed fleet commits end to end (`spec.verify`): keys made by the real
//! `ssh-keygen` and `gpg`, commits signed by the real `git commit -S`,
//! served by the test environment's git daemon, and a real `exo operator
//! run` following the Fleet.
//!
//! - a head signed by a trusted key is applied (`Verified=True`); an
//!   unsigned commit on top, or one signed by a key the Secret does not
//!   trust, is not: `Verified=False` names the commit and why, an Event
//!   says so, the metric counts it, `appliedCommit` stays, and no tenant's
//!   Rollout moves; the same with OpenPGP keys;
//! - `all-since`: an unsigned commit below a signed head is refused, named;
//! - a malformed `allowed_signers` line, an unknown key type or a stray
//!   Secret key: the Fleet's condition and the operator's log name the
//!   Fleet, the Secret and the key (and the line), never key data;
//! - the apiserver refuses a `spec.verify` without a Secret name, with a
//!   bad one or an unknown mode.
//!
//! A missing `ssh-keygen`, `gpg` or `git` fails the test (scripts/deps
//! installs them). Tests run one at a time (each runs an operator that
//! watches the whole cluster), with tenant prefixes unique per run.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use exo::crd::{Fleet as FleetCr, FleetStatus};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Patch, PatchParams};
use support::eventually;
use support::fleet::{Fixture, Operator, example_files, tail};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const OLD: &str = "2026.11.0";
const NEW: &str = "2026.11.1";
const SECRET: &str = "fleet-signers";

fn short(commit: &str) -> &str {
    &commit[..12]
}

/// Runs `program` (which must be installed), failing with its output.
fn run(program: &str, args: &[&str], dir: Option<&Path>, envs: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args).envs(envs.iter().map(|(k, v)| (*k, *v)));
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{program} is needed for these tests (scripts/deps installs it): {e}")
    });
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// An SSH signing key made by `ssh-keygen -t ed25519`.
struct SshKey {
    _dir: tempfile::TempDir,
    path: PathBuf,
    /// `ssh-ed25519 AAAA... comment`
    public: String,
}

impl SshKey {
    fn generate(comment: &str) -> Self {
        let dir = support::scratch();
        let path = dir.path().join("id_ed25519");
        let p = path.to_str().unwrap();
        run(
            "ssh-keygen",
            &["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", p],
            None,
            &[],
        );
        let public = std::fs::read_to_string(dir.path().join("id_ed25519.pub"))
            .unwrap()
            .trim()
            .to_owned();
        SshKey {
            _dir: dir,
            path,
            public,
        }
    }

    /// The key's base64 data, which no message may show.
    fn data(&self) -> &str {
        self.public.split_whitespace().nth(1).unwrap()
    }

    /// `SHA256:...`, as ssh-keygen prints it.
    fn fingerprint(&self) -> String {
        let out = run(
            "ssh-keygen",
            &["-l", "-f", &format!("{}.pub", self.path.display())],
            None,
            &[],
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_owned()
    }
}

/// An OpenPGP key made by `gpg --quick-gen-key` in a GNUPGHOME of its own.
struct GpgKey {
    home: tempfile::TempDir,
    fingerprint: String,
    armored: String,
}

impl GpgKey {
    fn generate(uid: &str) -> Self {
        let home = tempfile::Builder::new().prefix("gpg").tempdir().unwrap();
        let env = [("GNUPGHOME", home.path())];
        run(
            "gpg",
            &["--batch", "--passphrase", "", "--quick-gen-key", uid],
            None,
            &env,
        );
        let out = run(
            "gpg",
            &["--batch", "--with-colons", "--list-keys", uid],
            None,
            &env,
        );
        let fingerprint = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("fpr:"))
            .and_then(|l| l.split(':').find(|f| !f.is_empty()))
            .unwrap()
            .to_owned();
        let out = run(
            "gpg",
            &["--batch", "--armor", "--export", &fingerprint],
            None,
            &env,
        );
        GpgKey {
            home,
            fingerprint,
            armored: String::from_utf8(out.stdout).unwrap(),
        }
    }
}

impl Drop for GpgKey {
    fn drop(&mut self) {
        // The agent gpg started for this home.
        let _ = Command::new("gpgconf")
            .args(["--kill", "all"])
            .env("GNUPGHOME", self.home.path())
            .output();
    }
}

/// Who signs a commit.
#[derive(Clone, Copy)]
enum By<'a> {
    Nobody,
    Ssh(&'a SshKey),
    OpenPgp(&'a GpgKey),
}

/// A clone of the served fleet that commits with the real git and pushes.
struct Clone {
    dir: tempfile::TempDir,
}

impl Clone {
    fn of(fx: &Fixture) -> Self {
        let dir = support::scratch();
        let bare = fx.repo.path.to_str().unwrap().to_owned();
        run(
            "git",
            &["clone", "-q", &bare, "fleet"],
            Some(dir.path()),
            &[],
        );
        let c = Clone { dir };
        c.git(&["config", "user.name", "Exo Test"], &[]);
        c.git(&["config", "user.email", "test@exo.invalid"], &[]);
        c
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("fleet")
    }

    fn git(&self, args: &[&str], envs: &[(&str, &Path)]) -> Output {
        run("git", args, Some(&self.root()), envs)
    }

    /// Commits `changes` (path -> content, `None` removes) on the served
    /// `main` as it is now, signed `by`, pushes, and returns the commit.
    fn commit(&self, changes: &[(&str, Option<&str>)], message: &str, by: By<'_>) -> String {
        self.git(&["fetch", "-q", "origin"], &[]);
        self.git(&["reset", "-q", "--hard", "origin/main"], &[]);
        for (path, content) in changes {
            let p = self.root().join(path);
            match content {
                Some(c) => {
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::write(&p, c).unwrap();
                }
                None => {
                    let _ = std::fs::remove_file(&p);
                }
            }
        }
        self.git(&["add", "-A"], &[]);
        let commit = ["commit", "-q", "--allow-empty", "-m", message];
        match by {
            By::Nobody => {
                let mut args = vec!["-c", "commit.gpgsign=false"];
                args.extend(commit);
                args.push("--no-gpg-sign");
                self.git(&args, &[]);
            }
            By::Ssh(key) => {
                let signing = format!("user.signingkey={}", key.path.display());
                let mut args = vec!["-c", "gpg.format=ssh", "-c", &signing];
                args.extend(commit);
                args.push("-S");
                self.git(&args, &[]);
            }
            By::OpenPgp(key) => {
                let signing = format!("user.signingkey={}", key.fingerprint);
                let mut args = vec![
                    "-c",
                    "gpg.format=openpgp",
                    "-c",
                    "gpg.program=gpg",
                    "-c",
                    &signing,
                ];
                args.extend(commit);
                args.push("-S");
                self.git(&args, &[("GNUPGHOME", key.home.path())]);
            }
        }
        self.git(&["push", "-q", "origin", "HEAD:main"], &[]);
        let out = self.git(&["rev-parse", "HEAD"], &[]);
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// `releases/waves.yaml` with the canary wave on `release`.
    fn canary_on(&self, release: &str) -> String {
        self.git(&["fetch", "-q", "origin"], &[]);
        self.git(&["reset", "-q", "--hard", "origin/main"], &[]);
        let text = std::fs::read_to_string(self.root().join("releases/waves.yaml")).unwrap();
        let (head, rest) = text.split_once("  canary:\n").unwrap();
        let (line, rest) = rest.split_once('\n').unwrap();
        assert!(line.trim().starts_with("release:"), "{line}");
        format!("{head}  canary:\n    release: {release}\n{rest}")
    }
}

/// Writes the trusted keys' Secret (`stringData`), replacing what it held.
async fn put_secret(fx: &Fixture, entries: &[(&str, &str)]) {
    let data: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::json!(v)))
        .collect();
    let _ = fx
        .ns
        .api::<Secret>()
        .delete(SECRET, &Default::default())
        .await;
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": SECRET, "namespace": fx.ns.name},
        "stringData": data,
    }))
    .unwrap();
    fx.ns
        .api::<Secret>()
        .patch(
            SECRET,
            &PatchParams::apply("exo-tests").force(),
            &Patch::Apply(&secret),
        )
        .await
        .expect("write the trusted keys' Secret");
}

async fn fleet_status(fx: &Fixture) -> FleetStatus {
    fx.ns
        .api::<FleetCr>()
        .get("fleet")
        .await
        .unwrap()
        .status
        .unwrap_or_default()
}

fn condition<'a>(s: &'a FleetStatus, type_: &str) -> Option<&'a Condition> {
    s.conditions.iter().find(|c| c.type_ == type_)
}

/// Waits until the Fleet's status satisfies `check`.
async fn wait_fleet(
    fx: &Fixture,
    op: &Operator,
    what: &str,
    check: impl Fn(&FleetStatus) -> bool,
) -> FleetStatus {
    let check = &check;
    let found = tokio::time::timeout(
        Duration::from_secs(90),
        eventually(what, Duration::from_secs(90), || async move {
            let s = fleet_status(fx).await;
            check(&s).then_some(s)
        }),
    )
    .await;
    match found {
        Ok(s) => s,
        Err(_) => panic!(
            "timed out waiting for {what}; Fleet status {:#?}\noperator log tail:\n{}",
            fleet_status(fx).await,
            tail(&op.log())
        ),
    }
}

/// Waits until `commit` is applied and verified.
async fn wait_applied(fx: &Fixture, op: &Operator, commit: &str, signer: &str) -> FleetStatus {
    let s = wait_fleet(fx, op, &format!("{} applied", short(commit)), |s| {
        s.applied_commit.as_deref() == Some(commit)
            && condition(s, "Verified")
                .is_some_and(|c| c.status == "True" && c.message.contains(short(commit)))
    })
    .await;
    let v = condition(&s, "Verified").unwrap();
    assert_eq!(v.reason, "Signed");
    assert!(v.message.contains(signer), "{}", v.message);
    assert!(v.observed_generation.is_some());
    let ready = condition(&s, "Ready").unwrap();
    assert_eq!(ready.status, "True", "{ready:?}");
    assert!(ready.observed_generation.is_some());
    s
}

/// Waits until `commit` is fetched and refused for `reason`; checks that
/// `applied` stays applied, that an Event names the commit, and returns
/// the `Verified` condition's message.
async fn wait_refused(
    fx: &Fixture,
    op: &Operator,
    commit: &str,
    reason: &str,
    applied: &str,
) -> String {
    let s = wait_fleet(
        fx,
        op,
        &format!("{} refused ({reason})", short(commit)),
        |s| {
            s.fetched_commit.as_deref() == Some(commit)
                && condition(s, "Verified").is_some_and(|c| {
                    c.status == "False" && c.reason == reason && c.message.contains(short(commit))
                })
        },
    )
    .await;
    assert_eq!(s.applied_commit.as_deref(), Some(applied), "{s:#?}");
    let ready = condition(&s, "Ready").unwrap();
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason, "VerificationFailed");
    let message = condition(&s, "Verified").unwrap().message.clone();
    assert!(
        message.contains(&format!("{} stays applied", short(applied))),
        "{message}"
    );
    eventually(
        "a CommitVerificationFailed Event naming the commit",
        Duration::from_secs(30),
        || async {
            support::events(&fx.ns.name, "CommitVerificationFailed")
                .await
                .into_iter()
                .find(|e| {
                    e.note.as_deref().is_some_and(|n| n.contains(short(commit)))
                        && e.type_.as_deref() == Some("Warning")
                })
        },
    )
    .await;
    message
}

/// No tenant's Rollout moved off `release` or `commit`.
async fn rollouts_stay(fx: &Fixture, release: &str, commit: &str) {
    for t in fx.tenants() {
        let r = fx.rollout(&t).await.expect("the tenant's Rollout");
        assert_eq!(r.spec.release, release, "{t}");
        assert_eq!(r.spec.commit, commit, "{t}: {:?}", r.spec);
    }
}

/// Waits for every tenant's Rollout to be written at `commit`.
async fn wait_rollouts(fx: &Fixture, commit: &str) {
    for t in fx.tenants() {
        eventually(
            &format!("{t}'s Rollout at {}", short(commit)),
            Duration::from_secs(60),
            || async { fx.rollout(&t).await.filter(|r| r.spec.commit == commit) },
        )
        .await;
    }
}

fn verify_spec(mode: &str) -> serde_json::Value {
    serde_json::json!({"verify": {"mode": mode, "secretRef": SECRET}})
}

/// The example fleet with `spec.verify` in `mode`, tenants prefixed
/// `sg<kind>-<unique>`: unique per run, as a run before this one in the
/// same environment may still be deleting its tenants' namespaces.
async fn fixture(kind: &str, mode: &str) -> Fixture {
    let p = format!("sg{kind}-{}", support::unique_suffix());
    Fixture::with_spec(&p, example_files(&p), verify_spec(mode)).await
}

/// The three cases with one kind of key: a trusted signer applies, an
/// unsigned commit and an untrusted signer do not, and signing again lets
/// the refused change go on.
async fn trusted_unsigned_and_untrusted(
    fx: &Fixture,
    trusted: By<'_>,
    untrusted: By<'_>,
    signer: &str,
    untrusted_id: &str,
) {
    let clone = Clone::of(fx);
    // The fixture's first commit is unsigned: a signed one on top.
    let good = clone.commit(&[], "signed head", trusted);
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    wait_applied(fx, &op, &good, signer).await;
    // Every tenant at the first commit (the sync wrote each spec at it).
    wait_rollouts(fx, &good).await;
    rollouts_stay(fx, OLD, &good).await;

    // Unsigned, and moving the canary wave: not applied.
    let waves = clone.canary_on(NEW);
    let unsigned = clone.commit(
        &[("releases/waves.yaml", Some(&waves))],
        "canary to 2026.11.1, unsigned",
        By::Nobody,
    );
    fx.request_sync().await;
    let m = wait_refused(fx, &op, &unsigned, "Unsigned", &good).await;
    assert!(
        m.starts_with(&format!("commit {}: unsigned", short(&unsigned))),
        "{m}"
    );
    rollouts_stay(fx, OLD, &good).await;

    // Signed by a key the Secret does not hold: not applied either.
    let untrusted = clone.commit(&[], "signed by someone else", untrusted);
    fx.request_sync().await;
    let m = wait_refused(fx, &op, &untrusted, "UntrustedSigner", &good).await;
    assert!(m.contains(untrusted_id), "{m}");
    assert!(m.contains("which the Secret does not list"), "{m}");
    rollouts_stay(fx, OLD, &good).await;
    let failures = op
        .metric("exo_fleet_commit_verification_failures_total")
        .unwrap_or_default();
    assert!(failures >= 2, "{failures}");
    let log = op.log();
    assert!(log.contains("fleet commit not verified"), "{}", tail(&log));

    // Signed by the trusted key again: the canary move goes on.
    let resigned = clone.commit(&[], "signed again", trusted);
    fx.request_sync().await;
    wait_applied(fx, &op, &resigned, signer).await;
    let canary = format!("{}-platform", fx.prefix);
    eventually(
        "the canary tenant's Rollout on the new release",
        Duration::from_secs(60),
        || async { fx.rollout(&canary).await.filter(|r| r.spec.release == NEW) },
    )
    .await;
}

#[tokio::test]
async fn ssh_signed_commits_apply_and_unsigned_or_untrusted_ones_do_not() {
    let _serial = SERIAL.lock().await;
    let alice = SshKey::generate("alice@example.com");
    let mallory = SshKey::generate("mallory@example.com");
    let fx = fixture("s", "head").await;
    put_secret(
        &fx,
        &[(
            "allowed_signers",
            &format!(
                "# who may sign the fleet\nalice@example.com namespaces=\"git\" {}\n",
                alice.public
            ),
        )],
    )
    .await;
    trusted_unsigned_and_untrusted(
        &fx,
        By::Ssh(&alice),
        By::Ssh(&mallory),
        "alice@example.com",
        &mallory.fingerprint(),
    )
    .await;
}

#[tokio::test]
async fn openpgp_signed_commits_apply_and_unsigned_or_untrusted_ones_do_not() {
    let _serial = SERIAL.lock().await;
    let bob = GpgKey::generate("Bob <bob@example.com>");
    let eve = GpgKey::generate("Eve <eve@example.com>");
    let fx = fixture("g", "head").await;
    put_secret(&fx, &[("team.asc", &bob.armored)]).await;
    // gpg's default key signs with its primary key: Eve is named by her
    // fingerprint.
    trusted_unsigned_and_untrusted(
        &fx,
        By::OpenPgp(&bob),
        By::OpenPgp(&eve),
        "Bob <bob@example.com>",
        &format!("OpenPGP key {}", eve.fingerprint),
    )
    .await;
    let s = fleet_status(&fx).await;
    let v = condition(&s, "Verified").unwrap();
    assert!(
        v.message
            .contains(&format!("(OpenPGP key {})", bob.fingerprint)),
        "{}",
        v.message
    );
}

#[tokio::test]
async fn all_since_refuses_an_unsigned_commit_below_a_signed_head() {
    let _serial = SERIAL.lock().await;
    let alice = SshKey::generate("alice@example.com");
    let fx = fixture("a", "all-since").await;
    put_secret(
        &fx,
        &[(
            "allowed_signers",
            &format!("alice@example.com {}\n", alice.public),
        )],
    )
    .await;
    let clone = Clone::of(&fx);
    // The fixture's first commit is unsigned; with no commit applied yet,
    // the signed head alone is checked.
    let good = clone.commit(&[], "signed head", By::Ssh(&alice));
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    let s = wait_applied(&fx, &op, &good, "alice@example.com").await;
    let v = condition(&s, "Verified").unwrap();
    assert!(v.message.contains("no commit applied yet"), "{}", v.message);
    wait_rollouts(&fx, &good).await;

    // An unsigned commit, then a signed one on top, pushed together.
    let waves = clone.canary_on(NEW);
    let unsigned = clone.commit(
        &[("releases/waves.yaml", Some(&waves))],
        "canary to 2026.11.1, unsigned",
        By::Nobody,
    );
    let head = clone.commit(&[], "signed on top", By::Ssh(&alice));
    fx.request_sync().await;
    let s = wait_fleet(
        &fx,
        &op,
        "the unsigned commit below the head refused",
        |s| {
            s.fetched_commit.as_deref() == Some(head.as_str())
                && condition(s, "Verified").is_some_and(|c| c.status == "False")
        },
    )
    .await;
    let v = condition(&s, "Verified").unwrap();
    assert_eq!(v.reason, "Unsigned", "{v:?}");
    assert!(
        v.message.starts_with(&format!(
            "commit {} (before head {}): unsigned",
            short(&unsigned),
            short(&head)
        )),
        "{}",
        v.message
    );
    assert_eq!(s.applied_commit.as_deref(), Some(good.as_str()));
    rollouts_stay(&fx, OLD, &good).await;

    // Signed again on top: still refused, the unsigned commit is in the
    // range since the applied one; the Event names it.
    let later = clone.commit(&[], "another signed one", By::Ssh(&alice));
    fx.request_sync().await;
    let s = wait_fleet(&fx, &op, "the unsigned commit still refused", |s| {
        s.fetched_commit.as_deref() == Some(later.as_str())
            && condition(s, "Verified").is_some_and(|c| {
                c.status == "False"
                    && c.message
                        .contains(&format!("before head {}", short(&later)))
            })
    })
    .await;
    let v = condition(&s, "Verified").unwrap();
    assert!(
        v.message
            .starts_with(&format!("commit {} (before head", short(&unsigned))),
        "{}",
        v.message
    );
    assert_eq!(s.applied_commit.as_deref(), Some(good.as_str()));
    eventually(
        "an Event naming the unsigned commit",
        Duration::from_secs(30),
        || async {
            support::events(&fx.ns.name, "CommitVerificationFailed")
                .await
                .into_iter()
                .find(|e| {
                    e.note
                        .as_deref()
                        .is_some_and(|n| n.contains(short(&unsigned)))
                })
        },
    )
    .await;
    rollouts_stay(&fx, OLD, &good).await;
}

/// A Secret's keys and values.
type Entries = Vec<(&'static str, String)>;

#[tokio::test]
async fn bad_trusted_keys_name_the_fleet_the_secret_and_the_key() {
    let _serial = SERIAL.lock().await;
    let alice = SshKey::generate("alice@example.com");
    let fx = fixture("k", "head").await;
    let clone = Clone::of(&fx);
    let head = clone.commit(&[], "signed head", By::Ssh(&alice));
    let fleet = format!("Fleet {}/fleet", fx.ns.name);
    let secret = format!("Secret {}/{SECRET} (spec.verify.secretRef)", fx.ns.name);
    let trusted = format!("alice@example.com {}\n", alice.public);
    let bad_asc =
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAA\n-----END PGP PUBLIC KEY BLOCK-----\n";
    // (the Secret's entries, none: no Secret; the reason; what the message says)
    let cases: Vec<(Option<Entries>, &str, &str)> = vec![
        (None, "KeysUnavailable", "not found"),
        (
            Some(vec![(
                "allowed_signers",
                format!(
                    "# signers\n{trusted}bob@example.com namespaces=\"git {}\n",
                    alice.public
                ),
            )]),
            "InvalidKeys",
            "key \"allowed_signers\", line 3: an unterminated quote",
        ),
        (
            Some(vec![(
                "allowed_signers",
                format!("alice@example.com ssh-foo {}\n", alice.data()),
            )]),
            "InvalidKeys",
            "key \"allowed_signers\", line 1: unknown key type \"ssh-foo\"",
        ),
        (
            // Refused, not ignored.
            Some(vec![(
                "allowed_signers",
                format!("*@example.com cert-authority {}\n", alice.public),
            )]),
            "InvalidKeys",
            "key \"allowed_signers\", line 1: cert-authority is not supported",
        ),
        (
            Some(vec![
                ("allowed_signers", trusted.clone()),
                ("token", "hunter2".into()),
            ]),
            "InvalidKeys",
            "key \"token\" is neither",
        ),
        (
            Some(vec![("team.asc", bad_asc.into())]),
            "InvalidKeys",
            "key \"team.asc\": not an armored OpenPGP public key",
        ),
    ];
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    for (entries, reason, says) in &cases {
        if let Some(entries) = entries {
            let refs: Vec<(&str, &str)> = entries.iter().map(|(k, v)| (*k, v.as_str())).collect();
            put_secret(&fx, &refs).await;
            fx.request_sync().await;
        }
        let s = wait_fleet(&fx, &op, &format!("{reason}: {says}"), |s| {
            s.fetched_commit.as_deref() == Some(head.as_str())
                && condition(s, "Verified").is_some_and(|c| {
                    c.status == "False" && c.reason == *reason && c.message.contains(says)
                })
        })
        .await;
        assert_eq!(s.applied_commit, None, "nothing applied: {s:#?}");
        let m = &condition(&s, "Verified").unwrap().message;
        assert!(m.starts_with(&format!("{fleet}: {secret}: ")), "{m}");
        assert!(!m.contains(alice.data()), "key data in {m}");
    }

    // The log names the same, and never shows key data.
    let log = op.log();
    for want in [
        "line 3: an unterminated quote",
        "unknown key type",
        "ssh-foo",
        "is neither",
        SECRET,
        &fx.ns.name,
    ] {
        assert!(log.contains(want), "{want} not in the log:\n{}", tail(&log));
    }
    assert!(!log.contains(alice.data()), "key data in the log");
    assert!(!log.contains("hunter2"), "a Secret value in the log");

    // Fixed: the head applies.
    put_secret(&fx, &[("allowed_signers", &trusted)]).await;
    fx.request_sync().await;
    wait_applied(&fx, &op, &head, "alice@example.com").await;
}

#[tokio::test]
async fn the_apiserver_refuses_a_bad_verify_spec() {
    let ns = support::TestNamespace::new("sg-cel").await;
    support::install_crds(&ns.client).await;
    let fleets = ns.api::<FleetCr>();
    // Sent as JSON: the Rust type would refuse some of these itself.
    let apply = |verify: serde_json::Value| {
        let body = serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "Fleet",
            "metadata": {"name": "f", "namespace": ns.name},
            "spec": {"url": "https://git.example.com/fleet.git", "verify": verify}
        });
        let fleets = fleets.clone();
        async move {
            fleets
                .patch("f", &PatchParams::apply("exo-tests"), &Patch::Apply(&body))
                .await
        }
    };
    for (verify, says) in [
        (
            serde_json::json!({"secretRef": "Not_A_Secret"}),
            "secretRef must be a Secret name",
        ),
        (
            serde_json::json!({"mode": "everything", "secretRef": "signers"}),
            "Unsupported value: \"everything\"",
        ),
        (
            serde_json::json!({"mode": "head"}),
            "secretRef: Required value",
        ),
    ] {
        let err = apply(verify).await.unwrap_err();
        assert!(err.to_string().contains(says), "{says}: {err}");
    }
    let made = apply(serde_json::json!({"secretRef": "signers"}))
        .await
        .expect("a valid spec.verify");
    let v = made.spec.verify.unwrap();
    assert_eq!(v.mode, exo::crd::VerifyMode::Head, "the default mode");
}
