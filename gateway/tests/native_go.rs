//! Tyk Go plugins, source unchanged, through the Go adapter
//! (`plugins/go-adapter`): the real `go build -buildmode=c-shared` library
//! loaded by the real gateway in-process, real upstreams, real HTTP.
//!
//! Without a Go toolchain every test that needs one prints why it skipped
//! and passes; the seed comparison needs no Go.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::native::{
    go_plugin, go_plugin_bounded, go_toolchain, native_api, skip_without_go, workspace, write_def,
};
use common::{get, mock, recorder, send, start_gateway, start_gateway_with};
use gateway::server::GatewayConfig;
use serde_json::json;

const TYK_500: &str = "Internal Server Error";
const FIXTURE: &str = "gateway/tests/fixtures/go-plugin";

/// The seed text (Tyk's benchmark), found in a `shared/seed` directory
/// beside the checkout or one of its parents, as the workplace lays it out.
fn seed() -> Option<String> {
    workspace().ancestors().find_map(|dir| {
        let file = dir.join("shared/seed/000_162ae81325da51fd.txt");
        std::fs::read_to_string(file).ok()
    })
}

#[test]
fn main_go_is_the_seed_main_go_byte_for_byte() {
    let Some(seed) = seed() else {
        return common::native::skip(
            "main_go_is_the_seed_main_go_byte_for_byte: the seed text (shared/seed/) is not beside this checkout",
        );
    };
    // In the seed, the file follows its name on a line of its own and runs
    // to the end of the text.
    let start = seed
        .find("main.go\n\npackage main")
        .expect("the seed has main.go");
    let want = &seed[start + "main.go\n\n".len()..];
    let have = std::fs::read_to_string(workspace().join("plugins/go-add-header/main.go")).unwrap();
    assert_eq!(have, want);
}

/// An API whose pre chain is one Go handler, with optional config_data.
fn go_api(dir: &Path, id: &str, lib: &Path, handler: &str, target: &str) -> PathBuf {
    let api = native_api(id, &format!("/{id}/"), target, &[(lib, handler)], &[]);
    write_def(dir, id, &api)
}

#[test]
fn the_seed_main_go_adds_its_header_upstream() {
    let Some(lib) = go_plugin("plugins/go-add-header") else {
        return skip_without_go("the_seed_main_go_adds_its_header_upstream");
    };
    let dir = tempfile::tempdir().unwrap();
    go_api(
        dir.path(),
        "gopl-go",
        &lib,
        "AddHeader",
        &mock().to_string(),
    );
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    // Enough calls that both workers' threads enter the Go runtime.
    for _ in 0..50 {
        let got = get(gw.addr, "/gopl-go/hello/");
        assert_eq!(got.status, 200, "{}", got.text());
        let echo = got.json();
        assert_eq!(echo["path"], "/hello/");
        assert_eq!(echo["headers"]["X-Custom-Goplugin"], "hello-from-go-plugin");
    }
    gw.stop();
}

#[test]
fn a_go_handler_that_writes_answers_and_stops_the_chain() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_handler_that_writes_answers_and_stops_the_chain");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "deny", &lib, "Deny", &up.to_string());
    go_api(dir.path(), "echo", &lib, "Echo", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);

    let got = get(gw.addr, "/deny/x");
    assert_eq!(got.status, 403);
    assert_eq!(got.json()["error"], "X-Api-Key header is required");
    assert_eq!(got.headers["x-denied-by"], "go-plugin");
    assert_eq!(got.headers["content-type"], "application/json");
    assert_eq!(rec.count(), 0, "a written response must not be proxied");

    let got = send(gw.addr, "GET", "/deny/x", &[("X-Api-Key", "k")], b"");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(rec.count(), 1);

    // Write without WriteHeader: 200 and a sniffed type, as net/http does;
    // the handler saw the URL, Host and headers as Go's server gives them.
    let got = send(
        gw.addr,
        "GET",
        "/echo/a%20b?q=1",
        &[("User-Agent", "t/1")],
        b"",
    );
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["content-type"], "text/plain; charset=utf-8");
    let host = gw.addr.to_string();
    assert_eq!(
        got.text(),
        format!("GET /echo/a%20b?q=1 host={host} ua=t/1")
    );
    assert_eq!(rec.count(), 1);
    gw.stop();
}

#[test]
fn go_edits_of_headers_url_and_body_reach_the_upstream() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("go_edits_of_headers_url_and_body_reach_the_upstream");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "edit", &lib, "Edit", &up.to_string());
    go_api(dir.path(), "upper", &lib, "Upper", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);

    let headers = [("X-Set", "a"), ("X-Append", "first"), ("X-Delete", "gone")];
    let got = send(gw.addr, "GET", "/edit/p?q=1", &headers, b"");
    assert_eq!(got.status, 200, "{}", got.text());
    let seen = rec.last();
    // Pre runs before the listen path is stripped: the edited path keeps it.
    assert_eq!(seen.uri, "/edited/edit/p?added=yes&q=1");
    assert_eq!(seen.headers["x-set"], "replaced");
    let appended: Vec<_> = seen.headers.get_all("x-append").iter().collect();
    assert_eq!(appended, ["first", "added"]);
    assert!(!seen.headers.contains_key("x-delete"));

    // Body replaced through r.Body, big enough to span many reads.
    let body = "hello go ".repeat(20_000);
    let got = send(gw.addr, "POST", "/upper/", &[], body.as_bytes());
    assert_eq!(got.status, 200, "{}", got.text());
    let seen = rec.last();
    assert_eq!(seen.body, body.to_uppercase().as_bytes());
    assert_eq!(
        seen.headers["content-length"],
        body.len().to_string().as_str()
    );
    gw.stop();
}

