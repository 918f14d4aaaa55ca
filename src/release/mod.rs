//! Release manifests: lint, planning and edits. The model (the manifest
//! and wave pointers as they are in git) is [`crate::fleet::release`],
//! re-exported here.

pub mod lint;
pub mod pin_edit;
pub mod plan;
pub mod repoint;
pub mod waves_edit;
mod yaml_line;

/// The manifest's types live with the fleet repository's other documents.
pub use crate::fleet::release::*;
