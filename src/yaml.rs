//! Strict YAML reading for everything Exo loads from a fleet repository.
//!
//! Guarantees:
//! - input larger than [`MAX_DOCUMENT_BYTES`] is refused before parsing;
//! - duplicate keys are an error (YAML requires unique keys; a silent
//!   last-wins would hide edits);
//! - alias, depth, node and event budgets stop a YAML bomb early, with memory
//!   bounded by the budget rather than by the expansion;
//! - every error names the file and carries the parser's line and column.
//!
//! Unknown fields are refused by the types themselves
//! (`#[serde(deny_unknown_fields)]`).

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_saphyr::{Budget, DuplicateKeyPolicy, Options};

/// Largest YAML document Exo reads. Release manifests and fleet manifests are
/// a few KiB; a megabyte is far past any honest file.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {size} bytes is larger than the {max} byte limit for a YAML document")]
    TooLarge {
        path: PathBuf,
        size: u64,
        max: usize,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("cannot render YAML: {0}")]
    Render(#[source] serde_saphyr::ser::Error),
}

/// The deepest nesting a document may have.
pub const MAX_DEPTH: usize = 32;
/// The most nodes a document may hold, aliases expanded.
pub const MAX_NODES: usize = 50_000;

/// The parser options every Exo document is read with.
fn options() -> Options {
    let mut budget = Budget::default();
    budget.max_reader_input_bytes = Some(MAX_DOCUMENT_BYTES);
    budget.max_events = 100_000;
    budget.max_nodes = MAX_NODES;
    budget.max_aliases = 64;
    budget.max_anchors = 64;
    budget.max_depth = MAX_DEPTH;
    budget.max_documents = 1;
    budget.max_total_scalar_bytes = MAX_DOCUMENT_BYTES;
    budget.max_recorded_anchor_events = 10_000;
    budget.max_recorded_anchor_bytes = 256 * 1024;
    budget.max_merge_keys = 64;
    let mut options = Options::default();
    options.budget = Some(budget);
    options.duplicate_keys = DuplicateKeyPolicy::Error;
    options.strict_booleans = true;
    options
}

/// Parses one YAML document from `text`, naming `path` in any error.
pub fn from_str<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, YamlError> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(YamlError::TooLarge {
            path: path.to_owned(),
            size: text.len() as u64,
            max: MAX_DOCUMENT_BYTES,
        });
    }
    serde_saphyr::from_str_with_options(text, options()).map_err(|e| YamlError::Parse {
        path: path.to_owned(),
        message: one_line(&e.to_string()),
    })
}

/// Reads and parses the YAML file at `path`, checking its size before reading.
pub fn from_file<T: DeserializeOwned>(path: &Path) -> Result<T, YamlError> {
    from_str(path, &read(path)?)
}

/// Reads one document's text, refusing one over [`MAX_DOCUMENT_BYTES`]
/// before reading it: read once, it can be parsed as several types.
pub fn read(path: &Path) -> Result<String, YamlError> {
    let read_err = |source| YamlError::Read {
        path: path.to_owned(),
        source,
    };
    let size = std::fs::metadata(path).map_err(read_err)?.len();
    if size > MAX_DOCUMENT_BYTES as u64 {
        return Err(YamlError::TooLarge {
            path: path.to_owned(),
            size,
            max: MAX_DOCUMENT_BYTES,
        });
    }
    std::fs::read_to_string(path).map_err(read_err)
}

/// Renders a value as YAML.
pub fn to_string<T: serde::Serialize>(value: &T) -> Result<String, YamlError> {
    serde_saphyr::to_string(value).map_err(YamlError::Render)
}

/// The parser renders a multi-line snippet after a first line that already
/// holds the location and the cause; a lint line wants only that first line.
fn one_line(message: &str) -> String {
    let first = message.lines().next().unwrap_or("invalid YAML").trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // The library's hint is addressed to programmers, not to the file's author.
    first
        .split(", set DuplicateKeyPolicy")
        .next()
        .unwrap_or(first)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        #[allow(dead_code)]
        name: String,
        #[allow(dead_code)]
        #[serde(default)]
        items: Vec<String>,
    }

    fn parse(text: &str) -> Result<Doc, YamlError> {
        from_str(Path::new("releases/x.yaml"), text)
    }

    #[test]
    fn accepts_plain_document() {
        assert!(parse("name: a\nitems: [b, c]\n").is_ok());
    }

    #[test]
    fn refusals_name_file_and_cause() {
        let cases: &[(&str, &str)] = &[
            ("name: a\nname: b\n", "duplicate"),
            ("name: a\nextra: 1\n", "extra"),
            ("name: [1, 2]\n", "line"),
            ("name: a\n  - broken: [\n", "line"),
        ];
        for (text, needle) in cases {
            let err = parse(text).expect_err(text).to_string();
            assert!(err.starts_with("releases/x.yaml: "), "{err}");
            assert!(err.to_lowercase().contains(needle), "{text:?} -> {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn billion_laughs_fails_fast() {
        let mut bomb = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for i in 1..10 {
            let prev = (b'a' + i - 1) as char;
            let cur = (b'a' + i) as char;
            bomb.push_str(&format!(
                "{cur}: &{cur} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
            ));
        }
        let started = std::time::Instant::now();
        let err = from_str::<serde_json::Value>(Path::new("bomb.yaml"), &bomb).unwrap_err();
        assert!(err.to_string().starts_with("bomb.yaml: "), "{err}");
        // Not a timing assertion on speed, a guard against the expansion running
        // at all: 9^10 nodes would take minutes and gigabytes.
        assert!(started.elapsed().as_secs() < 10);
    }

    #[test]
    fn deep_nesting_is_refused() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(from_str::<serde_json::Value>(Path::new("deep.yaml"), &deep).is_err());
    }

    #[test]
    fn oversized_input_is_refused_before_parsing() {
        let big = "a".repeat(MAX_DOCUMENT_BYTES + 1);
        let err = parse(&big).unwrap_err();
        assert!(matches!(err, YamlError::TooLarge { .. }), "{err}");
    }
}
