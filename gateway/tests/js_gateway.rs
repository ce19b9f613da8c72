//! The JS host end to end: real gateway on 127.0.0.1:0, the real mock upstream
//! (the seed's echo server) or a recording upstream, real HTTP, real scripts.

mod common;

use std::path::Path;
use std::time::Duration;

use gateway::server::GatewayConfig;
use serde_json::{json, Value};

fn fixture(name: &str) -> String {
    format!("{}/tests/js_fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn js(hook: &str, name: &str, path: String) -> Value {
    json!({ "driver": "otto", hook: [{ "name": name, "path": path }] })
}

fn write(dir: &Path, id: &str, target: &str, mw: Value) {
    let mut v = common::api_json(id, &format!("/{id}/"), target, true, mw);
    v["config_data"] = json!({ "greeting": "hi" });
    common::write_api(dir, id, &v);
}

fn gateway_with_timeout(dir: &Path, timeout: Duration) -> common::TestGateway {
    common::start_gateway_with(GatewayConfig {
        apis_dir: dir.to_path_buf(),
        threads: 2,
        jsvm_timeout: timeout,
        ..GatewayConfig::default()
    })
}

fn assert_internal_error(got: &common::Got) {
    assert_eq!(got.status, 500, "{}", got.text());
    assert_eq!(got.json(), json!({ "error": "Internal Server Error" }));
}

#[test]
fn the_seed_route_shows_the_jsvm_header_in_the_echo() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    let repo_js = format!("{}/../js/jsvm_hello.js", env!("CARGO_MANIFEST_DIR"));
    write(
        dir.path(),
        "jsvm",
        &up,
        js("pre", "jsvmHelloPreHook", repo_js),
    );
    let gw = common::start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for _ in 0..4 {
        let echo = common::get(gw.addr, "/jsvm/hello/").json();
        assert_eq!(echo["headers"]["X-Custom-Jsvm"], "hello-from-jsvm");
        assert_eq!(echo["path"], "/hello/");
    }
    // Call times land in the same per-API, per-hook histograms as native.
    let s = gw.stats.summaries();
    let mine = s
        .iter()
        .find(|c| c.api_id == "jsvm")
        .expect("stats for jsvm");
    assert_eq!(
        (mine.hook.as_str(), mine.middleware.as_str()),
        ("pre", "jsvmHelloPreHook")
    );
    assert_eq!(mine.count, 4);
    gw.stop();
}

