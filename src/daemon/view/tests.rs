use super::*;
use crate::controller::decide::{Holder, Progress, Waiting};
use crate::status::{Note, Recorder};

const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJyb290In0.c2lnbmF0dXJlLW9mLXRoZS1rZXk";

fn status() -> Status {
    let p = Progress {
        node_set: "gpu".into(),
        revision: "gpu-5d8f7c".into(),
        replicas: 4,
        updated: 1,
        waiting: vec![Waiting {
            node: "gpu-1".into(),
            why: "rollout".into(),
            jobs: vec![Holder {
                id: 4242,
                user: "alice".into(),
                start: None,
                end: Some(1_900_000_000),
            }],
            since: Some(1_800_000_000),
        }],
        ..Progress::default()
    };
    Status {
        repository: "https://deploy:ghp_s3cr3tT0ken@git.example/infra.git".into(),
        branch: "main".into(),
        last_applied_commit: "a".repeat(40),
        result: "applied".into(),
        errors: format!(
            "slurmrestd said: token {JWT} expired\nfetch https://x:pw@git.example/r failed"
        ),
        node_sets: serde_json::to_string(&vec![p]).unwrap(),
        ..Status::default()
    }
}

fn published(view: &View, events: &Recorder) {
    publish(view, &status(), events);
}

fn publish(view: &View, status: &Status, events: &Recorder) {
    let facts = Facts {
        cluster: Some("prod"),
        namespace: "slurm",
        events,
    };
    view.publish(status, &facts);
}