/// The adapter reads up to 32 header lines into a per-thread buffer and
/// more through an array of its own, and remembers up to 256 canonical
/// names: on both sides of those lines, and far past them, a handler sees
/// every header value, repeated names in order.
#[test]
fn a_go_handler_sees_every_header_below_at_and_past_the_read_buffer() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_handler_sees_every_header_below_at_and_past_the_read_buffer");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "census", &lib, "Census", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let names: Vec<String> = (0..90).map(|i| format!("X-H-{i}")).collect();
    let values: Vec<String> = (0..90).map(|i| format!("v{i}")).collect();
    // Host is a line too (r.Host, not r.Header): 28 + X-Pick + 2 X-Multi
    // + Host is the buffer's 32; one fewer, one more, and far past it.
    for extra in [0, 27, 28, 29, 90] {
        let mut headers: Vec<(&str, &str)> = vec![("X-Pick", "X-Multi"), ("X-Multi", "a")];
        headers.extend(
            names
                .iter()
                .zip(&values)
                .take(extra)
                .map(|(n, v)| (n.as_str(), v.as_str())),
        );
        headers.push(("X-Multi", "b"));
        let got = send(gw.addr, "GET", "/census/", &headers, b"");
        assert_eq!(got.status, 200, "{extra}: {}", got.text());
        let seen = rec.last();
        assert_eq!(
            seen.headers["x-census"],
            (extra + 3).to_string().as_str(),
            "{extra}"
        );
        assert_eq!(seen.headers["x-picked"], "a,b", "{extra}");
        if extra > 0 {
            let last = format!("x-h-{}", extra - 1);
            assert_eq!(
                seen.headers[last.as_str()],
                format!("v{}", extra - 1).as_str()
            );
        }
    }
    // Past the 256 header names the adapter remembers: 4 x 90 new names,
    // the last one picked, still all seen.
    for round in 0..4 {
        let names: Vec<String> = (0..90).map(|i| format!("X-R{round}-{i}")).collect();
        let mut headers: Vec<(&str, &str)> = vec![("X-Pick", names[89].as_str())];
        headers.extend(names.iter().map(|n| (n.as_str(), "x")));
        let got = send(gw.addr, "GET", "/census/", &headers, b"");
        assert_eq!(got.status, 200, "round {round}: {}", got.text());
        let seen = rec.last();
        assert_eq!(seen.headers["x-census"], "91", "round {round}");
        assert_eq!(seen.headers["x-picked"], "x", "round {round}");
    }
    gw.stop();
}

#[test]
fn a_go_panic_is_tyks_500_and_the_gateway_keeps_serving() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_panic_is_tyks_500_and_the_gateway_keeps_serving");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "panic", &lib, "Panic", &up.to_string());
    go_api(dir.path(), "fine", &lib, "Edit", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for i in 0..200 {
        let got = get(gw.addr, "/panic/");
        assert_eq!(got.status, 500, "call {i}");
        assert_eq!(got.json()["error"], TYK_500);
        if i % 50 == 0 {
            assert_eq!(get(gw.addr, "/fine/").status, 200);
        }
    }
    assert_eq!(rec.count(), 4, "only the healthy API reached the upstream");
    gw.stop();
}

#[test]
fn a_blocked_go_handler_costs_its_request_a_500_after_the_budget() {
    // Built --bounded: inline handlers (the default) cannot be interrupted.
    let Some(lib) = go_plugin_bounded(FIXTURE) else {
        return skip_without_go("a_blocked_go_handler_costs_its_request_a_500_after_the_budget");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "sleep", &lib, "Sleep", &up.to_string());
    let gw = start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 2,
        jsvm_timeout: Duration::from_millis(300),
        ..GatewayConfig::default()
    });
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    // A handler that would sleep a minute: the budget answers long before
    // `send`'s 30 s limit, so this cannot pass by waiting it out.
    let got = send(gw.addr, "GET", "/sleep/", &[("X-Sleep", "60s")], b"");
    assert_eq!(got.status, 500);
    assert_eq!(got.json()["error"], TYK_500);
    assert_eq!(rec.count(), 0);
    // The worker is free again; a quick call through the same handler works.
    let got = send(gw.addr, "GET", "/sleep/", &[("X-Sleep", "1ms")], b"");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(rec.last().headers["x-slept"], "1ms");
    gw.stop();
}

#[test]
fn config_data_reaches_go_through_tyks_ctx_package() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("config_data_reaches_go_through_tyks_ctx_package");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let mut api = native_api("cfg", "/cfg/", &up.to_string(), &[(&lib, "Config")], &[]);
    api["config_data"] = json!({"greeting": "hello from config", "n": [1, 2]});
    write_def(dir.path(), "cfg", &api);
    go_api(dir.path(), "nocfg", &lib, "Config", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for _ in 0..3 {
        assert_eq!(get(gw.addr, "/cfg/").status, 200);
        let seen = rec.last();
        assert_eq!(seen.headers["x-greeting"], "hello from config");
        assert_eq!(seen.headers["x-api-id"], "cfg");
        assert_eq!(
            seen.headers["x-config"],
            r#"{"greeting":"hello from config","n":[1,2]}"#
        );
    }
    // Each API sees its own definition; no config_data is an empty object.
    assert_eq!(get(gw.addr, "/nocfg/").status, 200);
    let seen = rec.last();
    assert_eq!(seen.headers["x-api-id"], "nocfg");
    assert_eq!(seen.headers["x-config"], "{}");
    gw.stop();
}

