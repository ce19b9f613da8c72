//! Many calls through one JS API keep the process's memory flat, on every
//! engine and strategy. A test binary of its own: RSS is the whole
//! process's, and the limit tests in `js_engines.rs` allocate tens of MiB
//! while they run.

mod js_scenarios;

use js_scenarios::*;

#[test]
fn many_calls_keep_memory_flat_in_every_mode() {
    // One test, so no two modes run at once in this process. Fresh state
    // costs a context per call: fewer calls show the same leak.
    for mode in ALL {
        let calls = match (mode.engine, mode.strategy) {
            ("boa", "fresh") => 300,
            (_, "fresh") => 5_000,
            _ => 50_000,
        };
        many_calls_keep_memory_flat(mode, calls);
    }
}
