//! Many calls through one QuickJS API keep the process's memory flat. A test
//! binary of its own: RSS is the whole process's, and the limit tests in
//! `js_quickjs.rs` allocate tens of MiB while they run.

mod js_scenarios;

use js_scenarios::{many_calls_keep_memory_flat, FRESH, PERSISTENT};

#[test]
fn many_calls_keep_memory_flat_in_both_strategies() {
    // One test, so the two never run at once in this process.
    many_calls_keep_memory_flat(PERSISTENT, 50_000);
    many_calls_keep_memory_flat(FRESH, 5_000);
}
