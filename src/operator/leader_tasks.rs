//! Leader-only background tasks: started when this replica gains the
//! Lease, stopped (cooperatively, then aborted) when it loses it or shuts
//! down.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::cluster::apply::Ctx;

/// A background task that runs only while this replica leads: started on
/// gaining the Lease, told to [`Stop`] when the term ends (the Lease is
/// lost, or the process shuts down), and aborted if it has not returned
/// [`LEADER_TASK_GRACE`] later. The upstream connector uses the grace to
/// close its socket with a close frame; the others end at once through
/// [`Stop::until`].
/// It gets the operator's [`Ctx`]: the client, the counted write path and
/// the shared watch caches (the GitOps engine reads those instead of
/// running watches of its own).
pub type LeaderTask =
    Arc<dyn Fn(Arc<Ctx>, Stop) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// How long a leader task has to return after its term ends.
pub const LEADER_TASK_GRACE: Duration = Duration::from_secs(3);

/// The end of a leadership term, as seen by a leader task.
#[derive(Debug, Clone)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// Resolves when the term ends (at once if it has ended).
    pub async fn requested(mut self) {
        let _ = self.0.wait_for(|v| *v).await;
    }

    /// Runs `task` until it returns or the term ends, whichever is first.
    pub async fn until<F: Future<Output = ()>>(self, task: F) {
        tokio::select! {
            () = task => {}
            () = self.requested() => {}
        }
    }
}

/// Starts every leader task when the Lease is gained, and stops them when
/// it is lost or on shutdown: [`Stop`] first, abort after
/// [`LEADER_TASK_GRACE`]. Returns on shutdown, once they have stopped.
pub(super) async fn run_leader_tasks(
    ctx: Arc<Ctx>,
    mut leader: watch::Receiver<bool>,
    tasks: Vec<LeaderTask>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut term: Option<Term> = None;
    loop {
        let leading = *leader.borrow_and_update();
        if leading && term.is_none() && !*shutdown.borrow() {
            term = Some(Term::start(&ctx, &tasks));
        } else if !leading && let Some(t) = term.take() {
            t.end().await;
        }
        tokio::select! {
            r = leader.changed() => if r.is_err() { break },
            r = shutdown.wait_for(|v| *v) => { let _ = r; break },
        }
    }
    if let Some(t) = term {
        t.end().await;
    }
}

/// The leader tasks of one leadership term.
struct Term {
    stop: watch::Sender<bool>,
    running: Vec<JoinHandle<()>>,
}

impl Term {
    fn start(ctx: &Arc<Ctx>, tasks: &[LeaderTask]) -> Self {
        let (stop, rx) = watch::channel(false);
        let running: Vec<_> = tasks
            .iter()
            .map(|t| tokio::spawn(t(ctx.clone(), Stop(rx.clone()))))
            .collect();
        if !running.is_empty() {
            info!(count = running.len(), "leader tasks started");
        }
        Term { stop, running }
    }

    async fn end(self) {
        self.stop.send_replace(true);
        let aborts: Vec<_> = self.running.iter().map(JoinHandle::abort_handle).collect();
        let all = futures::future::join_all(self.running);
        if tokio::time::timeout(LEADER_TASK_GRACE, all).await.is_err() {
            warn!(grace = ?LEADER_TASK_GRACE, "leader tasks did not stop in time; aborted");
            for a in aborts {
                a.abort();
            }
        }
        info!("leader tasks stopped");
    }
}
