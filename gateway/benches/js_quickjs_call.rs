//! What one QuickJS middleware call costs through the real host
//! (`gateway::js::quickjs`), without the network: the seed's handler
//! (`js/jsvm_hello.js`) on the request `ab` sends, driven as a worker drives
//! it (`ApiChain::run` on a current-thread runtime). The QuickJS twin of
//! `js_call.rs`, for each strategy.
//!
//! To try this: 1. `cargo bench -p gateway --bench js_quickjs_call`
//! 2. read median, mean and p99 ns per call and Rust heap allocations per
//!    call (5 rounds) for `persistent` and for `fresh` (a new context per
//!    call, loaded from bytecode). QuickJS allocates with libc's malloc
//!    directly, so its own allocations are not in the count.
//!    `cpu mean` is the thread's CPU time per call over the round (it also
//!    counts the loop and the request clone, and with `EVICT_KB` the
//!    eviction): on a busy machine the wall-clock mean also counts the time
//!    other processes ran instead of the benchmark.
//! 3. `STRATEGY=fresh`, `EVICT_KB=8192`, `CALLS` and `ROUNDS` as in
//!    `js_call.rs` (cold caches between calls; cachegrind runs).

use std::alloc::{GlobalAlloc, Layout, System};
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

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
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

fn spec(strategy: &str) -> ApiSpec {
    let hello = format!("{}/../js/jsvm_hello.js", env!("CARGO_MANIFEST_DIR"));
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
        engine: Some(JsEngine::QuickJs),
        strategy: strategy.into(),
        pre: vec![MiddlewareEntry {
            name: "jsvmHelloPreHook".into(),
            path: hello,
            ..Default::default()
        }],
        post: Vec::new(),
        config_data: serde_json::Value::Null,
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
    MwRequest {
        method: Method::GET,
        path: "/jsvm/hello/".into(),
        query: None,
        headers,
        body: Bytes::new(),
        remote_addr: "127.0.0.1:40000".parse().unwrap(),
        request_uri: http::Uri::from_static("/jsvm/hello/"),
    }
}

/// CPU time this thread has used: unlike wall-clock samples, it does not
/// count the time other processes on a busy machine run instead of us.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    let only = std::env::var("STRATEGY").ok();
    for (name, strategy) in [("persistent", "persistent"), ("fresh", "fresh")] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        // Fresh calls cost ~100x more: fewer of them give as many digits.
        let default_calls = if name == "fresh" { 2_000 } else { 20_000 };
        measure(name, &spec(strategy), default_calls);
    }
}

fn measure(name: &str, spec: &ApiSpec, default_calls: usize) {
    let opts = HostOptions {
        jsvm_timeout: Duration::from_secs(5),
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
    println!(
        "quickjs {name}: ns per call (median, mean) and Rust allocations per call, \
         {calls} calls per round, {evict_kb} KiB evicted between calls"
    );
    let mut medians = Vec::new();
    for round in 0..rounds {
        let mut samples = Vec::with_capacity(calls);
        let allocs_before = ALLOCS.load(Ordering::Relaxed);
        let mut clone_allocs = 0;
        let mut junk = vec![0u8; evict_kb * 1024];
        let cpu_start = thread_cpu();
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
            assert!(matches!(flow, Ok(Flow::Continue)));
            assert_eq!(req.headers["x-custom-jsvm"], "hello-from-jsvm");
        }
        // The thread's CPU clock is a syscall (~1 µs): read once per round.
        let cpu = thread_cpu() - cpu_start;
        let allocs = ALLOCS.load(Ordering::Relaxed) - allocs_before - clone_allocs;
        let mean = samples.iter().sum::<u64>() / calls as u64;
        samples.sort_unstable();
        let median = samples[calls / 2];
        let p99 = samples[calls * 99 / 100];
        medians.push(median);
        println!(
            "round {round}: median {median:>6} ns  mean {mean:>6} ns  p99 {p99:>7} ns  \
             cpu mean {:>6} ns  allocs/call {:.1}",
            cpu.as_nanos() / calls as u128,
            allocs as f64 / calls as f64
        );
    }
    medians.sort_unstable();
    println!("median of medians: {} ns", medians[medians.len() / 2]);
}
