//! Review on a forge: a change the CLI commits on a branch of its own
//! (`exo tenant onboard`, `exo tenant offboard`) becomes a pull request on
//! a Gitea-compatible forge, and merging it is the approval.
//!
//! This module is the pure core: the settings (`--forge`/`EXO_FORGE_URL`,
//! `EXO_FORGE_TOKEN` or `EXO_FORGE_TOKEN_FILE`, `EXO_FORGE_REPO` or the
//! repository named by origin's URL), the request and answer bodies, and a
//! pull request's title and body from a commit message. [`gitea`] is the
//! thin HTTP edge.
//!
//! The same edge sets commit statuses ([`Gitea::set_status`]), which the
//! operator's notifications post (`crate::notify`), on Gitea or, through
//! [`Dialect::GitHub`], on GitHub.
//!
//! Guarantees: the token is never in a message, an error or a `Debug`
//! output; every error names the forge and, once known, the repository.
//! Opening a pull request for a branch that has an open one already finds
//! and reports that one instead (running again is harmless).

pub mod gitea;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use gitea::Gitea;

/// The forge's base URL (the `--forge` flag's variable).
pub const URL_VAR: &str = "EXO_FORGE_URL";
/// The API token itself.
pub const TOKEN_VAR: &str = "EXO_FORGE_TOKEN";
/// A file holding the API token (what a Secret mount gives).
pub const TOKEN_FILE_VAR: &str = "EXO_FORGE_TOKEN_FILE";
/// `owner/name` of the fleet repository on the forge, when origin's URL
/// does not say it.
pub const REPO_VAR: &str = "EXO_FORGE_REPO";

#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    #[error("forge URL {url:?} is not an http:// or https:// URL")]
    BadUrl { url: String },
    #[error(
        "a forge is configured ({url}) but no token: set {TOKEN_VAR}, or {TOKEN_FILE_VAR} to a file holding it"
    )]
    NoToken { url: String },
    #[error("{}: cannot read the forge token ({TOKEN_FILE_VAR}): {source}", .path.display())]
    TokenFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: the forge token ({TOKEN_FILE_VAR}) is empty", .path.display())]
    EmptyTokenFile { path: PathBuf },
    #[error("{REPO_VAR}={value:?} is not owner/name")]
    BadRepo { value: String },
    #[error(
        "cannot tell the repository on {forge} from origin's URL {remote:?}: {reason}; set {REPO_VAR}=owner/name"
    )]
    RepoFromRemote {
        forge: String,
        remote: String,
        reason: &'static str,
    },
    #[error("{forge}: no TLS roots for the forge: {reason}")]
    Tls { forge: String, reason: String },
    #[error("{forge}: repository {repo}: {what}: {reason}")]
    Unreachable {
        forge: String,
        repo: RepoName,
        what: &'static str,
        reason: String,
    },
    #[error("{forge}: repository {repo}: {what}: HTTP {status}: {body}")]
    Status {
        forge: String,
        repo: RepoName,
        what: &'static str,
        status: u16,
        body: String,
    },
    #[error("{forge}: repository {repo}: {what}: the answer is not a pull request: {source}")]
    Answer {
        forge: String,
        repo: RepoName,
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{forge}: repository {repo}: refused a pull request from {head} ({status}: {body}), and none from it is open"
    )]
    NoOpenPull {
        forge: String,
        repo: RepoName,
        head: String,
        status: u16,
        body: String,
    },
}

/// An API token. Its `Debug` shows nothing of it.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    pub fn new(token: &str) -> Self {
        Token(token.trim().to_owned())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// A repository on the forge, `owner/name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoName {
    pub owner: String,
    pub name: String,
}

impl std::fmt::Display for RepoName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

