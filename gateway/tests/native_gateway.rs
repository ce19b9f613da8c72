//! The native driver end to end: the real gateway in-process on 127.0.0.1:0,
//! definitions in a temp dir, the real plugin libraries, real upstreams (the
//! mock echo server and a recorder); assertions on what the upstream saw and
//! what the client got.

mod common;

use std::path::Path;

use common::native::{native_api, plugins, write_def};
use common::{get, mock, raw, recorder, send, start_gateway, Recorder, TestGateway};
use serde_json::json;

const TYK_500: &str = "Internal Server Error";

fn values(h: &http::HeaderMap, name: &str) -> Vec<String> {
    h.get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

/// A gateway serving one API, `/{name}/`, whose `pre` and `post` entries
/// are the test plugin's symbols, in front of a recorder; the temp dir
/// holds its definition.
fn serve_test_plugin(
    name: &str,
    pre: &[&str],
    post: &[&str],
) -> (tempfile::TempDir, TestGateway, Recorder) {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let t = plugins().test.as_path();
    let pre: Vec<_> = pre.iter().map(|s| (t, *s)).collect();
    let post: Vec<_> = post.iter().map(|s| (t, *s)).collect();
    let api = native_api(name, &format!("/{name}/"), &up.to_string(), &pre, &post);
    write_def(dir.path(), name, &api);
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    (dir, gw, rec)
}

#[test]
fn the_seed_add_header_reaches_the_mock_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let up = mock().to_string();
    let lib = &plugins().add_header;
    write_def(
        dir.path(),
        "gopl",
        &native_api("gopl-hello", "/gopl/", &up, &[(lib, "AddHeader")], &[]),
    );
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for _ in 0..3 {
        let got = get(gw.addr, "/gopl/hello/");
        assert_eq!(got.status, 200, "{}", got.text());
        let echo = got.json();
        assert_eq!(echo["path"], "/hello/");
        assert_eq!(echo["headers"]["X-Custom-Goplugin"], "hello-from-go-plugin");
    }
    let s = gw.stats.summaries();
    let mine: Vec<_> = s.iter().filter(|s| s.api_id == "gopl-hello").collect();
    assert_eq!(mine.len(), 1, "{s:?}");
    assert_eq!(
        (mine[0].hook.as_str(), mine[0].middleware.as_str()),
        ("pre", "AddHeader")
    );
    assert_eq!(mine[0].count, 3);
    gw.stop();
}

#[test]
fn http10_clients_through_a_plugin_go_upstream_as_http11_on_pooled_connections() {
    // ab's request through the seed's plugin: the chain runs in place and
    // the client's head, lent to it, goes on upstream as 1.1, keep-alive.
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let lib = &plugins().add_header;
    write_def(
        dir.path(),
        "gopl",
        &native_api(
            "gopl-hello",
            "/gopl/",
            &up.to_string(),
            &[(lib, "AddHeader")],
            &[],
        ),
    );
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for i in 0..20 {
        let resp = raw(gw.addr, &format!("GET /gopl/n{i}?k={i} HTTP/1.0\r\nHost: x\r\nUser-Agent: ApacheBench/2.3\r\nAccept: */*\r\n\r\n"));
        assert!(resp.starts_with("HTTP/1.0 200"), "{resp}");
    }
    let seen = rec.requests();
    assert_eq!(seen.len(), 20);
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(s.version, http::Version::HTTP_11, "request {i}");
        assert_eq!(s.uri, format!("/n{i}?k={i}"));
        assert_eq!(
            values(&s.headers, "x-custom-goplugin"),
            ["hello-from-go-plugin"]
        );
        assert_eq!(values(&s.headers, "user-agent"), ["ApacheBench/2.3"]);
    }
    // Two workers, each with its own pool, sequential requests: at most two.
    assert!(
        rec.connections() <= 2,
        "{} upstream connections for 20 requests",
        rec.connections()
    );
    gw.stop();
}

