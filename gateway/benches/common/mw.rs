//! What the middleware call benches share: an ab-like request, one poll of
//! a future that is ready at once, and the `EVICT_KB` cold-cache calls.
//! Included with `#[path]` by `native_call.rs` and `wasm_call.rs`.

use std::future::Future;
use std::hint::black_box;
use std::net::SocketAddr;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use gateway::config::{ApiSpec, Hook};
use gateway::middleware::{ApiChain, ChainFactory, MwRequest};
use gateway::stats::Stats;
use http::{HeaderMap, HeaderValue, Method};

/// A request like ab's for `path`: a handful of headers, no body.
pub fn request(path: &'static str) -> MwRequest {
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
    MwRequest::new(
        Method::GET,
        http::Uri::from_static(path),
        headers,
        Bytes::new(),
        SocketAddr::from(([127, 0, 0, 1], 1)),
    )
}

/// Polls a future once: native and wasm calls are ready at once, and a
/// runtime's `block_on` would cost more than the call being measured.
pub fn poll_once<F: Future>(f: F) -> Poll<F::Output> {
    let mut f = pin!(f);
    f.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

/// The kibibytes `EVICT_KB` asks to write between calls, if set.
pub fn evict_kb() -> Option<usize> {
    std::env::var("EVICT_KB").ok().and_then(|v| v.parse().ok())
}

/// `calls` pre-hook calls through a fresh chain with `kb` KiB written
/// between them (untimed, so each call starts with cold caches, as under
/// load), recorded as the gateway records them; prints the recorded p50,
/// mean and p99 under `label`.
pub fn cold_calls(
    label: &str,
    spec: &ApiSpec,
    factory: &dyn ChainFactory,
    path: &'static str,
    kb: usize,
    calls: usize,
) {
    let stats = Stats::default();
    let api = ApiChain::new(spec, factory.instantiate().unwrap(), &stats);
    let mut junk = vec![0u8; kb * 1024];
    for i in 0..calls {
        for b in junk.iter_mut().step_by(64) {
            *b = b.wrapping_add(i as u8);
        }
        black_box(&junk);
        let mut req = request(path);
        let _ = black_box(poll_once(api.run(Hook::Pre, &mut req)));
    }
    let s = &stats.summaries()[0];
    println!(
        "{label}, {kb} KiB evicted between calls: recorded p50 {:.0} ns, mean {:.0} ns, p99 {:.0} ns ({calls} calls)",
        s.p50_us * 1000.0,
        s.mean_us * 1000.0,
        s.p99_us * 1000.0
    );
}
