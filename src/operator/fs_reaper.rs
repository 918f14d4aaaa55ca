//! Deletes `exo fs` helper pods once idle (leader only). Both routes
//! stamp a helper's `autonomic.sh/fs-helper-last-used` while they use
//! it; the reaper reads the shared pod cache (helpers carry the
//! managed-by label) and deletes an expired helper only if it is still
//! the version it read, so a helper taken up again meanwhile survives.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tracing::{info, warn};

use crate::agentfs::helper::expired;
use crate::cluster::apply::Ctx;
use crate::cluster::metrics::Controller;

pub async fn run(ctx: Arc<Ctx>, idle: Duration, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        if !ctx.caches_synced() {
            continue;
        }
        let now = crate::wire::now_ms() / 1000;
        for pod in ctx.pods.state() {
            if !expired(&pod, now, idle) {
                continue;
            }
            let name = pod.metadata.name.clone().unwrap_or_default();
            match ctx.delete_unchanged::<Pod>(Controller::Agentfs, &pod).await {
                Ok(()) => info!(pod = %name, "deleted an idle fs helper pod"),
                Err(e) => warn!(pod = %name, error = %e, "could not delete an idle fs helper pod"),
            }
        }
    }
}
