//! The JS host through the middleware contract: real boa contexts, real
//! scripts from `tests/js_fixtures/`, driven as a worker would drive them
//! (`load` -> `instantiate` -> `ApiChain::run` on a current-thread runtime).
//! End-to-end tests through the gateway live in `js_gateway.rs`.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use gateway::config::{ApiSpec, Driver, Hook, MiddlewareEntry, Target};
use gateway::middleware::{ApiChain, Flow, HostOptions, MwError, MwRequest};
use gateway::stats::Stats;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

fn fixture(name: &str) -> String {
    format!("{}/tests/js_fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn entry(name: &str, path: String) -> MiddlewareEntry {
    MiddlewareEntry {
        name: name.into(),
        path,
        ..Default::default()
    }
}

fn spec(api_id: &str, pre: Vec<MiddlewareEntry>, config_data: serde_json::Value) -> ApiSpec {
    ApiSpec {
        file: PathBuf::from(format!("apis/{api_id}.json")),
        api_id: api_id.into(),
        name: api_id.into(),
        org_id: "org-1".into(),
        listen_path: format!("/{api_id}/"),
        strip_listen_path: true,
        preserve_host_header: false,
        target: Target::parse("http://127.0.0.1:9").unwrap(),
        driver: Some(Driver::Js),
        engine: None,
        pre,
        post: Vec::new(),
        config_data,
        strategy: String::new(),
        ..Default::default()
    }
}

fn request(method: Method, uri: &str, headers: &[(&str, &str)], body: &str) -> MwRequest {
    let (path, query) = match uri.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (uri.to_string(), None),
    };
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    MwRequest {
        method,
        path,
        query,
        headers: map,
        body: Bytes::from(body.to_string()),
        remote_addr: "127.0.0.1:40000".parse().unwrap(),
        request_uri: uri.parse().unwrap(),
    }
}

fn get(uri: &str, headers: &[(&str, &str)]) -> MwRequest {
    request(Method::GET, uri, headers, "")
}

/// One worker's view of one API.
struct Host {
    chain: ApiChain,
    rt: tokio::runtime::Runtime,
}

fn host_with(spec: &ApiSpec, timeout: Duration) -> Host {
    let opts = HostOptions {
        jsvm_timeout: timeout,
        ..HostOptions::default()
    };
    let factory = gateway::js::load(spec, &opts).unwrap_or_else(|e| panic!("load: {e}"));
    let chain = factory.instantiate().expect("instantiate");
    Host {
        chain: ApiChain::new(spec, chain, &Stats::default()),
        rt: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
    }
}

fn host(spec: &ApiSpec) -> Host {
    host_with(spec, Duration::from_secs(5))
}

impl Host {
    fn run(&self, req: &mut MwRequest) -> Result<Flow, MwError> {
        self.rt.block_on(self.chain.run(Hook::Pre, req))
    }

    fn ok(&self, req: &mut MwRequest) {
        match self.run(req) {
            Ok(Flow::Continue) => {}
            other => panic!("expected Continue, got {other:?}"),
        }
    }
}

fn header<'a>(req: &'a MwRequest, name: &str) -> &'a str {
    req.headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", req.headers))
        .to_str()
        .unwrap()
}

