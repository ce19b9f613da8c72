//! What one JS middleware call costs through the real host (`gateway::js`),
//! without the network, for each engine (boa, QuickJS) and strategy
//! (`persistent`, `tyk-json`, `fresh`): the seed's handler
//! (`js/jsvm_hello.js`) on the request `ab` sends (`Host`, `User-Agent`,
//! `Accept`), driven as a worker drives it (`ApiChain::run` on a
//! current-thread runtime).
//!
//! To try this: 1. `cargo bench -p gateway --bench js_call`
//! 2. read, per (engine, strategy) and round: median, mean and p99 ns per
//!    call (wall clock, I/O side), `cpu` = the process's CPU time per call
//!    over the round (every thread: with VM threads that is the I/O side,
//!    the VM thread and the hand-off between them; it also counts the loop
//!    and the request clone, and with `EVICT_KB` the eviction), and Rust
//!    heap allocations per call (QuickJS allocates with libc's malloc
//!    directly: not counted). The mean includes GC pauses, the median does
//!    not. On a busy machine `cpu` is the steadier figure.
//! 3. `ENGINE=boa|quickjs` and `STRATEGY=persistent|tyk-json|fresh` pick one
//!    mode; `CALLS` and `ROUNDS` (default 5) size the rounds. `fresh` also
//!    runs `fresh _`: the seed's handler plus one `_.keys` call, so every
//!    call's fresh context loads underscore (what a `fresh` API whose
//!    script uses `_` pays per request). `MODE` picks one row by its
//!    label (`MODE=fresh` leaves `fresh _` out). `persistent reads` runs a
//!    handler that reads two headers and a query parameter, as real ones
//!    do (the seed's reads nothing, so its calls never build `Headers`).
//! 4. `EVICT_KB=8192` writes 8 MiB between calls (untimed), so each call
//!    starts with cold caches, as in the gateway, where the kernel's network
//!    stack, the load generator and the upstream run between two calls on
//!    the same core. On the 2-core test machine (4 MiB L2 per core) that
//!    roughly doubles boa's median and brings it to what the gateway's own
//!    histogram shows under `ab`.
//! 5. `CALLS=3000 ROUNDS=1 EVICT_KB=8192 ENGINE=boa STRATEGY=persistent
//!    valgrind --tool=cachegrind --cache-sim=yes target/release/deps/js_call-*`
//!    (from `gateway/`) counts the cache lines a call touches and which
//!    functions miss (`cg_annotate --sort=D1mr`).
//! 6. `JSVM_THREADS=0` runs the call inline (`--jsvm-threads 0`); the
//!    default hands it to a VM thread, so the difference is what isolating
//!    scripts from the I/O thread costs (wall time includes the two thread
//!    wake-ups, `cpu` the work of both threads). With VM threads the bench
//!    pins itself and them to one core, as the gateway's default
//!    `--cpu-affinity auto` pins a worker and its VM threads;
//!    `CPU_AFFINITY=off` leaves them to the kernel, and a hand-off across
//!    cores costs far more (on the 2-core test VM, boa 5 -> ~60 µs CPU per
//!    call).
//!
//! Allocations are counted by a wrapper around the system allocator that
//! exists only in this benchmark binary.

use std::alloc::{GlobalAlloc, Layout};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use gateway::config::{ApiSpec, Driver, Hook, JsEngine, MiddlewareEntry, Target};
use gateway::middleware::{ApiChain, Flow, HostOptions, MwRequest};
use gateway::stats::Stats;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the gateway's allocator (the one the
// binary installs: `gateway::heap`) unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { gateway::heap::Counting.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { gateway::heap::Counting.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { gateway::heap::Counting.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A count from the environment, or `default`.
fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A handler that reads what a real one reads: two request headers and a
/// query parameter (so `Headers` and `Params` are built), then writes two
/// headers. The seed's handler reads nothing.
const HELLO_READS: &str = r#"var jsvmHelloPreHook = new TykJS.TykMiddleware.NewMiddleware({});
jsvmHelloPreHook.NewProcessRequest(function(request, session) {
    var ua = request.Headers["User-Agent"];
    var accept = request.Headers["Accept"];
    var page = request.Params["page"];
    if (ua && ua[0].indexOf("ApacheBench") === 0 && !page) {
        request.SetHeaders["X-Client"] = "ab " + (accept ? accept[0] : "");
    }
    request.SetHeaders["X-Custom-JSVM"] = "hello-from-jsvm";
    return jsvmHelloPreHook.ReturnData(request, {});
});
"#;

