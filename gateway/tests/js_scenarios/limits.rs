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

/// A script answers a session nested a million levels deep (what a
/// `--jsvm-memory` of 1 GiB lets it build), inline as a worker runs it: the
/// host's check of the answer fails that request (500) and the next call
/// works. (boa's own `JsValue::to_json`, which the check used, recursed
/// once per level and overflowed the worker's 256 MiB stack, aborting the
/// process.)
pub fn an_answer_nested_a_million_deep_fails_its_request_only(mode: Mode) {
    let s = spec(
        mode,
        "deep",
        ("deepMw", fixture("deep_answer.js")),
        serde_json::Value::Null,
    );
    let h = host_opts(
        &s,
        HostOptions {
            jsvm_timeout: Duration::from_secs(60),
            jsvm_threads: 0,
            jsvm_memory: 1 << 30,
            ..HostOptions::default()
        },
    );
    // Each engine's own words for "too deep": the host's bound on boa,
    // QuickJS's stack limit.
    let msg = h.err(&mut get("/deep/", &[("x-levels", "1000000")]));
    assert!(msg.contains("deepMw"), "{msg}");
    assert!(
        msg.contains("nested deeper than 10000 levels") || msg.contains("call stack size"),
        "{msg}"
    );
    // The same object thrown is named by its kind, on one short line.
    let msg = h.err(&mut get(
        "/deep/",
        &[("x-levels", "1000000"), ("x-throw", "1")],
    ));
    assert!(msg.ends_with("JS error: [object Object]"), "{msg}");
    // And thrown by a getter of the answer, as the host reads it.
    let msg = h.err(&mut get(
        "/deep/",
        &[("x-levels", "1000000"), ("x-getter", "1")],
    ));
    assert!(msg.contains("[object Object]"), "{msg}");
    assert!(msg.len() < 300, "{msg}");
    let mut req = get("/deep/", &[]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-deep"), "fine");
}

/// A script that runs `eval` (or `new Function`) on the request body, and
/// bodies nested 10,000 levels deep: each fails its own request and the
/// next works. (On boa the parser recurses per level, ~26 KB of stack
/// each, and such a body aborted the gateway; it is now refused by
/// length before it is parsed, `js/compile.rs`.)
pub fn eval_of_a_deeply_nested_body_fails_its_request_only(mode: Mode) {
    let s = spec(
        mode,
        "evalbody",
        ("evalMw", fixture("eval_body.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    let deep = [
        format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000)),
        format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000)),
        format!("{}1", "1?1:".repeat(20_000)),
        "(".repeat(20_000),
    ];
    for how in ["eval", "function"] {
        for body in &deep {
            let msg = h.err(&mut request(
                Method::POST,
                "/evalbody/",
                &[("x-how", how)],
                body,
            ));
            assert!(msg.contains("evalMw"), "{how}: {msg}");
            if mode.engine == "boa" {
                assert!(msg.contains("parse safely"), "{how}: {msg}");
            }
        }
        // Source of an ordinary size still compiles, nested a little.
        let body = format!("{}6*7{}", "(".repeat(200), ")".repeat(200));
        let mut req = request(Method::POST, "/evalbody/", &[("x-how", how)], &body);
        h.ok(&mut req);
        assert_eq!(header(&req, "x-value"), "42", "{how}");
    }
}

/// Proxies behave as the spec's (the same facts on every engine), and a
/// chain of a million of them read through fails its request only: boa's
/// Proxy methods recurse once per level and such a chain aborted the
/// gateway (`js/proxy.rs` checks the stack at every level).
pub fn proxies_keep_their_rules_and_a_million_deep_chain_fails_its_request_only(mode: Mode) {
    let s = spec(
        mode,
        "proxies",
        ("proxyMw", fixture("proxies.js")),
        serde_json::Value::Null,
    );
    let h = host_with(&s, Duration::from_secs(60), 1 << 30);
    let facts = "empty=1;keys=a,b;get=ABC!;has=true;ownKeys=y;set=n33;delete=false;\
                 apply=50;call=5;construct=7;proto=true;inherit=5;isArray=true;\
                 json={\"j\":[1]};nested=2;revoked!TypeError;badTrap!TypeError;\
                 badHandler!TypeError;noNew!TypeError;invariant!TypeError;length=2function";
    let mut req = get("/proxies/", &[]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-facts"), facts);
    let msg = h.err(&mut get("/proxies/", &[("x-mode", "chain")]));
    assert!(msg.contains("proxyMw"), "{msg}");
    let mut req = get("/proxies/", &[]);
    h.ok(&mut req);
    assert_eq!(header(&req, "x-facts"), facts);
}