#[test]
fn a_handler_the_library_lacks_fails_closed_listing_its_handlers() {
    let Some(lib) = go_plugin("plugins/go-add-header") else {
        return skip_without_go("a_handler_the_library_lacks_fails_closed_listing_its_handlers");
    };
    let dir = tempfile::tempdir().unwrap();
    go_api(dir.path(), "typo", &lib, "Addheader", &mock().to_string());
    let gw = start_gateway(dir.path());
    assert_eq!(gw.load_errors.len(), 1, "{:?}", gw.load_errors);
    let e = &gw.load_errors[0];
    assert_eq!(e.field, "custom_middleware.pre[0].name");
    assert!(e.message.contains("Go plugin adapter"), "{}", e.message);
    assert!(e.message.contains("[AddHeader]"), "{}", e.message);
    assert!(
        e.message.contains(r#"no handler "Addheader""#),
        "{}",
        e.message
    );
    assert!(
        e.message.contains(r#"did you mean "AddHeader"?"#),
        "{}",
        e.message
    );
    assert_ne!(get(gw.addr, "/typo/").status, 200, "never served open");
    gw.stop();
}

#[test]
fn a_go_package_that_does_not_compile_names_gos_error() {
    let Some(go) = go_toolchain() else {
        return skip_without_go("a_go_package_that_does_not_compile_names_gos_error");
    };
    let ws = workspace();
    let out = tempfile::tempdir().unwrap();
    let run = Command::new("bash")
        .arg(ws.join("plugins/go-adapter/build.sh"))
        .arg(ws.join("gateway/tests/fixtures/go-broken"))
        .arg(out.path().join("libbroken.so"))
        .env("GO", go)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{stderr}");
    assert!(stderr.contains("main.go:7:"), "{stderr}");
    assert!(stderr.contains("undefined: undefinedThing"), "{stderr}");
    assert!(stderr.contains("go build failed for"), "{stderr}");
    assert!(!out.path().join("libbroken.so").exists());
}

/// A Go library's package init() runs when it is loaded: one that panics
/// aborts the process, one that calls log.Fatal (os.Exit) ends it. Each used to take the whole gateway down at start-up; now
/// the library is tried in a child process first and only its APIs fail
/// closed, naming the file, the field and what Go printed, while a healthy
/// Go plugin loaded beside them serves.
#[test]
fn a_go_library_whose_init_ends_the_process_fails_only_its_apis() {
    let name = "a_go_library_whose_init_ends_the_process_fails_only_its_apis";
    let Some(good) = go_plugin(FIXTURE) else {
        return skip_without_go(name);
    };
    let panics = go_plugin("gateway/tests/fixtures/go-init-panic").unwrap();
    let exits = go_plugin("gateway/tests/fixtures/go-init-exit").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let up = up.to_string();
    go_api(dir.path(), "good", &good, "Edit", &up);
    go_api(dir.path(), "panics", &panics, "Handler", &up);
    go_api(dir.path(), "panics2", &panics, "Handler", &up);
    go_api(dir.path(), "exits", &exits, "Handler", &up);
    let gw = start_gateway(dir.path());
    let mut errors: Vec<_> = gw.load_errors.iter().collect();
    errors.sort_by(|a, b| a.file.cmp(&b.file));
    assert_eq!(errors.len(), 3, "{errors:?}");
    for e in &errors {
        assert_eq!(e.field, "custom_middleware.pre[0].path", "{e:?}");
        assert!(e.message.contains("cannot load library"), "{e:?}");
    }
    assert!(errors[0].file.ends_with("exits.json"), "{errors:?}");
    assert!(
        errors[0].message.contains("libgo_init_exit.so"),
        "{errors:?}"
    );
    assert!(
        errors[0].message.contains("exited with status 1"),
        "{errors:?}"
    );
    assert!(
        errors[0]
            .message
            .contains("init: cannot reach the config service"),
        "{errors:?}"
    );
    for e in &errors[1..] {
        assert!(e.message.contains("libgo_init_panic.so"), "{e:?}");
        assert!(e.message.contains("SIGABRT"), "{e:?}");
        assert!(
            e.message.contains("panic: init boom: no config file"),
            "{e:?}"
        );
    }
    for path in ["/panics/", "/panics2/", "/exits/"] {
        let got = get(gw.addr, path);
        assert_eq!(got.status, 500, "{path}: {}", got.text());
        assert_eq!(got.json()["error"], TYK_500);
    }
    assert_eq!(rec.count(), 0, "a failed API never reaches the upstream");
    let got = get(gw.addr, "/good/x");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(rec.last().headers["x-set"], "replaced");
    gw.stop();
}

/// Two Go libraries in one gateway: each `-buildmode=c-shared` library
/// brings a Go runtime of its own (scheduler, collector, signal handlers
/// chained one to the other), on the same worker threads. Both serve at
/// once from several clients, one library serves two APIs, and a nil
/// pointer dereference in one (a SIGSEGV Go turns into a panic, whichever
/// runtime's handler the kernel calls first) is a 500 for that request
/// only.
#[test]
fn two_go_libraries_serve_side_by_side_in_one_gateway() {
    let name = "two_go_libraries_serve_side_by_side_in_one_gateway";
    let (Some(seed), Some(fixture)) = (go_plugin("plugins/go-add-header"), go_plugin(FIXTURE))
    else {
        return skip_without_go(name);
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let up = up.to_string();
    go_api(dir.path(), "seed", &seed, "AddHeader", &up);
    go_api(dir.path(), "edit", &fixture, "Edit", &up);
    go_api(dir.path(), "census", &fixture, "Census", &up);
    go_api(dir.path(), "nil", &fixture, "NilDeref", &up);
    let gw = start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 2,
        ..GatewayConfig::default()
    });
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let addr = gw.addr;
    std::thread::scope(|s| {
        for client in 0..4 {
            s.spawn(move || {
                for i in 0..100 {
                    let path = ["/seed/", "/edit/", "/census/", "/nil/"][(client + i) % 4];
                    let got = get(addr, path);
                    let want = if path == "/nil/" { 500 } else { 200 };
                    assert_eq!(got.status, want, "{path} call {i}: {}", got.text());
                }
            });
        }
    });
    assert_eq!(
        rec.count(),
        300,
        "every call but the faulting ones went upstream"
    );
    assert_eq!(get(addr, "/seed/").status, 200);
    assert_eq!(
        rec.last().headers["x-custom-goplugin"],
        "hello-from-go-plugin"
    );
    gw.stop();
}

/// `rw.WriteHeader` as net/http's server takes it: a code outside
/// 100..999 panics (Go's "invalid WriteHeader code"), so the request gets
/// 500 instead of the 200 a later `Write` made of it; an informational
/// code (103 Early Hints) is not the answer's status, so the `Write` after
/// it answers 200 with the body (it was refused as a status, a 500).
#[test]
fn a_go_handlers_status_is_taken_as_net_http_takes_it() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_handlers_status_is_taken_as_net_http_takes_it");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "hints", &lib, "Hints", &up.to_string());
    go_api(dir.path(), "status", &lib, "Status", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);

    let got = get(gw.addr, "/hints/");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(got.text(), "after hints");
    assert_eq!(got.headers["link"], "</style.css>; rel=preload");

    for (code, want) in [
        ("0", 500),
        ("99", 500),
        ("1000", 500),
        ("103", 200),
        ("418", 418),
    ] {
        let got = send(gw.addr, "GET", "/status/", &[("X-Status", code)], b"");
        assert_eq!(got.status, want, "WriteHeader({code}): {}", got.text());
        if want == 500 {
            assert_eq!(got.json()["error"], TYK_500, "WriteHeader({code})");
        } else {
            assert_eq!(got.text(), "written", "WriteHeader({code})");
        }
    }
    assert_eq!(rec.count(), 0, "every one answered, none proxied");
    gw.stop();
}

