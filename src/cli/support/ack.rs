//! `exo support ack ID [--lane L] [--deployment D] [--note TEXT]`:
//! support has the incident. Acknowledging one twice changes nothing; one
//! already resolved is refused (exit 1).

use clap::Args;

use super::{Which, act};
use crate::cli::plane::PlaneArgs;

#[derive(Debug, Args)]
pub struct AckArgs {
    #[command(flatten)]
    pub which: Which,
    /// A note for the lane (never shown to the tenant).
    #[arg(long, default_value = "")]
    pub note: String,
}

pub async fn run(plane: &PlaneArgs, a: &AckArgs) -> u8 {
    act(plane, &a.which, &a.note, "ack").await
}