fn segment_ok(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl RepoName {
    /// `owner/name` as [`REPO_VAR`] gives it.
    pub fn parse(value: &str) -> Result<Self, ForgeError> {
        let bad = || ForgeError::BadRepo {
            value: value.to_owned(),
        };
        let (owner, name) = value.trim().split_once('/').ok_or_else(bad)?;
        let name = name.strip_suffix(".git").unwrap_or(name);
        if !segment_ok(owner) || !segment_ok(name) {
            return Err(bad());
        }
        Ok(RepoName {
            owner: owner.to_owned(),
            name: name.to_owned(),
        })
    }

    /// The repository an `http(s)://host[:port][/prefix]/owner/name[.git][/]`
    /// remote names: its last two path segments. Other schemes (ssh,
    /// `git://`, a path) say nothing certain about the forge's names.
    pub fn from_remote(forge: &str, remote: &str) -> Result<Self, ForgeError> {
        let refused = |reason| ForgeError::RepoFromRemote {
            forge: forge.to_owned(),
            remote: remote.to_owned(),
            reason,
        };
        let rest = remote
            .strip_prefix("https://")
            .or_else(|| remote.strip_prefix("http://"))
            .ok_or_else(|| refused("only an http:// or https:// remote names it"))?;
        let path = rest
            .split_once('/')
            .map(|(_, p)| p)
            .ok_or_else(|| refused("the URL has no path"))?;
        let path = path.split(['?', '#']).next().unwrap_or(path);
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let [.., owner, name] = segments.as_slice() else {
            return Err(refused("the path is not …/owner/name"));
        };
        let name = name.strip_suffix(".git").unwrap_or(name);
        if !segment_ok(owner) || !segment_ok(name) {
            return Err(refused("the path is not …/owner/name"));
        }
        Ok(RepoName {
            owner: (*owner).to_owned(),
            name: name.to_owned(),
        })
    }
}

/// Where pull requests go: the forge, its token, and the repository when
/// [`REPO_VAR`] names it (else origin's URL will).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The base URL without a trailing slash.
    pub url: String,
    pub token: Token,
    pub repo: Option<RepoName>,
}

impl Settings {
    /// The settings from the `--forge` flag (which clap fills from
    /// [`URL_VAR`] too) and the other variables, read through `var`;
    /// `read` reads the token file. `None`: no forge is configured.
    pub fn resolve(
        url: Option<&str>,
        var: impl Fn(&str) -> Option<String>,
        read: impl Fn(&Path) -> std::io::Result<String>,
    ) -> Result<Option<Self>, ForgeError> {
        let Some(url) = url.map(str::trim).filter(|u| !u.is_empty()) else {
            return Ok(None);
        };
        let url = url.trim_end_matches('/').to_owned();
        let scheme_ok = ["http://", "https://"].iter().any(|s| {
            url.strip_prefix(s)
                .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
        });
        if !scheme_ok {
            return Err(ForgeError::BadUrl { url });
        }
        let var = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let token = match (var(TOKEN_VAR), var(TOKEN_FILE_VAR)) {
            (Some(t), _) => Token::new(&t),
            (None, Some(file)) => {
                let path = PathBuf::from(file);
                let text = read(&path).map_err(|source| ForgeError::TokenFile {
                    path: path.clone(),
                    source,
                })?;
                if text.trim().is_empty() {
                    return Err(ForgeError::EmptyTokenFile { path });
                }
                Token::new(&text)
            }
            (None, None) => return Err(ForgeError::NoToken { url }),
        };
        let repo = var(REPO_VAR).map(|r| RepoName::parse(&r)).transpose()?;
        Ok(Some(Settings { url, token, repo }))
    }

    /// The repository: [`REPO_VAR`]'s, or the one origin's URL names.
    pub fn repo_for(&self, origin: &str) -> Result<RepoName, ForgeError> {
        match &self.repo {
            Some(r) => Ok(r.clone()),
            None => RepoName::from_remote(&self.url, origin),
        }
    }
}

/// `POST /repos/{owner}/{repo}/pulls`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewPull {
    pub title: String,
    pub body: String,
    /// The branch to merge.
    pub head: String,
    /// The branch it merges into: the one the Fleet follows.
    pub base: String,
}

impl NewPull {
    /// The pull request for a commit: its first line the title, the rest
    /// (trimmed) the body.
    pub fn from_commit(message: &str, head: &str, base: &str) -> Self {
        let (title, body) = message.split_once('\n').unwrap_or((message, ""));
        NewPull {
            title: title.trim().to_owned(),
            body: body.trim().to_owned(),
            head: head.to_owned(),
            base: base.to_owned(),
        }
    }
}

/// Which API a forge speaks: Gitea's (`/api/v1` under the forge's URL,
/// `Authorization: token …`; Forgejo and Codeberg too) or GitHub's (the
/// settings' URL is the API's own, `https://api.github.com` or
/// `https://HOST/api/v3`; `Authorization: Bearer …`). The calls used here
/// (a repository, pull requests, commit statuses) have the same paths and
/// bodies on both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    #[default]
    Gitea,
    GitHub,
}

impl Dialect {
    /// The API's root under the settings' URL.
    pub fn api_root(self, url: &str) -> String {
        match self {
            Dialect::Gitea => format!("{url}/api/v1"),
            Dialect::GitHub => url.to_owned(),
        }
    }

