//! The native driver through the middleware contract: definitions loaded from
//! a temp dir by the real config loader, real plugin libraries (Rust and C),
//! chains instantiated and run as a worker does. What the request looks like
//! afterwards is what the proxy would send upstream.

mod common;

use std::net::SocketAddr;
use std::path::Path;

use bytes::Bytes;
use common::native::{native_api, plugins, write_def};
use gateway::config::{load_dir, ApiSpec, Hook};
use gateway::middleware::{ApiChain, Flow, HostOptions, MwError, MwErrorKind, MwRequest};
use gateway::native;
use gateway::stats::Stats;
use http::{HeaderMap, HeaderValue, Method};

/// Loads one definition with the given pre entries through the real loader.
fn spec(dir: &Path, pre: &[(&Path, &str)]) -> ApiSpec {
    write_def(
        dir,
        "api",
        &native_api("api", "/api/", "127.0.0.1:9", pre, &[]),
    );
    let mut loaded = load_dir(dir).unwrap();
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    loaded.apis.remove(0)
}

fn request(path: &str, query: Option<&str>, headers: &[(&str, &str)], body: &str) -> MwRequest {
    let mut map = HeaderMap::new();
    for (n, v) in headers {
        map.append(
            http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    let uri = match query {
        Some(q) => format!("{path}?{q}").parse().unwrap(),
        None => path.parse().unwrap(),
    };
    MwRequest::new(
        Method::POST,
        uri,
        map,
        Bytes::from(body.to_string()),
        SocketAddr::from(([127, 0, 0, 1], 1)),
    )
}

/// A worker's view: instantiate the chain and run the pre hook, on a
/// current-thread runtime as the gateway's workers do.
struct Worker {
    chain: ApiChain,
    stats: Stats,
    rt: tokio::runtime::Runtime,
}

impl Worker {
    fn new(spec: &ApiSpec) -> Worker {
        let factory = native::load(spec, &HostOptions::default()).expect("loads");
        let stats = Stats::default();
        let chain = ApiChain::new(spec, factory.instantiate().unwrap(), &stats);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        Worker { chain, stats, rt }
    }

    fn run(&self, req: &mut MwRequest) -> Result<Flow, MwError> {
        self.rt.block_on(self.chain.run(Hook::Pre, req))
    }
}

fn one(symbol: &str) -> (tempfile::TempDir, Worker) {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::new(&spec(dir.path(), &[(&plugins().test, symbol)]));
    (dir, w)
}

fn values(req: &MwRequest, name: &str) -> Vec<String> {
    req.headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

#[test]
fn add_header_sets_the_seed_header() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::new(&spec(dir.path(), &[(&plugins().add_header, "AddHeader")]));
    let mut req = request("/api/x", None, &[("X-Custom-GoPlugin", "old")], "");
    assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
    assert_eq!(values(&req, "x-custom-goplugin"), ["hello-from-go-plugin"]);
}

#[test]
fn a_relative_library_path_resolves_against_the_working_directory() {
    let cwd = std::env::current_dir().unwrap();
    let rel = relative_to(&plugins().add_header, &cwd);
    assert!(rel.is_relative(), "{}", rel.display());
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::new(&spec(dir.path(), &[(&rel, "AddHeader")]));
    let mut req = request("/api/x", None, &[], "");
    w.run(&mut req).unwrap();
    assert_eq!(values(&req, "x-custom-goplugin"), ["hello-from-go-plugin"]);
}

/// `target` as a path relative to `base` (both absolute).
fn relative_to(target: &Path, base: &Path) -> std::path::PathBuf {
    let (t, b): (Vec<_>, Vec<_>) = (target.components().collect(), base.components().collect());
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut rel = std::path::PathBuf::new();
    for _ in common..b.len() {
        rel.push("..");
    }
    rel.extend(&t[common..]);
    rel
}

#[test]
fn headers_are_set_appended_and_deleted() {
    let (_d, w) = one("EditHeaders");
    let mut req = request(
        "/api/x",
        None,
        &[
            ("X-Set", "a"),
            ("X-Set", "b"),
            ("X-Append", "first"),
            ("X-Delete", "gone"),
            ("X-Keep", "kept"),
        ],
        "",
    );
    assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
    assert_eq!(values(&req, "x-set"), ["replaced"]);
    assert_eq!(values(&req, "x-append"), ["first", "added"]);
    assert!(values(&req, "x-delete").is_empty());
    assert_eq!(values(&req, "x-keep"), ["kept"]);
}

#[test]
fn path_query_and_body_are_rewritten() {
    let (_d, w) = one("Rewrite");
    let mut req = request("/api/x", Some("q=1"), &[("Content-Length", "5")], "hello");
    assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
    assert_eq!(req.path(), "/rewritten/api/x");
    assert_eq!(req.query(), Some("a=1&b=two"));
    assert_eq!(&req.body[..], b"rewritten body");
    assert_eq!(values(&req, "content-length"), ["14"]);
    assert_eq!(values(&req, "x-old"), [r#"/api/x Some("q=1") 5"#]);

    let (_d, w) = one("DropQuery");
    let mut req = request("/api/x", Some("q=1"), &[], "");
    w.run(&mut req).unwrap();
    assert_eq!(req.query(), None);
}

#[test]
fn every_read_callback_sees_the_request() {
    let (_d, w) = one("ReadAll");
    let mut req = request(
        "/api/r",
        Some("k=v"),
        &[("X-Multi", "one"), ("X-Multi", "two")],
        "payload",
    );
    w.run(&mut req).unwrap();
    assert_eq!(
        values(&req, "x-read"),
        ["method=POST path=/api/r query=k=v multi=one,two count=2 lines=2 body=payload"]
    );
    let mut req = request("/", None, &[], "");
    w.run(&mut req).unwrap();
    assert_eq!(
        values(&req, "x-read"),
        ["method=POST path=/ query=<none> multi= count=0 lines=0 body="]
    );
}

#[test]
fn a_plugin_can_answer_the_request_itself() {
    let (_d, w) = one("Teapot");
    let mut req = request("/api/x", None, &[], "");
    let Ok(Flow::Respond(resp)) = w.run(&mut req) else {
        panic!("expected a response");
    };
    assert_eq!(resp.status.as_u16(), 418);
    assert_eq!(resp.headers["content-type"], "application/json");
    assert_eq!(resp.headers["x-short"], "circuit");
    assert_eq!(&resp.body[..], br#"{"teapot":true}"#);
}

#[test]
fn the_c_plugin_speaks_the_same_abi() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::new(&spec(
        dir.path(),
        &[(&plugins().c_require, "RequireHeader")],
    ));
    let mut req = request("/api/x", None, &[], "");
    let Ok(Flow::Respond(resp)) = w.run(&mut req) else {
        panic!("expected a 403 from the C plugin");
    };
    assert_eq!(resp.status.as_u16(), 403);
    assert_eq!(resp.headers["content-type"], "application/json");
    let body: serde_json::Value = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(body["error"], "X-Api-Key header is required");

    let mut req = request("/api/x", None, &[("X-Api-Key", "secret")], "");
    assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
    assert_eq!(values(&req, "x-c-plugin"), ["POST key-len=6"]);
}

#[test]
fn errors_and_panics_fail_one_request_not_the_next() {
    for (symbol, message) in [
        ("Fail", "deliberate failure"),
        ("Panic", "plugin panicked: deliberate panic"),
    ] {
        let (_d, w) = one(symbol);
        for _ in 0..2 {
            let err = w.run(&mut request("/api/x", None, &[], "")).unwrap_err();
            assert!(err.message().contains(symbol), "{err}");
            assert!(err.message().contains(message), "{err}");
            // An error return and a caught panic are the plugin's own
            // error, not a broken contract.
            assert_eq!(err.kind(), MwErrorKind::Threw, "{err}");
        }
    }
}

#[test]
fn refused_edits_fail_the_request_even_when_ignored() {
    for (symbol, why) in [
        ("BadHeaderValue", "invalid value"),
        ("EmptyHeaderName", "invalid header name"),
        ("BadResponseHeader", "invalid value"),
        ("BadPath", "invalid path"),
        ("BadStatus", "invalid response status 99"),
    ] {
        let (_d, w) = one(symbol);
        let mut req = request("/api/x", None, &[], "");
        let err = w.run(&mut req).unwrap_err();
        assert!(err.message().contains(why), "{symbol}: {err}");
        assert_eq!(err.kind(), MwErrorKind::PluginFault, "{symbol}: {err}");
        assert!(req.headers.is_empty(), "{symbol} left {:?}", req.headers);
        assert_eq!(req.path(), "/api/x", "{symbol}");
    }
}

#[test]
fn header_values_that_change_per_call_are_never_served_stale() {
    // Each entry keeps the names and values its plugin sends in a small
    // cache: a value that changes on every call (a counter) must reach the
    // request as sent, also after the cache has filled up.
    let (_d, w) = one("Count");
    let mut last = None;
    for _ in 0..40 {
        let mut req = request("/api/x", None, &[], "");
        w.run(&mut req).unwrap();
        let n: u64 = values(&req, "x-count")[0].parse().unwrap();
        if let Some(prev) = last {
            assert_eq!(n, prev + 1, "a stale or skipped value");
        }
        last = Some(n);
    }
}

#[test]
fn a_refused_header_is_refused_on_every_call_of_a_worker() {
    // Bad input is never cached as if it were good.
    for symbol in ["BadHeaderValue", "EmptyHeaderName"] {
        let (_d, w) = one(symbol);
        for i in 0..3 {
            let mut req = request("/api/x", None, &[], "");
            let err = w.run(&mut req).unwrap_err();
            assert_eq!(
                err.kind(),
                MwErrorKind::PluginFault,
                "{symbol} call {i}: {err}"
            );
            assert!(
                req.headers.is_empty(),
                "{symbol} call {i} left {:?}",
                req.headers
            );
        }
    }
}

#[test]
fn every_call_is_recorded_per_api_hook_and_symbol() {
    let (_d, w) = one("EditHeaders");
    for _ in 0..5 {
        w.run(&mut request("/api/x", None, &[], "")).unwrap();
    }
    let s = w.stats.summaries();
    assert_eq!(s.len(), 1);
    assert_eq!(
        (
            s[0].api_id.as_str(),
            s[0].hook.as_str(),
            s[0].middleware.as_str(),
            s[0].count
        ),
        ("api", "pre", "EditHeaders", 5)
    );
    assert!(s[0].p50_us > 0.0);
}

#[test]
fn apis_naming_one_library_share_one_load() {
    let (da, a) = one("Count");
    let (db, b) = one("Count");
    let count = |w: &Worker| {
        let mut req = request("/api/x", None, &[], "");
        w.run(&mut req).unwrap();
        values(&req, "x-count")[0].parse::<u64>().unwrap()
    };
    // One static counter behind both APIs: the library is loaded once.
    let first = count(&a);
    assert_eq!(count(&b), first + 1);
    assert_eq!(count(&a), first + 2);
    drop((da, db));
}

/// The C header and the Rust ABI module must describe one layout: a C
/// program compiled against the header prints its sizes and offsets.
#[test]
fn the_c_header_and_the_rust_abi_agree_on_layout() {
    use plugin_sdk::abi::{GwHeader, GwHost, GwStr, ABI_VERSION, GW_HOST_BASE_SIZE};
    use std::mem::{offset_of, size_of};

    let ws = common::native::workspace();
    let out_dir = tempfile::tempdir().unwrap();
    let exe = out_dir.path().join("layout");
    let status = std::process::Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(ws.join("plugins/sdk/include"))
        .arg("-o")
        .arg(&exe)
        .arg(ws.join("gateway/tests/fixtures/layout.c"))
        .status()
        .unwrap();
    assert!(status.success());
    let out = std::process::Command::new(&exe).output().unwrap();
    let c = String::from_utf8(out.stdout).unwrap();
    let rust = format!(
        "version={} str={} header={} host={} method={} header_line={} set_header={} respond={} set_error={} \
         base={} api_id={} config_data={} log={} budget={}\n",
        ABI_VERSION,
        size_of::<GwStr>(),
        size_of::<GwHeader>(),
        size_of::<GwHost>(),
        offset_of!(GwHost, method),
        offset_of!(GwHost, header_line),
        offset_of!(GwHost, set_header),
        offset_of!(GwHost, respond),
        offset_of!(GwHost, set_error),
        GW_HOST_BASE_SIZE,
        offset_of!(GwHost, api_id),
        offset_of!(GwHost, config_data),
        offset_of!(GwHost, log),
        offset_of!(GwHost, call_budget_us),
    );
    assert_eq!(c, rust);
}

#[test]
fn abi_1_1_callbacks_read_the_api_and_its_config_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut api = native_api(
        "info",
        "/info/",
        "127.0.0.1:9",
        &[(&plugins().test, "ApiInfo")],
        &[],
    );
    api["config_data"] = serde_json::json!({"k": "v", "n": 1});
    write_def(dir.path(), "info", &api);
    let spec = load_dir(dir.path()).unwrap().apis.remove(0);
    let opts = HostOptions {
        jsvm_timeout: std::time::Duration::from_millis(1234),
        ..HostOptions::default()
    };
    let factory = native::load(&spec, &opts).unwrap();
    let stats = Stats::default();
    let chain = ApiChain::new(&spec, factory.instantiate().unwrap(), &stats);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut req = request("/info/", None, &[], "");
    assert!(matches!(
        rt.block_on(chain.run(Hook::Pre, &mut req)),
        Ok(Flow::Continue)
    ));
    assert_eq!(values(&req, "x-api-id"), ["info"]);
    assert_eq!(values(&req, "x-config"), [r#"{"k":"v","n":1}"#]);
    assert_eq!(values(&req, "x-budget-ms"), ["1234"]);

    // No config_data is an empty object, not `null`: Tyk's is a map.
    let (_dir, w) = one("ApiInfo");
    let mut req = request("/api/", None, &[], "");
    w.run(&mut req).unwrap();
    assert_eq!(values(&req, "x-config"), ["{}"]);
}

/// Loads one entry and returns the load error's text.
fn load_error(lib: &Path, symbol: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), &[(lib, symbol)]);
    match native::load(&spec, &HostOptions::default()) {
        Ok(_) => panic!("{symbol} in {} loaded", lib.display()),
        Err(e) => {
            assert_eq!(e.field, "custom_middleware.pre[0].name", "{e}");
            e.to_string()
        }
    }
}

#[test]
fn a_wrong_symbol_lists_the_plugin_symbols_and_suggests_one() {
    let p = plugins();
    let msg = load_error(&p.test, "noop");
    assert!(msg.contains(r#"does not export symbol "noop""#), "{msg}");
    assert!(
        msg.contains("it exports [ApiInfo, BadHeaderValue, "),
        "{msg}"
    );
    assert!(msg.contains(r#"did you mean "Noop"?"#), "{msg}");
    assert!(!msg.contains("gw_plugin_abi_version"), "{msg}");
    // A near miss in a C library; no suggestion when nothing is close.
    let msg = load_error(&p.c_require, "RequireHeadr");
    assert!(msg.contains("it exports [RequireHeader]"), "{msg}");
    assert!(msg.contains(r#"did you mean "RequireHeader"?"#), "{msg}");
    let msg = load_error(&p.add_header, "SomethingElse");
    assert!(msg.contains("it exports [AddHeader]"), "{msg}");
    assert!(!msg.contains("did you mean"), "{msg}");
}

#[test]
fn a_relative_path_error_names_the_directory_it_was_resolved_against() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(
        dir.path(),
        &[(Path::new("no/such/libplugin.so"), "AddHeader")],
    );
    let e = native::load(&spec, &HostOptions::default())
        .err()
        .expect("fails");
    let cwd = std::env::current_dir().unwrap();
    let msg = e.to_string();
    assert_eq!(e.field, "custom_middleware.pre[0].path");
    assert!(msg.contains(r#""no/such/libplugin.so""#), "{msg}");
    assert!(
        msg.contains(&format!(
            "resolved against the gateway's working directory {}",
            cwd.display()
        )),
        "{msg}"
    );
}

#[test]
fn the_cpp_plugin_exports_unmangled_names_and_reads_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let mut api = native_api(
        "cpp",
        "/cpp/",
        "127.0.0.1:9",
        &[(&plugins().cpp_stamp, "StampConfig")],
        &[],
    );
    api["config_data"] = serde_json::json!({"from": "c++"});
    write_def(dir.path(), "cpp", &api);
    let spec = load_dir(dir.path()).unwrap().apis.remove(0);
    let w = Worker::new(&spec);
    for _ in 0..3 {
        let mut req = request("/cpp/", None, &[], "");
        assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
        assert_eq!(values(&req, "x-cpp-api-id"), ["cpp"]);
        assert_eq!(values(&req, "x-cpp-config"), [r#"{"from":"c++"}"#]);
    }
}
