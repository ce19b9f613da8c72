//! The wasm driver through the middleware contract: definitions loaded by
//! the real config loader, real modules (the SDK-built plugins from
//! `plugins/add-header-wasm`, and `.wat` fault modules), chains instantiated
//! and run as a worker runs them. What the request looks like afterwards is
//! what the proxy would send upstream.
#![cfg(feature = "wasm")]

mod wasm_common;

use std::path::PathBuf;
use std::time::Duration;

use gateway::middleware::{Flow, MwRequest};
use gateway::wasm::WasmLimits;
use http::Method;
use serde_json::json;
use wasm_common::{fixture, load_error, request, sdk_module, spec_of, wasm_api, Worker};

fn probe_worker(config: serde_json::Value, limits: WasmLimits) -> Worker {
    let probe = sdk_module("probe.wasm");
    let mut def = wasm_api("probe", "/probe/", "127.0.0.1:9", &[(&probe, "Probe")]);
    def["config_data"] = config;
    Worker::new(&spec_of(&def), limits)
}

fn probe(mode: &str) -> MwRequest {
    request(
        Method::GET,
        "/probe/x?a=1",
        &[("host", "gw.example"), ("x-probe", mode)],
        "",
    )
}

fn header<'a>(req: &'a MwRequest, name: &str) -> &'a str {
    req.headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", req.headers))
        .to_str()
        .unwrap()
}

#[test]
fn the_sdk_plugin_sets_the_seeds_header_replacing_a_client_value() {
    let module = sdk_module("add_header_wasm.wasm");
    let spec = spec_of(&wasm_api(
        "w",
        "/wasm/",
        "127.0.0.1:9",
        &[(&module, "AddHeader")],
    ));
    let w = Worker::new(&spec, WasmLimits::default());
    for sent in [None, Some("from-client")] {
        let headers: Vec<(&str, &str)> = sent.iter().map(|v| ("x-custom-wasm", *v)).collect();
        let mut req = request(Method::GET, "/wasm/hello/", &headers, "");
        assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
        let values: Vec<_> = req.headers.get_all("x-custom-wasm").iter().collect();
        assert_eq!(values, ["hello-from-wasm"], "sent {sent:?}");
        assert_eq!(req.path(), "/wasm/hello/");
    }
    // Every call is timed into the API's histogram, as for the other drivers.
    let summaries = w.stats.summaries();
    assert_eq!(summaries.len(), 1, "{summaries:?}");
    assert_eq!(
        (summaries[0].middleware.as_str(), summaries[0].count),
        ("AddHeader", 2)
    );
}

#[test]
fn header_map_calls_read_and_edit_headers_and_pseudo_headers() {
    let w = probe_worker(json!(null), WasmLimits::default());
    let mut req = probe("headers");
    req.headers.insert("x-in", "42".parse().unwrap());
    req.headers.insert("x-remove", "bye".parse().unwrap());
    assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
    assert_eq!(header(&req, "x-out"), "got:42");
    assert!(req.headers.get("x-remove").is_none());
    let added: Vec<_> = req.headers.get_all("x-added").iter().collect();
    assert_eq!(added, ["one", "two"]);
    assert_eq!(header(&req, "x-seen-path"), "/probe/x?a=1");
    assert_eq!(header(&req, "x-seen-method"), "GET");
    assert_eq!(header(&req, "x-seen-authority"), "gw.example");
    // get-all lists pseudo-headers first, then the real ones.
    let all = header(&req, "x-all");
    assert!(
        all.starts_with(":method :path :scheme :authority host x-probe"),
        "{all}"
    );
}

#[test]
fn pseudo_header_writes_change_the_path_query_and_method() {
    let w = probe_worker(json!(null), WasmLimits::default());
    let mut req = probe("rewrite");
    assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
    assert_eq!(req.path(), "/rewritten/");
    assert_eq!(req.query(), Some("by=wasm"));
    assert_eq!(req.method, Method::PUT);
}