/// The seed's handler with one use of underscore's `_` before its write.
const HELLO_UNDERSCORE: &str = r#"var jsvmHelloPreHook = new TykJS.TykMiddleware.NewMiddleware({});
jsvmHelloPreHook.NewProcessRequest(function(request, session) {
    request.SetHeaders["X-Keys"] = _.keys({a: 1, b: 2}).join();
    request.SetHeaders["X-Custom-JSVM"] = "hello-from-jsvm";
    return jsvmHelloPreHook.ReturnData(request, {});
});
"#;

fn spec(engine: JsEngine, strategy: &str, script: &str) -> ApiSpec {
    let hello = script.to_string();
    ApiSpec {
        file: PathBuf::from("apis/jsvm-hello.json"),
        api_id: "jsvm-hello".into(),
        name: "jsvm-hello".into(),
        org_id: "default".into(),
        listen_path: "/jsvm/".into(),
        strip_listen_path: true,
        preserve_host_header: false,
        target: Target::parse("http://127.0.0.1:9").unwrap(),
        driver: Some(Driver::Js),
        engine: Some(engine),
        pre: vec![MiddlewareEntry {
            name: "jsvmHelloPreHook".into(),
            path: hello,
            ..Default::default()
        }],
        post: Vec::new(),
        config_data: serde_json::Value::Null,
        config_data_written: serde_json::Value::Null,
        strategy: strategy.into(),
        ..Default::default()
    }
}

/// What `ab -n .. http://127.0.0.1:18591/jsvm/hello/` sends.
fn ab_request() -> MwRequest {
    let mut headers = HeaderMap::new();
    for (k, v) in [
        ("host", "127.0.0.1:18591"),
        ("user-agent", "ApacheBench/2.3"),
        ("accept", "*/*"),
    ] {
        headers.append(HeaderName::from_static(k), HeaderValue::from_static(v));
    }
    MwRequest::new(
        Method::GET,
        http::Uri::from_static("/jsvm/hello/"),
        headers,
        Bytes::new(),
        "127.0.0.1:40000".parse().unwrap(),
    )
}

/// CPU time of the whole process (every thread): with VM threads, the I/O
/// side, the VM thread and the hand-off between them.
fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    let engine = std::env::var("ENGINE").ok();
    let strategy = std::env::var("STRATEGY").ok();
    let mode = std::env::var("MODE").ok();
    // JSVM_THREADS=0 calls inline, as `--jsvm-threads 0`; the default (1)
    // hands each call to a VM thread, as the gateway does by default.
    let jsvm_threads = env_count("JSVM_THREADS", 1);
    println!("jsvm_threads = {jsvm_threads}");
    // As the gateway's `--cpu-affinity auto`: with VM threads, the calling
    // (I/O) thread is pinned to a core before any VM thread exists, and
    // its VM threads inherit it. `CPU_AFFINITY=off` leaves both to the
    // kernel (the hand-off then often crosses cores).
    let pin = std::env::var("CPU_AFFINITY").map_or(true, |v| v != "off");
    if pin && jsvm_threads > 0 {
        let cpu = gateway::affinity::worker_cpu(0).expect("the process may run on some CPU");
        gateway::affinity::pin_current(cpu).expect("sched_setaffinity");
        println!("pinned to CPU {cpu} with its VM threads (CPU_AFFINITY=off: unpinned)");
    }
    let hello = format!("{}/../js/jsvm_hello.js", env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let with_underscore = dir.path().join("jsvm_hello_underscore.js");
    std::fs::write(&with_underscore, HELLO_UNDERSCORE).expect("write the script");
    let with_underscore = with_underscore.display().to_string();
    let reads = dir.path().join("jsvm_hello_reads.js");
    std::fs::write(&reads, HELLO_READS).expect("write the script");
    let reads = reads.display().to_string();
    let modes: [(&str, &str, &String); 5] = [
        ("persistent", "persistent", &hello),
        ("persistent reads", "persistent", &reads),
        ("tyk-json", "tyk-json", &hello),
        ("fresh", "fresh", &hello),
        ("fresh _", "fresh", &with_underscore),
    ];
    for (e, name) in [(JsEngine::Boa, "boa"), (JsEngine::QuickJs, "quickjs")] {
        for (label, s, script) in modes {
            if engine.as_deref().is_some_and(|o| o != name)
                || strategy.as_deref().is_some_and(|o| o != s)
                || mode.as_deref().is_some_and(|o| o != label)
            {
                continue;
            }
            // Costlier modes get fewer calls per round: about a second each.
            let default_calls = match (name, s) {
                ("boa", "fresh") => 300,
                (_, "fresh") => 2_000,
                ("boa", "tyk-json") => 5_000,
                _ => 20_000,
            };
            measure(
                &format!("{name} {label}"),
                &spec(e, s, script),
                jsvm_threads,
                default_calls,
            );
        }
    }
}

