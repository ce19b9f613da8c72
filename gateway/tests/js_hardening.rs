//! Issue 11's JS host attacks, through the real `gateway` binary on
//! 127.0.0.1:0: deep values, thousands of exceptions, large bodies and
//! runaway scripts. None may abort the process, poison an API, keep memory
//! after the request, or hold requests to other APIs.
//!
//! Each test starts its own gateway process (so an abort shows as a dead
//! process, and RSS is the gateway's alone) and stops it by pid. Every loop
//! is bounded; nothing asserts a timing.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

/// A gateway process, killed on drop.
struct Proc {
    child: Child,
    addr: SocketAddr,
}

impl Proc {
    fn start(apis: &Path, extra: &[&str]) -> Proc {
        Proc::spawn(apis, extra, "warn", Stdio::inherit())
    }

    /// As [`Proc::start`], its log (from `info`) written to `log`.
    fn start_logging(apis: &Path, extra: &[&str], log: &Path) -> Proc {
        let file = std::fs::File::create(log).unwrap();
        Proc::spawn(apis, extra, "info", Stdio::from(file))
    }

    fn spawn(apis: &Path, extra: &[&str], level: &str, stderr: Stdio) -> Proc {
        let (child, addr) = common::spawn_listening(
            common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_gateway")))
                .args(["--apis", apis.to_str().unwrap(), "--listen", "127.0.0.1:0"])
                .args(extra)
                .env("RUST_LOG", level)
                .stderr(stderr),
        );
        Proc { child, addr }
    }

    /// Panics if the process has exited (an abort, a crash).
    fn assert_alive(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("the gateway process died: {status}");
        }
    }

    /// VmRSS of the gateway process, in KiB.
    fn rss_kb(&self) -> u64 {
        status_field(self.child.id(), "VmRSS:")
    }

    /// Threads of the gateway whose name starts with `prefix`.
    fn threads_named(&self, prefix: &str) -> usize {
        common::threads_named(self.child.id(), prefix)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn status_field(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// One keep-alive connection: requests in order, each bounded in time.
struct Conn {
    rt: tokio::runtime::Runtime,
    tx: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let tx = rt.block_on(async {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (tx, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .unwrap();
            tokio::spawn(conn);
            tx
        });
        Conn { rt, tx }
    }

    fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> (u16, Bytes) {
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "gw");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(body)).unwrap();
        let tx = &mut self.tx;
        self.rt.block_on(async {
            tx.ready().await.expect("connection still open");
            let resp = tokio::time::timeout(Duration::from_secs(60), tx.send_request(req))
                .await
                .expect("a response within 60 s")
                .expect("a response, not a dropped connection");
            let status = resp.status().as_u16();
            (status, resp.into_body().collect().await.unwrap().to_bytes())
        })
    }
}

fn fixture(name: &str) -> String {
    format!("{}/tests/js_fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// An upstream that reads every request body to the end, drops it, and
/// answers 200 `ok` (the mock upstream does not read bodies, so hyper
/// closes its connections under large POSTs, which is not what is tested).
fn draining_upstream() -> SocketAddr {
    common::upstream_fn(|req: http::Request<hyper::body::Incoming>| async move {
        let _ = req.into_body().collect().await;
        Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from_static(b"ok"))))
    })
}

/// `hostile` (tests/js_fixtures/hostile.js), the seed's `jsvm` and a
/// `plain` API without middleware, all in front of a draining upstream.
fn apis(dir: &Path) {
    apis_on(dir, "boa");
}

/// [`apis`], the JS ones on `engine`.
fn apis_on(dir: &Path, engine: &str) {
    let up = format!("http://{}", draining_upstream());
    let js = |name: &str, path: String| json!({ "driver": "otto", "engine": engine, "pre": [{ "name": name, "path": path }] });
    let seed = format!("{}/../js/jsvm_hello.js", env!("CARGO_MANIFEST_DIR"));
    for (id, mw) in [
        ("hostile", js("hostileMw", fixture("hostile.js"))),
        ("jsvm", js("jsvmHelloPreHook", seed)),
        ("plain", Value::Null),
    ] {
        common::write_api(
            dir,
            id,
            &common::api_json(id, &format!("/{id}/"), &up, true, mw),
        );
    }
}

fn case(kase: &str, depth: usize) -> Vec<(String, String)> {
    vec![
        ("x-case".to_string(), kase.to_string()),
        ("x-depth".to_string(), depth.to_string()),
    ]
}

