use super::*;
use crate::analysis::Condition;

fn query(success: Option<&str>, failure: Option<&str>) -> Query {
    let parse = |t: Option<&str>| t.map(|t| Condition::parse(t).unwrap());
    Query {
        template: "up".into(),
        success: parse(success),
        failure: parse(failure),
    }
}

#[test]
fn answers_come_down_to_one_number() {
    let ok: &[(&str, f64)] = &[
        (
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"x"},"value":[1700000000.5,"0.25"]}]}}"#,
            0.25,
        ),
        (
            r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"3"]}}"#,
            3.0,
        ),
        (
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"+Inf"]}]}}"#,
            f64::INFINITY,
        ),
    ];
    for (body, want) in ok {
        assert_eq!(parse_answer(200, body.as_bytes()).unwrap(), *want, "{body}");
    }
}

#[test]
fn anything_but_one_number_is_an_error() {
    let cases: &[(u16, &str, &str)] = &[
        (
            200,
            r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
            "no sample",
        ),
        (
            200,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"1"]},{"metric":{"a":"2"},"value":[1,"2"]}]}}"#,
            "2 samples",
        ),
        (
            200,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}"#,
            "NaN",
        ),
        (
            200,
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}}"#,
            "range vector",
        ),
        (
            200,
            r#"{"status":"success","data":{"resultType":"string","result":[1,"x"]}}"#,
            "a string",
        ),
        (
            400,
            r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:1: parse error"}"#,
            "answered 400: invalid parameter",
        ),
        (
            503,
            "Service Unavailable",
            "answered 503: Service Unavailable",
        ),
        (200, "<html>", "not a query result"),
        (
            200,
            r#"{"status":"error","error":"query timed out"}"#,
            "query timed out",
        ),
        (
            200,
            r#"{"status":"success","data":{"resultType":"scalar","result":[1,"many"]}}"#,
            "\"many\" is not a number",
        ),
    ];
    for (status, body, want) in cases {
        match parse_answer(*status, body.as_bytes()) {
            Err(e) => assert!(e.to_string().contains(want), "{body}: {e}"),
            Ok(v) => panic!("{body}: {v}"),
        }
    }
}

#[test]
fn conditions_judge_as_argo_rollouts_does() {
    use Verdict::*;
    let cases: &[(Option<&str>, Option<&str>, f64, Verdict)] = &[
        (Some("result < 1"), None, 0.5, Pass),
        (Some("result < 1"), None, 2.0, Fail),
        (None, Some("result > 5"), 6.0, Fail),
        (None, Some("result > 5"), 1.0, Pass),
        (Some("result < 1"), Some("result > 5"), 0.5, Pass),
        (Some("result < 1"), Some("result > 5"), 6.0, Fail),
        (Some("result < 1"), Some("result > 5"), 3.0, Inconclusive),
        // The failure condition wins when both hold.
        (Some("result < 10"), Some("result > 5"), 6.0, Fail),
    ];
    for (success, failure, v, want) in cases {
        let r = judge(&query(*success, *failure), Ok(*v));
        assert_eq!(r.verdict, *want, "{success:?} {failure:?} at {v}");
        assert_eq!(r.value, Some(*v));
    }
}

#[test]
fn no_number_is_inconclusive_never_a_pass() {
    let q = query(Some("result < 1"), None);
    for e in [
        AnalysisError::Empty,
        AnalysisError::NaN,
        AnalysisError::Multiple(3),
        AnalysisError::Net(crate::net::NetError::Unreachable(
            "connection refused".into(),
        )),
    ] {
        let why = e.to_string();
        let r = judge(&q, Err(e));
        assert_eq!((r.verdict, r.value), (Verdict::Inconclusive, None));
        assert_eq!(r.detail, why);
    }
    assert_eq!(judge(&q, Ok(f64::NAN)).verdict, Verdict::Inconclusive);
}

#[test]
fn urls_are_http_or_https_without_credentials() {
    assert_eq!(
        check_url("http://127.0.0.1:9090/").unwrap(),
        "http://127.0.0.1:9090"
    );
    assert_eq!(
        check_url("https://prom.example.com/prometheus").unwrap(),
        "https://prom.example.com/prometheus"
    );
    for (bad, want) in [
        ("ftp://x", "not an http"),
        ("127.0.0.1:9090", "not an http"),
        ("http://", "no host"),
        ("https://user:pw@prom", "credentials"),
        ("http://prom/?a=b", "query"),
        ("http://prom x", "space"),
    ] {
        match check_url(bad) {
            Err(AnalysisError::Url { reason, .. }) => {
                assert!(reason.contains(want), "{bad}: {reason}")
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    // No password in the error either.
    let e = check_url("https://user:pw@prom").unwrap_err().to_string();
    assert!(e.contains("credentials") && !e.contains("pw"), "{e}");
}

#[tokio::test]
async fn an_unreachable_server_is_inconclusive() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(1);
    let p = Prometheus::new(&format!("http://127.0.0.1:{port}"), Duration::from_secs(5)).unwrap();
    let tenants = vec!["t".to_string()];
    let vars = Vars {
        tenants: &tenants,
        release: "r",
        wave: "canary",
    };
    let r = p.measure(&query(Some("result < 1"), None), &vars).await;
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert!(r.detail.contains("unreachable"), "{}", r.detail);
}