fn measure(name: &str, spec: &ApiSpec, jsvm_threads: usize, default_calls: usize) {
    let opts = HostOptions {
        jsvm_timeout: Duration::from_secs(5),
        jsvm_threads,
        ..HostOptions::default()
    };
    let factory = gateway::js::load(spec, &opts).expect("load");
    let chain = ApiChain::new(
        spec,
        factory.instantiate().expect("instantiate"),
        &Stats::default(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let template = ab_request();

    let evict_kb = env_count("EVICT_KB", 0);
    let (calls, rounds) = (env_count("CALLS", default_calls), env_count("ROUNDS", 5));
    println!("{name}: ns per call, {calls} calls per round, {evict_kb} KiB evicted between calls");
    let (mut medians, mut means, mut cpus) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut samples = Vec::with_capacity(calls);
        let allocs_before = ALLOCS.load(Ordering::Relaxed);
        let mut clone_allocs = 0;
        let mut junk = vec![0u8; evict_kb * 1024];
        let cpu_start = process_cpu();
        for i in 0..calls {
            // Untimed: write one byte per cache line of `junk`, evicting
            // what the previous call left in the caches.
            for b in junk.iter_mut().step_by(64) {
                *b = b.wrapping_add(i as u8);
            }
            std::hint::black_box(&junk);
            let a = ALLOCS.load(Ordering::Relaxed);
            let mut req = template.clone();
            clone_allocs += ALLOCS.load(Ordering::Relaxed) - a;
            let t = Instant::now();
            let flow = rt.block_on(chain.run(Hook::Pre, &mut req));
            samples.push(t.elapsed().as_nanos() as u64);
            assert!(matches!(flow, Ok(Flow::Continue)), "{flow:?}");
            assert_eq!(req.headers["x-custom-jsvm"], "hello-from-jsvm");
        }
        // The CPU clock is a syscall (~1 µs): read once per round.
        let cpu = (process_cpu() - cpu_start).as_nanos() as u64 / calls as u64;
        let allocs = ALLOCS.load(Ordering::Relaxed) - allocs_before - clone_allocs;
        let mean = samples.iter().sum::<u64>() / calls as u64;
        samples.sort_unstable();
        let median = samples[calls / 2];
        let p99 = samples[calls * 99 / 100];
        medians.push(median);
        means.push(mean);
        cpus.push(cpu);
        println!(
            "  round {round}: median {median:>7} ns  mean {mean:>7} ns  p99 {p99:>8} ns  \
             cpu {cpu:>7} ns  allocs/call {:.1}",
            allocs as f64 / calls as f64
        );
    }
    let mid = |v: &mut Vec<u64>| {
        v.sort_unstable();
        format!("{} [{}..{}]", v[v.len() / 2], v[0], v[v.len() - 1])
    };
    println!(
        "  {name}: median {} ns, mean {} ns, cpu {} ns (median [min..max] over rounds)",
        mid(&mut medians),
        mid(&mut means),
        mid(&mut cpus)
    );
}