    /// The `Authorization` header's scheme.
    pub fn auth_scheme(self) -> &'static str {
        match self {
            Dialect::Gitea => "token",
            Dialect::GitHub => "Bearer",
        }
    }
}

/// `POST /repos/{owner}/{repo}/statuses/{sha}`: a commit status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewStatus {
    /// `pending`, `success`, `error` or `failure`.
    pub state: String,
    /// One status per context: a later one replaces it on the forge's page.
    pub context: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_url: Option<String>,
}

/// Longest status description GitHub takes (Gitea takes more).
pub const STATUS_DESCRIPTION_MAX: usize = 140;

/// The parts of a forge's pull request this needs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PullRequest {
    pub number: u64,
    pub html_url: String,
    #[serde(default)]
    pub state: String,
    pub head: PullBranch,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PullBranch {
    #[serde(rename = "ref")]
    pub git_ref: String,
}

/// What opening a pull request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// A new one.
    New(PullRequest),
    /// The branch had an open one already (an earlier run's).
    Existing(PullRequest),
}

impl Opened {
    pub fn pull(&self) -> &PullRequest {
        match self {
            Opened::New(p) | Opened::Existing(p) => p,
        }
    }
}

impl std::fmt::Display for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (p, how) = match self {
            Opened::New(p) => (p, "opened"),
            Opened::Existing(p) => (p, "already open"),
        };
        write!(
            f,
            "pull request #{} {how}: {}; merging it is the approval",
            p.number, p.html_url
        )
    }
}

