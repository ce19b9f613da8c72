//! The engines' own limits: the timeout inside regexes and builtins'
//! callbacks, the memory limit, the stack limit on deep data and
//! recursion; after each the API still serves.

use super::*;

fn limits(mode: Mode) -> gateway::config::ApiSpec {
    spec(
        mode,
        "limits",
        ("limitsMw", fixture("limits.js")),
        serde_json::Value::Null,
    )
}

fn fault(h: &Host, name: &str) -> String {
    h.err(&mut get("/limits/", &[("x-fault", name)]))
}

fn still_serves(h: &Host) {
    let mut req = get("/limits/", &[]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-ok"), "yes");
}

pub fn the_timeout_stops_regexes_and_builtin_callbacks(mode: Mode) {
    let h = host_with(&limits(mode), Duration::from_millis(200), 64 << 20);
    for name in ["regex", "foreach", "sort"] {
        let msg = fault(&h, name);
        assert!(msg.contains("jsvm timeout"), "{name}: {msg}");
        assert!(msg.contains("limitsMw"), "{name}: {msg}");
        still_serves(&h);
    }
}

pub fn unbounded_allocation_hits_the_memory_limit(mode: Mode) {
    // A long timeout: the memory limit, not the clock, must stop these.
    let h = host_with(&limits(mode), Duration::from_secs(60), 16 << 20);
    for name in ["alloc", "onestep", "globalalloc", "alloc"] {
        let msg = fault(&h, name);
        assert!(msg.contains("memory limit (16 MiB)"), "{name}: {msg}");
        still_serves(&h);
    }
}

pub fn deep_data_and_unbounded_recursion_hit_the_stack_limit(mode: Mode) {
    let h = host(&limits(mode));
    for name in ["deepjson", "deepparse", "recurse"] {
        let msg = fault(&h, name);
        assert!(msg.contains("call stack size exceeded"), "{name}: {msg}");
        still_serves(&h);
    }
    // A stack overflow is an ordinary RangeError a script may catch.
    let mut req = get("/limits/", &[("x-fault", "catchrecurse")]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-caught"), "RangeError");
}
