//! `exo release diff <a> <b>`: what changes between two releases, per wave
//! and tenant, offline.

use clap::Args;

use crate::cli::exit;
use crate::cli::release::common::{Output, RootArg, emit, load_fleet, plan_table};
use crate::release::plan;

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The release to compare from.
    pub from: String,
    /// The release to compare to.
    pub to: String,
    #[command(flatten)]
    pub root: RootArg,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: Output,
}

pub fn run(args: &DiffArgs) -> u8 {
    let fleet = match load_fleet(&args.root.root, "diff") {
        Ok(f) => f,
        Err(code) => return code,
    };
    let (Some(a), Some(b)) = (fleet.release(&args.from), fleet.release(&args.to)) else {
        let missing = if fleet.release(&args.from).is_none() {
            &args.from
        } else {
            &args.to
        };
        eprintln!("exo release diff: no release {missing:?} in releases/");
        return exit::UNUSABLE;
    };
    let d = plan::diff(&fleet, &a.value, &b.value);
    emit(&d, args.output, || plan_table(&d), "exo release")
}