/// The open pull request from `head` among `pulls`, if any.
pub fn open_from<'a>(pulls: &'a [PullRequest], head: &str) -> Option<&'a PullRequest> {
    pulls
        .iter()
        .find(|p| p.head.git_ref == head && (p.state.is_empty() || p.state == "open"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(owner: &str, name: &str) -> RepoName {
        RepoName {
            owner: owner.into(),
            name: name.into(),
        }
    }

    #[test]
    fn the_repository_is_the_last_two_segments_of_an_http_remote() {
        let cases = [
            (
                "http://127.0.0.1:23000/exo-admin/fleet.git",
                "exo-admin/fleet",
            ),
            ("https://git.example.com/ops/fleet", "ops/fleet"),
            ("https://git.example.com/ops/fleet/", "ops/fleet"),
            ("https://git.example.com/ops/fleet.git/", "ops/fleet"),
            (
                "https://user@git.example.com:3000/ops/fleet.git",
                "ops/fleet",
            ),
            ("https://example.com/gitea/ops/fleet.git", "ops/fleet"),
        ];
        for (remote, want) in cases {
            let got = RepoName::from_remote("https://forge", remote)
                .unwrap_or_else(|e| panic!("{remote}: {e}"));
            assert_eq!(got.to_string(), want, "{remote}");
        }
    }

    #[test]
    fn other_remotes_are_refused_naming_the_variable_to_set() {
        for remote in [
            "git@git.example.com:ops/fleet.git",
            "ssh://git@git.example.com/ops/fleet.git",
            "git://127.0.0.1:29418/fleet.git",
            "/srv/git/fleet.git",
            "https://git.example.com/fleet.git",
            "https://git.example.com",
            "https://git.example.com/ops/..",
        ] {
            let e = RepoName::from_remote("https://forge", remote).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(REPO_VAR), "{remote}: {text}");
            assert!(text.contains(remote), "{remote}: {text}");
        }
    }

    #[test]
    fn owner_slash_name_is_parsed_and_checked() {
        assert_eq!(RepoName::parse("ops/fleet").unwrap(), repo("ops", "fleet"));
        assert_eq!(
            RepoName::parse("ops/fleet.git").unwrap(),
            repo("ops", "fleet")
        );
        for bad in ["fleet", "ops/", "/fleet", "a/b/c", "ops/fl eet", "../x"] {
            assert!(RepoName::parse(bad).is_err(), "{bad}");
        }
    }

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| owned.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    fn no_file(_: &Path) -> std::io::Result<String> {
        Err(std::io::Error::from(std::io::ErrorKind::NotFound))
    }

    #[test]
    fn no_url_is_no_forge() {
        let s = Settings::resolve(None, vars(&[(TOKEN_VAR, "t")]), no_file).unwrap();
        assert!(s.is_none());
        let s = Settings::resolve(Some(" "), vars(&[]), no_file).unwrap();
        assert!(s.is_none());
    }

    #[test]
    fn a_url_without_a_token_is_an_error_naming_both_variables() {
        let e = Settings::resolve(Some("http://forge:3000/"), vars(&[]), no_file).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(TOKEN_VAR) && text.contains(TOKEN_FILE_VAR),
            "{text}"
        );
        assert!(text.contains("http://forge:3000"), "{text}");
    }

    #[test]
    fn the_token_comes_from_the_variable_or_the_file_and_is_never_shown() {
        let s = Settings::resolve(
            Some("http://forge:3000/"),
            vars(&[(TOKEN_VAR, "s3cret\n"), (REPO_VAR, "ops/fleet")]),
            no_file,
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.url, "http://forge:3000");
        assert_eq!(s.token.expose(), "s3cret");
        assert_eq!(s.repo, Some(repo("ops", "fleet")));
        assert!(!format!("{s:?}").contains("s3cret"));

        let s = Settings::resolve(
            Some("https://forge"),
            vars(&[(TOKEN_FILE_VAR, "/run/token")]),
            |p: &Path| {
                assert_eq!(p, Path::new("/run/token"));
                Ok("from-file\n".into())
            },
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.token.expose(), "from-file");

        let e = Settings::resolve(
            Some("https://forge"),
            vars(&[(TOKEN_FILE_VAR, "/run/token")]),
            |_: &Path| Ok("\n".into()),
        )
        .unwrap_err();
        assert!(matches!(e, ForgeError::EmptyTokenFile { .. }), "{e}");
        let e = Settings::resolve(
            Some("https://forge"),
            vars(&[(TOKEN_FILE_VAR, "/run/token")]),
            no_file,
        )
        .unwrap_err();
        assert!(e.to_string().contains("/run/token"), "{e}");
    }

    #[test]
    fn only_http_urls_are_forges() {
        for bad in ["forge:3000", "ssh://forge", "http://", "file:///srv"] {
            let e = Settings::resolve(Some(bad), vars(&[(TOKEN_VAR, "t")]), no_file).unwrap_err();
            assert!(matches!(e, ForgeError::BadUrl { .. }), "{bad}: {e}");
        }
    }

    #[test]
    fn the_repository_variable_wins_over_origin() {
        let s = Settings::resolve(
            Some("https://forge"),
            vars(&[(TOKEN_VAR, "t"), (REPO_VAR, "ops/fleet")]),
            no_file,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            s.repo_for("git@forge:other/x.git").unwrap(),
            repo("ops", "fleet")
        );
        let s = Settings::resolve(Some("https://forge"), vars(&[(TOKEN_VAR, "t")]), no_file)
            .unwrap()
            .unwrap();
        assert_eq!(
            s.repo_for("https://forge/team/fleet.git").unwrap(),
            repo("team", "fleet")
        );
    }

    #[test]
    fn a_commit_message_splits_into_title_and_body() {
        let p = NewPull::from_commit(
            "Onboard tenant x: tier t\n\nModels: a\n\nMerging this is the approval.\n",
            "exo/onboard-x",
            "main",
        );
        assert_eq!(p.title, "Onboard tenant x: tier t");
        assert_eq!(p.body, "Models: a\n\nMerging this is the approval.");
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"title": "Onboard tenant x: tier t", "body": p.body,
                "head": "exo/onboard-x", "base": "main"})
        );
        let p = NewPull::from_commit("Offboard tenant y", "h", "b");
        assert_eq!(
            (p.title.as_str(), p.body.as_str()),
            ("Offboard tenant y", "")
        );
    }

    #[test]
    fn the_open_pull_from_a_branch_is_found_among_others() {
        let pulls: Vec<PullRequest> = serde_json::from_value(serde_json::json!([
            {"number": 1, "html_url": "u1", "state": "open", "head": {"ref": "exo/onboard-a"}},
            {"number": 2, "html_url": "u2", "state": "closed", "head": {"ref": "exo/onboard-b"}},
            {"number": 3, "html_url": "u3", "state": "open", "head": {"ref": "exo/onboard-b", "sha": "x"}},
        ]))
        .unwrap();
        assert_eq!(
            open_from(&pulls, "exo/onboard-b").map(|p| p.number),
            Some(3)
        );
        assert!(open_from(&pulls, "exo/onboard-c").is_none());
        assert_eq!(
            Opened::Existing(pulls[2].clone()).to_string(),
            "pull request #3 already open: u3; merging it is the approval"
        );
        assert_eq!(
            Opened::New(pulls[0].clone()).to_string(),
            "pull request #1 opened: u1; merging it is the approval"
        );
    }
}
