//! `exo support lane list [-o json|yaml]`.

use clap::Args;
use hyper::Method;

use super::view::{Lane, lanes_table};
use super::{SupportError, failed};
use crate::cli::plane::PlaneArgs;
use crate::cli::release::common::{Output, emit};

#[derive(Debug, Args)]
pub struct LaneListArgs {
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
}

/// Every lane the token reaches.
pub async fn fetch(plane: &PlaneArgs) -> Result<Vec<Lane>, SupportError> {
    let v = plane.call(Method::GET, "/api/v1/lanes", None).await?;
    Ok(serde_json::from_value(
        v.get("lanes").cloned().unwrap_or_default(),
    )?)
}

pub async fn run(plane: &PlaneArgs, a: &LaneListArgs) -> u8 {
    match fetch(plane).await {
        Ok(rows) => emit(
            &rows,
            a.output,
            || lanes_table(&rows),
            "exo support lane list",
        ),
        Err(e) => failed("lane list", &e),
    }
}
