//! Where two JSON documents differ, as field paths (`spec.runtime.image`):
//! what a drift Event names and what decides whether a live object still
//! says what Exo built. Pure; bounded to a few fields per object, so an
//! Event stays readable however much was changed.

use serde_json::Value;

/// At most this many differing fields are named per object.
const MAX_FIELDS: usize = 8;

/// The JSON paths (`spec.runtime.image`) where `live` and `want` differ.
/// Pure.
pub fn diff_paths(live: &Value, want: &Value, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    walk(live, want, prefix, &mut out);
    out.truncate(MAX_FIELDS);
    out
}

fn walk(live: &Value, want: &Value, prefix: &str, out: &mut Vec<String>) {
    if out.len() >= MAX_FIELDS || live == want {
        return;
    }
    match (live, want) {
        (Value::Object(l), Value::Object(w)) => {
            let mut keys: Vec<&String> = l.keys().chain(w.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let null = Value::Null;
                walk(
                    l.get(k).unwrap_or(&null),
                    w.get(k).unwrap_or(&null),
                    &format!("{prefix}.{k}"),
                    out,
                );
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_the_fields_that_differ() {
        let want = json!({"runtime": {"image": "a@sha256:1", "env": []}, "paused": false});
        let live = json!({"runtime": {"image": "b:latest", "env": []}, "paused": false});
        assert_eq!(diff_paths(&live, &want, "spec"), ["spec.runtime.image"]);
        assert!(diff_paths(&want, &want, "spec").is_empty());
        let added =
            json!({"runtime": {"image": "a@sha256:1", "env": [{"name": "X"}]}, "paused": true});
        assert_eq!(
            diff_paths(&added, &want, "spec"),
            ["spec.paused", "spec.runtime.env"]
        );
        let many: serde_json::Map<String, Value> =
            (0..20).map(|i| (format!("k{i:02}"), json!(i))).collect();
        assert_eq!(
            diff_paths(&Value::Object(many), &json!({}), "spec").len(),
            MAX_FIELDS
        );
    }
}