fn hostile(c: &mut Conn, kase: &str, depth: usize, body: &str) -> (u16, String) {
    let h = case(kase, depth);
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (status, body) = c.send("POST", "/hostile/", &h, Bytes::from(body.to_string()));
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn deep_values_never_abort_the_process() {
    let dir = tempfile::tempdir().unwrap();
    apis(dir.path());
    let mut gw = Proc::start(dir.path(), &["--threads", "1", "--jsvm-timeout", "30s"]);
    let mut c = Conn::open(gw.addr);
    // 2,000 levels: what a real script reaches; each works and answers
    // what JS says ({"a": ...} adds 6 characters per level).
    for kase in ["stringify", "stringify-array", "string", "tojson", "flat"] {
        let (status, body) = hostile(&mut c, kase, 2_000, "");
        assert_eq!(status, 200, "{kase} at 2,000 levels: {body}");
        gw.assert_alive();
    }
    let form = vec!["a"; 2_001].join(".") + "=1";
    assert!(form.len() > 4_000);
    let (status, echo) = hostile(&mut c, "form", 0, &form);
    assert_eq!(status, 200, "{echo}");
    // Far deeper than any stack: each is refused (500) and nothing else.
    for depth in [20_000, 300_000] {
        for kase in ["stringify", "stringify-array", "string", "tojson", "flat"] {
            let (status, body) = hostile(&mut c, kase, depth, "");
            assert!(
                status == 200 || status == 500,
                "{kase} at {depth}: {status} {body}"
            );
            gw.assert_alive();
        }
    }
    for dots in [20_000, 100_000] {
        let form = vec!["a"; dots].join(".") + "=1";
        let (status, body) = hostile(&mut c, "form", 0, &form);
        assert!(
            status == 200 || status == 500,
            "form with {dots} dots: {status} {body}"
        );
        gw.assert_alive();
    }
    // JSON text nested a million deep, as a request body.
    let text = "[".repeat(1_000_000) + &"]".repeat(1_000_000);
    let (status, _) = hostile(&mut c, "parse", 0, &text);
    assert_eq!(status, 500);
    gw.assert_alive();
    assert_eq!(c.send("GET", "/plain/x", &[], Bytes::new()).0, 200);
    assert_eq!(hostile(&mut c, "stringify", 10, "").0, 200);
}

#[test]
fn thousands_of_exceptions_fail_only_their_own_requests() {
    let dir = tempfile::tempdir().unwrap();
    apis(dir.path());
    let mut gw = Proc::start(dir.path(), &["--threads", "1"]);
    let mut c = Conn::open(gw.addr);
    let (mut thrown, mut clean) = (0, 0);
    for i in 0..6_000 {
        let kase = if i % 2 == 0 { "throw" } else { "stringify" };
        let (status, body) = hostile(&mut c, kase, 3, "");
        match kase {
            "throw" => {
                assert_eq!(status, 500, "request {i}: {body}");
                thrown += 1;
            }
            _ => {
                assert_eq!(
                    status, 200,
                    "clean request {i} after {thrown} exceptions: {body}"
                );
                clean += 1;
            }
        }
    }
    assert_eq!((thrown, clean), (3_000, 3_000));
    gw.assert_alive();
}

/// Sends `n` POSTs of `body` to `path` on one keep-alive connection.
fn posts(c: &mut Conn, path: &str, headers: &[(&str, &str)], body: &Bytes, n: usize) -> Vec<u16> {
    (0..n)
        .map(|_| c.send("POST", path, headers, body.clone()).0)
        .collect()
}

#[test]
fn request_bodies_do_not_stay_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    apis(dir.path());
    let gw = Proc::start(dir.path(), &["--threads", "1", "--jsvm-timeout", "60s"]);
    let mut c = Conn::open(gw.addr);
    let mib = Bytes::from(vec![b'x'; 1 << 20]);
    // Warm up every path once, so the baseline includes the runtime's own
    // one-time allocations.
    posts(&mut c, "/jsvm/", &[], &mib, 10);
    posts(&mut c, "/plain/", &[], &mib, 10);
    let before = gw.rss_kb();
    // The seed's script, which never reads the body.
    let statuses = posts(&mut c, "/jsvm/", &[], &mib, 300);
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let after_seed = gw.rss_kb();
    // JSON.parse of 8 MiB bodies.
    let mut text = String::from("[");
    while text.len() < 8 << 20 {
        text.push_str("123456789,");
    }
    text.push_str("0]");
    let json_body = Bytes::from(text);
    let statuses = posts(&mut c, "/hostile/", &[("x-case", "parse")], &json_body, 8);
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let after_parse = gw.rss_kb();
    // Failing calls carrying a body.
    let statuses = posts(&mut c, "/hostile/", &[("x-case", "throw")], &mib, 100);
    assert!(statuses.iter().all(|s| *s == 500), "{statuses:?}");
    let after_throw = gw.rss_kb();
    eprintln!(
        "VmRSS KiB: before {before}, after 300 x 1 MiB {after_seed}, after 8 x JSON.parse(8 MiB) {after_parse}, after 100 failing x 1 MiB {after_throw}"
    );
    // Generous: a body run of 300+ MiB must leave at most 48 MiB behind.
    for (what, kb) in [
        ("seed", after_seed),
        ("parse", after_parse),
        ("throw", after_throw),
    ] {
        assert!(
            kb < before + 48 * 1024,
            "{what}: VmRSS {before} -> {kb} KiB"
        );
    }
}