/// Tyk's response writer is an `http.Flusher`, and plugins assert it
/// unchecked: `rw.(http.Flusher).Flush()` panicked here (a 500) where Tyk
/// answers.
#[test]
fn a_go_handler_can_flush_as_in_tyk() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_handler_can_flush_as_in_tyk");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "flush", &lib, "Flushes", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let got = get(gw.addr, "/flush/");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(got.text(), "part one, part two");
    assert_eq!(rec.count(), 0);
    gw.stop();
}

/// Response headers as net/http's server writes them: CR and LF in a value
/// become spaces (no header can be injected), a name that is not a token
/// is dropped. The answer was refused whole (500) where Tyk sends it.
#[test]
fn a_go_handlers_answer_headers_are_written_as_net_http_writes_them() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_handlers_answer_headers_are_written_as_net_http_writes_them");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, _rec) = recorder();
    go_api(dir.path(), "raw", &lib, "RawValue", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let got = get(gw.addr, "/raw/");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(got.text(), "answered");
    assert_eq!(got.headers["x-echo"], "a  Injected: yes");
    assert!(!got.headers.contains_key("injected"), "{:?}", got.headers);
    assert!(
        got.headers.keys().all(|k| !k.as_str().contains("bad")),
        "{:?}",
        got.headers
    );
    gw.stop();
}

/// Tyk hands a Go plugin a body that rewinds when read to the end (its
/// nopCloserBuffer): a handler reading it twice (two helpers that each read
/// it) gets it whole both times. The second read got nothing here. The
/// upstream still gets the body untouched.
#[test]
fn a_go_handler_reads_the_body_twice_as_in_tyk() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_handler_reads_the_body_twice_as_in_tyk");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "twice", &lib, "ReadTwice", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let body = "x".repeat(100_000);
    let got = send(gw.addr, "POST", "/twice/", &[], body.as_bytes());
    assert_eq!(got.status, 200, "{}", got.text());
    let seen = rec.last();
    assert_eq!(seen.headers["x-first"], "100000");
    assert_eq!(seen.headers["x-second"], "100000");
    assert_eq!(seen.body, body.as_bytes());
    gw.stop();
}

/// Polls the API `cancelled` (handler Cancelled) until its count of ended
/// contexts is at least one; false after 100 tries.
fn some_context_ended(addr: std::net::SocketAddr, rec: &common::Recorder) -> bool {
    for _ in 0..100 {
        assert_eq!(get(addr, "/cancelled/").status, 200);
        if rec.last().headers["x-cancelled"] != "0" {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A request's context ends when its handler returns, as net/http's
/// server ends it: a goroutine the handler left waiting on `r.Context()`
/// stops. It waited for ever (the context was Background), one goroutine
/// and what it held kept per request.
#[test]
fn a_go_requests_context_ends_when_its_handler_returns() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_requests_context_ends_when_its_handler_returns");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "leave", &lib, "LeaveWaiter", &up.to_string());
    go_api(dir.path(), "cancelled", &lib, "Cancelled", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    assert_eq!(get(gw.addr, "/leave/").status, 200);
    assert!(
        some_context_ended(gw.addr, &rec),
        "the waiter never stopped"
    );
    gw.stop();
}

/// Built --bounded, a handler past the budget costs its request a 500 and
/// goes on on its own goroutine; its context now ends then, so a handler
/// waiting on `r.Context()` (a backend call made with it) stops. It waited
/// for ever: one goroutine lost per timed-out request.
#[test]
fn a_bounded_go_handler_past_its_budget_sees_its_context_end() {
    let Some(lib) = go_plugin_bounded(FIXTURE) else {
        return skip_without_go("a_bounded_go_handler_past_its_budget_sees_its_context_end");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "wait", &lib, "WaitDone", &up.to_string());
    go_api(dir.path(), "cancelled", &lib, "Cancelled", &up.to_string());
    let gw = start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        jsvm_timeout: Duration::from_millis(300),
        ..GatewayConfig::default()
    });
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let got = get(gw.addr, "/wait/");
    assert_eq!(got.status, 500, "{}", got.text());
    assert!(
        some_context_ended(gw.addr, &rec),
        "the handler never stopped"
    );
    gw.stop();
}

/// A goroutine a handler leaves writing to `rw` once the request's context
/// ends (after the handler returned; net/http forbids it) reaches nothing:
/// its writes are refused and its `Header()` is a map of its own. It wrote
/// into the answer the adapter was reading: within a few hundred requests
/// a late header reached the client, or the adapter's read of the header
/// lines panicked (slice bounds out of range) or Go threw "concurrent map
/// writes", either of which ended the gateway.
#[test]
fn a_goroutine_writing_to_rw_after_its_handler_returned_reaches_nothing() {
    let name = "a_goroutine_writing_to_rw_after_its_handler_returned_reaches_nothing";
    let (Some(inline), Some(bounded)) = (go_plugin(FIXTURE), go_plugin_bounded(FIXTURE)) else {
        return skip_without_go(name);
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "late", &inline, "LateWriter", &up.to_string());
    go_api(
        dir.path(),
        "late-b",
        &bounded,
        "LateWriter",
        &up.to_string(),
    );
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for path in ["/late/", "/late-b/"] {
        for i in 0..600 {
            let got = get(gw.addr, path);
            assert_eq!(got.status, 200, "{path} {i}: {}", got.text());
            assert_eq!(got.text(), "on time", "{path} {i}");
            assert_eq!(got.headers["x-now"], "1", "{path} {i}");
            assert!(!got.headers.contains_key("x-late"), "{path} {i}");
        }
    }
    assert_eq!(rec.count(), 0);
    gw.stop();
}

/// A Go plugin reads `config_data` as Tyk's `APIDefinition.ConfigData`, a
/// JSON object; Tyk refuses a definition where it is anything else. Here
/// such an API loaded and its handler read a nil map, as if there were no
/// configuration (a deny list read from it denies nothing): it now fails
/// closed, naming the field. An object, or none, serves.
#[test]
fn a_go_api_whose_config_data_is_not_an_object_fails_closed() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_api_whose_config_data_is_not_an_object_fails_closed");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let odd = [
        ("array", json!(["deny", "all"])),
        ("string", json!("{\"greeting\": \"hi\"}")),
        ("number", json!(7)),
    ];
    for (id, config) in &odd {
        let mut api = native_api(
            id,
            &format!("/{id}/"),
            &up.to_string(),
            &[(&lib, "Config")],
            &[],
        );
        api["config_data"] = config.clone();
        write_def(dir.path(), id, &api);
    }
    let mut api = native_api(
        "object",
        "/object/",
        &up.to_string(),
        &[(&lib, "Config")],
        &[],
    );
    api["config_data"] = json!({"greeting": "hi"});
    write_def(dir.path(), "object", &api);
    go_api(dir.path(), "none", &lib, "Config", &up.to_string());
    let gw = start_gateway(dir.path());
    assert_eq!(gw.load_errors.len(), odd.len(), "{:?}", gw.load_errors);
    for e in &gw.load_errors {
        assert_eq!(e.field, "config_data", "{e:?}");
        assert!(e.message.contains("APIDefinition.ConfigData"), "{e:?}");
    }
    for (id, _) in &odd {
        let got = get(gw.addr, &format!("/{id}/"));
        assert_eq!(got.status, 500, "{id}: {}", got.text());
    }
    assert_eq!(rec.count(), 0);
    assert_eq!(get(gw.addr, "/object/").status, 200);
    assert_eq!(rec.last().headers["x-greeting"], "hi");
    assert_eq!(get(gw.addr, "/none/").status, 200);
    gw.stop();
}

