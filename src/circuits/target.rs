//! A scrape target: a Service labelled [`crate::meta::LABEL_METRICS`]
//! whose annotation [`crate::meta::ANNOTATION_METRICS`] says where its
//! metrics are, `<port>/<path>` (`4000/metrics`, `http/metrics`, or just
//! `4000` for `/metrics`), the port a number or the name of one of the
//! Service's ports. Pure.
//!
//! The address is the Service's DNS name, `http://<name>.<namespace>.svc:
//! <port><path>` (the cluster's DNS search path completes it), or for an
//! `ExternalName` Service its external name: a gateway run outside the
//! cluster is named the same way. The tenant is the Service's namespace.

use k8s_openapi::api::core::v1::Service;

use crate::meta::ANNOTATION_METRICS;

/// Where one target's metrics are.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    /// The tenant: the Service's namespace.
    pub tenant: String,
    pub service: String,
    /// `http://host:port/path`.
    pub url: String,
}

/// Why a labelled Service is not a target; each names the annotation
/// ([`ANNOTATION_METRICS`], the same name as the label).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error(
        "the Service has the label autonomic.sh/metrics but not the annotation autonomic.sh/metrics: \"<port>/<path>\""
    )]
    Missing,
    #[error("annotation autonomic.sh/metrics {value:?}: {why}")]
    Bad { value: String, why: &'static str },
    #[error("annotation autonomic.sh/metrics {value:?}: the Service has no port named {port:?}")]
    NoSuchPort { value: String, port: String },
}

/// The port part: a number or a port's name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Port {
    Number(u16),
    Name(String),
}

/// `<port>/<path>` or `<port>`; the path is `/metrics` when left out.
fn parse(value: &str) -> Result<(Port, String), TargetError> {
    let bad = |why| TargetError::Bad {
        value: value.to_owned(),
        why,
    };
    let v = value.trim();
    let (port, path) = match v.split_once('/') {
        Some((port, path)) => (port, format!("/{path}")),
        None => (v, "/metrics".to_owned()),
    };
    if port.is_empty() {
        return Err(bad("no port before the path"));
    }
    if path
        .bytes()
        .any(|c| c.is_ascii_control() || matches!(c, b' ' | b'#' | b'?' | b'%' | b'\\'))
    {
        return Err(bad(
            "the path may hold no blank, control character, ?, #, % or \\",
        ));
    }
    let port = if port.bytes().all(|c| c.is_ascii_digit()) {
        match port.parse::<u16>() {
            Ok(n) if n > 0 => Port::Number(n),
            _ => return Err(bad("the port must be 1 to 65535")),
        }
    } else if crate::names::is_dns1035_label(port) && port.len() <= 15 {
        Port::Name(port.to_owned())
    } else {
        return Err(bad("the port must be a number or a port name"));
    };
    Ok((port, path))
}

/// The target a labelled Service makes.
pub fn of(svc: &Service) -> Result<Target, TargetError> {
    let tenant = svc.metadata.namespace.clone().unwrap_or_default();
    let service = svc.metadata.name.clone().unwrap_or_default();
    let value = svc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_METRICS))
        .ok_or(TargetError::Missing)?;
    let (port, path) = parse(value)?;
    let spec = svc.spec.as_ref();
    let number = match port {
        Port::Number(n) => n,
        Port::Name(name) => spec
            .and_then(|s| s.ports.as_ref())
            .into_iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.port).ok())
            .ok_or_else(|| TargetError::NoSuchPort {
                value: value.clone(),
                port: name,
            })?,
    };
    let host = match spec.and_then(|s| s.external_name.as_deref()) {
        Some(external) if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") => {
            external.trim_end_matches('.').to_owned()
        }
        _ => format!("{service}.{tenant}.svc"),
    };
    Ok(Target {
        url: format!("http://{host}:{number}{path}"),
        tenant,
        service,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(annotation: Option<&str>, extra: serde_json::Value) -> Service {
        let mut v = serde_json::json!({
            "metadata": {"name": "litellm", "namespace": "t1", "labels": {"autonomic.sh/metrics": "true"}},
            "spec": {"ports": [{"name": "http", "port": 4000}, {"name": "admin", "port": 4001}]}
        });
        if let Some(a) = annotation {
            v["metadata"]["annotations"] = serde_json::json!({ANNOTATION_METRICS: a});
        }
        if let Some(spec) = extra.as_object() {
            for (k, x) in spec {
                v["spec"][k] = x.clone();
            }
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_annotation_gives_the_address() {
        let none = serde_json::json!({});
        let external =
            serde_json::json!({"type": "ExternalName", "externalName": "gateway.example."});
        let cases = [
            ("4000/metrics", &none, "http://litellm.t1.svc:4000/metrics"),
            (
                "http/metrics/",
                &none,
                "http://litellm.t1.svc:4000/metrics/",
            ),
            ("admin", &none, "http://litellm.t1.svc:4001/metrics"),
            (" 9090/a/b ", &none, "http://litellm.t1.svc:9090/a/b"),
            ("4000/", &none, "http://litellm.t1.svc:4000/"),
            ("8080/m", &external, "http://gateway.example:8080/m"),
        ];
        for (annotation, spec, url) in cases {
            let t = of(&svc(Some(annotation), spec.clone())).unwrap();
            assert_eq!(t.url, url, "{annotation:?}");
            assert_eq!((t.tenant.as_str(), t.service.as_str()), ("t1", "litellm"));
        }
    }

    #[test]
    fn a_bad_annotation_is_refused_naming_it() {
        let none = serde_json::json!({});
        let cases = [
            (
                "/metrics",
                "annotation autonomic.sh/metrics \"/metrics\": no port before the path",
            ),
            (
                "0/metrics",
                "annotation autonomic.sh/metrics \"0/metrics\": the port must be 1 to 65535",
            ),
            (
                "70000",
                "annotation autonomic.sh/metrics \"70000\": the port must be 1 to 65535",
            ),
            (
                "Http/x",
                "annotation autonomic.sh/metrics \"Http/x\": the port must be a number or a port name",
            ),
            (
                "4000/a b",
                "annotation autonomic.sh/metrics \"4000/a b\": the path may hold no blank, control character, ?, #, % or \\",
            ),
            (
                "4000/m?x=1",
                "annotation autonomic.sh/metrics \"4000/m?x=1\": the path may hold no blank, control character, ?, #, % or \\",
            ),
            (
                "grpc/metrics",
                "annotation autonomic.sh/metrics \"grpc/metrics\": the Service has no port named \"grpc\"",
            ),
        ];
        for (annotation, message) in cases {
            let e = of(&svc(Some(annotation), none.clone())).unwrap_err();
            assert_eq!(e.to_string(), message, "{annotation:?}");
        }
        assert_eq!(of(&svc(None, none)).unwrap_err(), TargetError::Missing);
    }
}
