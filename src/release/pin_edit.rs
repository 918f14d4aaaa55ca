//! Writing resolved digests back into a release file while keeping its
//! comments and layout: the YAML library does not round-trip comments, so
//! the edit is made on the text, line by line, and then checked by parsing
//! the result and comparing it with the model it must equal. When the check
//! fails (an unusual layout such as flow mappings), the caller falls back to
//! re-rendering the document and says that comments were not kept.

use std::collections::BTreeMap;
use std::path::Path;

use super::yaml_line::{indent_of, key_at, split_value, unquote};
use crate::fleet::pin::TagRef;
use crate::fleet::release::{ImageRef, Release};
use crate::yaml::YamlError;

#[derive(Debug, thiserror::Error)]
pub enum PinEditError {
    #[error("image {image:?} has neither a tag nor `tag:`; nothing to resolve")]
    NoTag { image: String },
    /// The fallback, re-rendering the whole document, failed.
    #[error(transparent)]
    Render(#[from] YamlError),
}

/// What a component resolves from: the tag in its image, else its `tag`.
pub fn tag_ref(image: &str, tag: Option<&str>) -> Result<TagRef, PinEditError> {
    let r = ImageRef::parse(image);
    let tag = r
        .tag
        .clone()
        .or_else(|| tag.map(str::to_owned))
        .ok_or_else(|| PinEditError::NoTag {
            image: image.to_owned(),
        })?;
    Ok(TagRef {
        repository: r.repository,
        tag,
    })
}

/// The release with every component pinned: `image: repo@digest`, `tag`.
pub fn pinned_model(release: &Release, digests: &BTreeMap<usize, (TagRef, String)>) -> Release {
    let mut out = release.clone();
    for (i, (r, digest)) in digests {
        if let Some(c) = out.spec.components.get_mut(*i) {
            c.image = format!("{}@{digest}", r.repository);
            c.tag = Some(r.tag.clone());
        }
    }
    out
}

/// Edits `text` in place. Returns `None` when the layout is not one this
/// line editor understands, so the caller re-renders instead.
pub fn edit_text(
    text: &str,
    release: &Release,
    digests: &BTreeMap<usize, (TagRef, String)>,
) -> Option<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut cursor = 0usize;
    for (i, c) in release.spec.components.iter().enumerate() {
        // Find this component's image line, after the previous one.
        let at = (cursor..lines.len()).find(|&n| {
            key_at(&lines[n], "image")
                .is_some_and(|(_, rest)| unquote(split_value(rest.trim_start()).0) == c.image)
        })?;
        cursor = at + 1;
        let Some((r, digest)) = digests.get(&i) else {
            continue;
        };
        let (col, rest) = key_at(&lines[at], "image")?;
        let (_, comment) = split_value(rest.trim_start());
        let prefix_end = lines[at].len() - rest.len();
        let comment = if comment.is_empty() {
            String::new()
        } else {
            format!("  {comment}")
        };
        lines[at] = format!(
            "{} {}@{digest}{comment}",
            &lines[at][..prefix_end],
            r.repository
        );
        // The same mapping continues while lines are indented at least to
        // the key column (or are blank/comments).
        let mut tag_line = None;
        let mut n = at + 1;
        while n < lines.len() {
            let l = &lines[n];
            let t = l.trim_start();
            if t.is_empty() || t.starts_with('#') {
                n += 1;
                continue;
            }
            if indent_of(l) < col || (indent_of(l) == col.saturating_sub(2) && t.starts_with("- "))
            {
                break;
            }
            if indent_of(l) == col && key_at(l, "tag").is_some() {
                tag_line = Some(n);
                break;
            }
            n += 1;
        }
        let tag_text = format!("{}tag: \"{}\"", " ".repeat(col), r.tag);
        match tag_line {
            Some(n) => {
                let (_, rest) = key_at(&lines[n], "tag")?;
                let (_, comment) = split_value(rest.trim_start());
                let comment = if comment.is_empty() {
                    String::new()
                } else {
                    format!("  {comment}")
                };
                lines[n] = format!("{tag_text}{comment}");
            }
            None => lines.insert(at + 1, tag_text),
        }
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    Some(out)
}

/// The new file content, and whether comments and layout were kept.
pub fn rewrite(
    path: &Path,
    text: &str,
    release: &Release,
    digests: &BTreeMap<usize, (TagRef, String)>,
) -> Result<(String, bool), PinEditError> {
    let want = pinned_model(release, digests);
    if let Some(edited) = edit_text(text, release, digests)
        && crate::yaml::from_str::<Release>(path, &edited)
            .ok()
            .as_ref()
            == Some(&want)
    {
        return Ok((edited, true));
    }
    Ok((crate::yaml::to_string(&want)?, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# top comment
apiVersion: autonomic.sh/v1alpha1
kind: Release
metadata:
  name: r1
spec:
  components:
    # the broker
    - name: broker
      layer: capability
      image: reg:5000/exo/broker:1.4.0   # resolved by pin
    - name: runtime
      layer: consumer
      image: "reg:5000/exo/runtime@sha256:0000000000000000000000000000000000000000000000000000000000000000"
      tag: "3.0"  # keep me
      dependsOn: [broker]
  waves: []
"#;

    fn digest(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    #[test]
    fn edits_keep_comments_and_add_tags() {
        let p = Path::new("releases/r1.yaml");
        let release: Release = crate::yaml::from_str(p, TEXT).unwrap();
        let mut d = BTreeMap::new();
        for (i, c) in release.spec.components.iter().enumerate() {
            let r = tag_ref(&c.image, c.tag.as_deref()).unwrap();
            d.insert(i, (r, digest(if i == 0 { 'a' } else { 'b' })));
        }
        let (out, kept) = rewrite(p, TEXT, &release, &d).unwrap();
        assert!(kept, "{out}");
        assert!(
            out.contains("# the broker")
                && out.contains("# top comment")
                && out.contains("# keep me")
        );
        assert!(
            out.contains(&format!(
                "image: reg:5000/exo/broker@{}  # resolved by pin",
                digest('a')
            )),
            "{out}"
        );
        assert!(out.contains("      tag: \"1.4.0\"\n"), "{out}");
        assert!(
            out.contains(&format!("image: reg:5000/exo/runtime@{}", digest('b'))),
            "{out}"
        );
        let back: Release = crate::yaml::from_str(p, &out).unwrap();
        assert_eq!(back.spec.components[0].tag.as_deref(), Some("1.4.0"));
        assert_eq!(back.spec.components[1].tag.as_deref(), Some("3.0"));
    }

    #[test]
    fn flow_layout_falls_back_to_rerender() {
        let text = "apiVersion: autonomic.sh/v1alpha1\nkind: Release\nmetadata: {name: r1}\nspec:\n  components: [{name: a, layer: consumer, image: \"r/a:1\"}]\n  waves: []\n";
        let p = Path::new("r1.yaml");
        let release: Release = crate::yaml::from_str(p, text).unwrap();
        let d = BTreeMap::from([(0, (tag_ref("r/a:1", None).unwrap(), digest('c')))]);
        let (out, kept) = rewrite(p, text, &release, &d).unwrap();
        assert!(!kept);
        let back: Release = crate::yaml::from_str(p, &out).unwrap();
        assert_eq!(
            back.spec.components[0].image,
            format!("r/a@{}", digest('c'))
        );
    }

    #[test]
    fn nothing_to_resolve_is_an_error() {
        assert!(tag_ref("reg/a@sha256:00", None).is_err());
        assert_eq!(
            tag_ref("reg/a@sha256:00", None).unwrap_err().to_string(),
            "image \"reg/a@sha256:00\" has neither a tag nor `tag:`; nothing to resolve"
        );
        assert_eq!(tag_ref("reg/a@sha256:00", Some("1.0")).unwrap().tag, "1.0");
    }
}
