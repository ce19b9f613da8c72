//! The request object and the answer: what a script sees of the request
//! (canonical header arrays, params, body, method, URL) and how its answer
//! applies (set before delete rules, overrides, body rewrites, a request
//! object that behaves as Tyk's plain decoded object).

use super::*;

pub fn seed_script_sets_its_header(mode: Mode) {
    let repo_js = format!("{}/../js/jsvm_hello.js", env!("CARGO_MANIFEST_DIR"));
    let s = spec(
        mode,
        "jsvm-hello",
        ("jsvmHelloPreHook", repo_js),
        serde_json::Value::Null,
    );
    let h = host(&s);
    for _ in 0..3 {
        let mut req = get("/jsvm-hello/", &[("host", "x")]);
        h.ok(&mut req);
        assert_eq!(header(&req, "x-custom-jsvm"), "hello-from-jsvm");
        assert_eq!(header(&req, "host"), "x");
    }
}

pub fn headers_are_canonical_arrays_and_only_set_delete_apply(mode: Mode) {
    let s = spec(
        mode,
        "hdr",
        ("headersMw", fixture("headers.js")),
        serde_json::json!({"greeting": "hi"}),
    );
    let h = host(&s);
    let mut req = get(
        "/hdr/p?q=1",
        &[
            ("x-api-key", "k1"),
            ("x-multi", "one"),
            ("x-multi", "two"),
            ("x-ignored", "orig"),
            ("x-replace", "old"),
            ("x-drop", "gone"),
        ],
    );
    // Values past ASCII: UTF-8 is read as such, other bytes as U+FFFD.
    for (name, value) in [
        ("x-utf8", &b"caf\xc3\xa9"[..]),
        ("x-bad-utf8", b"\xe9t\xe9"),
    ] {
        req.headers
            .append(name, http::HeaderValue::from_bytes(value).unwrap());
    }
    h.ok(&mut req);
    assert_eq!(header(&req, "x-seen-text"), "4:233,3:65533");
    assert_eq!(header(&req, "x-seen-key"), "k1");
    assert_eq!(header(&req, "x-seen-multi"), r#"["one","two"]"#);
    assert_eq!(header(&req, "x-seen-method"), "GET /hdr/p?q=1 http");
    assert_eq!(header(&req, "x-seen-spec"), "hdr/org-1/hi");
    assert_eq!(header(&req, "x-seen-session"), "{}");
    assert_eq!(header(&req, "x-ignored"), "orig");
    assert_eq!(header(&req, "x-replace"), "new");
    assert!(req.headers.get("x-drop").is_none());
}

pub fn url_and_params_follow_tyk_order(mode: Mode) {
    let s = spec(
        mode,
        "q",
        ("queryMw", fixture("query.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    let mut req = get("/q/a?z=1&drop=x&multi=a&z=2", &[]);
    h.ok(&mut req);
    // Go's JSON encoder writes a map's keys sorted; the native object keeps
    // the query's order.
    let want = if is_tyk_json(mode) {
        r#"{"drop":["x"],"multi":["a"],"z":["1","2"]}"#
    } else {
        r#"{"z":["1","2"],"drop":["x"],"multi":["a"]}"#
    };
    assert_eq!(header(&req, "x-params"), want);
    assert_eq!(req.path(), "/q/a");
    assert_eq!(
        req.query(),
        Some("added=x+y&multi=a&multi=b&multi=c&z=1&z=2")
    );
    // Params drop what Go's url.ParseQuery drops: a pair with ';' in its
    // key part, a bad '%' escape; the re-encoded query drops them too.
    let mut req = get("/q/a?a=1;b=2&bad=%zz&z=%41+b", &[]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-params"), r#"{"z":["A b"]}"#);
    assert_eq!(req.query(), Some("added=x+y&multi=b&multi=c&z=A+b"));
    let mut req = get("/q/a?move=1", &[]);
    h.ok(&mut req);
    assert_eq!(req.path(), "/moved/here");
    assert_eq!(
        req.query(),
        Some("added=x+y&keep=1&multi=a&multi=b&multi=c")
    );
    // A parameter named __proto__ is a plain key, as JSON decoding makes it.
    let mut req = get("/q/a?__proto__=p", &[]);
    h.ok(&mut req);
    // In `tyk-json` the JSON text is pasted into source, where an object
    // literal's `"__proto__"` sets the prototype (Tyk's transport on any
    // ES2015 engine): the parameter is not an own key.
    let want = if is_tyk_json(mode) {
        "{}"
    } else {
        r#"{"__proto__":["p"]}"#
    };
    assert_eq!(header(&req, "x-params"), want);
}

pub fn body_rewrite_ignore_body_and_base64_helpers(mode: Mode) {
    let s = spec(
        mode,
        "body",
        ("bodyMw", fixture("body.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    let mut req = request(Method::POST, "/body/", &[("content-length", "5")], "hello");
    h.ok(&mut req);
    assert_eq!(&req.body[..], b"rewritten:hello");
    assert_eq!(header(&req, "content-length"), "15");
    assert_eq!(header(&req, "x-b64"), "aGVsbG8=");
    assert_eq!(header(&req, "x-roundtrip"), "true");
    assert_eq!(header(&req, "x-raw"), "YWI,ab,ab");
    assert_eq!(header(&req, "x-bad-b64"), "undefined");

    let mut req = request(Method::POST, "/body/", &[("x-ignore-body", "1")], "keep me");
    h.ok(&mut req);
    assert_eq!(&req.body[..], b"keep me");
}

pub fn every_call_sees_its_own_method_and_body(mode: Mode) {
    let s = spec(
        mode,
        "body",
        ("bodyMw", fixture("body.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    for i in 0..50 {
        let (method, body) = match i % 4 {
            0 => (Method::POST, format!("post {i}")),
            1 => (Method::GET, String::new()),
            2 => (Method::DELETE, String::new()),
            _ => (Method::PUT, format!("put {i}")),
        };
        let mut req = request(method.clone(), "/body/", &[], &body);
        h.ok(&mut req);
        assert_eq!(
            header(&req, "x-seen"),
            format!("{method} {}", serde_json::Value::from(body.as_str())),
            "call {i}"
        );
        assert_eq!(req.body, format!("rewritten:{body}").as_bytes(), "call {i}");
    }
}

/// Every call's `URL` is its own request's, whatever the calls before it
/// had: paths alternating, a query, paths past what the QuickJS host keeps
/// of the last one (256 bytes), and a rewrite, after which the next call
/// sees its own path again.
pub fn every_call_sees_its_own_url(mode: Mode) {
    let s = spec(
        mode,
        "url",
        ("urlMw", fixture("url_echo.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    let long = format!("/url/{}", "l".repeat(300));
    let longer = format!("{long}x");
    let targets = [
        "/url/a",
        "/url/b",
        "/url/a",
        "/url/a?x=1",
        "/url/a",
        long.as_str(),
        long.as_str(),
        longer.as_str(),
        long.as_str(),
        "/url/a",
    ];
    for (i, target) in targets.iter().enumerate() {
        let mut req = get(target, &[]);
        h.ok(&mut req);
        assert_eq!(header(&req, "x-url"), *target, "call {i}");
        assert_eq!(header(&req, "x-uri"), *target, "call {i}");
        assert_eq!(req.path_and_query(), *target, "call {i}");
    }
    // A rewrite to another path, and one to the same text.
    for (target, to) in [("/url/a", "/url/elsewhere"), ("/url/b", "/url/b")] {
        let mut req = get(target, &[("x-rewrite", to)]);
        h.ok(&mut req);
        assert_eq!(header(&req, "x-url"), target);
        assert_eq!(req.path_and_query(), to);
        let mut next = get(target, &[]);
        h.ok(&mut next);
        assert_eq!(header(&next, "x-url"), target);
        assert_eq!(next.path_and_query(), target);
    }
}

pub fn return_overrides_answer_without_proxying(mode: Mode) {
    let s = spec(
        mode,
        "ro",
        ("overridesMw", fixture("overrides.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    let respond = |m: &str| match h.run(&mut get("/ro/", &[("x-mode", m)])) {
        Ok(Flow::Respond(r) | Flow::Forced(r)) => *r,
        other => panic!("{m}: expected an answer, got {other:?}"),
    };
    let r = respond("error");
    assert_eq!(r.status, 403);
    assert_eq!(r.headers.get("x-why").unwrap(), "policy");
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body, serde_json::json!({"error": "go away"}));
    let r = respond("ok");
    assert_eq!(r.status, 200);
    assert_eq!(&r.body[..], b"answered by js");
    assert_eq!(r.headers.get("content-type").unwrap(), "text/plain");
    let r = respond("override");
    assert_eq!(r.status, 418);
    // Tyk: a non-empty ResponseError replaces ResponseBody, also with
    // OverrideError (mw_js_plugin.go).
    assert_eq!(&r.body[..], b"unused");
    h.ok(&mut get("/ro/", &[]));
}

pub fn request_fields_behave_as_a_plain_object(mode: Mode) {
    let s = spec(
        mode,
        "plain",
        ("plainMw", fixture("plain_object.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    let run = |m: &str| {
        let mut req = get(
            "/plain/p?a=1&a=2",
            &[("x-mode", m), ("x-drop", "d"), ("host", "h")],
        );
        h.ok(&mut req);
        req
    };
    let req = run("inspect");
    assert_eq!(header(&req, "x-failed"), "none");
    let json: serde_json::Value = serde_json::from_str(header(&req, "x-json")).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "Headers": {"X-Mode": ["inspect"], "X-Drop": ["d"], "Host": ["h"]},
            "SetHeaders": {},
            "DeleteHeaders": [],
            "Body": "",
            "URL": "/plain/p?a=1&a=2",
            "Params": {"a": ["1", "2"]},
            "AddParams": {},
            "ExtendedParams": {},
            "DeleteParams": [],
            "ReturnOverrides": {
                "ResponseCode": 0,
                "ResponseError": "",
                "ResponseBody": "",
                "ResponseHeaders": {},
                "OverrideError": false
            },
            "IgnoreBody": false,
            "Method": "GET",
            "RequestURI": "/plain/p?a=1&a=2",
            "Scheme": "http"
        })
    );
    assert!(req.headers.get("x-child").is_none());

    let req = run("replace");
    assert_eq!(header(&req, "x-failed"), "none");
    assert_eq!(header(&req, "x-replaced"), "yes");
    assert!(req.headers.get("x-drop").is_none());

    let req = run("delete");
    assert!(req.headers.get("x-failed").is_none());
    assert!(req.headers.get("x-drop").is_none());

    let req = run("define");
    assert_eq!(header(&req, "x-defined"), "yes");

    let req = run("copy");
    assert_eq!(header(&req, "x-copied"), "yes");
    assert_eq!(header(&req, "x-drop"), "d");

    let req = run("freeze");
    assert_eq!(header(&req, "x-failed"), "none");
    assert_eq!(header(&req, "x-frozen"), "yes");
    assert!(req.headers.get("x-lost").is_none());

    // The same through paths that never read Headers before.
    let unread = |path: &str, probe: &str| {
        let mut req = get(path, &[("x-probe", probe), ("host", "h")]);
        h.ok(&mut req);
        req
    };
    let req = unread("/plain/json-unread?b=3", "j");
    let json: serde_json::Value = serde_json::from_str(header(&req, "x-json")).unwrap();
    assert_eq!(
        json["Headers"],
        serde_json::json!({"X-Probe": ["j"], "Host": ["h"]})
    );
    assert_eq!(json["Params"], serde_json::json!({"b": ["3"]}));
    assert_eq!(
        header(&req, "x-keys"),
        "Headers,SetHeaders,DeleteHeaders,Body,URL,Params,AddParams,ExtendedParams,\
         DeleteParams,ReturnOverrides,IgnoreBody,Method,RequestURI,Scheme"
    );
    let req = unread("/plain/write-unread", "w");
    assert_eq!(header(&req, "x-written"), "w,Headers");
    let req = unread("/plain/delete-unread", "d");
    assert_eq!(header(&req, "x-deleted"), "false,13,-1");

    // Only state kept across calls can keep a request for a later one.
    match mode.strategy {
        "persistent" => {
            run("keep");
            let req = run("reuse");
            assert_eq!(header(&req, "x-kept-mode"), "keep");
            unread("/plain/keep-unread", "first");
            let req = unread("/plain/reuse-unread", "second");
            assert_eq!(header(&req, "x-kept-probe"), "first");
        }
        "tyk-json" => {
            // Tyk's DoProcessRequest resets the returned request's Headers,
            // so the kept object has none left: the reuse throws, as in Tyk.
            run("keep");
            let mut req = get("/plain/p", &[("x-mode", "reuse")]);
            let e = h.err(&mut req);
            assert!(e.contains("plainMw") && e.contains("JS error"), "{e}");
        }
        _ => {}
    }
}

/// An answer made of getters applies as a plain one; a getter that throws
/// fails that request only. Where state persists, QuickJS's host is seen
/// to read each field once, in the order Tyk's decoder meets them.
pub fn answer_getters_run_once_and_a_throw_fails_one_request(mode: Mode) {
    let s = spec(
        mode,
        "getters",
        ("gettersMw", fixture("answer_getters.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    let mut req = get("/getters/", &[("x-mode", "apply")]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-via-getter"), "yes");
    if (mode.engine, mode.strategy) == ("quickjs", "persistent") {
        let mut req = get("/getters/", &[("x-mode", "report")]);
        h.ok(&mut req);
        assert_eq!(
            header(&req, "x-reads"),
            "Request,ReturnOverrides,IgnoreBody,Body,URL,DeleteHeaders,SetHeaders,\
             DeleteParams,AddParams,ExtendedParams"
        );
    }
    let msg = h.err(&mut get("/getters/", &[("x-mode", "throw")]));
    assert!(msg.contains("no headers here"), "{msg}");
    let mut req = get("/getters/", &[("x-mode", "apply")]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-via-getter"), "yes");
}

/// `request` keeps an ordinary object's rules past plain reads and writes
/// (`js_fixtures/descriptors.js`): accessors and attributes a script
/// defines, keys added, deleted and added again (in an ordinary object's
/// order), seal, freeze, preventExtensions, a Proxy, copies; and what
/// applies afterwards. Where state persists, a request kept from an
/// earlier call still shows that call's fields.
pub fn request_keeps_ordinary_object_rules(mode: Mode) {
    let s = spec(
        mode,
        "desc",
        ("descMw", fixture("descriptors.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    let run = |m: &str| {
        let headers = [("x-mode", m), ("x-engine", mode.engine)];
        let mut req = get("/desc/p", &headers);
        h.ok(&mut req);
        assert_eq!(header(&req, "x-failed"), "none", "mode {m}");
        req
    };
    // `tyk-json` reads Body back as Tyk does (base64), so only there a
    // plain text body does not come back as written.
    let plain_body = mode.strategy != "tyk-json";
    let req = run("accessors");
    assert_eq!(header(&req, "x-got"), "yes");
    assert!(!plain_body || &req.body[..] == b"SHOUT", "{:?}", req.body);
    for (m, name) in [
        ("attributes", "x-attributes"),
        ("add", "x-added"),
        ("readd", "x-readded"),
        ("no-extend", "x-no-extend"),
        ("freeze", "x-frozen"),
        ("proxy", "x-proxied"),
        ("spread", "x-spread"),
        ("describe", "x-described"),
        ("seal", "x-sealed"),
        ("delete-all", "x-all-deleted"),
    ] {
        let req = run(m);
        assert_eq!(header(&req, name), "yes", "mode {m}");
    }
    let req = run("readd");
    assert!(!plain_body || &req.body[..] == b"moved", "{:?}", req.body);
    if mode.strategy == "persistent" {
        let headers = [("x-mode", "keep"), ("x-engine", mode.engine)];
        let mut first = request(Method::POST, "/desc/k", &headers, "first");
        h.ok(&mut first);
        let req = run("reuse");
        assert_eq!(header(&req, "x-kept"), "POST,first,/desc/k");
        assert!(req.headers.get("x-not-here").is_none());
        let mut kept = get("/desc/keep-unread", &[("x-probe", "first"), ("host", "h")]);
        h.ok(&mut kept);
        assert!(kept.headers.get("x-probe").is_none());
        assert_eq!(header(&kept, "x-added-later"), "1");
        let mut req = get("/desc/reuse-unread", &[("x-probe", "second")]);
        h.ok(&mut req);
        assert_eq!(header(&req, "x-kept-headers"), "Host,X-Probe=first");
        let mut kept = get("/desc/keep-throw", &[("x-probe", "thrown")]);
        let e = h.err(&mut kept);
        assert!(e.contains("kept, then threw"), "{e}");
        let mut req = get("/desc/reuse-unread", &[("x-probe", "second")]);
        h.ok(&mut req);
        assert_eq!(header(&req, "x-kept-headers"), "X-Probe=thrown");
    }
}

fn churn(mode: Mode) -> gateway::config::ApiSpec {
    spec(
        mode,
        "churn",
        ("churnMw", fixture("header_churn.js")),
        serde_json::Value::Null,
    )
}

/// One ordinary call of `header_churn.js`, its headers checked; returns
/// the call's number as the script counted it.
fn churn_ok(h: &Host, mode: Mode, expect_n: Option<u64>) -> u64 {
    let mut req = get("/churn/", &[]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-const"), "same-every-call");
    let n: u64 = header(&req, "x-count")[1..].parse().unwrap();
    if let Some(want) = expect_n {
        assert_eq!(n, want, "{mode:?}");
    }
    assert_eq!(header(&req, "x-long"), format!("ab{n}").repeat(99));
    assert_eq!(
        header(&req, format!("x-name-{}", n % 50).as_str()),
        format!("v{n}")
    );
    assert!(req.headers.get("x-stale").is_none(), "{mode:?}");
    assert!(req.headers.get("x-which").is_none(), "{mode:?}");
    // The headers of this call and nothing else.
    let names = req
        .headers
        .keys()
        .filter(|k| k.as_str().starts_with("x-name-"))
        .count();
    assert_eq!(names, 1, "{mode:?}: {:?}", req.headers);
    n
}

/// What QuickJS's host keeps between calls to read answers faster (header
/// names and values by identity, the last `SetHeaders` container, the
/// entry's `ProcessRequest` looked up per call) never leaks into another
/// call: constant and changing names and values, past every bound, values
/// too long to keep, bad names and values (500, the next call right), a
/// kept container written after its call, a replaced and a broken
/// `ProcessRequest`. On every mode; the long runs on QuickJS, whose host
/// this is.
pub fn set_headers_stay_right_call_after_call(mode: Mode) {
    // Inline (`--jsvm-threads 0`): a QuickJS API that starts inline moves
    // to a VM thread, its globals reset, the first time a call overruns
    // the 1 ms slice (a loaded machine, a debug build), and the counts
    // checked here would start over.
    let h = host_inline(&churn(mode), Duration::from_secs(5));
    let fresh = is_fresh(mode);
    let rounds = if mode.engine == "quickjs" { 400 } else { 60 };
    let mut last = 0;
    for i in 0..rounds {
        let n = churn_ok(&h, mode, (!fresh).then_some(last + 1));
        last = n;
        if i % 7 == 3 {
            for (m, needle) in [
                ("throw", "churn throws at"),
                ("bad-name", "\"Bad Name\" is not a valid header name"),
                ("bad-value", "Request.SetHeaders[\"X-Bad\"]: value contains"),
            ] {
                let msg = match h.run(&mut get("/churn/", &[("x-mode", m)])) {
                    Err(e) => e.to_string(),
                    other => panic!("{mode:?} {m}: expected an error, got {other:?}"),
                };
                assert!(msg.contains(needle), "{mode:?} {m}: {msg}");
                assert!(msg.contains("churnMw"), "{mode:?} {m}: {msg}");
                last += 1;
            }
        }
    }
    // Non-ASCII text is carried as its UTF-8 bytes, as on every path.
    let mut req = get("/churn/", &[("x-mode", "non-ascii")]);
    h.ok(&mut req);
    assert_eq!(req.headers["x-bad"].as_bytes(), "café".as_bytes());
    assert_eq!(req.headers["x-wide"].as_bytes(), "snow ☃".as_bytes());
    last += 1;
    churn_ok(&h, mode, (!fresh).then_some(last + 1));
    last += 1;
    // Many headers at once, past every bound, then the usual call.
    let mut req = get("/churn/", &[("x-mode", "many")]);
    h.ok(&mut req);
    let many = req
        .headers
        .keys()
        .filter(|k| k.as_str().starts_with("x-many-"))
        .count();
    assert_eq!(many, 3000, "{mode:?}");
    assert_eq!(header(&req, "x-many-2999"), "m2999");
    churn_ok(&h, mode, (!fresh).then_some(last + 2));
    last += 2;
    // A replaced ProcessRequest serves the next call, which puts the
    // first back.
    let mut req = get("/churn/", &[("x-mode", "swap")]);
    h.ok(&mut req);
    if !fresh {
        let mut req = get("/churn/", &[]);
        h.ok(&mut req);
        assert_eq!(header(&req, "x-which"), "second", "{mode:?}");
        assert_eq!(header(&req, "x-count"), format!("n{}", last + 2));
        last += 2;
    }
    churn_ok(&h, mode, (!fresh).then_some(last + 1));
    // A ProcessRequest that is no function fails its calls closed (kept
    // state) or only the one that broke it (fresh).
    h.ok(&mut get("/churn/", &[("x-mode", "break")]));
    for _ in 0..3 {
        if fresh {
            churn_ok(&h, mode, Some(1));
        } else {
            let msg = h.err(&mut get("/churn/", &[]));
            assert!(msg.contains("churnMw"), "{mode:?}: {msg}");
        }
    }
}

/// Hostile answers thousands of times on the host that keeps state
/// between calls: a throw, a bad header, an answer too deep to check; each
/// fails its own request (500) and the next call is right.
pub fn failing_answers_thousands_of_times(mode: Mode) {
    // Inline, as above: the counts must not start over at a move.
    let h = host_inline(&churn(mode), Duration::from_secs(5));
    let (mut last, fresh) = (0, is_fresh(mode));
    for i in 0..3000 {
        let m = ["throw", "bad-value", "deep"][i % 3];
        // The deep answer is slow to build: one in thirty.
        if m == "deep" && i % 30 != 2 {
            continue;
        }
        let r = h.run(&mut get("/churn/", &[("x-mode", m)]));
        assert!(r.is_err(), "{mode:?} {m}: {r:?}");
        last += 1;
        // Past the deep answer the state may have been rebuilt (it can
        // reach the memory limit): the count may start over.
        let expect = (!fresh && m != "deep").then_some(last + 1);
        last = churn_ok(&h, mode, expect);
    }
}