#[test]
fn the_upstream_sees_header_path_query_and_body_edits() {
    let (_dir, gw, rec) = serve_test_plugin("edit", &["EditHeaders"], &["Rewrite"]);
    let got = send(
        gw.addr,
        "POST",
        "/edit/x?q=1",
        &[("X-Set", "a"), ("X-Append", "first"), ("X-Delete", "gone")],
        b"hello",
    );
    assert_eq!(got.status, 200, "{}", got.text());
    let seen = rec.last();
    assert_eq!(values(&seen.headers, "x-set"), ["replaced"]);
    assert_eq!(values(&seen.headers, "x-append"), ["first", "added"]);
    assert!(seen.headers.get("x-delete").is_none());
    // Rewrite runs in post, before the strip (Tyk strips at the proxy): it
    // saw /edit/x and made /rewritten/edit/x, which no longer starts with
    // the listen path, so nothing is stripped (Tyk's TrimPrefix).
    assert_eq!(seen.uri, "/rewritten/edit/x?a=1&b=two");
    assert_eq!(values(&seen.headers, "x-old"), [r#"/edit/x Some("q=1") 5"#]);
    assert_eq!(&seen.body[..], b"rewritten body");
    assert_eq!(values(&seen.headers, "content-length"), ["14"]);
    // A request without a body runs the same chain in place (no future of
    // its own, `ApiChain::runs_in_place`): the same edits arrive.
    let got = send(gw.addr, "GET", "/edit/y?q=2", &[("X-Delete", "gone")], b"");
    assert_eq!(got.status, 200, "{}", got.text());
    let seen = rec.last();
    assert_eq!(seen.method, "GET");
    assert_eq!(values(&seen.headers, "x-set"), ["replaced"]);
    assert_eq!(values(&seen.headers, "x-append"), ["added"]);
    assert!(seen.headers.get("x-delete").is_none());
    assert_eq!(seen.uri, "/rewritten/edit/y?a=1&b=two");
    assert_eq!(values(&seen.headers, "x-old"), [r#"/edit/y Some("q=2") 0"#]);
    assert_eq!(&seen.body[..], b"rewritten body");
    assert_eq!(values(&seen.headers, "content-length"), ["14"]);
    gw.stop();
}

#[test]
fn a_rewritten_path_loses_its_dot_segments_before_the_upstream() {
    let (_dir, gw, rec) = serve_test_plugin("edit", &["ClimbOut"], &[]);
    // Without a body the chain runs in place; with one, after the body is
    // read: both paths clean what the plugin wrote.
    for (method, body) in [("GET", &b""[..]), ("POST", &b"payload"[..])] {
        let got = send(gw.addr, method, "/edit/x?q=1", &[], body);
        assert_eq!(got.status, 200, "{method}: {}", got.text());
        let seen = rec.last();
        assert_eq!(seen.uri, "/admin/x", "{method}");
        assert_eq!(&seen.body[..], body, "{method}");
    }
    gw.stop();
}

#[test]
fn pre_and_post_both_see_the_path_the_client_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let t = &plugins().test;
    let mut api = native_api(
        "order",
        "/svc/",
        &up.to_string(),
        &[(t, "SeenPath")],
        &[(t, "SeenPath")],
    );
    // A disabled entry is skipped, even when its library does not exist.
    api["custom_middleware"]["pre"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "Nope", "path": "/does/not/exist.so", "disabled": true}));
    write_def(dir.path(), "order", &api);
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    assert_eq!(get(gw.addr, "/svc/a/b").status, 200);
    let seen = rec.last();
    assert_eq!(
        values(&seen.headers, "x-seen-path"),
        ["/svc/a/b", "/svc/a/b"]
    );
    assert_eq!(seen.uri, "/a/b");
    gw.stop();
}

#[test]
fn a_plugin_answer_reaches_the_client_and_nothing_is_proxied() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let (t, c) = (&plugins().test, &plugins().c_require);
    write_def(
        dir.path(),
        "tea",
        &native_api(
            "tea",
            "/tea/",
            &up.to_string(),
            &[(t, "Teapot")],
            &[(t, "Panic")],
        ),
    );
    write_def(
        dir.path(),
        "c",
        &native_api("c", "/c/", &up.to_string(), &[(c, "RequireHeader")], &[]),
    );
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);

    // The short-circuit also stops the chain: post's Panic never runs.
    let got = get(gw.addr, "/tea/x");
    assert_eq!(got.status, 418);
    assert_eq!(values(&got.headers, "x-short"), ["circuit"]);
    assert_eq!(values(&got.headers, "content-type"), ["application/json"]);
    assert_eq!(got.json(), json!({"teapot": true}));

    let got = get(gw.addr, "/c/x");
    assert_eq!(got.status, 403);
    assert_eq!(values(&got.headers, "x-denied-by"), ["c-plugin"]);
    assert_eq!(got.json()["error"], "X-Api-Key header is required");
    assert_eq!(rec.count(), 0, "a short-circuited request was proxied");

    let got = send(gw.addr, "GET", "/c/x", &[("X-Api-Key", "k1")], b"");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(values(&rec.last().headers, "x-c-plugin"), ["GET key-len=2"]);
    gw.stop();
}

