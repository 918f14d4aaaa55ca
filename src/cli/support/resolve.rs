//! `exo support resolve ID [--lane L] [--deployment D] [--note TEXT]`:
//! the incident is resolved. Resolving one twice changes nothing.

use clap::Args;

use super::{Which, act};
use crate::cli::plane::PlaneArgs;

#[derive(Debug, Args)]
pub struct ResolveArgs {
    #[command(flatten)]
    pub which: Which,
    /// A note for the lane (never shown to the tenant).
    #[arg(long, default_value = "")]
    pub note: String,
}

pub async fn run(plane: &PlaneArgs, a: &ResolveArgs) -> u8 {
    act(plane, &a.which, &a.note, "resolve").await
}
