//! The JS behaviour scenarios, each a function of the engine and strategy
//! ([`Mode`]), so one suite (`js_engines.rs`) runs every one on boa and
//! QuickJS, each with `persistent`, `tyk-json` and `fresh`. What differs by
//! strategy (state kept across calls; Tyk's JSON map order in `tyk-json`)
//! and by engine (the wording of a stack overflow) is asserted per mode.

// Each test binary that includes this module uses some of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use gateway::config::{ApiSpec, Driver, Hook, JsEngine, MiddlewareEntry, Target};
use gateway::middleware::{ApiChain, Flow, HostOptions, MwError, MwRequest};
use gateway::stats::Stats;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

pub fn fixture(name: &str) -> String {
    format!("{}/tests/js_fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Which engine and strategy a scenario runs on.
#[derive(Clone, Copy, Debug)]
pub struct Mode {
    pub engine: &'static str,
    pub strategy: &'static str,
}

const fn mode(engine: &'static str, strategy: &'static str) -> Mode {
    Mode { engine, strategy }
}

pub const BOA_PERSISTENT: Mode = mode("boa", "persistent");
pub const BOA_TYK_JSON: Mode = mode("boa", "tyk-json");
pub const BOA_FRESH: Mode = mode("boa", "fresh");
pub const QJS_PERSISTENT: Mode = mode("quickjs", "persistent");
pub const QJS_TYK_JSON: Mode = mode("quickjs", "tyk-json");
pub const QJS_FRESH: Mode = mode("quickjs", "fresh");

/// Every engine with every strategy.
pub const ALL: [Mode; 6] = [
    BOA_PERSISTENT,
    BOA_TYK_JSON,
    BOA_FRESH,
    QJS_PERSISTENT,
    QJS_TYK_JSON,
    QJS_FRESH,
];

/// QuickJS's modes (its own limits: memory, a timeout inside builtins).
pub const QUICKJS: [Mode; 3] = [QJS_PERSISTENT, QJS_TYK_JSON, QJS_FRESH];

/// Runs `scenario` on every mode, naming the mode of a failure.
pub fn each(modes: &[Mode], scenario: impl Fn(Mode)) {
    for &m in modes {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scenario(m)));
        if let Err(e) = r {
            eprintln!("failed on {} / {}", m.engine, m.strategy);
            std::panic::resume_unwind(e);
        }
    }
}

pub fn spec(
    mode: Mode,
    api_id: &str,
    script: (&str, String),
    config: serde_json::Value,
) -> ApiSpec {
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
        engine: Some(JsEngine::parse(mode.engine).expect("engine name")),
        strategy: mode.strategy.into(),
        pre: vec![MiddlewareEntry {
            name: script.0.into(),
            path: script.1,
            ..Default::default()
        }],
        post: Vec::new(),
        config_data: config,
        ..Default::default()
    }
}

pub fn request(method: Method, uri: &str, headers: &[(&str, &str)], body: &str) -> MwRequest {
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

pub fn get(uri: &str, headers: &[(&str, &str)]) -> MwRequest {
    request(Method::GET, uri, headers, "")
}

/// One worker's view of one API.
pub struct Host {
    chain: ApiChain,
    rt: tokio::runtime::Runtime,
}

pub fn host_with(spec: &ApiSpec, timeout: Duration, memory: usize) -> Host {
    host_opts(
        spec,
        HostOptions {
            jsvm_timeout: timeout,
            jsvm_memory: memory,
            ..HostOptions::default()
        },
    )
}

/// Scripts run inline on the calling thread (`--jsvm-threads 0`).
pub fn host_inline(spec: &ApiSpec, timeout: Duration) -> Host {
    host_opts(
        spec,
        HostOptions {
            jsvm_timeout: timeout,
            jsvm_threads: 0,
            ..HostOptions::default()
        },
    )
}

pub fn host_opts(spec: &ApiSpec, opts: HostOptions) -> Host {
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

pub fn host(spec: &ApiSpec) -> Host {
    host_with(spec, Duration::from_secs(5), 64 << 20)
}

impl Host {
    pub fn chain(&self) -> &ApiChain {
        &self.chain
    }

    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    pub fn run(&self, req: &mut MwRequest) -> Result<Flow, MwError> {
        self.rt.block_on(self.chain.run(Hook::Pre, req))
    }

    pub fn ok(&self, req: &mut MwRequest) {
        match self.run(req) {
            Ok(Flow::Continue) => {}
            other => panic!("expected Continue, got {other:?}"),
        }
    }

    pub fn err(&self, req: &mut MwRequest) -> String {
        match self.run(req) {
            Err(e) => e.to_string(),
            other => panic!("expected an error, got {other:?}"),
        }
    }
}

pub fn header<'a>(req: &'a MwRequest, name: &str) -> &'a str {
    req.headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", req.headers))
        .to_str()
        .unwrap()
}

