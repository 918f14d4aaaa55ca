//! `exo support show ID [--lane L] [--deployment D] [-o json|yaml]`.

use clap::Args;
use hyper::Method;

use super::view::{LaneIncident, incident_text};
use super::{SupportError, Which, failed, lane_of};
use crate::cli::plane::PlaneArgs;
use crate::cli::release::common::emit;

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub which: Which,
}

async fn fetch(plane: &PlaneArgs, w: &Which) -> Result<LaneIncident, SupportError> {
    if !crate::wire::incident::valid_id(&w.id) {
        return Err(SupportError::BadId(w.id.clone()));
    }
    let lane = lane_of(plane, w.lane.as_deref()).await?;
    let v = plane.call(Method::GET, &w.path(&lane, ""), None).await?;
    Ok(serde_json::from_value(v)?)
}

pub async fn run(plane: &PlaneArgs, a: &ShowArgs) -> u8 {
    match fetch(plane, &a.which).await {
        Ok(i) => emit(&i, a.which.output, || incident_text(&i), "exo support show"),
        Err(e) => failed("show", &e),
    }
}
