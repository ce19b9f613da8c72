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
    let h = host(&s);
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
