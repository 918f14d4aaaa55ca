//! The local side of a copy (written next).