/// A path edit without a leading slash (`strings.TrimPrefix(r.URL.Path,
/// "/api/")` leaves "x", or "" for the listen path itself) goes upstream as
/// Tyk sends it, joined to the target with one slash: "/x" and "/". The
/// host refused it, a 500.
#[test]
fn a_go_path_edit_without_a_leading_slash_goes_upstream_as_in_tyk() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_path_edit_without_a_leading_slash_goes_upstream_as_in_tyk");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "relative", &lib, "Relative", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for (path, want) in [("/relative/x?q=1", "/x?q=1"), ("/relative/", "/")] {
        let got = get(gw.addr, path);
        assert_eq!(got.status, 200, "{path}: {}", got.text());
        assert_eq!(rec.last().uri, want, "{path}");
    }
    gw.stop();
}

/// A handler answering with over 2^20 header values: the adapter's read of
/// its answer panicked (slice bounds out of range, its index of header
/// lines) outside the handler's guard, and Go aborted the gateway. Any
/// panic in the adapter's own phases is now that request's 500, and the
/// gateway keeps serving.
#[test]
fn a_go_answer_flooded_with_headers_fails_its_request_only() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_answer_flooded_with_headers_fails_its_request_only");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "flood", &lib, "AnswerFlood", &up.to_string());
    go_api(dir.path(), "edit", &lib, "Edit", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for _ in 0..2 {
        let got = get(gw.addr, "/flood/");
        assert_eq!(got.status, 500, "{}", got.text());
        assert_eq!(got.json()["error"], TYK_500);
        assert_eq!(get(gw.addr, "/edit/").status, 200);
    }
    assert_eq!(rec.count(), 2);
    gw.stop();
}

/// A handler setting 900 request headers to one 64 KiB string (64 KiB of
/// Go's heap): the host copied each, 59 MB for the upstream. Past 1 MiB of
/// header text in one call the request now fails closed (500, nothing
/// proxied, counted as a plugin fault), and the next request is served.
#[test]
fn a_go_handler_naming_one_string_under_many_headers_fails_past_1_mib() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go(
            "a_go_handler_naming_one_string_under_many_headers_fails_past_1_mib",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "flood", &lib, "HeadFlood", &up.to_string());
    go_api(dir.path(), "edit", &lib, "Edit", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for _ in 0..2 {
        let got = get(gw.addr, "/flood/");
        assert_eq!(got.status, 500, "{}", got.text());
        assert_eq!(got.json()["error"], TYK_500);
        assert_eq!(get(gw.addr, "/edit/").status, 200);
    }
    assert_eq!(rec.count(), 2, "only the edits went upstream");
    let counts: Vec<_> = gw
        .stats
        .error_counts()
        .into_iter()
        .map(|e| (e.api_id, e.kind, e.count))
        .collect();
    assert_eq!(counts, [("flood".into(), "plugin_fault".into(), 2)]);
    gw.stop();
}

/// A handler panicking with a 4 MiB message: its request's 500 is logged
/// with the message's first 2,000 bytes (the whole message was one log
/// line per request), and the next request is served.
#[test]
fn a_go_panic_with_a_huge_message_is_cut_in_the_log() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_panic_with_a_huge_message_is_cut_in_the_log");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, _rec) = recorder();
    go_api(dir.path(), "big", &lib, "PanicBig", &up.to_string());
    go_api(dir.path(), "edit", &lib, "Edit", &up.to_string());
    let log = dir.path().join("gateway.log");
    let (child, addr) = common::spawn_binary(dir.path(), "0", &log);
    for _ in 0..2 {
        assert_eq!(get(addr, "/big/").status, 500);
        assert_eq!(get(addr, "/edit/").status, 200);
    }
    common::stop_binary(child);
    let text = std::fs::read_to_string(&log).unwrap();
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("start of it ppp"))
        .collect();
    assert_eq!(said.len(), 2, "{}", &text[..text.len().min(4000)]);
    for line in said {
        assert!(line.len() < 2600, "a line of {} bytes", line.len());
        assert!(line.contains("ppp..."), "{line}");
    }
}

/// Built --bounded, a handler that calls `runtime.Goexit()` never returns
/// and never panics: the call waited for the whole budget (here a minute,
/// past `send`'s 30 s limit) before its 500. It is now answered at once.
/// (Inline, Go aborts the process: see plugins/README.md.)
#[test]
fn a_bounded_go_handler_calling_goexit_is_answered_at_once() {
    let Some(lib) = go_plugin_bounded(FIXTURE) else {
        return skip_without_go("a_bounded_go_handler_calling_goexit_is_answered_at_once");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "goexit", &lib, "Goexit", &up.to_string());
    go_api(dir.path(), "edit", &lib, "Edit", &up.to_string());
    let gw = start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        jsvm_timeout: Duration::from_secs(60),
        ..GatewayConfig::default()
    });
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let got = get(gw.addr, "/goexit/");
    assert_eq!(got.status, 500, "{}", got.text());
    assert_eq!(got.json()["error"], TYK_500);
    assert_eq!(rec.count(), 0);
    assert_eq!(get(gw.addr, "/edit/").status, 200);
    gw.stop();
}

