//! `exo support list [--lane L] [--state routed|acknowledged|resolved]
//! [-o json|yaml]`.

use clap::Args;
use hyper::Method;

use super::view::{LaneIncident, incidents_table};
use super::{SupportError, failed, lane_of};
use crate::cli::plane::{PlaneArgs, enc};
use crate::cli::release::common::{Output, emit};

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The lane; may be left out when the token reaches one lane.
    #[arg(long)]
    pub lane: Option<String>,
    /// Only incidents in this state.
    #[arg(long, value_parser = ["routed", "acknowledged", "resolved"])]
    pub state: Option<String>,
    /// At most this many, newest first (the server allows up to 5000).
    #[arg(long, default_value_t = 500)]
    pub limit: usize,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
}

async fn fetch(plane: &PlaneArgs, a: &ListArgs) -> Result<Vec<LaneIncident>, SupportError> {
    let lane = lane_of(plane, a.lane.as_deref()).await?;
    let mut path = format!("/api/v1/lanes/{}/incidents?limit={}", enc(&lane), a.limit);
    if let Some(s) = &a.state {
        path.push_str(&format!("&state={}", enc(s)));
    }
    let v = plane.call(Method::GET, &path, None).await?;
    Ok(serde_json::from_value(
        v.get("incidents").cloned().unwrap_or_default(),
    )?)
}

pub async fn run(plane: &PlaneArgs, a: &ListArgs) -> u8 {
    match fetch(plane, a).await {
        Ok(rows) => emit(
            &rows,
            a.output,
            || incidents_table(&rows),
            "exo support list",
        ),
        Err(e) => failed("list", &e),
    }
}
