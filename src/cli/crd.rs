//! `exo crd`: print the CRD YAML generated from the Rust types, or write one
//! file per CRD (what `deploy/crds/` holds).

use std::path::PathBuf;

use clap::Args;

use crate::cli::exit;
use crate::crd;

#[derive(Debug, Args)]
pub struct CrdArgs {
    /// Write `<crd name>.yaml` files into this folder instead of printing.
    #[arg(long, short = 'o')]
    pub out_dir: Option<PathBuf>,
}

pub fn run(args: CrdArgs) -> u8 {
    let mut rendered = Vec::new();
    for c in crd::all() {
        match crd::render(&c) {
            Ok(y) => rendered.push((crd::file_name(&c), y)),
            Err(e) => {
                eprintln!("exo crd: {e}");
                return exit::UNUSABLE;
            }
        }
    }
    match args.out_dir {
        None => {
            let docs: Vec<&str> = rendered.iter().map(|(_, y)| y.as_str()).collect();
            print!("{}", docs.join("---\n"));
        }
        Some(dir) => {
            if let Err(e) = std::fs::create_dir_all(&dir) {
                eprintln!("exo crd: {}: {e}", dir.display());
                return exit::UNUSABLE;
            }
            for (name, yaml) in rendered {
                let path = dir.join(name);
                if let Err(e) = std::fs::write(&path, yaml) {
                    eprintln!("exo crd: {}: {e}", path.display());
                    return exit::UNUSABLE;
                }
                eprintln!("wrote {}", path.display());
            }
        }
    }
    exit::OK
}