/// A Go library named as a response entry fails its API closed with a
/// reason a Go plugin's author can act on (the adapter has no response
/// phase, Tyk's Go response hooks are not supported); it told them to
/// rebuild against ABI 1.2 with the Rust SDK or the C header.
#[test]
fn a_go_library_as_a_response_entry_is_refused_saying_why() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_library_as_a_response_entry_is_refused_saying_why");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let mut api = native_api("resp", "/resp/", &up.to_string(), &[], &[]);
    api["custom_middleware"]["response"] = json!([{"name": "Edit", "path": lib.to_str().unwrap()}]);
    write_def(dir.path(), "resp", &api);
    let gw = start_gateway(dir.path());
    assert_eq!(gw.load_errors.len(), 1, "{:?}", gw.load_errors);
    let e = &gw.load_errors[0];
    assert_eq!(e.field, "custom_middleware.response[0].path", "{e:?}");
    assert!(e.message.contains("Go plugin adapter"), "{e:?}");
    assert!(e.message.contains("Go response hooks"), "{e:?}");
    assert_eq!(get(gw.addr, "/resp/").status, 500);
    assert_eq!(rec.count(), 0);
    gw.stop();
}

/// A body replaced through `r.Body` is read whole before it goes upstream
/// (Tyk streams it), so it is bounded as the gateway bounds a body held
/// for middleware, 32 MiB: past that (or a reader without end, which grew
/// the gateway's heap until the system killed it) the request gets 500.
/// At the bound it still goes.
#[test]
fn a_go_handlers_replaced_body_is_bounded() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_handlers_replaced_body_is_bounded");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "endless", &lib, "Endless", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let bound = (32 << 20).to_string();
    let got = send(gw.addr, "POST", "/endless/", &[("X-Length", &bound)], b"");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(rec.last().body.len(), 32 << 20);
    let past = ((32 << 20) + 1).to_string();
    for length in [Some(past.as_str()), None] {
        let headers: Vec<(&str, &str)> = length.map(|l| ("X-Length", l)).into_iter().collect();
        let got = send(gw.addr, "POST", "/endless/", &headers, b"");
        assert_eq!(got.status, 500, "{length:?}: {}", got.text());
        assert_eq!(got.json()["error"], TYK_500);
    }
    assert_eq!(rec.count(), 1);
    gw.stop();
}

/// Built --bounded, a body replaced through `r.Body` is read within the
/// budget: a reader that never ends (a pipe whose producer stalled) costs
/// its request a 500 at the budget. It was read after the bounded call, on
/// the worker, which it held for ever (the request never answered).
#[test]
fn a_bounded_go_handlers_stuck_replaced_body_is_bounded_by_the_budget() {
    let Some(lib) = go_plugin_bounded(FIXTURE) else {
        return skip_without_go(
            "a_bounded_go_handlers_stuck_replaced_body_is_bounded_by_the_budget",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "stuck", &lib, "StuckBody", &up.to_string());
    go_api(dir.path(), "upper", &lib, "Upper", &up.to_string());
    let gw = start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 1,
        jsvm_timeout: Duration::from_millis(300),
        ..GatewayConfig::default()
    });
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let got = send(gw.addr, "POST", "/stuck/", &[], b"body");
    assert_eq!(got.status, 500, "{}", got.text());
    assert_eq!(got.json()["error"], TYK_500);
    // The one worker serves on; a replaced body within the budget goes.
    let got = send(gw.addr, "POST", "/upper/", &[], b"body");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(rec.last().body, &b"BODY"[..]);
    gw.stop();
}

/// Tyk's `config_data_disabled` hides `config_data` from JS only: a Go
/// plugin's `ctx.GetDefinition(r)` is the whole definition, `ConfigData`
/// included. Here a Go handler got an empty map, as if the API had no
/// configuration (a deny list kept there denied nothing).
#[test]
fn config_data_disabled_hides_nothing_from_a_go_plugin_as_in_tyk() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("config_data_disabled_hides_nothing_from_a_go_plugin_as_in_tyk");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let mut api = native_api(
        "hidden",
        "/hidden/",
        &up.to_string(),
        &[(&lib, "Config")],
        &[],
    );
    api["config_data"] = json!({"greeting": "still here"});
    api["config_data_disabled"] = json!(true);
    write_def(dir.path(), "hidden", &api);
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    assert_eq!(get(gw.addr, "/hidden/").status, 200);
    let seen = rec.last();
    assert_eq!(seen.headers["x-greeting"], "still here");
    assert_eq!(seen.headers["x-config"], r#"{"greeting":"still here"}"#);
    gw.stop();
}

/// The adapter holds a handler's answer until it returns (Tyk streams it):
/// an answer is held up to 32 MiB, the bound on a replaced body. Past it
/// `Write` fails and the request gets 500; a handler writing until `Write`
/// fails (which grew the gateway's heap until the system killed it) stops
/// there. At the bound the answer goes whole.
#[test]
fn a_go_handlers_answer_is_bounded() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_handlers_answer_is_bounded");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "big", &lib, "BigAnswer", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let got = send(gw.addr, "GET", "/big/", &[("X-MiB", "32")], b"");
    assert_eq!(got.status, 200);
    assert_eq!(got.body.len(), 32 << 20);
    for mib in [Some("33"), None] {
        let headers: Vec<(&str, &str)> = mib.map(|m| ("X-MiB", m)).into_iter().collect();
        let got = send(gw.addr, "GET", "/big/", &headers, b"");
        assert_eq!(got.status, 500, "{mib:?}");
        assert_eq!(got.json()["error"], TYK_500);
    }
    assert_eq!(rec.count(), 0);
    gw.stop();
}

