//! Bounded text: cutting a string to a byte limit on a char boundary, the
//! one rule the protocol's fields, Events' notes and the analysis'
//! details share.

/// The longest prefix of `s` of at most `max_bytes` bytes that ends on a
/// char boundary.
pub fn clip_to(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
