//! `exo config build`: turn `configmaps/<name>/` folders into immutable
//! ConfigMaps named `<name>-<short hash>`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::cli::exit;
use crate::fleet::configmap;

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Build every baseline folder (or the ones named) into ConfigMap YAML.
    Build(BuildArgs),
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Source folders to build; default: every folder under <root>/configmaps.
    pub folders: Vec<PathBuf>,
    /// The fleet repository's root.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// Write one `<version>.yaml` per ConfigMap into this folder instead of
    /// printing a multi-document stream on stdout.
    #[arg(long, short = 'o')]
    pub out_dir: Option<PathBuf>,
}

pub fn run(cmd: ConfigCommand) -> u8 {
    match cmd {
        ConfigCommand::Build(args) => match build(&args) {
            Ok(()) => exit::OK,
            Err(message) => {
                eprintln!("exo config build: {message}");
                exit::UNUSABLE
            }
        },
    }
}

fn build(args: &BuildArgs) -> Result<(), String> {
    let baselines = if args.folders.is_empty() {
        configmap::read_all(&args.root.join("configmaps")).map_err(|e| e.to_string())?
    } else {
        args.folders
            .iter()
            .map(|f| configmap::read_source(f))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?
    };
    // Render everything before writing anything, so a failure leaves no
    // partial output behind.
    let mut rendered = Vec::with_capacity(baselines.len());
    for b in &baselines {
        let mut cm = serde_json::to_value(b.to_configmap()).map_err(|e| e.to_string())?;
        if let Some(obj) = cm.as_object_mut() {
            let mut ordered = serde_json::Map::new();
            ordered.insert("apiVersion".into(), "v1".into());
            ordered.insert("kind".into(), "ConfigMap".into());
            ordered.extend(std::mem::take(obj));
            *obj = ordered;
        }
        let yaml = crate::yaml::to_string(&cm).map_err(|e| e.to_string())?;
        rendered.push((b.version(), yaml));
    }
    match &args.out_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            for (version, yaml) in &rendered {
                let path = dir.join(format!("{version}.yaml"));
                std::fs::write(&path, yaml).map_err(|e| format!("{}: {e}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
        }
        None => {
            let docs: Vec<&str> = rendered.iter().map(|(_, y)| y.as_str()).collect();
            print!("{}", docs.join("---\n"));
        }
    }
    Ok(())
}
