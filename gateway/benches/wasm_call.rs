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

use std::hint::black_box;
use std::path::Path;
use std::task::Poll;
use std::time::Instant;

use gateway::config::{load_dir, Hook};
use gateway::middleware::{ApiChain, ChainFactory};
use gateway::stats::Stats;
use gateway::wasm::WasmLimits;

#[path = "common/mw.rs"]
mod common;
use common::{poll_once, request};

/// The path the benches' requests ask for.
const PATH: &str = "/wasm/hello/";

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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
    let (build, ..) = per_call_ns(batches, calls, || drop(black_box(request(PATH))));
    let (bare, lo, hi) = per_call_ns(batches, calls, || {
        let mut req = request(PATH);
        let out = poll_once(mw.call(&mut req));
        assert!(matches!(out, Poll::Ready(Ok(_))));
        black_box(req);
    });
    let stats = Stats::default();
    let api = ApiChain::new(&spec, factory.instantiate().unwrap(), &stats);
    let (run, ..) = per_call_ns(batches, calls, || {
        let mut req = request(PATH);
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
    if let Some(kb) = common::evict_kb() {
        common::cold_calls(
            "AddHeader (wasm)",
            &spec,
            &*factory,
            PATH,
            kb,
            (calls / 4).max(1),
        );
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