#[test]
fn a_runaway_script_does_not_hold_other_apis_or_its_own() {
    let dir = tempfile::tempdir().unwrap();
    apis(dir.path());
    // 30 `a`s: ~26 s in boa's regex engine here (debug build; each `a`
    // doubles it), far past the 4 s timeout on any machine. (27 ran 3.3 s
    // alone, and passed or failed by the machine's speed and load.)
    runaways_hold_nothing(dir.path(), 30);

    // A thread stuck in a builtin exits once its call returns: a short
    // regex past a short timeout, on a gateway of its own (the one above
    // may still be running its regex at nice 19). 26 `a`s: ~1.6 s here,
    // 16 times the timeout (22, ~0.1 s, was answered 200 on a faster
    // machine).
    let gw = Proc::start(dir.path(), &["--threads", "1", "--jsvm-timeout", "100ms"]);
    let mut c = Conn::open(gw.addr);
    assert_eq!(hostile(&mut c, "regex", 26, "").0, 500);
    let mut left = usize::MAX;
    for _ in 0..1200 {
        left = gw.threads_named("gw-js-");
        if left <= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // One VM thread per JS API (hostile, jsvm): the replacement, not the
    // abandoned one.
    assert!(left <= 2, "{left} JS threads still alive after 120 s");
}

/// QuickJS runs on VM threads too: its interrupt handler stops the runaway
/// at the deadline, and until then nothing else on the worker waits for it.
/// (Inline on the I/O thread, as before, `/plain/` waited the whole 4 s.)
#[test]
fn a_runaway_quickjs_script_does_not_hold_other_apis_or_its_own() {
    let dir = tempfile::tempdir().unwrap();
    apis_on(dir.path(), "quickjs");
    // QuickJS's regex engine is faster than boa's: 27 `a`s end in ~2.5 s,
    // inside the 4 s timeout on a quiet machine; 30 run ~8x longer (the
    // interrupt handler stops them at the timeout all the same).
    runaways_hold_nothing(dir.path(), 30);
}

/// On a one-worker gateway, each runaway (a catastrophic regex on
/// `regex_depth` `a`s, a loop in a builtin's callback, a plain loop) is
/// answered 500 only after 40 requests to other APIs have been answered,
/// and its own API answers at once after.
fn runaways_hold_nothing(dir: &Path, regex_depth: usize) {
    // A timeout long enough for the other requests below to finish first on
    // a loaded machine with a debug build; the regex runs far longer.
    let mut gw = Proc::start(dir, &["--threads", "1", "--jsvm-timeout", "4s"]);
    let addr = gw.addr;
    for (kase, depth) in [("regex", regex_depth), ("foreach", 0), ("loop", 0)] {
        let (tx, rx) = std::sync::mpsc::channel();
        let slow = tx.clone();
        std::thread::spawn(move || {
            let mut c = Conn::open(addr);
            let got = hostile(&mut c, kase, depth, "");
            let _ = slow.send(("runaway", got.0));
        });
        // Give the runaway a head start on the one worker (not a timing
        // assertion: the order below holds however long this takes).
        std::thread::sleep(Duration::from_millis(100));
        std::thread::spawn(move || {
            let mut c = Conn::open(addr);
            for _ in 0..20 {
                assert_eq!(c.send("GET", "/plain/x", &[], Bytes::new()).0, 200);
                assert_eq!(c.send("GET", "/jsvm/x", &[], Bytes::new()).0, 200);
            }
            let _ = tx.send(("others", 200));
        });
        let first = rx.recv().unwrap();
        let second = rx.recv().unwrap();
        assert_eq!(first, ("others", 200), "{kase}");
        assert_eq!(second, ("runaway", 500), "{kase}");
        // The same API answers at once, although the stopped script's
        // thread may still be running its builtin.
        let mut c = Conn::open(addr);
        assert_eq!(hostile(&mut c, "stringify", 3, "").0, 200, "{kase}");
        gw.assert_alive();
    }
}

// --- `--jsvm-memory` on boa (`gateway/src/heap.rs`, `js/memory.rs`) ---

/// `memory` (tests/js_fixtures/memory.js) on boa with `strategy`, in front
/// of a draining upstream.
fn memory_api(dir: &Path, strategy: &str) {
    let up = format!("http://{}", draining_upstream());
    let mw = json!({ "driver": "otto", "strategy": strategy,
        "pre": [{ "name": "memoryMw", "path": fixture("memory.js") }] });
    common::write_api(
        dir,
        "memory",
        &common::api_json("memory", "/memory/", &up, true, mw),
    );
}

/// One `memory` case; the number it answers (`None` for a failure).
fn memory_case(c: &mut Conn, kase: &str) -> Option<usize> {
    let (status, body) = c.send("GET", "/memory/", &[("x-case", kase)], Bytes::new());
    (status == 200).then(|| String::from_utf8_lossy(&body).parse().unwrap())
}

/// Where JS runs: a VM thread (the default) and inline on the worker.
const PLACES: [&str; 2] = ["1", "0"];

/// A 2 MiB heap (a ceiling of 66 MiB), calls slow enough never to time out,
/// `/tyk/stats` open: what the parking tests measure against.
const SMALL_HEAP_SLOW_CALLS: [&str; 6] = [
    "--jsvm-memory",
    "2MiB",
    "--jsvm-timeout",
    "60s",
    "--secret",
    "s3cret",
];

/// A one-worker gateway serving `memory` with `strategy`, its JS on `place`
/// (`--jsvm-threads`), given `extra` flags too; the directory lives as
/// long as the caller keeps it.
fn memory_gateway(strategy: &str, place: &str, extra: &[&str]) -> (tempfile::TempDir, Proc, Conn) {
    let dir = tempfile::tempdir().unwrap();
    memory_api(dir.path(), strategy);
    let mut args = vec!["--threads", "1", "--jsvm-threads", place];
    args.extend_from_slice(extra);
    let gw = Proc::start(dir.path(), &args);
    let c = Conn::open(gw.addr);
    (dir, gw, c)
}

#[test]
fn boa_garbage_is_collected_by_its_size() {
    // Each call leaves 1 MiB of string garbage behind, held by one small
    // object: boa's own trigger counts objects, not bytes, and collected
    // only after hundreds of such calls (RSS grew by about their sum).
    for place in PLACES {
        let (_dir, gw, mut c) = memory_gateway("persistent", place, &[]);
        for _ in 0..10 {
            assert_eq!(memory_case(&mut c, "garbage"), Some((1 << 20) + 1));
        }
        let before = gw.rss_kb();
        for _ in 0..300 {
            assert_eq!(memory_case(&mut c, "garbage"), Some((1 << 20) + 1));
        }
        let after = gw.rss_kb();
        eprintln!("--jsvm-threads {place}: VmRSS {before} -> {after} KiB over 300 MiB of garbage");
        assert!(
            after < before + 96 * 1024,
            "--jsvm-threads {place}: VmRSS {before} -> {after} KiB"
        );
    }
}

#[test]
fn a_boa_context_keeping_more_than_jsvm_memory_is_rebuilt() {
    for (place, strategy) in [("1", "persistent"), ("0", "persistent"), ("1", "tyk-json")] {
        let (_dir, gw, mut c) = memory_gateway(strategy, place, &["--jsvm-memory", "16MiB"]);
        let before = gw.rss_kb();
        // Every call answers (the call that passes the limit too); the
        // context is then rebuilt, and `kept` starts again from empty.
        let kept: Vec<usize> = (0..60)
            .map(|_| memory_case(&mut c, "keep").expect("a 200"))
            .collect();
        let after = gw.rss_kb();
        let what = format!("--jsvm-threads {place}, {strategy}: kept {kept:?}");
        let most = *kept.iter().max().unwrap();
        assert!((8..=17).contains(&most), "{what}");
        let restarts = kept.windows(2).filter(|w| w[1] == 1).count();
        assert!(restarts >= 3, "{what}");
        assert!(
            after < before + 96 * 1024,
            "{what}: VmRSS {before} -> {after} KiB"
        );
    }
}

/// What a call's promise jobs and WeakRefs hold is let go when the call
/// ends (`js/reactions.rs`): 160 calls each queuing a reaction that holds
/// 256 KiB, then 160 each making a WeakRef to 256 KiB, under a 16 MiB heap
/// limit, keep one context (its count goes on). boa ran no job and
/// cleared no kept WeakRef target: the context held them all and was
/// rebuilt, its globals reset, every ~60 calls. (QuickJS's side is
/// `js_engines.rs`'s `what_promise_jobs_and_weak_refs_hold_is_let_go`;
/// boa's heap is only counted in the gateway's binary.)
#[test]
fn boa_lets_go_of_what_promise_jobs_and_weak_refs_held() {
    for place in PLACES {
        let dir = tempfile::tempdir().unwrap();
        let up = format!("http://{}", draining_upstream());
        let mw = json!({ "driver": "otto",
            "pre": [{ "name": "promisesMw", "path": fixture("promises.js") }] });
        common::write_api(
            dir.path(),
            "promises",
            &common::api_json("promises", "/promises/", &up, true, mw),
        );
        let args = [
            "--threads",
            "1",
            "--jsvm-threads",
            place,
            "--jsvm-memory",
            "16MiB",
        ];
        let mut gw = Proc::start(dir.path(), &args);
        let mut c = Conn::open(gw.addr);
        let mut count = 0;
        for mode in ["capture", "weak"] {
            for i in 0..160 {
                let headers = [("x-mode", mode), ("x-answer", "1")];
                let (status, body) = c.send("GET", "/promises/", &headers, Bytes::new());
                let body = String::from_utf8_lossy(&body).into_owned();
                assert_eq!(status, 200, "--jsvm-threads {place} {mode} #{i}: {body}");
                count += 1;
                assert_eq!(
                    body,
                    count.to_string(),
                    "--jsvm-threads {place} {mode} #{i}"
                );
            }
        }
        gw.assert_alive();
    }
}

#[test]
fn a_boa_call_growing_past_jsvm_memory_is_stopped() {
    for place in PLACES {
        let flags = ["--jsvm-memory", "32MiB", "--jsvm-timeout", "60s"];
        let (_dir, gw, mut c) = memory_gateway("persistent", place, &flags);
        assert_eq!(memory_case(&mut c, "keep"), Some(1));
        let peak = status_field(gw.child.id(), "VmHWM:");
        // 1 KiB a step without end: stopped at a slice boundary once the
        // collected heap is past 32 MiB, long before the peak-RSS guard
        // (256 MiB) or the timeout.
        assert_eq!(memory_case(&mut c, "grow"), None, "--jsvm-threads {place}");
        let grown = status_field(gw.child.id(), "VmHWM:") - peak;
        assert!(
            grown < 160 * 1024,
            "--jsvm-threads {place}: peak RSS +{grown} KiB"
        );
        // The stopped context was dropped: `kept` is empty again.
        assert_eq!(
            memory_case(&mut c, "keep"),
            Some(1),
            "--jsvm-threads {place}"
        );
    }
}

/// `GET /tyk/stats` of a gateway started with `--secret s3cret`.
fn stats(c: &mut Conn) -> Value {
    let (status, body) = c.send(
        "GET",
        "/tyk/stats",
        &[("x-tyk-authorization", "s3cret")],
        Bytes::new(),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

/// How many of `api`'s middleware calls failed with `kind`.
fn failures(stats: &Value, api: &str, kind: &str) -> u64 {
    stats["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["api_id"] == api && e["kind"] == kind)
        .map_or(0, |e| e["count"].as_u64().unwrap())
}

/// Asserts that `stats` shows one parked VM thread and none abandoned and
/// running; the bytes the parked one holds.
fn one_parked(stats: &Value) -> u64 {
    let threads = &stats["js_threads"];
    assert_eq!(
        (threads["parked"].as_u64(), threads["abandoned"].as_u64()),
        (Some(1), Some(0)),
        "{stats}"
    );
    threads["parked_bytes"].as_u64().unwrap()
}

/// `/tyk/stats` once `js_threads.<field>` reads `value` (waited for up to
/// 30 s, then as it is).
fn stats_once(c: &mut Conn, field: &str, value: u64) -> Value {
    common::raw::eventually(Duration::from_secs(30), || {
        stats(c)["js_threads"][field] == value
    });
    stats(c)
}

/// One `memory` case that spins 1 s in a callback before its work, past
/// the deadline of the gateways that use it; the status answered.
fn late_case(c: &mut Conn, kase: &str) -> u16 {
    let headers = [("x-case", kase), ("x-spin", "1000")];
    c.send("GET", "/memory/", &headers, Bytes::new()).0
}

#[test]
fn a_boa_callback_growing_past_its_ceiling_stops_its_thread_there() {
    // `Array.from`'s callback runs in a loop of boa's that yields no
    // slice: the slice checks never see the heap grow, and without the
    // ceiling the call ran to its end (~450 MB) and was answered 200. On
    // a VM thread the allocator stops it at its ceiling (here 16 + 64 MiB),
    // before the allocation that would pass it, and the call fails at once
    // (not at its 60 s deadline); the thread sleeps for good, holding its
    // heap.
    let flags = [
        "--jsvm-memory",
        "16MiB",
        "--jsvm-timeout",
        "60s",
        "--secret",
        "s3cret",
    ];
    let (_dir, mut gw, mut c) = memory_gateway("persistent", "1", &flags);
    assert_eq!(memory_case(&mut c, "keep"), Some(1));
    let before = gw.rss_kb();
    assert_eq!(memory_case(&mut c, "callback-grow"), None);
    let s = stats(&mut c);
    assert_eq!(failures(&s, "memory", "out_of_memory"), 1, "{s}");
    assert_eq!(failures(&s, "memory", "timed_out"), 0, "{s}");
    let held = one_parked(&s);
    assert!(
        (76 << 20..=80 << 20).contains(&held),
        "stopped holding {held} bytes, not just under 80 MiB"
    );
    let after = gw.rss_kb();
    assert!(after < before + 112 * 1024, "VmRSS {before} -> {after} KiB");
    // The API serves on from a new thread, with a new context (`kept`
    // empty again), and the parked thread stays parked.
    assert_eq!(memory_case(&mut c, "keep"), Some(1));
    assert_eq!(stats(&mut c)["js_threads"]["parked"], 1);
    // One step that asks for 200 MB at once (`"x".repeat(2e8)`: answered
    // 200 before the ceiling, then parked its thread) is refused before
    // the allocation: the call fails, counted as out of memory, and the
    // thread and its context serve on (`kept` holds one more).
    let peak = status_field(gw.child.id(), "VmHWM:");
    assert_eq!(memory_case(&mut c, "huge"), None);
    let s = stats(&mut c);
    assert_eq!(failures(&s, "memory", "out_of_memory"), 2, "{s}");
    assert_eq!(s["js_threads"]["parked"], 1, "{s}");
    let grown = status_field(gw.child.id(), "VmHWM:") - peak;
    assert!(grown < 112 * 1024, "peak RSS +{grown} KiB");
    assert_eq!(memory_case(&mut c, "keep"), Some(2));
    gw.assert_alive();
}

/// `"x".repeat(n)`, `new Array(n + 1).join("x")` and `Array.prototype.join
/// .call({length: n + 1}, "x")` make an `n`-character string and no more:
/// boa's own made a vector of 16 bytes a character first, so 16 M
/// characters (16 MB, within the default `--jsvm-memory`) asked for one
/// 256 MB block and parked the VM thread for good, a thread per request
/// (then no thread at all once the parked filled their budget). A string
/// past what the call may still allocate is refused before it is made:
/// 500, counted as out of memory, nothing parked; so is an `ArrayBuffer`
/// (boa reserves it at once: `new Uint8Array(3e8)` parked too).
#[test]
fn boa_repeat_and_join_make_no_more_than_their_result() {
    let flags = ["--jsvm-timeout", "60s", "--secret", "s3cret"];
    for place in PLACES {
        let (_dir, mut gw, mut c) = memory_gateway("persistent", place, &flags);
        let n = (16_000_000).to_string();
        for kase in ["repeat", "join", "join-like"] {
            let (status, body) = c.send(
                "GET",
                "/memory/",
                &[("x-case", kase), ("x-n", &n)],
                Bytes::new(),
            );
            assert_eq!(
                (status, String::from_utf8_lossy(&body).into_owned()),
                (200, n.clone()),
                "{kase}, --jsvm-threads {place}"
            );
        }
        // JSON.stringify's output, 20 MiB and a little; JSON.parse of a
        // million numbers.
        let headers = [("x-case", "stringify"), ("x-n", "20")];
        let (status, body) = c.send("GET", "/memory/", &headers, Bytes::new());
        let want = (20 * ((1 << 20) + 3) + 1).to_string();
        assert_eq!(
            (status, String::from_utf8_lossy(&body).into_owned()),
            (200, want)
        );
        let headers = [("x-case", "parse"), ("x-n", "1000000")];
        let (status, body) = c.send("GET", "/memory/", &headers, Bytes::new());
        assert_eq!((status, &body[..]), (200, &b"1000000"[..]));
        let s = stats(&mut c);
        assert_eq!(s["js_threads"]["parked"], 0, "{s}");
        assert_eq!(failures(&s, "memory", "out_of_memory"), 0, "{s}");
        if place == "1" {
            // Past the ceiling (64 + 192 MiB): refused, not parked, as is
            // an ArrayBuffer past it (boa reserves it at once); a join
            // past boa's loop iteration limit (1e8) is not looped.
            let n = (300_000_000).to_string();
            for (kase, n) in [
                ("repeat", n.as_str()),
                ("join-like", &n),
                ("buffer", &n),
                // 300 MiB of JSON: its output grew past the ceiling.
                ("stringify", "300"),
                // 30 M numbers: 16 bytes each as values, twice.
                ("parse", "30000000"),
            ] {
                let headers = [("x-case", kase), ("x-n", n)];
                assert_eq!(c.send("GET", "/memory/", &headers, Bytes::new()).0, 500);
            }
            let s = stats(&mut c);
            assert_eq!(s["js_threads"]["parked"], 0, "{s}");
            assert_eq!(failures(&s, "memory", "out_of_memory"), 4, "{s}");
        }
        assert_eq!(
            memory_case(&mut c, "keep"),
            Some(1),
            "--jsvm-threads {place}"
        );
        gw.assert_alive();
    }
}

#[test]
fn an_abandoned_boa_thread_stops_growing_at_jsvm_memory() {
    // The call spins in a callback past its deadline: it gets 500 at the
    // deadline and its VM thread is abandoned, still in the callback.
    // That thread then grows its heap there; it used to grow on until the
    // step ended (~450 MB here, gigabytes for a longer one), freeing it
    // only then. Abandoned, it stops at its limit (checked every MiB past
    // it) and sleeps for good.
    let flags = [
        "--jsvm-memory",
        "16MiB",
        "--jsvm-timeout",
        "200ms",
        "--secret",
        "s3cret",
    ];
    let (_dir, mut gw, mut c) = memory_gateway("persistent", "1", &flags);
    assert_eq!(memory_case(&mut c, "calls"), Some(0));
    let before = gw.rss_kb();
    assert_eq!(late_case(&mut c, "late-grow"), 500);
    let s = stats(&mut c);
    assert_eq!(failures(&s, "memory", "timed_out"), 1, "{s}");
    let held = one_parked(&stats_once(&mut c, "parked", 1));
    assert!(
        (15 << 20..=18 << 20).contains(&held),
        "stopped holding {held} bytes, not about 16 MiB"
    );
    let after = gw.rss_kb();
    assert!(after < before + 48 * 1024, "VmRSS {before} -> {after} KiB");
    assert_eq!(memory_case(&mut c, "calls"), Some(0));
    gw.assert_alive();
}

#[test]
fn parked_boa_threads_are_bounded_by_what_they_hold() {
    // A thread stopped before one huge block (`padStart`'s) holds almost nothing: twenty
    // of them (more than the 16 running abandoned threads allowed) leave
    // the API served. Threads that filled their ceiling (2 + 64 MiB here)
    // use up the parked threads' budget (4 ceilings) in four: then the API
    // answers 500 rather than start a fifth, until a restart.
    let (_dir, mut gw, mut c) = memory_gateway("persistent", "1", &SMALL_HEAP_SLOW_CALLS);
    for i in 0..20 {
        assert_eq!(memory_case(&mut c, "huge-block"), None, "huge call {i}");
    }
    assert_eq!(memory_case(&mut c, "calls"), Some(0));
    let s = stats(&mut c);
    assert_eq!(failures(&s, "memory", "out_of_memory"), 20, "{s}");
    assert_eq!(s["js_threads"]["parked"], 20, "{s}");
    for i in 0..4 {
        assert_eq!(
            memory_case(&mut c, "callback-grow"),
            None,
            "growing call {i}"
        );
    }
    let s = stats(&mut c);
    assert_eq!(failures(&s, "memory", "out_of_memory"), 24, "{s}");
    assert_eq!(s["js_threads"]["parked"], 24, "{s}");
    let held = s["js_threads"]["parked_bytes"].as_u64().unwrap();
    assert!(
        held >= 4 * (66 << 20) - (4 << 20),
        "parked threads hold {held} bytes"
    );
    // Budget used up: no fifth thread, and no more parked memory.
    assert_eq!(memory_case(&mut c, "calls"), None);
    let s = stats(&mut c);
    assert_eq!(failures(&s, "memory", "internal"), 1, "{s}");
    assert_eq!(s["js_threads"]["parked"], 24, "{s}");
    gw.assert_alive();
}

#[test]
fn a_large_body_does_not_take_a_boa_call_past_its_ceiling() {
    // `tyk-json` pastes the body into the call's source as base64: boa's
    // parser makes ~13 bytes per body byte inside one step. The ceiling
    // grows with the bodies a call is given (32 bytes a byte), so an 8 MiB
    // body is served under a 2 MiB limit (ceiling 66 MiB: the thread was
    // parked and the request answered 500 before).
    let (_dir, mut gw, mut c) = memory_gateway("tyk-json", "1", &SMALL_HEAP_SLOW_CALLS);
    let body = Bytes::from(vec![b'b'; 8 << 20]);
    for i in 0..2 {
        let (status, _) = c.send("POST", "/memory/", &[("x-case", "ordinary")], body.clone());
        assert_eq!(status, 200, "call {i}");
    }
    assert_eq!(stats(&mut c)["js_threads"]["parked"], 0);
    gw.assert_alive();
}

#[test]
fn a_boa_context_build_is_not_held_to_a_calls_ceiling() {
    // Top-level code that makes ~96 MiB of strings and keeps none passes
    // the load-time check (2 MiB limit); with `fresh`, each call's context
    // is built again on its VM thread (after the call, off the next
    // request's path). Built under the last call's ceiling (66 MiB), the
    // thread was parked and the next, unrelated request answered 500.
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", draining_upstream());
    let mw = json!({ "driver": "otto", "strategy": "fresh",
        "pre": [{ "name": "buildMw", "path": fixture("memory_build.js") }] });
    common::write_api(
        dir.path(),
        "build",
        &common::api_json("build", "/build/", &up, true, mw),
    );
    let args = [
        "--threads",
        "1",
        "--jsvm-memory",
        "2MiB",
        "--secret",
        "s3cret",
    ];
    let mut gw = Proc::start(dir.path(), &args);
    let mut c = Conn::open(gw.addr);
    for i in 0..4 {
        let (status, body) = c.send("GET", "/build/", &[], Bytes::new());
        assert_eq!((status, &body[..]), (200, &b"built"[..]), "call {i}");
    }
    assert_eq!(stats(&mut c)["js_threads"]["parked"], 0);
    gw.assert_alive();
}

#[test]
fn an_abandoned_boa_call_logs_no_more() {
    // Its request got 500 at the deadline; a callback that goes on
    // logging afterwards (one wrote 5 GB in 40 s) writes nothing more.
    let dir = tempfile::tempdir().unwrap();
    memory_api(dir.path(), "persistent");
    let log = dir.path().join("gateway.log");
    let flags = [
        "--threads",
        "1",
        "--jsvm-timeout",
        "200ms",
        "--secret",
        "s3cret",
    ];
    let mut gw = Proc::start_logging(dir.path(), &flags, &log);
    let mut c = Conn::open(gw.addr);
    assert_eq!(late_case(&mut c, "late-log"), 500);
    // The abandoned thread runs its callback to the end, then exits.
    let s = stats_once(&mut c, "abandoned", 0);
    assert_eq!(s["js_threads"]["abandoned"], 0, "{s}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("stopped after the jsvm timeout"), "{text}");
    let late = text.matches("late-log-line").count();
    assert_eq!(late, 0, "{late} lines logged by the abandoned call");
    gw.assert_alive();
}

#[test]
fn ordinary_calls_leave_a_boa_contexts_heap_count_where_it_was() {
    // What the host copies into and out of a context (header maps that
    // share the I/O thread's buffers, the header values, bodies and URLs
    // made from an answer, error messages) must not move the count: up,
    // and a context under its limit would be rebuilt after enough calls;
    // down, and the limit would drift away. With a 2 MiB limit (an empty
    // context counts well under 1 MiB), 3,300 calls must not rebuild the
    // context, and then 1 MiB kept twice must.
    for place in PLACES {
        let (_dir, _gw, mut c) = memory_gateway("persistent", place, &["--jsvm-memory", "2MiB"]);
        let body = Bytes::from(vec![b'b'; 2048]);
        let headers = [("x-case", "ordinary"), ("x-padding", &*"p".repeat(1024))];
        for i in 0..3300 {
            let method = if i % 33 == 0 { "PUT" } else { "POST" };
            let (status, _) = c.send(method, "/memory/?a=1", &headers, body.clone());
            let want = if method == "PUT" { 500 } else { 200 };
            assert_eq!(status, want, "--jsvm-threads {place}: call {i}");
        }
        assert_eq!(
            memory_case(&mut c, "calls"),
            Some(3300),
            "--jsvm-threads {place}"
        );
        let kept: Vec<_> = (0..3).map(|_| memory_case(&mut c, "keep")).collect();
        assert_eq!(kept, [Some(1), Some(2), Some(1)], "--jsvm-threads {place}");
    }
}

#[test]
fn boa_symbol_for_keys_live_and_die_with_their_context() {
    let (_dir, gw, mut c) = memory_gateway("persistent", "1", &["--jsvm-memory", "16MiB"]);
    assert_eq!(memory_case(&mut c, "symbol-rules"), Some(1));
    let before = gw.rss_kb();
    // 2,000 new keys a call: in boa's process-wide registry they were
    // never freed, whatever became of the context. Here they count towards
    // the context's heap: a call that passes the limit at a slice gets 500
    // (`None`), one that passes it by its end is answered; either way the
    // context is rebuilt and its registry goes with it.
    let registered: Vec<Option<usize>> = (0..300).map(|_| memory_case(&mut c, "symbols")).collect();
    let after = gw.rss_kb();
    eprintln!("VmRSS {before} -> {after} KiB over 600,000 registered symbols");
    let restarts = registered.windows(2).filter(|w| w[1] == Some(1)).count();
    assert!(restarts >= 3, "{registered:?}");
    assert!(after < before + 64 * 1024, "VmRSS {before} -> {after} KiB");
}

#[test]
fn a_boa_context_over_jsvm_memory_once_built_fails_at_load() {
    // 3 MiB of config_data in every context: refused at load (its API
    // fails closed) rather than rebuilt after every call.
    let up = format!("http://{}", draining_upstream());
    let big: serde_json::Map<String, Value> = (0..3000)
        .map(|i| (format!("k{i}"), Value::from("v".repeat(1024))))
        .collect();
    for (config, limit, want) in [(&big, "2MiB", 500), (&big, "64MiB", 200)] {
        let dir = tempfile::tempdir().unwrap();
        let mw = json!({ "driver": "otto",
            "pre": [{ "name": "memoryMw", "path": fixture("memory.js") }] });
        let mut api = common::api_json("memory", "/memory/", &up, true, mw);
        api["config_data"] = Value::Object(config.clone());
        common::write_api(dir.path(), "memory", &api);
        let gw = Proc::start(dir.path(), &["--threads", "1", "--jsvm-memory", limit]);
        let mut c = Conn::open(gw.addr);
        let (status, _) = c.send("GET", "/memory/", &[("x-case", "calls")], Bytes::new());
        assert_eq!(status, want, "--jsvm-memory {limit}");
    }
}

/// A call out's answer is JSON text the host makes, and boa's string made
/// of it: a reply of 8 MiB of control characters is 96 MiB of escapes
/// (`\u0001`, the body twice). Made in the call's count, that passed the
/// ceiling (16 + 64 MiB here): the allocator parked the VM thread for good
/// (31 MiB replies at the default limit parked one holding ~220 MB a
/// request, and after a handful no lost JS thread was replaced). An answer
/// that cannot fit fails the call instead: the script gets `undefined`, as
/// for any failed call, and nothing is parked.
#[test]
fn a_call_out_answer_too_large_for_the_heap_fails_the_call_not_the_thread() {
    let control = Bytes::from(vec![1u8; 8 << 20]);
    let svc = common::upstream_fn(move |_req: http::Request<hyper::body::Incoming>| {
        let body = control.clone();
        async move { Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(body))) }
    });
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("callout.js");
    std::fs::write(
        &script,
        r#"var mw = new TykJS.TykMiddleware.NewMiddleware({});
mw.NewProcessRequest(function (request, session, spec) {
    var url = spec.config_data.svc;
    var one = TykMakeHttpRequest(JSON.stringify({Domain: url, Resource: "/one"}));
    var batch = TykBatchRequest(JSON.stringify({requests: [{method: "GET", relative_url: url + "/b"}]}));
    request.ReturnOverrides.ResponseCode = 200;
    request.ReturnOverrides.ResponseBody = typeof one + " " + typeof batch;
    return mw.ReturnData(request, {});
});
"#,
    )
    .unwrap();
    let mut api = common::api_json(
        "callout",
        "/callout/",
        &format!("http://{svc}"),
        true,
        json!({"driver": "otto", "pre": [{"name": "mw", "path": script.to_str().unwrap()}]}),
    );
    api["config_data"] = json!({"svc": format!("http://{svc}")});
    common::write_api(dir.path(), "callout", &api);
    let mut gw = Proc::start(
        dir.path(),
        &[
            "--threads",
            "1",
            "--jsvm-memory",
            "16MiB",
            "--jsvm-timeout",
            "60s",
            "--secret",
            "s3cret",
        ],
    );
    let mut c = Conn::open(gw.addr);
    for _ in 0..2 {
        let (status, body) = c.send("GET", "/callout/", &[], Bytes::new());
        assert_eq!(
            (status, String::from_utf8_lossy(&body).into_owned()),
            (200, "undefined undefined".to_string())
        );
    }
    let s = stats(&mut c);
    assert_eq!(s["js_threads"]["parked"], 0, "{s}");
    assert_eq!(failures(&s, "callout", "out_of_memory"), 0, "{s}");
    gw.assert_alive();
}

/// A QuickJS `fresh` context puts its heap image back before each call,
/// and gave the pages a call dirtied past it back to the kernel only
/// then: a call that made a 40 MiB string kept 40 MB resident for as long
/// as its API was idle (up to twice `--jsvm-memory` per API and VM
/// thread). A call that grew the heap that far is now put back when it
/// ends.
#[test]
fn a_quickjs_fresh_call_gives_its_memory_back_when_it_ends() {
    let up = draining_upstream();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("big.js");
    std::fs::write(
        &script,
        r#"var mw = new TykJS.TykMiddleware.NewMiddleware({});
mw.NewProcessRequest(function (request, session, spec) {
    var n = request.URL.indexOf("big") >= 0 ? "x".repeat(40 << 20).length : 1;
    request.ReturnOverrides.ResponseCode = 200;
    request.ReturnOverrides.ResponseBody = String(n);
    return mw.ReturnData(request, {});
});
"#,
    )
    .unwrap();
    common::write_api(
        dir.path(),
        "fresh",
        &common::api_json(
            "fresh",
            "/fresh/",
            &format!("http://{up}"),
            true,
            json!({"driver": "otto", "engine": "quickjs", "strategy": "fresh",
                   "pre": [{"name": "mw", "path": script.to_str().unwrap()}]}),
        ),
    );
    let mut gw = Proc::start(dir.path(), &["--threads", "1", "--jsvm-memory", "128MiB"]);
    let mut c = Conn::open(gw.addr);
    for _ in 0..3 {
        assert_eq!(c.send("GET", "/fresh/small", &[], Bytes::new()).1, "1");
    }
    let before = gw.rss_kb();
    let (status, body) = c.send("GET", "/fresh/big", &[], Bytes::new());
    assert_eq!((status, &body[..]), (200, &b"41943040"[..]));
    let after = gw.rss_kb();
    assert!(
        after < before + 16 * 1024,
        "VmRSS {before} -> {after} KiB after the call ended"
    );
    gw.assert_alive();
}
