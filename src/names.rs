//! Kubernetes' name rules, written once and used everywhere a name is
//! checked: namespaces, object names, AgentFS names, control-plane
//! deployments, label values and ConfigMap keys.
//!
//! The rules are those of the apiserver's validation (`IsDNS1123Label`,
//! `IsDNS1123Subdomain`, `IsDNS1035Label`, `IsValidLabelValue`,
//! `IsConfigMapKey`), so a name this accepts is one the apiserver accepts
//! for the same field, and the other way round. Pure.

/// Longest DNS-1123 or DNS-1035 label (and label value).
pub const LABEL_MAX: usize = 63;
/// Longest DNS-1123 subdomain (and ConfigMap key).
pub const SUBDOMAIN_MAX: usize = 253;

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// A DNS-1123 label, as namespace and most object names are:
/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 bytes.
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= LABEL_MAX
        && b.first().copied().is_some_and(lower_alnum)
        && b.last().copied().is_some_and(lower_alnum)
        && b.iter().all(|&c| lower_alnum(c) || c == b'-')
}

/// A DNS-1123 subdomain, as custom resource and Secret names are: DNS-1123
/// labels joined by `.`, at most 253 bytes.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= SUBDOMAIN_MAX && s.split('.').all(is_dns1123_label)
}

/// A DNS-1035 label, as Service names are: a DNS-1123 label that starts
/// with a letter.
pub fn is_dns1035_label(s: &str) -> bool {
    is_dns1123_label(s) && s.as_bytes()[0].is_ascii_lowercase()
}

/// A label value: empty, or at most 63 of `[A-Za-z0-9._-]` with an
/// alphanumeric at both ends.
pub fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() <= LABEL_MAX
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b.first().is_none_or(u8::is_ascii_alphanumeric)
        && b.last().is_none_or(u8::is_ascii_alphanumeric)
}

/// A label key: an optional DNS-1123 subdomain prefix and `/`, then a
/// name of 1 to 63 of `[A-Za-z0-9._-]` with an alphanumeric at both ends.
pub fn is_label_key(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    prefix.is_none_or(is_dns1123_subdomain) && !name.is_empty() && is_label_value(name)
}

/// A ConfigMap (or Secret) key: 1 to 253 of `[-._a-zA-Z0-9]`, and not `.`,
/// `..` or anything starting with `..`.
pub fn is_configmap_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= SUBDOMAIN_MAX
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && s != "."
        && !s.starts_with("..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys() {
        for good in ["env", "autonomic.sh/region", "a.b_c-d", "x/Y.z"] {
            assert!(is_label_key(good), "{good}");
        }
        for bad in ["", "/env", "a/", "Bad_/x", "a/b/c", "-env", &"x".repeat(64)] {
            assert!(!is_label_key(bad), "{bad}");
        }
    }

    #[test]
    fn dns1123_labels() {
        for good in ["a", "0", "a-0", "9z", "a--b", &"x".repeat(63)] {
            assert!(is_dns1123_label(good), "{good:?}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", "é", &"x".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad:?}");
        }
    }

    #[test]
    fn dns1123_subdomains() {
        let max = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        );
        assert_eq!(max.len(), 253);
        assert!(is_dns1123_subdomain(&max));
        assert!(!is_dns1123_subdomain(&format!("{max}d")));
        for good in ["a", "a.b", "writer-0.tools"] {
            assert!(is_dns1123_subdomain(good), "{good:?}");
        }
        for bad in ["", ".", "a.", ".a", "a..b", "a_b", "é", "a-.b"] {
            assert!(!is_dns1123_subdomain(bad), "{bad:?}");
        }
    }

    #[test]
    fn dns1035_labels_start_with_a_letter() {
        assert!(is_dns1035_label("agent-writer"));
        for bad in ["0agent", "-a", "a-", "", "A"] {
            assert!(!is_dns1035_label(bad), "{bad:?}");
        }
    }

    #[test]
    fn label_values() {
        for good in ["", "a", "A.b_c-9", &"x".repeat(63)] {
            assert!(is_label_value(good), "{good:?}");
        }
        for bad in ["-a", "a.", "_", "a b", "a/b", &"x".repeat(64)] {
            assert!(!is_label_value(bad), "{bad:?}");
        }
    }

    #[test]
    fn configmap_keys() {
        for good in ["a", "SOUL.md", "-x", "_y", ".hidden", &"k".repeat(253)] {
            assert!(is_configmap_key(good), "{good:?}");
        }
        for bad in ["", ".", "..", "..a", "a/b", "a b", &"k".repeat(254)] {
            assert!(!is_configmap_key(bad), "{bad:?}");
        }
    }
}