#[test]
fn errors_and_panics_answer_500_and_the_next_request_works() {
    let (_dir, gw, rec) = serve_test_plugin("m", &["Moody"], &[]);
    for trigger in ["fail", "panic", "panic", "fail"] {
        let got = send(gw.addr, "GET", "/m/x", &[("X-Trigger", trigger)], b"");
        assert_eq!(got.status, 500, "{trigger}");
        assert_eq!(got.json(), json!({"error": TYK_500}), "{trigger}");
        let got = get(gw.addr, "/m/x");
        assert_eq!(got.status, 200, "after {trigger}: {}", got.text());
        assert_eq!(values(&rec.last().headers, "x-survived"), ["yes"]);
    }
    assert_eq!(rec.count(), 4, "a failed request was proxied");
    gw.stop();
}

#[test]
fn invalid_headers_from_a_plugin_answer_500_and_send_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let t = &plugins().test;
    for (i, symbol) in ["BadHeaderValue", "EmptyHeaderName", "BadResponseHeader"]
        .iter()
        .enumerate()
    {
        let api = native_api(
            &format!("bad{i}"),
            &format!("/bad{i}/"),
            &up.to_string(),
            &[(t, symbol)],
            &[],
        );
        write_def(dir.path(), &format!("bad{i}"), &api);
    }
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for i in 0..3 {
        let got = get(gw.addr, &format!("/bad{i}/x"));
        assert_eq!(got.status, 500, "bad{i}");
        assert_eq!(got.json(), json!({"error": TYK_500}));
        assert!(got.headers.get("x-bad").is_none() && got.headers.get("x-evil").is_none());
    }
    assert_eq!(rec.count(), 0, "an invalid request reached the upstream");
    gw.stop();
}

