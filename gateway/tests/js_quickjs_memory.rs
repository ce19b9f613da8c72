//! QuickJS's heap limit (`--jsvm-memory`) as a request meets it, through
//! the real gateway binary on 127.0.0.1:0: in every strategy and phase, a
//! script that runs the heap out, in its own code or while the host reads
//! its answer (`js_fixtures/heap_fill.js`), fails its request with a 500
//! counted and logged as `out_of_memory`, naming the limit, and the next
//! request is served from a context rebuilt or put back.
//!
//! Each out-of-memory in the host's reading was reported as whatever the
//! read failed with: `threw` with "reading Request.SetHeaders: null" (the
//! `null` QuickJS throws when even its error object cannot be made), an
//! `internal` "Unknown error", or a `bad_answer` for a string the host
//! could not convert; a `persistent` context was then kept, full.

mod common;
mod js_phases;

use std::collections::BTreeMap;

use common::{error_counts, recorder, send, spawn_binary_with, stop_binary, write_api, Got};
use js_phases::{file_endpoint, js_api};
use loadgen::bench::probe::Control;
use serde_json::{json, Value};

const SECRET: &str = "heap-secret";

const STRATEGIES: [&str; 3] = ["persistent", "tyk-json", "fresh"];

/// Where the script runs: a request-phase entry (`pre`), a response hook,
/// a virtual endpoint (`/v`).
const PHASES: [&str; 3] = ["pre", "resp", "virt"];

/// How the script runs the heap out (`X-Oom`, see the fixture).
const CASES: [&str; 2] = ["call", "answer"];

/// The limit the gateway runs with; the log names it.
const LIMIT: &str = "16MiB";

fn fixture() -> String {
    format!(
        "{}/tests/js_fixtures/heap_fill.js",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// One API per strategy and phase, `/<strategy>-<phase>/`.
fn write_apis(dir: &std::path::Path, target: &str) {
    let js = fixture();
    let entry = |name: &str| json!([{"name": name, "path": js}]);
    for strategy in STRATEGIES {
        for phase in PHASES {
            let id = format!("{strategy}-{phase}");
            let mut mw = json!({"strategy": strategy});
            match phase {
                "pre" => mw["pre"] = entry("fillRequest"),
                "resp" => mw["response"] = entry("fillResponse"),
                _ => {}
            }
            let mut def: Value = js_api(&id, target, "quickjs", mw);
            if phase == "virt" {
                def["version_data"] = file_endpoint("fillEndpoint", &js);
            }
            write_api(dir, &id, &def);
        }
    }
}

fn path(strategy: &str, phase: &str) -> String {
    let last = if phase == "virt" { "v" } else { "x" };
    format!("/{strategy}-{phase}/{last}")
}

fn ask(addr: std::net::SocketAddr, path: &str, case: &str) -> Got {
    send(addr, "GET", path, &[("X-Oom", case)], b"")
}

/// In every strategy and phase, running QuickJS's heap out fails the
/// request (500), counted as `out_of_memory` (not `threw`, `internal` or
/// `bad_answer`), logged with the limit, and the next request is served.
#[test]
fn a_quickjs_heap_run_out_is_out_of_memory_in_every_strategy_and_phase() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, rec) = recorder();
    write_apis(d, &format!("http://{up}"));
    let log = d.join("gateway.log");
    // One worker: the request after a failed one meets the same context.
    let args = [
        "--threads",
        "1",
        "--secret",
        SECRET,
        "--jsvm-memory",
        LIMIT,
        "--jsvm-timeout",
        "60s",
    ];
    let (child, addr) = spawn_binary_with(d, "127.0.0.1:0", &log, &args);

    for strategy in STRATEGIES {
        for phase in PHASES {
            let path = path(strategy, phase);
            for case in CASES {
                let what = format!("{strategy} {phase} {case}");
                let got = ask(addr, &path, case);
                assert_eq!(got.status, 500, "{what}: {}", got.text());
                let got = ask(addr, &path, "");
                assert_eq!(got.status, 200, "{what}: the next request: {}", got.text());
                // The answer the script made, whole.
                let text = "\u{e9}".repeat(2048);
                match phase {
                    "pre" => {
                        let seen = rec.last();
                        assert_eq!(seen.headers["x-served"], "yes", "{what}");
                        assert_eq!(seen.body, text.as_bytes(), "{what}");
                    }
                    "resp" => assert_eq!(got.headers["x-served"], "yes", "{what}"),
                    _ => assert_eq!(got.text(), text, "{what}"),
                }
            }
        }
    }

    let control = Control {
        addr,
        secret: SECRET.into(),
    };
    let counts = error_counts(&control);
    let mut want = BTreeMap::new();
    for strategy in STRATEGIES {
        for phase in PHASES {
            let id = format!("{strategy}-{phase}");
            want.insert((id, "out_of_memory".to_string()), CASES.len() as u64);
        }
    }
    stop_binary(child);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(counts, want, "{text}");

    // One line per failure, saying what happened and naming the limit.
    assert!(!text.contains("panicked"), "{text}");
    for strategy in STRATEGIES {
        for phase in PHASES {
            let api = format!("API {strategy}-{phase}: ");
            let lines = text
                .lines()
                .filter(|l| l.contains(&api) && l.contains("(out_of_memory)"))
                .filter(|l| l.contains("stopped at the jsvm memory limit (16 MiB)"))
                .count();
            assert_eq!(lines, CASES.len(), "{api}\n{text}");
        }
    }
}
