//! What is notified: an [`Event`] (a kind, the tenants it concerns, the
//! wave, release and commit when known, a message and a time) or a
//! [`CommitStatus`] (pending, success or failure of one tenant's rollout
//! on the release commit). Both travel as a [`Notice`]. Pure.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use sha2::{Digest, Sha256};

pub use crate::crd::{EventKind, Severity};
use crate::fleet::release::WaveName;

/// Something that happened, for the rules that select its kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    pub kind: EventKind,
    /// The tenants it concerns, sorted: one for a tenant's event, a wave's
    /// for a wave's, none for one about the fleet as a whole.
    pub tenants: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<WaveName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// The fleet repository's commit, when the event is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub message: String,
    pub time: Timestamp,
}

impl Event {
    /// An event of `kind` now, about no tenant yet.
    pub fn new(kind: EventKind, message: impl Into<String>) -> Self {
        Event {
            kind,
            tenants: Vec::new(),
            wave: None,
            release: None,
            commit: None,
            message: message.into(),
            time: Timestamp::now(),
        }
    }

    /// The same event about `tenant` (added to those it concerns).
    pub fn tenant(self, tenant: &str) -> Self {
        self.tenants([tenant])
    }

    /// The same event about these tenants too.
    pub fn tenants<S: AsRef<str>>(mut self, tenants: impl IntoIterator<Item = S>) -> Self {
        self.tenants
            .extend(tenants.into_iter().map(|t| t.as_ref().to_owned()));
        self.tenants.sort();
        self.tenants.dedup();
        self
    }

    pub fn wave(mut self, wave: WaveName) -> Self {
        self.wave = Some(wave);
        self
    }

    pub fn release(mut self, release: &str) -> Self {
        self.release = Some(release.to_owned());
        self
    }

    pub fn commit(mut self, commit: &str) -> Self {
        self.commit = (!commit.is_empty()).then(|| commit.to_owned());
        self
    }

    pub fn at(mut self, time: Timestamp) -> Self {
        self.time = time;
        self
    }

    pub fn severity(&self) -> Severity {
        self.kind.severity()
    }

    /// A stable id (16 hex digits) of its content and time: the same
    /// event delivered again (a retry) has the same id, so a receiver can
    /// drop duplicates.
    pub fn id(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        let digest = Sha256::digest(text.as_bytes());
        hex::encode(&digest[..8])
    }
}

/// The state of a commit status, as both Gitea and GitHub spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CommitState {
    Pending,
    Success,
    Failure,
}

impl CommitState {
    pub fn as_str(self) -> &'static str {
        match self {
            CommitState::Pending => "pending",
            CommitState::Success => "success",
            CommitState::Failure => "failure",
        }
    }
}

/// One tenant's rollout of a release commit, as a commit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus {
    /// The fleet repository's commit (the Rollout's `spec.commit`).
    pub commit: String,
    pub tenant: String,
    pub wave: Option<WaveName>,
    pub release: Option<String>,
    pub state: CommitState,
    /// What happened, in a line (cut to the forge's limit when sent).
    pub description: String,
}

impl CommitStatus {
    pub fn new(
        state: CommitState,
        commit: &str,
        tenant: &str,
        description: impl Into<String>,
    ) -> Self {
        CommitStatus {
            commit: commit.to_owned(),
            tenant: tenant.to_owned(),
            wave: None,
            release: None,
            state,
            description: description.into(),
        }
    }

    pub fn wave(mut self, wave: WaveName) -> Self {
        self.wave = Some(wave);
        self
    }

    pub fn release(mut self, release: &str) -> Self {
        self.release = Some(release.to_owned());
        self
    }

    /// The status's context: one per tenant, so each tenant's latest state
    /// on the commit is what the forge shows.
    pub fn context(&self) -> String {
        format!("exo/{}", self.tenant)
    }
}

/// What the operator hands the notifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    Event(Event),
    Status(CommitStatus),
}

impl Notice {
    /// The tenants it concerns.
    pub fn tenants(&self) -> &[String] {
        match self {
            Notice::Event(e) => &e.tenants,
            Notice::Status(s) => std::slice::from_ref(&s.tenant),
        }
    }

    /// A bounded label for logs: the event's kind, or `commitStatus`.
    pub fn label(&self) -> &'static str {
        match self {
            Notice::Event(e) => e.kind.as_str(),
            Notice::Status(_) => "commitStatus",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_are_sorted_once_and_an_empty_commit_is_none() {
        let e = Event::new(EventKind::Promoted, "m")
            .tenants(["b", "a"])
            .tenant("a")
            .commit("");
        assert_eq!(e.tenants, ["a", "b"]);
        assert_eq!(e.commit, None);
        assert_eq!(e.severity(), Severity::Info);
    }

    #[test]
    fn the_id_follows_the_content() {
        let t = Timestamp::from_second(1_700_000_000).unwrap();
        let a = Event::new(EventKind::Verified, "m").tenant("x").at(t);
        assert_eq!(a.id(), a.clone().id());
        assert_eq!(a.id().len(), 16);
        assert_ne!(a.id(), a.clone().tenant("y").id());
    }

    #[test]
    fn a_commit_status_is_one_context_per_tenant() {
        let s = CommitStatus::new(CommitState::Pending, "abc", "acme", "applying");
        assert_eq!(s.context(), "exo/acme");
        assert_eq!(Notice::Status(s).tenants(), ["acme"]);
    }
}