#[test]
fn a_local_response_answers_the_request() {
    let w = probe_worker(json!(null), WasmLimits::default());
    match w.run(&mut probe("respond")) {
        Ok(Flow::Respond(r)) => {
            assert_eq!(r.status, 403);
            assert_eq!(r.headers["x-why"], "probe");
            assert_eq!(&r.body[..], b"denied by wasm");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_body_is_readable_and_replaceable() {
    let w = probe_worker(json!(null), WasmLimits::default());
    let big = "abc".repeat(100_000);
    let mut req = request(Method::POST, "/probe/", &[("x-probe", "body")], &big);
    assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
    assert_eq!(req.body, big.to_uppercase().as_bytes());
    assert_eq!(header(&req, "x-body-len"), "300000");
}

#[test]
fn properties_configuration_time_and_logging_reach_the_module() {
    let w = probe_worker(json!({"greeting": "hi"}), WasmLimits::default());
    let mut req = probe("context");
    assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
    assert_eq!(header(&req, "x-root-id"), "Probe");
    assert_eq!(header(&req, "x-config"), r#"{"greeting":"hi"}"#);
    let secs: u64 = header(&req, "x-time").parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(now) < 3600, "module time {secs}, host {now}");
}

#[test]
fn a_configuration_the_plugin_rejects_fails_the_load_naming_config_data() {
    let probe = sdk_module("probe.wasm");
    let mut def = wasm_api("p", "/p/", "127.0.0.1:9", &[(&probe, "Probe")]);
    def["config_data"] = json!("reject-me");
    let e = gateway::wasm::load(&spec_of(&def), &WasmLimits::default())
        .err()
        .expect("refused");
    assert_eq!(e.field, "config_data");
    assert!(e.message.contains("rejected its configuration"), "{e}");
}

/// Each fault answers its own request with an error, the instance is
/// replaced (the request counter starts again at 1), and the next request
/// works.
#[test]
fn a_panic_a_runaway_loop_and_runaway_memory_fail_only_their_request() {
    let limits = WasmLimits {
        timeout: Duration::from_millis(200),
        memory: 16 << 20,
    };
    let w = probe_worker(json!(null), limits);
    for (fault, says) in [
        ("panic", "unreachable"),
        ("loop", "wasm timeout"),
        ("grow", "memory"),
    ] {
        let mut ok = probe("none");
        assert!(w.run(&mut ok).is_ok());
        assert_ne!(header(&ok, "x-served"), "0");
        let err = w.run(&mut probe(fault)).expect_err(fault);
        assert!(err.message().contains(says), "{fault}: {err}");
        assert!(err.message().contains("probe.wasm"), "{fault}: {err}");
        let mut next = probe("none");
        assert!(w.run(&mut next).is_ok(), "after {fault}");
        assert_eq!(header(&next, "x-served"), "1", "after {fault}");
    }
}

#[test]
fn a_thousand_traps_in_a_row_leave_the_worker_serving() {
    let module = fixture("trap.wat");
    let spec = spec_of(&wasm_api("t", "/t/", "127.0.0.1:9", &[(&module, "Trap")]));
    let w = Worker::new(&spec, WasmLimits::default());
    for i in 0..1000 {
        let mut bad = request(Method::GET, "/t/", &[("x-fault", "1")], "");
        let err = w.run(&mut bad).expect_err("traps");
        assert!(err.message().contains("unreachable"), "{i}: {err}");
        // The request the module failed on is still whole for the log.
        assert_eq!(bad.headers["x-fault"], "1");
    }
    assert!(w.run(&mut request(Method::GET, "/t/", &[], "")).is_ok());
}

#[test]
fn wat_modules_that_loop_or_grow_fail_their_request_and_the_next_works() {
    let limits = WasmLimits {
        timeout: Duration::from_millis(100),
        memory: 4 << 20,
    };
    for (file, says) in [("loop.wat", "wasm timeout"), ("grow.wat", "memory")] {
        let module = fixture(file);
        let spec = spec_of(&wasm_api("f", "/f/", "127.0.0.1:9", &[(&module, "Fault")]));
        let w = Worker::new(&spec, limits);
        let err = w
            .run(&mut request(Method::GET, "/f/", &[("x-fault", "1")], ""))
            .expect_err(file);
        assert!(err.message().contains(says), "{file}: {err}");
        assert!(
            w.run(&mut request(Method::GET, "/f/", &[], "")).is_ok(),
            "{file}"
        );
    }
}

/// The calls a module sees per request (`lifecycle.wat` records each with
/// its arguments): order, context ids, `num_headers`, `end_of_stream`, and
/// when the body call happens.
#[test]
fn each_request_gets_the_abis_calls_in_order_with_their_arguments() {
    let module = fixture("lifecycle.wat");
    let spec = spec_of(&wasm_api("l", "/l/", "127.0.0.1:9", &[(&module, "Calls")]));
    let w = Worker::new(&spec, WasmLimits::default());
    let calls = |req: &MwRequest| -> Vec<String> {
        req.headers
            .get_all("x-calls")
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect()
    };
    // No body: the headers end the stream and no body call follows.
    // num_headers counts the request as it arrived: :method, :path,
    // :scheme, :authority (from host), then host and x-a.
    let mut req = request(Method::GET, "/l/", &[("host", "h"), ("x-a", "1")], "");
    assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
    assert_eq!(
        calls(&req),
        ["create 2 1", "headers 2 6 1", "done 2", "delete 2"]
    );
    // A body: the body call gets its length, at the end of the stream.
    let mut req = request(Method::POST, "/l/", &[], "hello");
    assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
    assert_eq!(
        calls(&req),
        [
            "create 3 1",
            "headers 3 3 0",
            "body 3 5 1",
            "done 3",
            "delete 3"
        ]
    );
    // A local response from the headers phase: no body call.
    let mut req = request(Method::POST, "/l/", &[("x-respond", "1")], "hello");
    let flow = w.run(&mut req).unwrap();
    assert!(matches!(&flow, Flow::Respond(r) if r.status == 403));
    assert_eq!(
        calls(&req),
        ["create 4 1", "headers 4 4 0", "done 4", "delete 4"]
    );
    // The headers phase gave a bodiless request a body: the body call
    // sees the body as it is now.
    let mut req = request(Method::POST, "/l/", &[("x-set-body", "1")], "");
    assert!(matches!(w.run(&mut req), Ok(Flow::Continue)));
    assert_eq!(
        calls(&req),
        [
            "create 5 1",
            "headers 5 4 1",
            "body 5 3 1",
            "done 5",
            "delete 5"
        ]
    );
    assert_eq!(&req.body[..], b"abc");
}

#[test]
fn unimplemented_calls_return_the_abis_unimplemented_status() {
    let module = fixture("unimplemented.wat");
    let spec = spec_of(&wasm_api("u", "/u/", "127.0.0.1:9", &[(&module, "U")]));
    let w = Worker::new(&spec, WasmLimits::default());
    let mut req = request(Method::GET, "/u/", &[], "");
    assert!(w.run(&mut req).is_ok());
    assert_eq!(header(&req, "x-status"), "unimplemented");
}

#[test]
fn modules_that_cannot_run_fail_the_load_naming_the_file_and_why() {
    for (file, says) in [
        ("no_compile.wat", "does not compile"),
        ("missing_import.wat", "env.proxy_teleport"),
        ("wasi_import.wat", "wasi_snapshot_preview1.fd_write"),
        ("no_context_create.wat", "proxy_on_context_create"),
        ("start_trap.wat", "proxy_on_vm_start"),
        (
            "headers_global.wat",
            "exports proxy_on_request_headers as a global; the host uses it as a function",
        ),
        (
            "memory_function.wat",
            "exports memory as a function; the host uses it as a linear memory",
        ),
        ("does_not_exist.wasm", "cannot read"),
    ] {
        let e = load_error(&fixture(file));
        assert_eq!(e.field, "custom_middleware.pre[0].path", "{file}: {e}");
        assert!(e.message.contains(file), "{file}: {e}");
        assert!(e.message.contains(says), "{file}: {e}");
    }
    // Not a module at all: a native plugin's source file.
    let e = load_error(&fixture("../fixtures/layout.c"));
    assert!(e.message.contains("does not compile"), "{e}");
}

#[test]
fn a_start_that_exceeds_the_memory_limit_fails_the_load() {
    let probe = sdk_module("probe.wasm");
    let spec = spec_of(&wasm_api("m", "/m/", "127.0.0.1:9", &[(&probe, "Probe")]));
    let tiny = WasmLimits {
        timeout: Duration::from_secs(1),
        memory: 64 << 10,
    };
    let e = gateway::wasm::load(&spec, &tiny).err().expect("refused");
    assert_eq!(e.field, "custom_middleware.pre[0].path");
    assert!(e.message.contains("probe.wasm"), "{e}");
    assert!(e.message.contains("--wasm-memory"), "{e}");
}

#[test]
fn a_module_flooding_headers_gets_a_fault_naming_the_bound() {
    let module = fixture("header_flood.wat");
    let spec = spec_of(&wasm_api("f", "/f/", "127.0.0.1:9", &[(&module, "Flood")]));
    let w = Worker::new(&spec, WasmLimits::default());
    for mode in ["add", "pairs", "local"] {
        let err = w
            .run(&mut request(Method::GET, "/f/", &[("x-flood", mode)], ""))
            .expect_err(mode);
        assert!(
            err.message().contains("more than 1000 header values"),
            "{mode}: {err}"
        );
        assert!(err.message().contains("header_flood.wat"), "{mode}: {err}");
    }
    // Within the count, one 64 KiB buffer handed over 900 times: 59 MB
    // of the host's for 64 KiB of the module's. The call stops at 1 MiB.
    let err = w
        .run(&mut request(Method::GET, "/f/", &[("x-flood", "big")], ""))
        .expect_err("big");
    assert!(
        err.message()
            .contains("more than 1048576 bytes (1 MiB) of header names and values in one call"),
        "{err}"
    );
    // The instance is made again after the trap; the next request passes.
    let mut ok = request(Method::GET, "/f/", &[], "");
    assert!(w.run(&mut ok).is_ok());
}

/// `--wasm-memory` bounded each memory by itself and tables not at all: four
/// memories of 3 MiB passed an 8 MiB limit, and a table of 20 million
/// elements took 160 MB. Now both are charged to one budget.
#[test]
fn memories_and_tables_share_the_instances_memory_limit() {
    let limits = WasmLimits {
        timeout: Duration::from_secs(1),
        memory: 8 << 20,
    };
    let module = fixture("memories_and_tables.wat");
    let spec = spec_of(&wasm_api("m", "/m/", "127.0.0.1:9", &[(&module, "M")]));
    let w = Worker::new(&spec, limits);
    for mode in ["memories", "table"] {
        let err = w
            .run(&mut request(Method::GET, "/m/", &[("x-grow", mode)], ""))
            .expect_err(mode);
        assert!(err.message().contains("--wasm-memory"), "{mode}: {err}");
        assert!(
            err.message().contains("memories_and_tables.wat"),
            "{mode}: {err}"
        );
        assert!(
            w.run(&mut request(Method::GET, "/m/", &[], "")).is_ok(),
            "after {mode}"
        );
    }
}

#[test]
fn a_module_with_more_memories_than_an_instance_may_have_fails_the_load() {
    let e = load_error(&fixture("nine_memories.wat"));
    assert_eq!(e.field, "custom_middleware.pre[0].path", "{e}");
    assert!(e.message.contains("nine_memories.wat"), "{e}");
    assert!(e.message.contains("9 memories"), "{e}");
}

/// A module whose `proxy_on_vm_start` loops forever (so every start in that
/// window costs a wasm timeout) while the wall clock is in `[from, until)`,
/// nanoseconds since the epoch; `x-fault` makes a request trap.
fn module_that_cannot_start_between(dir: &std::path::Path, from: u128, until: u128) -> PathBuf {
    let wat = format!(
        r#"(module
  (import "env" "proxy_get_current_time_nanoseconds" (func $now (param i32) (result i32)))
  (import "env" "proxy_get_header_map_value"
    (func $get (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "x-fault")
  (global $bump (mut i32) (i32.const 1024))
  (func (export "malloc") (param $n i32) (result i32)
    (global.get $bump)
    (global.set $bump (i32.add (global.get $bump) (local.get $n))))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32)
    (drop (call $now (i32.const 8)))
    (if (i32.and (i64.ge_u (i64.load (i32.const 8)) (i64.const {from}))
                 (i64.lt_u (i64.load (i32.const 8)) (i64.const {until})))
      (then (loop $forever (br $forever))))
    (i32.const 1))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (if (i32.eqz (call $get (i32.const 0) (i32.const 16) (i32.const 7) (i32.const 64) (i32.const 68)))
      (then unreachable))
    (i32.const 0)))"#
    );
    let path = dir.join("cannot_start.wat");
    std::fs::write(&path, wat).unwrap();
    path
}

fn nanos_now() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn sleep_until(nanos: u128) {
    let now = nanos_now();
    if nanos > now {
        std::thread::sleep(Duration::from_nanos((nanos - now) as u64));
    }
}

/// A start that fails on a worker (F4: a worker's first instance; F3: the
/// instance replacing one that faulted) is logged and retried later, not on
/// every request: meanwhile requests fail fast with a message saying why;
/// once the module can start again, the entry serves again. Before, a
/// failed first start failed the API on that worker until a restart, and a
/// failed restart was retried (a wasm timeout each) by every request.
#[test]
fn a_start_that_fails_on_a_worker_is_retried_later_and_requests_fail_fast_meanwhile() {
    use gateway::middleware::MwErrorKind;
    let limits = WasmLimits {
        timeout: Duration::from_millis(100),
        memory: 16 << 20,
    };
    let dir = tempfile::tempdir().unwrap();
    let ok = || request(Method::GET, "/s/", &[], "");
    // The load must start the module before the window opens; a load
    // slower than the margin (a very loaded machine) tries a wider one.
    for margin_ms in [1_500u128, 6_000, 20_000] {
        let from = nanos_now() + margin_ms * 1_000_000;
        let until = from + 3_000_000_000;
        let module = module_that_cannot_start_between(dir.path(), from, until);
        let spec = spec_of(&wasm_api("s", "/s/", "127.0.0.1:9", &[(&module, "S")]));
        let Ok(factory) = gateway::wasm::load(&spec, &limits) else {
            continue;
        };
        let ready = Worker::from_factory(&spec, &*factory);
        if nanos_now() >= from {
            continue;
        }
        sleep_until(from);

        // F4: this worker's first start fails; the chain is still built.
        let late = Worker::from_factory(&spec, &*factory);
        let err = late.run(&mut ok()).expect_err("no instance yet");
        assert_eq!(err.kind(), MwErrorKind::NotLoaded, "{err}");
        assert!(
            err.message().contains("is not running on this worker"),
            "{err}"
        );
        assert!(err.message().contains("proxy_on_vm_start"), "{err}");
        assert!(err.message().contains("cannot_start.wat"), "{err}");

        // F3: a fault, and the restart after it fails.
        let err = ready
            .run(&mut request(Method::GET, "/s/", &[("x-fault", "1")], ""))
            .expect_err("traps");
        assert_eq!(err.kind(), MwErrorKind::PluginFault, "{err}");
        let err = ready.run(&mut ok()).expect_err("restart failed");
        assert!(
            err.message().contains("is not running on this worker"),
            "{err}"
        );
        assert!(err.message().contains("wasm timeout"), "{err}");

        // Both serve again once the module starts (a hang guard, not a
        // timing: retries back off up to a minute).
        sleep_until(until);
        for w in [&ready, &late] {
            let deadline = std::time::Instant::now() + Duration::from_secs(120);
            while w.run(&mut ok()).is_err() {
                assert!(std::time::Instant::now() < deadline, "never restarted");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        return;
    }
    panic!("the load never finished before the window opened");
}

/// An action the ABI does not have was reported as "the module paused the
/// request", sending a plugin author after asynchronous calls.
#[test]
fn an_action_the_abi_does_not_have_is_reported_as_invalid() {
    let module = fixture("bad_action.wat");
    let spec = spec_of(&wasm_api("a", "/a/", "127.0.0.1:9", &[(&module, "A")]));
    let w = Worker::new(&spec, WasmLimits::default());
    for (headers, value) in [(&[][..], "7"), (&[("x-negative", "1")][..], "-1")] {
        let err = w
            .run(&mut request(Method::GET, "/a/", headers, ""))
            .expect_err(value);
        let said = format!("returned {value}, which is not an action of the ABI");
        assert!(err.message().contains(&said), "{value}: {err}");
        assert!(err.message().contains("bad_action.wat"), "{value}: {err}");
    }
}
