//! The HTTP side: the JSON API (`api`), the events stream (`sse`), the
//! user sockets of shell attach (`attach`) and file copy (`fs`), the support
//! lanes (`lanes`), the fleet view across clusters (`fleet`), who may use
//! them (`authn`) and the hop to the replica that holds a deployment
//! (`hop`). Nothing below this module names it.

pub mod api;
pub mod attach;
pub mod authn;
pub mod fleet;
pub mod fs;
pub mod hop;
pub mod lanes;
pub mod sse;
