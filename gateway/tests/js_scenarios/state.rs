//! State: what a context keeps between calls (per strategy), two APIs'
//! globals kept apart, and memory that stays flat over many calls.

use super::*;

pub fn two_apis_with_the_same_global_names_stay_apart(mode: Mode) {
    let a = spec(
        mode,
        "a",
        ("mw", fixture("clash_a.js")),
        serde_json::Value::Null,
    );
    let b = spec(
        mode,
        "b",
        ("mw", fixture("clash_b.js")),
        serde_json::Value::Null,
    );
    let (ha, hb) = (host(&a), host(&b));
    let mut ra = get("/a/", &[]);
    let mut rb = get("/b/", &[]);
    ha.ok(&mut ra);
    hb.ok(&mut rb);
    assert_eq!(header(&ra, "x-owner"), "a");
    assert_eq!(header(&rb, "x-owner"), "b");
}

/// `X-Count` of three calls to `counter.js`.
pub fn counts(mode: Mode) -> Vec<String> {
    let s = spec(
        mode,
        "count",
        ("counterMw", fixture("counter.js")),
        serde_json::Value::Null,
    );
    let h = host_counting(&s);
    (0..3)
        .map(|_| {
            let mut req = get("/count/", &[]);
            h.ok(&mut req);
            header(&req, "x-count").to_string()
        })
        .collect()
}

/// Rough resident set size of this process, from /proc (Linux).
fn rss_kb() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

pub fn many_calls_keep_memory_flat(mode: Mode, calls: usize) {
    let s = spec(
        mode,
        "soak",
        ("headersMw", fixture("headers.js")),
        serde_json::json!({"greeting": "hi"}),
    );
    let h = host(&s);
    let call = || {
        let mut req = get("/soak/x?a=1", &[("x-api-key", "k"), ("x-multi", "m")]);
        h.ok(&mut req);
    };
    for _ in 0..calls / 5 {
        call();
    }
    let before = rss_kb();
    for _ in 0..calls {
        call();
    }
    let after = rss_kb();
    // A leak of even 1 KiB per call would show as 5-50 MB here.
    assert!(
        after < before + 4 * 1024,
        "RSS grew from {before} KiB to {after} KiB over {calls} calls"
    );
}

fn promises(mode: Mode) -> ApiSpec {
    spec(
        mode,
        "promises",
        ("promisesMw", fixture("promises.js")),
        serde_json::Value::Null,
    )
}

/// Promise jobs a call queues (a `.then` reaction, an `await`'s
/// continuation) run once the host has read its answer, as Tyk's goja runs
/// its job queue when a call returns: the next call of a persistent
/// context sees what they did (fresh: nothing is kept), an edit they make
/// comes too late to be applied, and a call that throws still runs the
/// ones it queued. Neither engine ran them: they stayed queued for good.
pub fn promise_jobs_run_after_the_answer_is_read(mode: Mode) {
    let h = host_counting(&promises(mode));
    for i in 0..4 {
        let mut req = get("/promises/", &[]);
        h.ok(&mut req);
        let want = if is_fresh(mode) { 0 } else { 2 * i };
        assert_eq!(header(&req, "x-reactions"), want.to_string(), "call {i}");
    }
    let mut req = get("/promises/", &[("x-mode", "late-edit")]);
    h.ok(&mut req);
    assert!(req.headers.get("x-late").is_none(), "{:?}", req.headers);
    let msg = h.err(&mut get("/promises/", &[("x-mode", "throw")]));
    assert!(msg.contains("thrown with jobs queued"), "{msg}");
    let mut req = get("/promises/", &[]);
    h.ok(&mut req);
    // Four calls, the late edit's and the throw's: two reactions each.
    let want = if is_fresh(mode) { 0 } else { 12 };
    assert_eq!(header(&req, "x-reactions"), want.to_string());
}

/// A chain of promise jobs that never ends (each queues the next) stops
/// at the call's deadline: the request fails as a timeout, and the API
/// serves the next one.
pub fn a_promise_chain_that_never_ends_stops_at_the_deadline(mode: Mode) {
    let h = host_with(&promises(mode), Duration::from_millis(500), 64 << 20);
    for _ in 0..2 {
        let msg = h.err(&mut get("/promises/", &[("x-mode", "forever")]));
        assert!(msg.contains("timeout"), "{msg}");
        // The next call is served (a rebuilt context may need more than
        // one try to build within 500 ms on a loaded machine).
        let served = (0..5).any(|_| h.run(&mut get("/promises/", &[])).is_ok());
        assert!(served, "the API did not serve after the chain was stopped");
    }
}

/// What a call's promise jobs and WeakRefs hold is let go when the call
/// ends: 160 calls each queuing a reaction that holds 256 KiB, or making a
/// WeakRef to 256 KiB, under a 16 MiB heap limit, keep one context (its
/// count goes on) and never fail. Jobs left queued held 40 MiB: the
/// context was rebuilt (boa) or calls failed out of memory (QuickJS).
pub fn what_promise_jobs_and_weak_refs_hold_is_let_go(mode: Mode) {
    // On VM threads from the start: a QuickJS API moved there from inline
    // (a call past `--jsvm-inline-budget`, which a collection in the
    // tests' build can be) gets a new context, and its count starts over.
    let h = host_opts(
        &promises(mode),
        HostOptions {
            jsvm_memory: 16 << 20,
            jsvm_inline_budget: Duration::ZERO,
            ..HostOptions::default()
        },
    );
    for which in ["capture", "weak"] {
        let start = {
            let mut req = get("/promises/", &[]);
            h.ok(&mut req);
            header(&req, "x-calls").parse::<u64>().unwrap()
        };
        for i in 1..=160u64 {
            let mut req = get("/promises/", &[("x-mode", which)]);
            h.ok(&mut req);
            let want = if is_fresh(mode) { 1 } else { start + i };
            assert_eq!(
                header(&req, "x-calls"),
                want.to_string(),
                "{which} call {i}"
            );
        }
    }
}
