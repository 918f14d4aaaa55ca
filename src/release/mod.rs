//! Release manifests: the model, lint, and (in submodules) planning.

pub mod lint;
mod model;
pub mod pin_edit;
pub mod plan;
pub mod repoint;
pub mod waves_edit;
mod yaml_line;

pub use model::*;
