//! AgentFS from the outside: what `exo fs` and the control plane's tunnelled
//! commands do with a volume (list, create, browse, copy in and out,
//! resize, delete). One code path serves both routes: the CLI calls it
//! directly with its kubeconfig, and the operator calls it for commands
//! that arrive on the upstream connection.
//!
//! - `tarstream`: the one tar walker every transfer passes through (pure):
//!   refuses links, special files, escaping names and over-limit sizes, and
//!   hashes every file it sees.
//! - `local`: the laptop's side of a copy: pack a file or folder, unpack
//!   into a staging folder that becomes the final name only once verified.

pub mod local;
pub mod tarstream;
