//! WebSocket close codes, their exact reasons, and the one way every close
//! reason is made to fit a close frame.
//!
//! Guarantee: [`reason`] returns at most [`MAX_REASON_BYTES`] bytes, the
//! text whole when it fits, else cut after a whole word (after a whole
//! char when one word is longer than the room) and marked with `…`. An
//! error the user must read whole travels beside the close, never in it
//! (`exo attach`: a text message before the close).

use super::clip_to;

/// Normal close (operator shutting down).
pub const NORMAL: u16 = 1000;
/// Server shutting down.
pub const GOING_AWAY: u16 = 1001;
/// Binary message or a frame that is not valid JSON of a known type.
pub const UNSUPPORTED_DATA: u16 = 1003;
/// A frame larger than the server's limit.
pub const TOO_BIG: u16 = 1009;
/// Another connection registered with the same deployment.
pub const EVICTED: u16 = 4000;
pub const EVICTED_REASON: &str = "evicted by newer connection";
/// The `hello` named a protocol version the server does not speak.
pub const UNSUPPORTED_VERSION: u16 = 4001;
/// The connection's token was revoked or expired.
pub const TOKEN_REVOKED: u16 = 4002;
pub const TOKEN_REVOKED_REASON: &str = "token revoked";
/// A frame broke the protocol (wrong order, bad JSON, unknown type).
pub const PROTOCOL_ERROR: u16 = 4003;
/// No `hello` within the server's handshake timeout.
pub const HELLO_TIMEOUT: u16 = 4004;
pub const HELLO_TIMEOUT_REASON: &str = "no hello within the handshake timeout";
/// No pong to the server's WebSocket pings: the socket is considered dead.
pub const PING_TIMEOUT: u16 = 4005;
pub const PING_TIMEOUT_REASON: &str = "no pong within the ping timeout";

/// RFC 6455, 5.5: a control frame's payload is at most 125 bytes, two of
/// which are the close code.
pub const MAX_REASON_BYTES: usize = 123;

/// Marks a text that was cut.
pub const ELLIPSIS: &str = "…";

/// Close codes after which a client must not redial quickly: the same
/// credentials or the same build will be refused again.
pub fn is_fatal(code: u16) -> bool {
    matches!(code, UNSUPPORTED_VERSION | TOKEN_REVOKED | EVICTED)
}

/// `text` as a close reason: whole when it fits in [`MAX_REASON_BYTES`],
/// else its longest run of whole words that fits with [`ELLIPSIS`] after
/// it (whole chars when the first word alone does not fit).
pub fn reason(text: &str) -> String {
    if text.len() <= MAX_REASON_BYTES {
        return text.to_owned();
    }
    let room = clip_to(text, MAX_REASON_BYTES - ELLIPSIS.len());
    // Whole words only: what follows `room` in `text` decides whether its
    // last word was cut.
    let whole = if text[room.len()..].starts_with(char::is_whitespace) {
        room
    } else {
        match room.rfind(char::is_whitespace) {
            Some(i) if !room[..i].trim_end().is_empty() => &room[..i],
            _ => room,
        }
    };
    format!("{}{ELLIPSIS}", whole.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_that_fits_is_kept_whole() {
        assert_eq!(reason("token revoked"), "token revoked");
        let exact = "x".repeat(MAX_REASON_BYTES);
        assert_eq!(reason(&exact), exact);
    }

    #[test]
    fn a_long_reason_ends_after_a_whole_word_with_an_ellipsis() {
        let text = "malformed frame: ".to_owned() + &"word ".repeat(40);
        let r = reason(&text);
        assert!(r.len() <= MAX_REASON_BYTES, "{} bytes", r.len());
        assert!(r.ends_with("word…"), "{r:?}");
        assert!(text.starts_with(r.trim_end_matches(ELLIPSIS)), "{r:?}");
    }

    #[test]
    fn a_word_cut_at_the_limit_is_dropped_whole() {
        // 119 bytes of words, then a word that crosses the limit.
        let text = format!("{} crossing the limit", "ab ".repeat(40).trim_end());
        let r = reason(&text);
        assert!(r.len() <= MAX_REASON_BYTES);
        assert!(r.ends_with("ab…"), "{r:?}");
    }

    #[test]
    fn one_long_word_is_cut_on_a_char_boundary() {
        // 'é' is two bytes, so the limit falls inside one of them.
        let text = "é".repeat(100);
        let r = reason(&text);
        assert!(r.len() <= MAX_REASON_BYTES);
        assert!(r.ends_with(ELLIPSIS));
        assert!(r.trim_end_matches(ELLIPSIS).chars().all(|c| c == 'é'));
    }
}
