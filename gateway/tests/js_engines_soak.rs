//! Many calls through one JS API keep the process's memory flat, on every
//! engine and strategy. A test binary of its own: RSS is the whole
//! process's, and the limit tests in `js_engines.rs` allocate tens of MiB
//! while they run.

mod js_scenarios;

use js_scenarios::*;

#[test]
fn many_calls_keep_memory_flat_in_every_mode() {
    // One test, so no two modes run at once in this process. Fresh state
    // costs a context per call, tyk-json a parse: fewer calls show the same
    // leak (the bound is 4 MiB: under 1 KiB per call at 5,000).
    for mode in ALL {
        let calls = match (mode.engine, mode.strategy) {
            ("boa", "fresh") => 300,
            (_, "persistent") => 20_000,
            _ => 5_000,
        };
        let t = std::time::Instant::now();
        many_calls_keep_memory_flat(mode, calls);
        eprintln!("{mode:?}: {calls} calls in {:?}", t.elapsed());
    }
}