#[test]
fn every_request_field_and_rule_reaches_the_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, rec) = common::recorder();
    let up = format!("http://{addr}");
    write(
        dir.path(),
        "hdr",
        &up,
        js("pre", "headersMw", fixture("headers.js")),
    );
    write(
        dir.path(),
        "q",
        &up,
        js("post", "queryMw", fixture("query.js")),
    );
    write(
        dir.path(),
        "body",
        &up,
        js("pre", "bodyMw", fixture("body.js")),
    );
    let gw = common::start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);

    let got = common::send(
        gw.addr,
        "GET",
        "/hdr/p?q=1",
        &[
            ("X-Api-Key", "k1"),
            ("x-multi", "one"),
            ("x-multi", "two"),
            ("x-replace", "old"),
            ("x-drop", "d"),
        ],
        b"",
    );
    assert_eq!(got.status, 200);
    let seen = rec.last();
    let h = |n: &str| seen.headers.get(n).map(|v| v.to_str().unwrap().to_string());
    assert_eq!(h("x-seen-key").as_deref(), Some("k1"));
    assert_eq!(h("x-seen-multi").as_deref(), Some(r#"["one","two"]"#));
    // Pre runs before the listen path is stripped.
    assert_eq!(h("x-seen-method").as_deref(), Some("GET /hdr/p?q=1 http"));
    assert_eq!(h("x-seen-spec").as_deref(), Some("hdr/default/hi"));
    assert_eq!(h("x-replace").as_deref(), Some("new"));
    assert_eq!(h("x-drop"), None);
    assert_eq!(seen.uri, "/p?q=1");

    // Post runs before the strip, as in Tyk (the proxy strips); the query
    // edits reach the upstream.
    common::send(gw.addr, "GET", "/q/a?z=1&drop=x&multi=a", &[], b"");
    let seen = rec.last();
    assert_eq!(seen.uri, "/a?added=x+y&multi=a&multi=b&multi=c&z=1");
    // In post, URL is still the path the client sent, as is RequestURI.
    assert_eq!(
        seen.headers["x-uris"],
        "/q/a?z=1&drop=x&multi=a /q/a?z=1&drop=x&multi=a"
    );
    common::send(gw.addr, "GET", "/q/a?move=1", &[], b"");
    assert_eq!(
        rec.last().uri,
        "/moved/here?added=x+y&keep=1&multi=a&multi=b&multi=c"
    );

    let got = common::send(
        gw.addr,
        "POST",
        "/body/",
        &[("content-type", "text/plain")],
        b"hello",
    );
    assert_eq!(got.status, 200);
    let seen = rec.last();
    assert_eq!(&seen.body[..], b"rewritten:hello");
    assert_eq!(seen.headers.get("x-roundtrip").unwrap(), "true");
    assert_eq!(seen.headers.get("x-b64").unwrap(), "aGVsbG8=");
    gw.stop();
}

#[test]
fn return_overrides_answer_the_client_and_nothing_is_proxied() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, rec) = common::recorder();
    write(
        dir.path(),
        "ro",
        &format!("http://{addr}"),
        js("pre", "overridesMw", fixture("overrides.js")),
    );
    let gw = common::start_gateway(dir.path());
    let got = common::send(gw.addr, "GET", "/ro/", &[("x-mode", "error")], b"");
    assert_eq!(got.status, 403);
    assert_eq!(got.headers.get("x-why").unwrap(), "policy");
    assert_eq!(got.json(), json!({ "error": "go away" }));
    let got = common::send(gw.addr, "GET", "/ro/", &[("x-mode", "ok")], b"");
    assert_eq!(
        (got.status.as_u16(), got.text().as_str()),
        (200, "answered by js")
    );
    assert_eq!(rec.count(), 0);
    common::send(gw.addr, "GET", "/ro/", &[], b"");
    assert_eq!(rec.count(), 1);
    gw.stop();
}

#[test]
fn faults_answer_500_and_the_api_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    write(
        dir.path(),
        "faults",
        &up,
        js("pre", "faultsMw", fixture("faults.js")),
    );
    write(
        dir.path(),
        "other",
        &up,
        js("pre", "mw", fixture("clash_a.js")),
    );
    let gw = gateway_with_timeout(dir.path(), Duration::from_millis(500));
    for fault in [
        "throw", "nothing", "shape", "crlf", "recurse", "loop", "alloc",
    ] {
        let got = common::send(gw.addr, "GET", "/faults/", &[("x-fault", fault)], b"");
        assert_internal_error(&got);
        let ok = common::get(gw.addr, "/faults/");
        assert_eq!(ok.status, 200, "{fault}: {}", ok.text());
        assert_eq!(
            common::get(gw.addr, "/other/").json()["headers"]["X-Owner"],
            "a"
        );
    }
    gw.stop();
}

#[test]
fn a_runaway_script_does_not_stop_other_requests() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    write(
        dir.path(),
        "faults",
        &up,
        js("pre", "faultsMw", fixture("faults.js")),
    );
    write(
        dir.path(),
        "other",
        &up,
        js("pre", "mw", fixture("clash_a.js")),
    );
    // Generous: the other requests must all finish while the runaway still
    // runs, also on a loaded machine with a debug build.
    let gw = gateway_with_timeout(dir.path(), Duration::from_secs(10));
    let addr = gw.addr;
    let (tx, rx) = std::sync::mpsc::channel();
    let slow_tx = tx.clone();
    std::thread::spawn(move || {
        let got = common::send(addr, "GET", "/faults/", &[("x-fault", "loop")], b"");
        let _ = slow_tx.send(("runaway", got.status.as_u16()));
    });
    std::thread::spawn(move || {
        // Several requests, so some land on the worker running the loop.
        for _ in 0..6 {
            assert_eq!(common::get(addr, "/other/").status, 200);
        }
        let _ = tx.send(("others", 200));
    });
    let first = rx.recv().unwrap();
    let second = rx.recv().unwrap();
    assert_eq!(first, ("others", 200));
    assert_eq!(second, ("runaway", 500));
    gw.stop();
}