#[test]
fn each_broken_library_fails_only_its_api_naming_file_and_symbol() {
    let dir = tempfile::tempdir().unwrap();
    let up = mock().to_string();
    let p = plugins();
    let missing = dir.path().join("missing.so");
    let a_dir = tempfile::tempdir().unwrap();
    // Not a library: the system's reason is named, not only "dlopen failed".
    let not_elf = dir.path().join("notes.so");
    std::fs::write(
        &not_elf,
        "these are notes, not a shared library\n".repeat(4),
    )
    .unwrap();
    let cases: [(&str, &Path, &str, &str, &str); 7] = [
        (
            "missing",
            &missing,
            "AddHeader",
            "pre[0].path",
            "cannot open library",
        ),
        (
            "nosym",
            &p.add_header,
            "NoSuchSymbol",
            "pre[0].name",
            "does not export symbol \"NoSuchSymbol\"",
        ),
        (
            "wrongabi",
            &p.wrong_abi,
            "AddHeader",
            "pre[0].path",
            "speaks plugin ABI version 99",
        ),
        (
            "noversion",
            &p.no_version,
            "AddHeader",
            "pre[0].path",
            "does not export \"gw_plugin_abi_version\"",
        ),
        (
            "isdir",
            a_dir.path(),
            "AddHeader",
            "pre[0].path",
            "is a directory",
        ),
        (
            "abisym",
            &p.add_header,
            "gw_plugin_abi_version",
            "pre[0].name",
            "the plugin ABI's own symbols",
        ),
        (
            "notelf",
            &not_elf,
            "AddHeader",
            "pre[0].path",
            "invalid ELF header",
        ),
    ];
    for (name, lib, symbol, _, _) in &cases {
        write_def(
            dir.path(),
            name,
            &native_api(name, &format!("/{name}/"), &up, &[(lib, symbol)], &[]),
        );
    }
    let good = native_api("good", "/good/", &up, &[(&p.add_header, "AddHeader")], &[]);
    write_def(dir.path(), "good", &good);
    let gw = start_gateway(dir.path());

    assert_eq!(gw.load_errors.len(), cases.len(), "{:?}", gw.load_errors);
    for (name, lib, symbol, field, why) in &cases {
        let e = gw
            .load_errors
            .iter()
            .find(|e| e.file.ends_with(format!("{name}.json")))
            .unwrap_or_else(|| panic!("no error for {name}: {:?}", gw.load_errors));
        let text = e.to_string();
        assert_eq!(e.field, format!("custom_middleware.{field}"), "{text}");
        assert!(text.contains(why), "{text}");
        assert!(
            text.contains(lib.to_str().unwrap()),
            "library not named: {text}"
        );
        assert!(text.contains(symbol), "symbol not named: {text}");
        assert_eq!(
            get(gw.addr, &format!("/{name}/x")).status,
            500,
            "{name} fails closed"
        );
    }
    let got = get(gw.addr, "/good/x");
    assert_eq!(got.status, 200);
    assert_eq!(
        got.json()["headers"]["X-Custom-Goplugin"],
        "hello-from-go-plugin"
    );
    gw.stop();
}

#[test]
fn apis_naming_one_library_share_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let up = mock().to_string();
    let t = &plugins().test;
    write_def(
        dir.path(),
        "a",
        &native_api("a", "/a/", &up, &[(t, "Count")], &[]),
    );
    write_def(
        dir.path(),
        "b",
        &native_api("b", "/b/", &up, &[(t, "Count")], &[]),
    );
    let gw = start_gateway(dir.path());
    let count = |path: &str| -> u64 {
        let got = get(gw.addr, path);
        got.json()["headers"]["X-Count"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    // One static counter behind both APIs and both workers: one load.
    let first = count("/a/");
    assert_eq!(count("/b/"), first + 1);
    assert_eq!(count("/a/"), first + 2);
    gw.stop();
}

/// ABI 1.3 from the Rust SDK: `add_client_header` reaches the client on
/// the proxied answer (the upstream's headers after it) and on an answer a
/// later middleware writes (whose own names win); `set_method` sends the
/// method upstream, and a method that is not a token fails the request.
#[test]
fn a_native_plugins_client_headers_and_method_reach_client_and_upstream() {
    let (_dir, gw, rec) = serve_test_plugin("ch", &["ClientHeader"], &[]);
    let got = get(gw.addr, "/ch/");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(values(&got.headers, "x-native-client"), ["from-native"]);
    assert_eq!(values(&got.headers, "x-both"), ["native"]);
    assert_eq!(values(&got.headers, "x-upstream"), ["recorder"]);
    assert!(rec.last().headers.get("x-native-client").is_none());
    assert_eq!(rec.last().method, "GET");
    let got = send(gw.addr, "GET", "/ch/", &[("X-Method", "POST")], b"");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(rec.last().method, "POST");
    let got = send(gw.addr, "GET", "/ch/", &[("X-Method", "G ET")], b"");
    assert_eq!(got.status, 500, "{}", got.text());
    assert_eq!(got.json()["error"], TYK_500);
    assert_eq!(rec.count(), 2);
    gw.stop();

    let (_dir, gw, rec) = serve_test_plugin("cht", &["ClientHeader"], &["Teapot"]);
    let got = get(gw.addr, "/cht/");
    assert_eq!(got.status, 418, "{}", got.text());
    assert_eq!(values(&got.headers, "x-native-client"), ["from-native"]);
    assert_eq!(rec.count(), 0);
    gw.stop();
}