fn is_fresh(mode: Mode) -> bool {
    mode.strategy == "fresh"
}

fn is_tyk_json(mode: Mode) -> bool {
    mode.strategy == "tyk-json"
}

/// How the engine words a stack overflow.
fn stack_overflow(mode: Mode) -> &'static str {
    match mode.engine {
        "boa" => "recursive calls",
        _ => "call stack size exceeded",
    }
}

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
    assert_eq!(req.path, "/q/a");
    assert_eq!(
        req.query.as_deref(),
        Some("added=x+y&multi=a&multi=b&multi=c&z=1&z=2")
    );
    // Params drop what Go's url.ParseQuery drops: a pair with ';' in its
    // key part, a bad '%' escape; the re-encoded query drops them too.
    let mut req = get("/q/a?a=1;b=2&bad=%zz&z=%41+b", &[]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-params"), r#"{"z":["A b"]}"#);
    assert_eq!(
        req.query.as_deref(),
        Some("added=x+y&multi=b&multi=c&z=A+b")
    );
    let mut req = get("/q/a?move=1", &[]);
    h.ok(&mut req);
    assert_eq!(req.path, "/moved/here");
    assert_eq!(
        req.query.as_deref(),
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

pub fn return_overrides_answer_without_proxying(mode: Mode) {
    let s = spec(
        mode,
        "ro",
        ("overridesMw", fixture("overrides.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    let respond = |m: &str| match h.run(&mut get("/ro/", &[("x-mode", m)])) {
        Ok(Flow::Respond(r)) => r,
        other => panic!("{m}: expected Respond, got {other:?}"),
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

fn faults(mode: Mode) -> gateway::config::ApiSpec {
    spec(
        mode,
        "faults",
        ("faultsMw", fixture("faults.js")),
        serde_json::Value::Null,
    )
}

pub fn script_faults_fail_one_request_and_the_next_works(mode: Mode) {
    let h = host(&faults(mode));
    for (fault, needle) in [
        ("throw", "boom from js"),
        ("nothing", "return value must be an object"),
        ("shape", "Request must be an object"),
        ("number", r#"SetHeaders["X-N"] must be a string"#),
        ("crlf", "X-Evil"),
        ("recurse", stack_overflow(mode)),
    ] {
        let msg = h.err(&mut get("/faults/", &[("x-fault", fault)]));
        assert!(msg.contains(needle), "{fault}: {msg}");
        assert!(msg.contains("faultsMw"), "{fault}: {msg}");
        h.ok(&mut get("/faults/", &[]));
    }
    // The state survived every fault above (persistent and tyk-json: the
    // counter kept going; fresh: every call starts at 1).
    let mut req = get("/faults/", &[]);
    h.ok(&mut req);
    let want = if is_fresh(mode) { "1" } else { "13" };
    assert_eq!(header(&req, "x-calls"), want);
}

pub fn runaway_scripts_are_stopped_and_the_state_rebuilt(mode: Mode) {
    let h = host_with(&faults(mode), Duration::from_millis(300), 64 << 20);
    // boa cannot stop a loop inside a builtin's callback: its VM thread is
    // abandoned, and the replacement builds its context within the next
    // call's deadline, which on a loaded machine with a debug build can take
    // longer than 300 ms (`js_hardening.rs` and the iteration-limit test
    // cover that case).
    let faults: &[&str] = match mode.engine {
        "boa" => &["loop", "catchloop", "alloc"],
        _ => &["loop", "catchloop", "callbackloop", "alloc"],
    };
    for &fault in faults {
        let msg = h.err(&mut get("/faults/", &[("x-fault", fault)]));
        assert!(
            msg.contains("jsvm timeout") || msg.contains("memory"),
            "{fault}: {msg}"
        );
        let mut req = get("/faults/", &[]);
        h.ok(&mut req);
        // A stopped context is discarded: the rebuilt one counts afresh.
        assert_eq!(header(&req, "x-calls"), "1", "{fault}");
    }
}

pub fn two_apis_with_the_same_global_names_stay_apart(mode: Mode) {
    let a = spec(
        mode,
        "a",
        ("mw", fixture("clash_a.js")),
        serde_json::Value::Null,
    );
    let b = spec(
        mode,
        "b",
        ("mw", fixture("clash_b.js")),
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

fn load_err(s: &gateway::config::ApiSpec) -> String {
    match gateway::js::load(s, &HostOptions::default()) {
        Ok(_) => panic!("{} loaded", s.api_id),
        Err(e) => e.to_string(),
    }
}

pub fn broken_scripts_fail_the_load_naming_file_field_and_line(mode: Mode) {
    let none = serde_json::Value::Null;
    let msg = load_err(&spec(
        mode,
        "bad",
        ("broken", fixture("syntax_error.js")),
        none.clone(),
    ));
    assert!(msg.contains("apis/bad.json"), "{msg}");
    assert!(msg.contains("custom_middleware.pre[0].path"), "{msg}");
    assert!(msg.contains("syntax_error.js"), "{msg}");
    assert!(msg.contains("line 4"), "{msg}");

    let s = spec(
        mode,
        "none",
        ("jsvmHelloPreHook", fixture("no_object.js")),
        none.clone(),
    );
    let msg = load_err(&s);
    assert!(msg.contains("custom_middleware.pre[0].name"), "{msg}");
    assert!(msg.contains("no object \"jsvmHelloPreHook\""), "{msg}");

    let s = spec(
        mode,
        "missing",
        ("x", fixture("does_not_exist.js")),
        none.clone(),
    );
    let msg = load_err(&s);
    assert!(
        msg.contains("cannot read") && msg.contains("does_not_exist.js"),
        "{msg}"
    );

    let msg = load_err(&spec(
        mode,
        "ident",
        ("not-an-id", fixture("clash_a.js")),
        none,
    ));
    assert!(msg.contains("not a JavaScript identifier"), "{msg}");
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

    // Only state kept across calls can keep a request for a later one.
    match mode.strategy {
        "persistent" => {
            run("keep");
            let req = run("reuse");
            assert_eq!(header(&req, "x-kept-mode"), "keep");
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

/// `X-Count` of three calls to `counter.js`.
pub fn counts(mode: Mode) -> Vec<String> {
    let s = spec(
        mode,
        "count",
        ("counterMw", fixture("counter.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    (0..3)
        .map(|_| {
            let mut req = get("/count/", &[]);
            h.ok(&mut req);
            header(&req, "x-count").to_string()
        })
        .collect()
}

/// Rough resident set size of this process, from /proc (Linux).
fn rss_kb() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

pub fn many_calls_keep_memory_flat(mode: Mode, calls: usize) {
    let s = spec(
        mode,
        "soak",
        ("headersMw", fixture("headers.js")),
        serde_json::json!({"greeting": "hi"}),
    );
    let h = host(&s);
    let call = || {
        let mut req = get("/soak/x?a=1", &[("x-api-key", "k"), ("x-multi", "m")]);
        h.ok(&mut req);
    };
    for _ in 0..calls / 5 {
        call();
    }
    let before = rss_kb();
    for _ in 0..calls {
        call();
    }
    let after = rss_kb();
    // A leak of even 1 KiB per call would show as 5-50 MB here.
    assert!(
        after < before + 4 * 1024,
        "RSS grew from {before} KiB to {after} KiB over {calls} calls"
    );
}

fn limits(mode: Mode) -> gateway::config::ApiSpec {
    spec(
        mode,
        "limits",
        ("limitsMw", fixture("limits.js")),
        serde_json::Value::Null,
    )
}

fn fault(h: &Host, name: &str) -> String {
    h.err(&mut get("/limits/", &[("x-fault", name)]))
}

fn still_serves(h: &Host) {
    let mut req = get("/limits/", &[]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-ok"), "yes");
}

pub fn the_timeout_stops_regexes_and_builtin_callbacks(mode: Mode) {
    let h = host_with(&limits(mode), Duration::from_millis(200), 64 << 20);
    for name in ["regex", "foreach", "sort"] {
        let msg = fault(&h, name);
        assert!(msg.contains("jsvm timeout"), "{name}: {msg}");
        assert!(msg.contains("limitsMw"), "{name}: {msg}");
        still_serves(&h);
    }
}

pub fn unbounded_allocation_hits_the_memory_limit(mode: Mode) {
    // A long timeout: the memory limit, not the clock, must stop these.
    let h = host_with(&limits(mode), Duration::from_secs(60), 16 << 20);
    for name in ["alloc", "onestep", "globalalloc", "alloc"] {
        let msg = fault(&h, name);
        assert!(msg.contains("memory limit (16 MiB)"), "{name}: {msg}");
        still_serves(&h);
    }
}

pub fn deep_data_and_unbounded_recursion_hit_the_stack_limit(mode: Mode) {
    let h = host(&limits(mode));
    for name in ["deepjson", "deepparse", "recurse"] {
        let msg = fault(&h, name);
        assert!(msg.contains("call stack size exceeded"), "{name}: {msg}");
        still_serves(&h);
    }
    // A stack overflow is an ordinary RangeError a script may catch.
    let mut req = get("/limits/", &[("x-fault", "catchrecurse")]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-caught"), "RangeError");
}
