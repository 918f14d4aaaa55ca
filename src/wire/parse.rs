//! Reading one text message as a [`Frame`], with an error short enough to
//! be a close reason.
//!
//! serde's error for an unknown `type` lists every known type and overruns
//! the 123 bytes of a close reason, mid-word. [`Frame::parse`] names the
//! unknown type instead (clipped), and passes every other error through.

use std::fmt;

use serde::Deserialize;
use serde::de::value::MapDeserializer;

use super::{Frame, clip_marked};

/// Longest part of a peer's unknown `type` quoted back to it.
const TYPE_SHOWN_BYTES: usize = 40;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// A JSON object whose `type` names no frame of this protocol version.
    #[error("unknown type {:?}", clip_marked(.0, TYPE_SHOWN_BYTES))]
    UnknownType(String),
    /// Not JSON, not an object, no `type`, or a field missing or of the
    /// wrong type (serde's own words).
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

impl Frame {
    /// [`Frame::from_json`] with an unknown `type` told apart.
    pub fn parse(text: &str) -> Result<Frame, FrameError> {
        Frame::from_json(text).map_err(|e| match type_of(text) {
            Some(t) if !is_known_type(&t) => FrameError::UnknownType(t),
            _ => FrameError::Json(e),
        })
    }
}

/// The `type` of a JSON object, when it has a string one.
fn type_of(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Typed {
        #[serde(rename = "type")]
        t: String,
    }
    serde_json::from_str::<Typed>(text).ok().map(|x| x.t)
}

/// Whether `t` is one of [`Frame`]'s tags. Asked of the derived
/// deserializer itself, so no list of names can fall out of step with the
/// enum: given `{"type": t}` alone, it reports an unknown variant for an
/// unknown tag and something else (a missing field) for a known one.
fn is_known_type(t: &str) -> bool {
    let only_tag = MapDeserializer::<_, Probe>::new(std::iter::once(("type", t)));
    !matches!(Frame::deserialize(only_tag), Err(Probe::UnknownVariant))
}

/// The error of [`is_known_type`]'s deserializer: which kind of failure.
#[derive(Debug)]
enum Probe {
    UnknownVariant,
    Other,
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Probe::UnknownVariant => "unknown variant",
            Probe::Other => "other",
        })
    }
}

impl std::error::Error for Probe {}

impl serde::de::Error for Probe {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Probe::Other
    }

    fn unknown_variant(_: &str, _: &'static [&'static str]) -> Self {
        Probe::UnknownVariant
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::close;

    #[test]
    fn every_frame_type_is_known_and_others_are_not() {
        for t in [
            "hello",
            "snapshot",
            "delta",
            "heartbeat",
            "command_ack",
            "command_result",
            "audit",
            "alert",
            "welcome",
            "alert_ack",
            "command",
            "pod_control",
            "attach_open",
            "attach_resize",
            "attach_data",
            "attach_close",
            "fs_chunk",
            "fs_chunk_ack",
            "fs_abort",
        ] {
            assert!(is_known_type(t), "{t}");
        }
        for t in ["", "nope", "Hello", "hello ", "snapshots"] {
            assert!(!is_known_type(t), "{t:?}");
        }
    }

    #[test]
    fn an_unknown_type_is_named_short_and_whole() {
        let e = Frame::parse(r#"{"type":"subscribe","topic":"x"}"#).unwrap_err();
        assert!(matches!(e, FrameError::UnknownType(_)), "{e:?}");
        assert_eq!(e.to_string(), r#"unknown type "subscribe""#);
        // A long type (multi-byte chars) is clipped on a char boundary and
        // marked; the whole reason stays far inside a close frame.
        let long = "ü".repeat(200);
        let e = Frame::parse(&format!(r#"{{"type":"{long}"}}"#)).unwrap_err();
        let reason = format!("malformed frame: {e}");
        assert!(reason.len() < close::MAX_REASON_BYTES, "{reason}");
        assert!(reason.ends_with("ü…\""), "{reason}");
    }

    #[test]
    fn other_errors_are_serdes_own() {
        for (text, says) in [
            ("{this is not json", "key must be a string"),
            (r#"{"protocol":1}"#, "missing field `type`"),
            (
                r#"{"type":"hello","protocol":"1","agent_version":"v","boot_id":"b","connection_id":"c"}"#,
                "invalid type: string \"1\", expected u32",
            ),
            (
                r#"{"type":"hello","protocol":1,"agent_version":"v","connection_id":"c"}"#,
                "missing field `boot_id`",
            ),
            (
                r#"{"type":"delta","seq":1,"op":"patch","resource":{}}"#,
                "unknown variant `patch`",
            ),
            (
                r#"{"type":"delta","seq":1,"op":"upsert","resource":{"kind":"Service","namespace":"n","name":"s","resourceVersion":"1"}}"#,
                "unknown variant `Service`",
            ),
            (
                r#"{"type":"delta","seq":1,"op":"upsert","resource":{"kind":"Pod","namespace":"n","name":"s","resourceVersion":1}}"#,
                "invalid type: integer `1`, expected a string",
            ),
        ] {
            let e = Frame::parse(text).unwrap_err();
            assert!(matches!(e, FrameError::Json(_)), "{text}: {e:?}");
            assert!(e.to_string().contains(says), "{text}: {e}");
            // As a close reason, what it says survives the clipping (the
            // list of expected kinds may be cut short, never the bad one).
            let reason = close::reason(&format!("malformed frame: {e}"));
            assert!(reason.len() <= close::MAX_REASON_BYTES, "{reason}");
            assert!(reason.contains(says), "{reason}");
        }
    }
}