#[test]
fn seed_script_sets_its_header() {
    let repo_js = format!("{}/../js/jsvm_hello.js", env!("CARGO_MANIFEST_DIR"));
    let s = spec(
        "jsvm-hello",
        vec![entry("jsvmHelloPreHook", repo_js)],
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

#[test]
fn headers_are_canonical_arrays_and_only_set_delete_apply() {
    let s = spec(
        "hdr",
        vec![entry("headersMw", fixture("headers.js"))],
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
    h.ok(&mut req);
    assert_eq!(header(&req, "x-seen-key"), "k1");
    assert_eq!(header(&req, "x-seen-multi"), r#"["one","two"]"#);
    assert_eq!(header(&req, "x-seen-method"), "GET /hdr/p?q=1 http");
    assert_eq!(header(&req, "x-seen-spec"), "hdr/org-1/hi");
    assert_eq!(header(&req, "x-seen-session"), "{}");
    assert_eq!(header(&req, "x-ignored"), "orig");
    assert_eq!(header(&req, "x-replace"), "new");
    assert!(req.headers.get("x-drop").is_none());
}

#[test]
fn url_and_params_follow_tyk_order() {
    let s = spec(
        "q",
        vec![entry("queryMw", fixture("query.js"))],
        serde_json::Value::Null,
    );
    let h = host(&s);
    let mut req = get("/q/a?z=1&drop=x&multi=a&z=2", &[]);
    h.ok(&mut req);
    assert_eq!(
        header(&req, "x-params"),
        r#"{"z":["1","2"],"drop":["x"],"multi":["a"]}"#
    );
    assert_eq!(req.path, "/q/a");
    // Deleted, set, appended; keys sorted as Go's url.Values.Encode does.
    assert_eq!(
        req.query.as_deref(),
        Some("added=x+y&multi=a&multi=b&multi=c&z=1&z=2")
    );

    let mut req = get("/q/a?move=1", &[]);
    h.ok(&mut req);
    assert_eq!(req.path, "/moved/here");
    assert_eq!(
        req.query.as_deref(),
        Some("added=x+y&keep=1&multi=a&multi=b&multi=c")
    );
}

#[test]
fn body_rewrite_ignore_body_and_base64_helpers() {
    let s = spec(
        "body",
        vec![entry("bodyMw", fixture("body.js"))],
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

#[test]
fn every_call_sees_its_own_method_and_body() {
    let s = spec(
        "body",
        vec![entry("bodyMw", fixture("body.js"))],
        serde_json::Value::Null,
    );
    let h = host(&s);
    // Enough calls to use several batches of request objects, the methods
    // and bodies changing from call to call.
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

#[test]
fn return_overrides_answer_without_proxying() {
    let s = spec(
        "ro",
        vec![entry("overridesMw", fixture("overrides.js"))],
        serde_json::Value::Null,
    );
    let h = host(&s);
    let respond = |mode: &str| match h.run(&mut get("/ro/", &[("x-mode", mode)])) {
        Ok(Flow::Respond(r)) => r,
        other => panic!("{mode}: expected Respond, got {other:?}"),
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

fn faults() -> ApiSpec {
    spec(
        "faults",
        vec![entry("faultsMw", fixture("faults.js"))],
        serde_json::Value::Null,
    )
}

fn expect_err(h: &Host, fault: &str) -> String {
    match h.run(&mut get("/faults/", &[("x-fault", fault)])) {
        Err(e) => {
            eprintln!("DBG {fault}: {}", e.0);
            e.0
        }
        other => panic!("{fault}: expected an error, got {other:?}"),
    }
}

#[test]
fn script_faults_fail_one_request_and_the_next_works() {
    let h = host(&faults());
    for (fault, needle) in [
        ("throw", "boom from js"),
        ("nothing", "return value must be an object"),
        ("shape", "Request must be an object"),
        ("number", r#"SetHeaders["X-N"] must be a string"#),
        ("crlf", "X-Evil"),
        ("recurse", "recursive calls"),
    ] {
        let msg = expect_err(&h, fault);
        assert!(msg.contains(needle), "{fault}: {msg}");
        assert!(msg.contains("faultsMw"), "{fault}: {msg}");
        let mut req = get("/faults/", &[]);
        h.ok(&mut req);
    }
    // The context survived every fault above: its global counter kept going.
    let mut req = get("/faults/", &[]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-calls"), "13");
}

#[test]
fn runaway_scripts_are_stopped_and_the_context_rebuilt() {
    let h = host_with(&faults(), Duration::from_millis(300));
    for fault in ["loop", "catchloop", "alloc"] {
        let msg = expect_err(&h, fault);
        assert!(
            msg.contains("jsvm timeout") || msg.contains("memory"),
            "{fault}: {msg}"
        );
        let mut req = get("/faults/", &[]);
        h.ok(&mut req);
        // A stopped VM is discarded: the rebuilt one starts counting afresh.
        assert_eq!(header(&req, "x-calls"), "1", "{fault}");
    }
}

#[test]
fn a_loop_inside_a_native_callback_hits_the_iteration_limit() {
    let h = host_with(&faults(), Duration::from_secs(60));
    let msg = expect_err(&h, "callbackloop");
    assert!(msg.contains("iteration"), "{msg}");
    h.ok(&mut get("/faults/", &[]));
}

#[test]
fn a_runaway_call_yields_so_other_apis_on_the_worker_keep_serving() {
    let slow = host_with(&faults(), Duration::from_secs(2));
    let other = spec(
        "clash-a",
        vec![entry("mw", fixture("clash_a.js"))],
        serde_json::Value::Null,
    );
    let fast = host(&other);
    // One thread, one runtime: the fast call can only finish first if the
    // runaway call yields between slices.
    let done = slow.rt.block_on(async {
        let mut looping = get("/faults/", &[("x-fault", "loop")]);
        let mut quick = get("/clash-a/", &[]);
        let runaway = slow.chain.run(Hook::Pre, &mut looping);
        let served = async {
            tokio::task::yield_now().await;
            fast.chain.run(Hook::Pre, &mut quick).await
        };
        tokio::pin!(runaway);
        tokio::select! {
            biased;
            r = served => {
                assert!(matches!(r, Ok(Flow::Continue)));
                let stopped = runaway.await;
                assert!(stopped.is_err());
                "served-first"
            }
            _ = &mut runaway => "runaway-first",
        }
    });
    assert_eq!(done, "served-first");
}

#[test]
fn two_apis_with_the_same_global_names_stay_apart() {
    let a = spec(
        "a",
        vec![entry("mw", fixture("clash_a.js"))],
        serde_json::Value::Null,
    );
    let b = spec(
        "b",
        vec![entry("mw", fixture("clash_b.js"))],
        serde_json::Value::Null,
    );
    let (ha, hb) = (host(&a), host(&b));
    let mut ra = get("/a/", &[]);
    let mut rb = get("/b/", &[]);
    ha.ok(&mut ra);
    hb.ok(&mut rb);
    assert_eq!(header(&ra, "x-owner"), "a");
    assert_eq!(header(&rb, "x-owner"), "b");
}

fn load_err(s: &ApiSpec) -> String {
    match gateway::js::load(s, &HostOptions::default()) {
        Ok(_) => panic!("{} loaded", s.api_id),
        Err(e) => {
            eprintln!("DBG {}", e);
            e.to_string()
        }
    }
}

#[test]
fn broken_scripts_fail_the_load_naming_file_field_and_line() {
    let msg = load_err(&spec(
        "bad",
        vec![entry("broken", fixture("syntax_error.js"))],
        serde_json::Value::Null,
    ));
    assert!(msg.contains("apis/bad.json"), "{msg}");
    assert!(msg.contains("custom_middleware.pre[0].path"), "{msg}");
    assert!(msg.contains("syntax_error.js"), "{msg}");
    assert!(msg.contains("line 4"), "{msg}");

    let msg = load_err(&spec(
        "none",
        vec![entry("jsvmHelloPreHook", fixture("no_object.js"))],
        serde_json::Value::Null,
    ));
    assert!(msg.contains("custom_middleware.pre[0].name"), "{msg}");
    assert!(msg.contains("no object \"jsvmHelloPreHook\""), "{msg}");

    let msg = load_err(&spec(
        "missing",
        vec![entry("x", fixture("does_not_exist.js"))],
        serde_json::Value::Null,
    ));
    assert!(
        msg.contains("cannot read") && msg.contains("does_not_exist.js"),
        "{msg}"
    );

    let msg = load_err(&spec(
        "ident",
        vec![entry("not-an-id", fixture("clash_a.js"))],
        serde_json::Value::Null,
    ));
    assert!(msg.contains("not a JavaScript identifier"), "{msg}");
}

/// Rough resident set size of this process, from /proc (Linux).
fn rss_kb() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

#[test]
fn many_calls_through_one_context_keep_memory_flat() {
    let s = spec(
        "soak",
        vec![entry("headersMw", fixture("headers.js"))],
        serde_json::json!({"greeting": "hi"}),
    );
    let h = host(&s);
    let call = || {
        let mut req = get("/soak/x?a=1", &[("x-api-key", "k"), ("x-multi", "m")]);
        h.ok(&mut req);
    };
    for _ in 0..10_000 {
        call();
    }
    let before = rss_kb();
    for _ in 0..50_000 {
        call();
    }
    let after = rss_kb();
    // A leak of even 1 KiB per call would show as ~50 MB here.
    assert!(
        after < before + 16 * 1024,
        "RSS grew from {before} KiB to {after} KiB over 50,000 calls"
    );
}

#[test]
fn request_fields_behave_as_a_plain_object() {
    let s = spec(
        "plain",
        vec![entry("plainMw", fixture("plain_object.js"))],
        serde_json::Value::Null,
    );
    let h = host(&s);
    let run = |mode: &str| {
        let mut req = get(
            "/plain/p?a=1&a=2",
            &[("x-mode", mode), ("x-drop", "d"), ("host", "h")],
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
    // SetHeaders is gone, so not even X-Failed is set; the delete applied.
    assert!(req.headers.get("x-failed").is_none());
    assert!(req.headers.get("x-drop").is_none());

    let req = run("define");
    assert_eq!(header(&req, "x-defined"), "yes");
    assert_eq!(header(&req, "x-failed"), "none");

    let req = run("copy");
    assert_eq!(header(&req, "x-copied"), "yes");
    assert_eq!(header(&req, "x-drop"), "d");

    let req = run("freeze");
    assert_eq!(header(&req, "x-failed"), "none");
    assert_eq!(header(&req, "x-frozen"), "yes");
    assert!(req.headers.get("x-lost").is_none());

    run("keep");
    let req = run("reuse");
    assert_eq!(header(&req, "x-kept-mode"), "keep");
}
