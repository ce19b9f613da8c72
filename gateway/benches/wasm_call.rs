//! What one WebAssembly middleware call costs, without the network: the
//! SDK-built AddHeader module (`plugins/add-header-wasm`, built by the
//! gateway's build script) loaded through the wasm driver and called the
//! way a worker calls it: one call is the whole proxy-wasm lifecycle of a
//! request (context create, request headers, done, delete) plus moving the
//! request in and out of the store. A benchmark, not a test: it prints,
//! never asserts.
//!
//! To try this: `cargo bench -p gateway --bench wasm_call`. It runs BATCHES
//! batches of CALLS calls (both overridable from the environment, e.g.
//! `CALLS=2000 BATCHES=3` under `valgrind --tool=callgrind`) and prints the
//! median batch's time per call with the spread (min..max batch), for the
//! bare `Middleware::call`, for `ApiChain::run` (which adds the timing the
//! stats show), and for starting a fresh instance (what a fault costs).
//!
//! `EVICT_KB=512` (or any size) adds calls with cold caches, as under load
//! in the gateway, where a request's other work (hyper, the upstream, the
//! kernel) runs between two middleware calls: before each call, untimed,
//! it writes one byte per cache line of a buffer that size, then records
//! the call through `ApiChain::run` and prints the recorded p50 and mean.
//! `native_call` has the same switch, for the native plugin beside it.

use std::future::Future;
use std::hint::black_box;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use gateway::config::{load_dir, Hook};
use gateway::middleware::{ApiChain, ChainFactory, MwRequest};
use gateway::stats::Stats;
use gateway::wasm::WasmLimits;
use http::{HeaderMap, HeaderValue, Method};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A request like ab's: a handful of headers, no body.
fn request() -> MwRequest {
    // Sized as the gateway sizes it: hyper's map for the client's headers,
    // plus the room the proxy makes before a chain.
    let mut headers = HeaderMap::with_capacity(3 + gateway::middleware::CHAIN_HEADER_ROOM);
    for (n, v) in [
        ("host", "127.0.0.1:8091"),
        ("user-agent", "ApacheBench/2.3"),
        ("accept", "*/*"),
    ] {
        headers.insert(n, HeaderValue::from_static(v));
    }
    MwRequest {
        method: Method::GET,
        path: "/wasm/hello/".into(),
        query: None,
        headers,
        body: Bytes::new(),
        remote_addr: SocketAddr::from(([127, 0, 0, 1], 1)),
        request_uri: http::Uri::from_static("/wasm/hello/"),
    }
}

/// Polls a future once: wasm calls are ready at once.
fn poll_once<F: Future>(f: F) -> Poll<F::Output> {
    let mut f = pin!(f);
    f.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

/// (median, min, max) ns per call over the batches.
fn per_call_ns(batches: usize, calls: usize, mut f: impl FnMut()) -> (f64, f64, f64) {
    let mut v: Vec<f64> = (0..batches)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                f();
            }
            start.elapsed().as_nanos() as f64 / calls as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    (v[batches / 2], v[0], v[batches - 1])
}

fn main() {
    let (batches, calls) = (env_or("BATCHES", 21).max(1), env_or("CALLS", 20_000).max(1));
    let module = Path::new(env!("GATEWAY_WASM_PLUGINS")).join("add_header_wasm.wasm");
    assert!(
        module.exists(),
        "{} is missing: see target/wasm/BUILD-FAILED.txt",
        module.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let def = serde_json::json!({
        "api_id": "wasm-bench", "use_keyless": true,
        "proxy": {"listen_path": "/wasm/", "target_url": "http://127.0.0.1:9"},
        "custom_middleware": {"driver": "wasm",
            "pre": [{"name": "AddHeader", "path": module}]}
    });
    std::fs::write(dir.path().join("b.json"), def.to_string()).unwrap();
    let spec = load_dir(dir.path()).unwrap().apis.remove(0);
    let started = Instant::now();
    let factory = gateway::wasm::load(&spec, &WasmLimits::default()).unwrap();
    println!(
        "load (compile + check + one start): {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );

    let chain = factory.instantiate().unwrap();
    let mw = &chain.pre[0];
    // Each call gets a request built as the gateway builds one (a clone
    // would leave its header list full, so the plugin's header would grow
    // it); building it is measured separately and subtracted.
    let (build, ..) = per_call_ns(batches, calls, || drop(black_box(request())));
    let (bare, lo, hi) = per_call_ns(batches, calls, || {
        let mut req = request();
        let out = poll_once(mw.call(&mut req));
        assert!(matches!(out, Poll::Ready(Ok(_))));
        black_box(req);
    });
    let stats = Stats::default();
    let api = ApiChain::new(&spec, factory.instantiate().unwrap(), &stats);
    let (run, ..) = per_call_ns(batches, calls, || {
        let mut req = request();
        let _ = black_box(poll_once(api.run(Hook::Pre, &mut req)));
    });
    let p50 = stats.summaries()[0].p50_us * 1000.0;
    println!(
        "AddHeader (wasm): call {:.1} ns [{:.1}..{:.1}]  ApiChain::run {:.1} ns  \
         (building the request {build:.1} ns subtracted; recorded p50 {p50:.0} ns)",
        bare - build,
        lo - build,
        hi - build,
        run - build,
    );
    if let Some(kb) = std::env::var("EVICT_KB").ok().and_then(|v| v.parse().ok()) {
        cold_calls(&spec, &*factory, kb, calls);
    }
    let starts = (calls / 100).max(1);
    let (start, lo, hi) = per_call_ns(batches.min(5), starts, || {
        black_box(factory.instantiate().unwrap());
    });
    println!(
        "fresh instance (after a fault, or per worker): {:.1} us [{:.1}..{:.1}]",
        start / 1e3,
        lo / 1e3,
        hi / 1e3
    );
    black_box(factory as std::sync::Arc<dyn ChainFactory>);
}

/// Calls with `kb` KiB written between them (untimed), recorded as the
/// gateway records them; prints the recorded p50 and mean.
fn cold_calls(
    spec: &gateway::config::ApiSpec,
    factory: &dyn ChainFactory,
    kb: usize,
    calls: usize,
) {
    let stats = Stats::default();
    let api = ApiChain::new(spec, factory.instantiate().unwrap(), &stats);
    let mut junk = vec![0u8; kb * 1024];
    let calls = (calls / 4).max(1);
    for i in 0..calls {
        for b in junk.iter_mut().step_by(64) {
            *b = b.wrapping_add(i as u8);
        }
        black_box(&junk);
        let mut req = request();
        let _ = black_box(poll_once(api.run(Hook::Pre, &mut req)));
    }
    let s = &stats.summaries()[0];
    println!(
        "AddHeader (wasm), {kb} KiB evicted between calls: recorded p50 {:.0} ns, mean {:.0} ns, p99 {:.0} ns ({calls} calls)",
        s.p50_us * 1000.0,
        s.mean_us * 1000.0,
        s.p99_us * 1000.0
    );
}
