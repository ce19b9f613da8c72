//! When JS contexts are built: once per API at load (the check that its
//! scripts compile), then where they run, at the API's first call on each
//! worker, never for an API nobody calls. Each build runs the scripts'
//! top-level code, which here logs a line naming its API, so the log
//! counts the builds. The gateway binary runs with its log in a file.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

/// A gateway process with its log in a file, killed on drop.
struct Gw {
    child: Child,
    addr: std::net::SocketAddr,
    log: std::path::PathBuf,
}

impl Gw {
    fn start(apis: &Path, extra: &[&str]) -> Gw {
        let log = apis.join("gateway.log");
        let file = std::fs::File::create(&log).unwrap();
        let (child, addr) = common::spawn_listening(
            common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_gateway")))
                .args(["--apis", apis.to_str().unwrap(), "--listen", "127.0.0.1:0"])
                .args(["--threads", "1"])
                .args(extra)
                .env("RUST_LOG", "info")
                .stderr(Stdio::from(file)),
        );
        Gw { child, addr, log }
    }

    fn get(&self, path: &str) -> (u16, String) {
        let got = common::send(self.addr, "GET", path, &[], b"");
        (got.status.as_u16(), got.text())
    }

    /// How many times `api`'s scripts were built so far.
    fn builds(&self, api: &str) -> usize {
        let text = std::fs::read_to_string(&self.log).unwrap();
        text.matches(&format!("context built: {api};")).count()
    }

    /// Waits (bounded) until `api` was built `n` times, then a little
    /// longer for any build past `n` to show; returns the count.
    fn builds_settled(&self, api: &str, n: usize) -> usize {
        let end = Instant::now() + Duration::from_secs(20);
        while self.builds(api) < n && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        self.builds(api)
    }

    /// The gateway's threads whose name starts with `prefix`.
    fn threads_named(&self, prefix: &str) -> usize {
        common::threads_named(self.child.id(), prefix)
    }
}

impl Drop for Gw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes JS API `id` on `engine`, whose script's top level logs its build
/// and then busies itself for `build_ms`, and whose call takes `call_ms`;
/// and a plain API.
fn write_apis(dir: &Path, apis: &[(&str, &str)], build_ms: u64, call_ms: u64) {
    let up = format!("http://{}", common::mock());
    for (id, engine) in apis {
        let script = dir.join(format!("{id}.js"));
        std::fs::write(
            &script,
            format!(
                r#"log("context built: {id};");
var t0 = Date.now();
while (Date.now() - t0 < {build_ms}) {{}}
var mw = new TykJS.TykMiddleware.NewMiddleware({{}});
mw.NewProcessRequest(function (request, session) {{
    var t1 = Date.now();
    while (Date.now() - t1 < {call_ms}) {{}}
    request.SetHeaders["X-Seen-By"] = "{id}";
    return mw.ReturnData(request, {{}});
}});
"#
            ),
        )
        .unwrap();
        let mw = json!({
            "driver": "otto",
            "engine": engine,
            "pre": [{ "name": "mw", "path": script.to_str().unwrap() }]
        });
        common::write_api(
            dir,
            id,
            &common::api_json(id, &format!("/{id}/"), &up, true, mw),
        );
    }
    let plain = common::api_json("plain", "/plain/", &up, true, serde_json::Value::Null);
    common::write_api(dir, "plain", &plain);
}

#[test]
fn js_contexts_are_built_at_each_apis_first_call_not_at_start() {
    // Before, every worker built each JS API's context twice at start (a
    // check, then its VM thread's): 2,000 JS APIs on two workers held
    // 3.6 GB and 4,000 threads before the first answer.
    for flags in [&[][..], &["--jsvm-threads", "0"]] {
        let dir = tempfile::tempdir().unwrap();
        write_apis(dir.path(), &[("lazyb", "boa"), ("lazyq", "quickjs")], 0, 0);
        let gw = Gw::start(dir.path(), flags);
        assert_eq!(gw.get("/plain/hello").0, 200);
        // The load-time check only.
        assert_eq!(gw.builds_settled("lazyb", 1), 1, "{flags:?}");
        assert_eq!(gw.builds_settled("lazyq", 1), 1, "{flags:?}");
        assert_eq!(gw.threads_named("gw-js-"), 0, "no VM thread yet: {flags:?}");

        let (status, body) = gw.get("/lazyb/hello");
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("lazyb"), "its middleware ran: {body}");
        assert_eq!(gw.builds_settled("lazyb", 2), 2, "{flags:?}");
        assert_eq!(gw.builds("lazyq"), 1, "not called, not built: {flags:?}");
        // Built once per worker: later calls use it.
        for _ in 0..3 {
            assert_eq!(gw.get("/lazyb/hello").0, 200);
        }
        assert_eq!(gw.builds_settled("lazyb", 2), 2, "{flags:?}");

        let (status, body) = gw.get("/lazyq/hello");
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("lazyq"), "its middleware ran: {body}");
        assert_eq!(gw.builds_settled("lazyq", 2), 2, "{flags:?}");
    }
}

#[test]
fn a_context_build_is_not_charged_to_the_call_that_waits_for_it() {
    // A build runs the scripts' top level, held to the jsvm timeout (1 s
    // here) as at load; this one takes 600 ms, and each call 600 ms more.
    // The first call on a worker waits for the build, then has its whole
    // second. Charged to the call, the build would fail it with 500 (1.2 s
    // in all), and on a VM thread abandon the thread, whose replacement
    // would fail the next call the same way, for ever.
    let configs: [&[&str]; 3] = [
        // boa on a VM thread; QuickJS inline (a budget it never overruns).
        &["--jsvm-inline-budget", "1000ms"],
        // Both inline.
        &["--jsvm-threads", "0"],
        // QuickJS on a VM thread too.
        &["--jsvm-inline-budget", "0"],
    ];
    for flags in configs {
        let dir = tempfile::tempdir().unwrap();
        write_apis(
            dir.path(),
            &[("slowb", "boa"), ("slowq", "quickjs")],
            600,
            600,
        );
        let mut all = vec!["--jsvm-timeout", "1s"];
        all.extend_from_slice(flags);
        let gw = Gw::start(dir.path(), &all);
        for id in ["slowb", "slowq"] {
            for n in 0..2 {
                let (status, body) = gw.get(&format!("/{id}/hello"));
                assert_eq!(status, 200, "{id} call {n} {flags:?}: {body}");
                assert!(body.contains(id), "{body}");
            }
            assert_eq!(gw.builds(id), 2, "built at load and once here");
        }
    }
}