fn get(view: &View, path: &str, headers: &[(&str, &str)]) -> Response<Full<Bytes>> {
    let mut req = Request::get(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    view.get(&req.body(()).unwrap())
}

fn text(r: Response<Full<Bytes>>) -> String {
    use http_body_util::BodyExt;
    let Ok(body) = futures_lite(r.into_body().collect());
    let body = body.to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

/// Polls a future that is ready at once (a Full body).
fn futures_lite<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn the_data_holds_the_cluster_and_no_credential_or_token() {
    let view = View::new(true, None);
    let events = Recorder::default();
    events.show(
        &Note {
            involved: crate::status::node_set_ref("slurm", "gpu", false),
            reason: "Draining",
            message: format!("gpu-1 waits for job 4242 (token {JWT})"),
            warning: false,
        },
        3,
    );
    published(&view, &events);
    let r = get(&view, API_PATH, &[]);
    assert_eq!(r.status(), StatusCode::OK);
    let body = text(r);
    for secret in ["ghp_s3cr3tT0ken", "deploy:", "x:pw", JWT, "c2lnbmF0dXJl"] {
        assert!(!body.contains(secret), "{secret} in {body}");
    }
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["apiVersion"], API_VERSION);
    assert_eq!(v["repository"], "https://***@git.example/infra.git");
    assert_eq!(v["nodeSets"][0]["waiting"][0]["jobs"][0]["id"], 4242);
    assert_eq!(v["events"][0]["reason"], "Draining");
    assert_eq!(v["events"][0]["count"], 3);
    assert_eq!(v["errors"][0], "slurmrestd said: token [token] expired");
}

#[test]
fn a_viewer_with_the_current_copy_gets_304_and_a_new_pass_with_news_a_new_copy() {
    let view = View::new(true, None);
    let events = Recorder::default();
    assert_eq!(
        get(&view, API_PATH, &[]).status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    published(&view, &events);
    let first = get(&view, API_PATH, &[]);
    let etag = first.headers()[header::ETAG].to_str().unwrap().to_string();
    let again = get(&view, API_PATH, &[("if-none-match", &etag)]);
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    // The same facts again: the same copy.
    published(&view, &events);
    assert_eq!(
        get(&view, API_PATH, &[("if-none-match", &etag)]).status(),
        StatusCode::NOT_MODIFIED
    );
    // An Event: a new copy.
    events.show(
        &Note {
            involved: crate::status::node_set_ref("slurm", "gpu", false),
            reason: "Replaced",
            message: "gpu-1".into(),
            warning: false,
        },
        1,
    );
    published(&view, &events);
    assert_eq!(
        get(&view, API_PATH, &[("if-none-match", &etag)]).status(),
        StatusCode::OK
    );
}

#[test]
fn with_a_token_the_data_needs_it_and_the_assets_do_not() {
    let view = View::new(true, Some(b"0123456789abcdef0123"));
    published(&view, &Recorder::default());
    let refused = get(&view, API_PATH, &[]);
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert!(refused.headers().contains_key(header::WWW_AUTHENTICATE));
    assert!(!text(refused).contains("prod"));
    for wrong in [
        "Bearer 0123456789abcdef012",
        "Bearer ",
        "Basic 0123456789abcdef0123",
        "0123456789abcdef0123",
    ] {
        assert_eq!(
            get(&view, API_PATH, &[("authorization", wrong)]).status(),
            StatusCode::UNAUTHORIZED,
            "{wrong}"
        );
    }
    let ok = get(
        &view,
        API_PATH,
        &[("authorization", "Bearer 0123456789abcdef0123")],
    );
    assert_eq!(ok.status(), StatusCode::OK);
    assert!(text(ok).contains("\"cluster\":\"prod\""));
    for asset in ["/", "/app.js", "/app.css", "/icon.svg"] {
        assert_eq!(get(&view, asset, &[]).status(), StatusCode::OK, "{asset}");
    }
}

#[test]
fn every_answer_carries_the_strict_content_security_policy() {
    let view = View::new(true, None);
    published(&view, &Recorder::default());
    for path in ["/", "/app.js", "/app.css", "/icon.svg", API_PATH] {
        let r = get(&view, path, &[]);
        let h = r.headers();
        assert_eq!(h[header::CONTENT_SECURITY_POLICY], CSP, "{path}");
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY", "{path}");
    }
    assert!(CSP.starts_with("default-src 'none'; script-src 'self';"));
}

#[test]
fn the_page_writes_no_markup_from_data() {
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "Function(",
        "setAttribute('on",
        "srcdoc",
    ] {
        assert!(!SCRIPT.contains(sink), "app.js uses {sink}");
    }
    assert!(!INDEX.contains("<script>"), "inline script in index.html");
    assert!(!INDEX.contains("style="), "inline style in index.html");
}

#[test]
fn without_the_view_its_paths_are_not_served() {
    let view = View::new(false, None);
    for path in ["/", "/app.js", API_PATH] {
        assert!(!view.serves(path), "{path}");
    }
    assert!(View::new(true, None).serves(API_PATH));
}

#[test]
fn redaction_cuts_user_information_and_tokens_and_keeps_the_rest() {
    assert_eq!(
        redact("clone https://u:p@h/x failed"),
        "clone https://***@h/x failed"
    );
    assert_eq!(redact("ssh://git@h:22/x"), "ssh://***@h:22/x");
    assert_eq!(redact("see https://h/a@b"), "see https://h/a@b");
    assert_eq!(redact(&format!("Bearer {JWT}.")), "Bearer [token].");
    assert_eq!(
        redact("job 12 user alice: eyJ only"),
        "job 12 user alice: eyJ only"
    );
    assert_eq!(redact("a.b.c and eyJa.b"), "a.b.c and eyJa.b");
}

#[test]
fn a_pass_that_only_moves_the_pass_time_makes_no_new_copy() {
    let view = View::new(true, None);
    let events = Recorder::default();
    published(&view, &events);
    let etag = get(&view, API_PATH, &[]).headers()[header::ETAG]
        .to_str()
        .unwrap()
        .to_string();
    let later = Status {
        last_attempt: "2026-11-28T02:00:00Z".into(),
        last_fetch: "2026-11-28T02:00:00Z".into(),
        ..status()
    };
    publish(&view, &later, &events);
    assert_eq!(
        get(&view, API_PATH, &[("if-none-match", &etag)]).status(),
        StatusCode::NOT_MODIFIED
    );
    let news = Status {
        result: "failed".into(),
        ..later
    };
    publish(&view, &news, &events);
    assert_eq!(
        get(&view, API_PATH, &[("if-none-match", &etag)]).status(),
        StatusCode::OK
    );
}

#[test]
fn slurm_reads_off_when_the_daemon_runs_without_it_and_unreachable_when_it_should_answer() {
    assert_eq!(super::slurm_state(""), "reachable");
    assert_eq!(
        super::slurm_state(
            "off (--no-slurm): nothing rolls; scale-ins and prunes over workers are refused"
        ),
        "off"
    );
    assert_eq!(
        super::slurm_state("unreachable or failing, destructive steps wait: dns error"),
        "unreachable"
    );
    assert_eq!(super::slurm_state("offline node list"), "unreachable");
}