/// The adapter's code shares package main with the plugin's files: a
/// plugin declaring package-level names the adapter also used (`var debug`,
/// `var url`, `func equal`, `func view`, ... or a package the adapter
/// imports, which Go refuses beside a package-level name) failed to build
/// with "redeclared in this block", though it builds for Tyk. The adapter's
/// names and imports all start with gw now.
#[test]
fn a_go_plugin_may_use_any_package_level_name() {
    let Some(lib) = go_plugin("gateway/tests/fixtures/go-names") else {
        return skip_without_go("a_go_plugin_may_use_any_package_level_name");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "names", &lib, "Names", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    assert_eq!(get(gw.addr, "/names/").status, 200);
    let seen = rec.last();
    assert_eq!(
        seen.headers["x-names"],
        "[http://auth.internal/check] b never {} v1"
    );
    assert_eq!(seen.headers["x-api-id"], "names");
    gw.stop();
}

/// net/http sends the header as it stood when the status was written (the
/// first `WriteHeader`, or the first `Write`): changes to `rw.Header()`
/// after that are ignored. The adapter read the map when the handler
/// returned, so a header set after the status reached the client and one
/// deleted after it went missing.
#[test]
fn a_go_answers_headers_are_those_set_before_its_status() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_answers_headers_are_those_set_before_its_status");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "late", &lib, "LateHeaders", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for (via, status, body) in [("status", 403, "written"), ("write", 200, "body written")] {
        let got = send(gw.addr, "GET", "/late/", &[("X-Via", via)], b"");
        assert_eq!(got.status, status, "{via}");
        assert_eq!(got.text(), body, "{via}");
        assert_eq!(got.headers["x-early"], "1", "{via}");
        assert!(!got.headers.contains_key("x-after"), "{via}");
    }
    assert_eq!(rec.count(), 0);
    gw.stop();
}

/// An upstream that answers `proxied` with headers a Go handler also sets
/// (`X-Both`, a CORS header, `Content-Type`), recording what it saw.
fn answering_upstream() -> (std::net::SocketAddr, common::Recorder) {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    let rec = common::Recorder::default();
    let r = rec.clone();
    let addr = common::upstream_fn(move |req: http::Request<hyper::body::Incoming>| {
        let r = r.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = body.collect().await.unwrap().to_bytes();
            r.seen.lock().unwrap().push(common::Seen {
                method: parts.method,
                uri: parts.uri.to_string(),
                version: parts.version,
                headers: parts.headers,
                body,
            });
            let resp = http::Response::builder()
                .header("X-Both", "upstream")
                .header("X-Upstream", "yes")
                .header("Access-Control-Allow-Origin", "https://upstream.example")
                .header("Content-Type", "application/json")
                .body(Full::new(Bytes::from_static(b"proxied")))
                .unwrap();
            Ok::<_, std::convert::Infallible>(resp)
        }
    });
    (addr, rec)
}

fn all(got: &common::Got, name: &str) -> Vec<String> {
    got.headers
        .get_all(name)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect()
}

