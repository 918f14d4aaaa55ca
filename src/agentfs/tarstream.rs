//! The tar walker every transfer passes through (written next).