#[test]
fn two_apis_defining_the_same_globals_each_see_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    write(dir.path(), "a", &up, js("pre", "mw", fixture("clash_a.js")));
    write(dir.path(), "b", &up, js("pre", "mw", fixture("clash_b.js")));
    let gw = common::start_gateway(dir.path());
    for _ in 0..4 {
        assert_eq!(
            common::get(gw.addr, "/a/").json()["headers"]["X-Owner"],
            "a"
        );
        assert_eq!(
            common::get(gw.addr, "/b/").json()["headers"]["X-Owner"],
            "b"
        );
    }
    gw.stop();
}

#[test]
fn a_broken_script_fails_its_api_only() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    write(
        dir.path(),
        "bad",
        &up,
        js("pre", "broken", fixture("syntax_error.js")),
    );
    write(
        dir.path(),
        "noobj",
        &up,
        js("pre", "missingObj", fixture("no_object.js")),
    );
    write(
        dir.path(),
        "good",
        &up,
        js("pre", "mw", fixture("clash_a.js")),
    );
    // A disabled entry first: the error must still name the entry as written.
    let missing = json!({ "driver": "otto", "pre": [
        { "name": "mw", "path": fixture("clash_a.js"), "disabled": true },
        { "name": "mw", "path": "/nonexistent/mw.js" },
    ]});
    write(dir.path(), "missing", &up, missing);
    let gw = common::start_gateway(dir.path());
    let errors: Vec<String> = gw.load_errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors.iter().any(|e| e.contains("missing.json")
            && e.contains("custom_middleware.pre[1].path")
            && e.contains("/nonexistent/mw.js")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("bad.json")
            && e.contains("syntax_error.js")
            && e.contains("line 4")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("noobj.json") && e.contains("missingObj")),
        "{errors:?}"
    );
    assert_eq!(common::get(gw.addr, "/good/").status, 200);
    // Fails closed: routed, answering 500, never falling through.
    assert_eq!(common::get(gw.addr, "/bad/").status, 500);
    gw.stop();
}

#[test]
fn a_hundred_thousand_requests_through_one_vm_keep_memory_flat() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    write(
        dir.path(),
        "soak",
        &up,
        js("pre", "headersMw", fixture("headers.js")),
    );
    let gw = common::start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 1,
        ..GatewayConfig::default()
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let addr = gw.addr;
    // One keep-alive connection, bounded in count; the time bound is the
    // per-request timeout.
    let rss = |phase: &str| {
        let kb = rss_kb();
        eprintln!("soak {phase}: {kb} KiB");
        kb
    };
    let run = |n: usize| {
        rt.block_on(async {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (mut tx, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .unwrap();
            tokio::spawn(conn);
            for _ in 0..n {
                let req = http::Request::get("/soak/x?a=1")
                    .header("host", "soak")
                    .header("x-api-key", "k")
                    .header("x-multi", "m")
                    .body(http_body_util::Empty::<bytes::Bytes>::new())
                    .unwrap();
                let resp = tokio::time::timeout(Duration::from_secs(10), tx.send_request(req))
                    .await
                    .expect("response within 10 s")
                    .unwrap();
                assert_eq!(resp.status(), 200);
                http_body_util::BodyExt::collect(resp.into_body())
                    .await
                    .unwrap();
            }
        })
    };
    run(20_000);
    let before = rss("after 20,000");
    run(80_000);
    let after = rss("after 100,000");
    assert_eq!(
        gw.stats.summaries().iter().map(|c| c.count).sum::<u64>(),
        100_000
    );
    assert!(
        after < before + 32 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    gw.stop();
}

/// Resident set size of this process (gateway in-process), from /proc.
fn rss_kb() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    statm
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 4
}