/// Headers a handler sets on `rw.Header()` without writing reach the
/// client on the proxied answer, as in Tyk (rw wraps the client's writer,
/// and its proxy's copyHeader `Add`s the upstream's values after them):
/// same name from both, the plugin's value first and the upstream's
/// after; a CORS header the plugin set replaces the upstream's
/// (removeDuplicateCORSHeader). They were dropped. Both request paths:
/// a GET (the chain runs in place) and a POST with a body (buffered).
#[test]
fn headers_a_go_handler_sets_without_writing_reach_the_proxied_answer() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go(
            "headers_a_go_handler_sets_without_writing_reach_the_proxied_answer",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = answering_upstream();
    go_api(dir.path(), "ch", &lib, "ClientHeaders", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for (method, body) in [("GET", &b""[..]), ("POST", &b"a body"[..])] {
        let got = send(gw.addr, method, "/ch/x", &[], body);
        assert_eq!(got.status, 200, "{method}: {}", got.text());
        assert_eq!(got.text(), "proxied", "{method}");
        assert_eq!(all(&got, "x-plugin"), ["from-plugin"], "{method}");
        assert_eq!(all(&got, "x-plugin-multi"), ["one", "two"], "{method}");
        assert_eq!(all(&got, "x-both"), ["plugin", "upstream"], "{method}");
        assert_eq!(all(&got, "x-upstream"), ["yes"], "{method}");
        assert_eq!(
            all(&got, "access-control-allow-origin"),
            ["https://plugin.example"],
            "{method}"
        );
        assert_eq!(
            all(&got, "content-type"),
            ["text/x-plugin", "application/json"],
            "{method}"
        );
        assert_eq!(all(&got, "content-length"), ["7"], "{method}");
    }
    assert_eq!(rec.count(), 2);
    // The headers are the client's: none went upstream.
    assert!(rec.last().headers.get("x-plugin").is_none());
    gw.stop();
}

/// Such headers are written as the adapter writes an answer's (as Go's
/// server does): CR and LF in a value become spaces, a name that is not a
/// token is dropped; a value with a NUL fails the request (500) and
/// nothing is proxied, as on the written-answer path.
#[test]
fn a_go_handlers_client_headers_are_cleaned_as_a_written_answers() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_handlers_client_headers_are_cleaned_as_a_written_answers");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = answering_upstream();
    go_api(dir.path(), "raw", &lib, "ClientHeadersRaw", &up.to_string());
    go_api(dir.path(), "nul", &lib, "ClientHeadersNul", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let got = get(gw.addr, "/raw/");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(got.text(), "proxied");
    assert_eq!(all(&got, "x-echo"), ["a  Injected: yes"]);
    assert_eq!(all(&got, "x-fine"), ["kept"]);
    assert!(!got.headers.contains_key("injected"), "{:?}", got.headers);
    assert!(
        got.headers.keys().all(|k| !k.as_str().contains("bad")),
        "{:?}",
        got.headers
    );
    assert_eq!(rec.count(), 1);
    let got = get(gw.addr, "/nul/");
    assert_eq!(got.status, 500, "{}", got.text());
    assert_eq!(got.json()["error"], TYK_500);
    assert_eq!(rec.count(), 1, "a failed request is not proxied");
    gw.stop();
}

/// Framing and hop-by-hop headers a handler sets without writing
/// (`Content-Length: 3`, `Transfer-Encoding: chunked`, `Connection:
/// close`, ...) never reach the proxied answer: its body is framed from
/// the upstream's, whole, and the connection stays open for the next
/// request. (In Tyk Go's server sends a plugin's Content-Length beside the
/// upstream's and cuts the body at the first.)
#[test]
fn framing_headers_a_go_handler_sets_without_writing_do_not_frame_the_answer() {
    use std::io::Write;
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go(
            "framing_headers_a_go_handler_sets_without_writing_do_not_frame_the_answer",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = answering_upstream();
    go_api(
        dir.path(),
        "fr",
        &lib,
        "ClientHeadersFraming",
        &up.to_string(),
    );
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let mut s = std::net::TcpStream::connect(gw.addr).unwrap();
    for i in 0..3 {
        write!(s, "GET /fr/{i} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let (head, body) = common::raw::read_framed_response(&mut s)
            .unwrap_or_else(|| panic!("request {i}: no answer on the kept-alive connection"));
        let head = head.to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert_eq!(body, b"proxied", "{head}");
        assert!(head.contains("x-framed: fine"), "{head}");
        assert!(head.contains("content-length: 7\r\n"), "{head}");
        for gone in [
            "content-length: 3",
            "transfer-encoding",
            "connection: close",
            "keep-alive",
            "upgrade",
        ] {
            assert!(!head.contains(gone), "{gone} in {head}");
        }
    }
    assert_eq!(rec.count(), 3);
    gw.stop();
}

/// A handler that sets more header values than an answer holds without
/// writing fails its request with 500 (the host refuses past 32,768
/// lines, and the adapter stops handing them over); the gateway serves on.
#[test]
fn a_go_handler_flooding_client_headers_fails_its_request_only() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_handler_flooding_client_headers_fails_its_request_only");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = answering_upstream();
    go_api(
        dir.path(),
        "flood",
        &lib,
        "ClientHeadersFlood",
        &up.to_string(),
    );
    go_api(dir.path(), "ch", &lib, "ClientHeaders", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for _ in 0..2 {
        let got = get(gw.addr, "/flood/");
        assert_eq!(got.status, 500, "{}", got.text());
        assert_eq!(got.json()["error"], TYK_500);
        assert!(got.headers.get("x-flood").is_none());
        let got = get(gw.addr, "/ch/");
        assert_eq!(got.status, 200);
        assert_eq!(all(&got, "x-plugin"), ["from-plugin"]);
    }
    assert_eq!(rec.count(), 2);
    gw.stop();
}

/// The upstream down: Tyk's error handler writes its 500 into the same
/// map the plugin's headers are in (`HandleError` `Set`s `Content-Type`
/// and `Add`s `X-Generator`), so they reach the client on the error
/// answer too; its own `Content-Type` wins.
#[test]
fn a_go_handlers_client_headers_ride_tyks_error_when_the_upstream_is_down() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go(
            "a_go_handlers_client_headers_ride_tyks_error_when_the_upstream_is_down",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let dead = common::dead_addr();
    go_api(
        dir.path(),
        "down",
        &lib,
        "ClientHeaders",
        &dead.addr().to_string(),
    );
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for (method, body) in [("GET", &b""[..]), ("POST", &b"a body"[..])] {
        let got = send(gw.addr, method, "/down/", &[], body);
        assert_eq!(got.status, 500, "{method}: {}", got.text());
        assert_eq!(
            got.json()["error"],
            "There was a problem proxying the request"
        );
        assert_eq!(all(&got, "x-plugin"), ["from-plugin"], "{method}");
        assert_eq!(all(&got, "x-both"), ["plugin"], "{method}");
        assert_eq!(all(&got, "content-type"), ["application/json"], "{method}");
        assert_eq!(all(&got, "x-generator"), ["tyk.io"], "{method}");
    }
    gw.stop();
}

/// A goroutine the handler left that keeps setting headers once the
/// handler returned (and did not write) reaches neither this proxied
/// answer nor another: rw is sealed on return, and what is sent is the
/// map as the handler left it. Inline and bounded.
#[test]
fn a_goroutine_setting_client_headers_after_return_reaches_nothing() {
    let name = "a_goroutine_setting_client_headers_after_return_reaches_nothing";
    let (Some(inline), Some(bounded)) = (go_plugin(FIXTURE), go_plugin_bounded(FIXTURE)) else {
        return skip_without_go(name);
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = answering_upstream();
    go_api(
        dir.path(),
        "late",
        &inline,
        "LateClientHeaders",
        &up.to_string(),
    );
    go_api(
        dir.path(),
        "late-b",
        &bounded,
        "LateClientHeaders",
        &up.to_string(),
    );
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for path in ["/late/", "/late-b/"] {
        for i in 0..300 {
            let got = get(gw.addr, path);
            assert_eq!(got.status, 200, "{path} {i}: {}", got.text());
            assert_eq!(got.text(), "proxied", "{path} {i}");
            assert_eq!(all(&got, "x-now"), ["1"], "{path} {i}");
            assert!(!got.headers.contains_key("x-late"), "{path} {i}");
        }
    }
    assert_eq!(rec.count(), 600);
    gw.stop();
}

/// `r.Method` edits go upstream, as in Tyk (its proxy sends the plugin's
/// `*http.Request`): GET becomes POST, an extension token goes as it is,
/// an empty method is GET (net/http's client). A method that is not a
/// token fails the request closed (500; Go's client refuses it too) and
/// nothing is proxied. The method was not carried at all.
#[test]
fn a_go_handlers_method_edit_goes_upstream() {
    let Some(lib) = go_plugin(FIXTURE) else {
        return skip_without_go("a_go_handlers_method_edit_goes_upstream");
    };
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    go_api(dir.path(), "m", &lib, "Method", &up.to_string());
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let cases = [
        ("GET", "POST", &b""[..], "POST"),
        ("GET", "PURGE", &b""[..], "PURGE"),
        ("DELETE", "", &b""[..], "GET"),
        ("PUT", "PATCH", &b"a body"[..], "PATCH"),
    ];
    for (i, (sent, set, body, want)) in cases.into_iter().enumerate() {
        let got = send(gw.addr, sent, "/m/x", &[("X-Method", set)], body);
        assert_eq!(got.status, 200, "{sent}->{set:?}: {}", got.text());
        assert_eq!(rec.count(), i + 1);
        let seen = rec.last();
        assert_eq!(seen.method.as_str(), want, "{sent}->{set:?}");
        assert_eq!(seen.body, body, "{sent}->{set:?}");
    }
    for bad in ["G ET", "(GET)", "GE/T"] {
        let got = send(gw.addr, "GET", "/m/x", &[("X-Method", bad)], b"");
        assert_eq!(got.status, 500, "{bad:?}: {}", got.text());
        assert_eq!(got.json()["error"], TYK_500);
    }
    assert_eq!(rec.count(), cases.len(), "a bad method is not proxied");
    gw.stop();
}
