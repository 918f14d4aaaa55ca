//! The test environment's Gitea (`scripts/testenv up`): its API as the
//! admin, a public repository made for one test (deleted when dropped),
//! and git over HTTP with the admin's token through a credential store
//! file, never in a URL. A missing Gitea is a test failure with
//! instructions, never a skip.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const HOW_TO_START: &str = "Start the test environment with `scripts/testenv up` (which \
     starts Gitea too) and `set -a; eval \"$(scripts/testenv env)\"; set +a`.";

/// Where Gitea is and who the tests are on it.
#[derive(Clone)]
pub struct Gitea {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub url: String,
    pub user: String,
    /// The file holding the admin's API token (`EXO_FORGE_TOKEN_FILE` for
    /// the CLI).
    pub token_file: PathBuf,
    token: String,
}

impl std::fmt::Debug for Gitea {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gitea({} as {})", self.url, self.user)
    }
}

impl Gitea {
    /// The testenv's Gitea, answering; panics with instructions otherwise.
    pub fn get() -> Self {
        let var = |key: &str| {
            super::testenv_var(key).unwrap_or_else(|| {
                panic!("no Gitea for the tests: {key} is not set. {HOW_TO_START}")
            })
        };
        let url = var("EXO_TEST_GITEA_URL").trim_end_matches('/').to_owned();
        let token_file = PathBuf::from(var("EXO_TEST_GITEA_TOKEN_FILE"));
        let token = std::fs::read_to_string(&token_file)
            .unwrap_or_else(|e| panic!("{}: {e}. {HOW_TO_START}", token_file.display()))
            .trim()
            .to_owned();
        let g = Gitea {
            url,
            user: var("EXO_TEST_GITEA_USER"),
            token_file,
            token,
        };
        let (status, body) = g
            .try_api("GET", "/version", None)
            .unwrap_or_else(|e| panic!("Gitea at {} does not answer: {e}. {HOW_TO_START}", g.url));
        assert_eq!(status, 200, "Gitea at {}: /version: {body}", g.url);
        g
    }

    fn authority(&self) -> &str {
        self.url.trim_start_matches("http://")
    }

    /// Its container registry (`host:port`), a Bearer-token registry.
    pub fn registry(&self) -> &str {
        self.authority()
    }

    /// The user and API token its registry takes as a docker login.
    pub fn registry_login(&self) -> (String, String) {
        (self.user.clone(), self.token.clone())
    }

    fn try_api(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> std::io::Result<(u16, serde_json::Value)> {
        let mut s = TcpStream::connect(self.authority())?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        write!(
            s,
            "{method} /api/v1{path} HTTP/1.0\r\nHost: {}\r\nAuthorization: token {}\r\n\
             Content-Type: application/json\r\nAccept: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.authority(),
            self.token,
            body.len()
        )?;
        let mut text = String::new();
        s.read_to_string(&mut text)?;
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let answer = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let json = serde_json::from_str(answer).unwrap_or(serde_json::Value::Null);
        Ok((status, json))
    }

    /// An API call (`path` below `/api/v1`) as the admin: the status and
    /// the JSON answer (null when there is none).
    pub fn api(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        self.try_api(method, path, body)
            .unwrap_or_else(|e| panic!("{method} {}{path}: {e}", self.url))
    }

    /// Makes the public repository `name` of the admin, empty.
    pub fn create_repo(&self, name: &str) -> Repo {
        let (status, body) = self.api(
            "POST",
            "/user/repos",
            Some(&serde_json::json!({"name": name, "private": false, "default_branch": "main"})),
        );
        assert_eq!(status, 201, "create repository {name}: {body}");
        Repo {
            gitea: self.clone(),
            owner: self.user.clone(),
            name: name.to_owned(),
            clone_url: format!("{}/{}/{name}.git", self.url, self.user),
        }
    }

    /// Writes a git credential store file granting the admin's token for
    /// this Gitea, and sets `credential.helper` in the repository at
    /// `git_dir` to it, so pushes authenticate with no secret in a URL.
    pub fn grant_push(&self, git_dir: &Path, store: &Path) {
        let line = format!("http://{}:{}@{}\n", self.user, self.token, self.authority());
        std::fs::write(store, line).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(store, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let repo = git2::Repository::open(git_dir).unwrap();
        repo.config()
            .unwrap()
            .set_str(
                "credential.helper",
                &format!("store --file={}", store.display()),
            )
            .unwrap();
    }

    /// The environment that points `exo tenant onboard|offboard` at this
    /// Gitea (the token by file, so it is in no command line).
    pub fn cli_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("EXO_FORGE_URL", self.url.clone()),
            (
                "EXO_FORGE_TOKEN_FILE",
                self.token_file.display().to_string(),
            ),
        ]
    }
}

/// A repository on Gitea, deleted when dropped.
pub struct Repo {
    pub gitea: Gitea,
    pub owner: String,
    pub name: String,
    /// `http://127.0.0.1:PORT/owner/name.git`: anyone may fetch it.
    pub clone_url: String,
}

impl Repo {
    fn path(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", self.owner, self.name)
    }

    /// Its open pull requests.
    pub fn open_pulls(&self) -> Vec<serde_json::Value> {
        let (status, body) = self
            .gitea
            .api("GET", &self.path("/pulls?state=open&limit=50"), None);
        assert_eq!(status, 200, "list pull requests: {body}");
        body.as_array().cloned().unwrap_or_default()
    }

    /// The open pull request from `branch`; panics when there is none.
    pub fn open_pull_from(&self, branch: &str) -> serde_json::Value {
        let pulls = self.open_pulls();
        pulls
            .iter()
            .find(|p| p["head"]["ref"] == branch)
            .cloned()
            .unwrap_or_else(|| panic!("no open pull request from {branch} in {pulls:#?}"))
    }

    /// Merges pull request `number` (a merge commit), as a reviewer would.
    /// Gitea checks a new pull request's mergeability in the background,
    /// and refuses a merge until it has: that is retried, for a while.
    pub fn merge(&self, number: u64) {
        let path = self.path(&format!("/pulls/{number}/merge"));
        let body = serde_json::json!({"Do": "merge"});
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (status, answer) = self.gitea.api("POST", &path, Some(&body));
            if status == 200 {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline && (status == 405 || status == 409),
                "merge pull request #{number}: {status}: {answer}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Pushes `main` of the repository at `git_dir` here, with the admin's
    /// token from the store file [`Gitea::grant_push`] set up.
    pub fn push_main(&self, git_dir: &Path) {
        self.sync_main(git_dir, "push");
    }

    /// Fetches this repository's `main` into `main` of the (bare)
    /// repository at `git_dir`.
    pub fn fetch_main(&self, git_dir: &Path) {
        self.sync_main(git_dir, "fetch");
    }

    fn sync_main(&self, git_dir: &Path, verb: &str) {
        let o = Command::new("git")
            .args([
                verb,
                "-q",
                &self.clone_url,
                "+refs/heads/main:refs/heads/main",
            ])
            .current_dir(git_dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "git {verb} {}: {}",
            self.clone_url,
            super::fleet::out(&o)
        );
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = self.gitea.try_api("DELETE", &self.path(""), None);
    }
}
