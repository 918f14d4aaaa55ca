//! The forge's HTTP edge: Gitea's API (`/api/v1`, which Forgejo and
//! Codeberg serve too), authenticated with `Authorization: token …`, or
//! GitHub's where the calls are the same ([`Dialect`]). Every call has a
//! deadline; an answer in an error is cut short and never carries the
//! token.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};

use crate::net;

use super::{
    Dialect, ForgeError, NewPull, NewStatus, Opened, PullRequest, RepoName, Settings, Token,
    open_from,
};

/// How long one call may take.
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);
/// Pages of open pull requests searched for a branch's (50 each).
const MAX_PAGES: u32 = 20;

/// A Gitea-compatible forge (or GitHub, for the calls they share).
pub struct Gitea {
    url: String,
    token: Token,
    dialect: Dialect,
    client: net::Client,
}

impl Gitea {
    pub fn new(settings: &Settings) -> Result<Self, ForgeError> {
        let client = net::client().map_err(|e| ForgeError::Tls {
            forge: settings.url.clone(),
            reason: e.to_string(),
        })?;
        Ok(Self::with_client(settings, Dialect::Gitea, client))
    }

    /// A forge of `dialect` over a client the caller shares (its pool and
    /// roots read once).
    pub fn with_client(settings: &Settings, dialect: Dialect, client: net::Client) -> Self {
        Gitea {
            url: settings.url.clone(),
            token: settings.token.clone(),
            dialect,
            client,
        }
    }

    /// One API call: the status and the answer's bytes.
    async fn call(
        &self,
        repo: &RepoName,
        what: &'static str,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, Bytes), ForgeError> {
        let fail = |reason: String| ForgeError::Unreachable {
            forge: self.url.clone(),
            repo: repo.clone(),
            what,
            reason,
        };
        let req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.dialect.api_root(&self.url)))
            .header(
                "authorization",
                format!("{} {}", self.dialect.auth_scheme(), self.token.expose()),
            )
            .header("accept", "application/json")
            // GitHub refuses a request without one.
            .header("user-agent", concat!("exo/", env!("CARGO_PKG_VERSION")))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| fail(format!("bad request: {e}")))?;
        let answer = net::send(&self.client, req, DEADLINE)
            .await
            .map_err(|e| fail(e.to_string()))?;
        Ok((answer.status, answer.body))
    }

    /// The start of an answer, for a message, with the token (should a
    /// server echo it) masked.
    fn shown(&self, bytes: &[u8]) -> String {
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
        let token = self.token.expose();
        let text = if token.is_empty() {
            text
        } else {
            text.replace(token, "[redacted]")
        };
        text.trim().to_owned()
    }

    fn parse<T: serde::de::DeserializeOwned>(
        &self,
        repo: &RepoName,
        what: &'static str,
        bytes: &[u8],
    ) -> Result<T, ForgeError> {
        serde_json::from_slice(bytes).map_err(|source| ForgeError::Answer {
            forge: self.url.clone(),
            repo: repo.clone(),
            what,
            source,
        })
    }

    /// Whether the token may read `repo`: asked before anything is
    /// committed, so that a wrong token, repository or forge URL stops a
    /// verb with nothing written.
    pub async fn check_repo(&self, repo: &RepoName) -> Result<(), ForgeError> {
        const WHAT: &str = "read the repository";
        let path = format!("/repos/{}/{}", repo.owner, repo.name);
        let (status, bytes) = self.call(repo, WHAT, Method::GET, &path, None).await?;
        if status.is_success() {
            return Ok(());
        }
        Err(self.refused(repo, WHAT, status, &bytes))
    }

    fn refused(
        &self,
        repo: &RepoName,
        what: &'static str,
        status: StatusCode,
        bytes: &[u8],
    ) -> ForgeError {
        ForgeError::Status {
            forge: self.url.clone(),
            repo: repo.clone(),
            what,
            status: status.as_u16(),
            body: self.shown(bytes),
        }
    }

    /// Opens a pull request; when the forge refuses it because the branch
    /// has one open already (Gitea answers 409, older versions 422), that
    /// one is found and returned as [`Opened::Existing`].
    pub async fn open_pull(&self, repo: &RepoName, new: &NewPull) -> Result<Opened, ForgeError> {
        const WHAT: &str = "open a pull request";
        let body = serde_json::to_vec(new).unwrap_or_default();
        let path = format!("/repos/{}/{}/pulls", repo.owner, repo.name);
        let (status, bytes) = self
            .call(repo, WHAT, Method::POST, &path, Some(body))
            .await?;
        if status.is_success() {
            return Ok(Opened::New(self.parse(repo, WHAT, &bytes)?));
        }
        if status == StatusCode::CONFLICT || status == StatusCode::UNPROCESSABLE_ENTITY {
            return match self.find_open(repo, &new.head).await? {
                Some(p) => Ok(Opened::Existing(p)),
                None => Err(ForgeError::NoOpenPull {
                    forge: self.url.clone(),
                    repo: repo.clone(),
                    head: new.head.clone(),
                    status: status.as_u16(),
                    body: self.shown(&bytes),
                }),
            };
        }
        Err(self.refused(repo, WHAT, status, &bytes))
    }

    /// Sets a commit status on `sha`; the same `context` again replaces
    /// the one shown.
    pub async fn set_status(
        &self,
        repo: &RepoName,
        sha: &str,
        status: &NewStatus,
    ) -> Result<(), ForgeError> {
        const WHAT: &str = "set a commit status";
        let body = serde_json::to_vec(status).unwrap_or_default();
        let path = format!(
            "/repos/{}/{}/statuses/{}",
            repo.owner,
            repo.name,
            net::query_value(sha)
        );
        let (status, bytes) = self
            .call(repo, WHAT, Method::POST, &path, Some(body))
            .await?;
        if status.is_success() {
            return Ok(());
        }
        Err(self.refused(repo, WHAT, status, &bytes))
    }

    /// The open pull request from `head`, if there is one.
    pub async fn find_open(
        &self,
        repo: &RepoName,
        head: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        const WHAT: &str = "list open pull requests";
        for page in 1..=MAX_PAGES {
            let path = format!(
                "/repos/{}/{}/pulls?state=open&limit=50&page={page}",
                repo.owner, repo.name
            );
            let (status, bytes) = self.call(repo, WHAT, Method::GET, &path, None).await?;
            if !status.is_success() {
                return Err(self.refused(repo, WHAT, status, &bytes));
            }
            let pulls: Vec<PullRequest> = self.parse(repo, WHAT, &bytes)?;
            if let Some(p) = open_from(&pulls, head) {
                return Ok(Some(p.clone()));
            }
            if pulls.is_empty() {
                break;
            }
        }
        Ok(None)
    }
}
