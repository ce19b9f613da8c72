//! The `gateway` binary's log as a user reads it: plain sentences naming the
//! user's own files, each load problem once, each failed request once; and
//! `--listen` with a port alone or a host name.

mod common;

use std::path::Path;

use common::*;
use serde_json::{json, Value};

fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn js_mw(name: &str, path: &str) -> Value {
    json!({"driver": "otto", "pre": [{"name": name, "path": path}]})
}

/// `GET /tyk/stats` of a gateway started with `--secret s3cret`.
fn stats(addr: std::net::SocketAddr) -> Value {
    let got = send(
        addr,
        "GET",
        "/tyk/stats",
        &[("x-tyk-authorization", "s3cret")],
        b"",
    );
    serde_json::from_slice(&got.body).unwrap()
}

/// `script` (defining `mw`) as one API per engine in front of `target`:
/// `/<prefix>-boa/` and `/<prefix>-quickjs/`.
fn engine_apis(d: &Path, prefix: &str, script: &str, target: &str) {
    for engine in ["boa", "quickjs"] {
        let mut mw = js_mw("mw", script);
        mw["engine"] = json!(engine);
        let id = format!("{prefix}-{engine}");
        write_api(d, &id, &api_json(&id, &format!("/{id}/"), target, true, mw));
    }
}

/// A script's `log` cannot forge log lines: its control characters are
/// escaped, on both engines (Tyk's logrus quotes such a message).
#[test]
fn a_scripts_log_message_stays_on_its_own_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, _rec) = recorder();
    let t = format!("http://{up}");
    let forger = write_file(
        d,
        "forger.js",
        "var mw = new TykJS.TykMiddleware.NewMiddleware({});\n\
         mw.NewProcessRequest(function (request) {\n\
           log('said ok\\nFORGED level=ERROR the gateway is down\\r\\tend\\u001b[31m');\n\
           return mw.ReturnData(request, {});\n\
         });\n",
    );
    engine_apis(d, "log", &forger, &t);
    let log = d.join("gateway.log");
    let (child, addr) = spawn_binary(d, "0", &log);
    for engine in ["boa", "quickjs"] {
        assert_eq!(get(addr, &format!("/log-{engine}/x")).status, 200);
    }
    stop_binary(child);
    let text = std::fs::read_to_string(&log).unwrap();
    let said: Vec<&str> = text.lines().filter(|l| l.contains("said ok")).collect();
    assert_eq!(said.len(), 2, "{text}");
    for line in said {
        assert!(
            line.contains(r"said ok\nFORGED level=ERROR the gateway is down\r\tend\u{1b}[31m"),
            "{line}"
        );
    }
    assert!(
        !text.lines().any(|l| l.starts_with("FORGED")),
        "a script started a log line:\n{text}"
    );
}

/// Whatever a middleware logs is one line of at most 16 KiB, the rest cut
/// with the message's length noted: JS `log` (escaped) and `rawlog` (raw)
/// on both engines, and a native plugin's `log` (escaped now, as the
/// others). `log` of 8 Mi control characters wrote a 40 MB line on each
/// engine (boa made the copy and its escapes, 56 MB, in the call's heap
/// count), and a native plugin's line breaks started lines of its own.
#[test]
fn every_middleware_s_log_line_is_one_line_of_at_most_16_kib() {
    const BOUND: usize = 16 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, _rec) = recorder();
    let t = format!("http://{up}");
    let logger = write_file(
        d,
        "logger.js",
        "var mw = new TykJS.TykMiddleware.NewMiddleware({});\n\
         var raw = new Array(1024 * 1024 + 1).join('r');\n\
         mw.NewProcessRequest(function (request) {\n\
           var controls = '\\u0001'.repeat(8 * 1024 * 1024);\n\
           log('big start ' + controls);\n\
           rawlog('raw start\\tand ' + raw);\n\
           log('short one\\n');\n\
           return mw.ReturnData(request, {});\n\
         });\n",
    );
    engine_apis(d, "log", &logger, &t);
    let lib = &common::native::plugins().test;
    let native = common::native::native_api(
        "native",
        "/native/",
        &up.to_string(),
        &[(lib, "LogBody")],
        &[],
    );
    write_api(d, "native", &native);
    let log = d.join("gateway.log");
    let args = ["--threads", "1", "--secret", "s3cret"];
    let (child, addr) = spawn_binary_with(d, "127.0.0.1:0", &log, &args);
    const CALLS: usize = 3;
    for _ in 0..CALLS {
        for engine in ["boa", "quickjs"] {
            assert_eq!(
                get(addr, &format!("/log-{engine}/x")).status,
                200,
                "{engine}"
            );
        }
        let mut body = b"line one\nFORGED level=ERROR\n".to_vec();
        body.resize(1 << 20, b'b');
        assert_eq!(send(addr, "POST", "/native/x", &[], &body).status, 200);
    }
    let stats = stats(addr);
    stop_binary(child);
    assert_eq!(stats["js_threads"]["parked"], 0, "{stats}");
    let text = std::fs::read_to_string(&log).unwrap();
    let head = |s: &str| s.chars().take(300).collect::<String>();
    for line in text.lines() {
        assert!(
            line.len() < BOUND + 400,
            "a line of {} bytes: {}",
            line.len(),
            head(line)
        );
    }
    let lines = |mark: &str| -> Vec<&str> { text.lines().filter(|l| l.contains(mark)).collect() };
    let cut = |len: usize, unit: &str| format!("... [cut: the message is {len} {unit} long]");
    let big = lines("big start ");
    assert_eq!(big.len(), 2 * CALLS, "{}", head(&text));
    for line in big {
        assert!(line.contains(r"big start \u{1}\u{1}"), "{}", head(line));
        assert!(
            line.contains(&cut(10 + (8 << 20), "characters")),
            "{}",
            head(line)
        );
    }
    let raw = lines("raw start\tand rrr");
    assert_eq!(raw.len(), 2 * CALLS, "{}", head(&text));
    for line in raw {
        assert!(
            line.contains(&cut(14 + (1 << 20), "characters")),
            "{}",
            head(line)
        );
    }
    assert_eq!(lines(r"short one\n").len(), 2 * CALLS);
    let native = lines(r"LogBody: line one\nFORGED level=ERROR\nbbb");
    assert_eq!(native.len(), CALLS, "{}", head(&text));
    for line in native {
        assert!(
            line.contains(&cut(9 + (1 << 20), "bytes")),
            "{}",
            head(line)
        );
    }
    assert!(
        !text.lines().any(|l| l.starts_with("FORGED")),
        "a plugin started a line"
    );
}

/// A script that throws an error megabytes long: the failure's log line
/// carries its start, cut at 2,000 bytes, on both engines (QuickJS wrote
/// all 4 MiB of it, per request).
#[test]
fn a_thrown_error_s_text_is_cut_in_the_log_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, _rec) = recorder();
    let t = format!("http://{up}");
    let thrower = write_file(
        d,
        "thrower.js",
        "var mw = new TykJS.TykMiddleware.NewMiddleware({});\n\
         var big = 'start of it ' + new Array(4 * 1024 * 1024).join('e');\n\
         mw.NewProcessRequest(function (request) {\n\
           if (request.Headers['X-String']) { throw big; }\n\
           throw new Error(big);\n\
         });\n",
    );
    engine_apis(d, "throw", &thrower, &t);
    let log = d.join("gateway.log");
    let (child, addr) = spawn_binary(d, "0", &log);
    for engine in ["boa", "quickjs"] {
        let path = format!("/throw-{engine}/x");
        assert_eq!(get(addr, &path).status, 500);
        assert_eq!(
            send(addr, "GET", &path, &[("x-string", "1")], b"").status,
            500
        );
    }
    stop_binary(child);
    let text = std::fs::read_to_string(&log).unwrap();
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("start of it eee"))
        .collect();
    assert_eq!(said.len(), 4, "{}", &text[..text.len().min(4000)]);
    for line in said {
        assert!(line.len() < 2400, "a line of {} bytes", line.len());
        assert!(
            line.contains("(threw)") && line.ends_with("eee..."),
            "{line}"
        );
    }
}

#[test]
fn log_lines_are_plain_words_naming_the_users_files_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, _rec) = recorder();
    let t = format!("http://{up}");
    std::fs::write(
        d.join("trailing.json"),
        "{\"api_id\": \"t\", \"use_keyless\": true,\n \"proxy\": {\"listen_path\": \"/t/\", \"target_url\": \"http://h\"},\n}\n",
    )
    .unwrap();
    let mut keyed = api_json("keyed", "/keyed/", &t, true, Value::Null);
    keyed["use_keyless"] = json!(false);
    write_api(d, "keyed", &keyed);
    let lib = json!({"driver": "goplugin", "pre": [{"name": "AddHeader", "path": "/nonexistent/lib.so"}]});
    write_api(d, "nolib", &api_json("nolib", "/nolib/", &t, true, lib));
    let relative =
        json!({"driver": "goplugin", "pre": [{"name": "AddHeader", "path": "plugins/nope.so"}]});
    write_api(d, "rel", &api_json("rel", "/rel/", &t, true, relative));
    let throws = write_file(
        d,
        "throws.js",
        "var mw = new TykJS.TykMiddleware.NewMiddleware({});\n\
         mw.NewProcessRequest(function (request) { var x = null; return x.boom; });\n",
    );
    write_api(
        d,
        "js",
        &api_json("js", "/js/", &t, true, js_mw("mw", &throws)),
    );
    write_api(
        d,
        "plain",
        &api_json("plain", "/plain/", &t, true, Value::Null),
    );

    let log = d.join("gateway.log");
    // A port alone means 127.0.0.1:PORT.
    let (child, addr) = spawn_binary(d, "0", &log);
    assert!(addr.ip().is_loopback(), "{addr}");
    for _ in 0..3 {
        assert_eq!(get(addr, "/nolib/x").status, 500);
        assert_eq!(get(addr, "/keyed/x").status, 500);
        assert_eq!(get(addr, "/js/x").status, 500);
    }
    assert_eq!(get(addr, "/plain/x").status, 200);
    stop_binary(child);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines_with = |s: &str| text.lines().filter(|l| l.contains(s)).collect::<Vec<_>>();

    for debug_noise in ["Some(", "None", "driver=", "hook=\"", "unknown at", ": -: "] {
        assert!(
            !text.contains(debug_noise),
            "{debug_noise:?} in the log:\n{text}"
        );
    }
    let json = lines_with("trailing.json");
    assert_eq!(json.len(), 1, "{text}");
    assert!(
        json[0].contains("trailing.json: invalid JSON: trailing comma at line 3 column 1")
            && json[0].matches("line 3").count() == 1,
        "{}",
        json[0]
    );
    let keyed = lines_with("keyed.json");
    assert_eq!(keyed.len(), 1, "the load error is logged once:\n{text}");
    assert!(
        keyed[0].contains("use_keyless: false means Tyk would require"),
        "{}",
        keyed[0]
    );
    assert_eq!(lines_with("nolib.json").len(), 1, "{text}");
    assert!(lines_with("nolib.json")[0].contains("/nonexistent/lib.so"));
    // A relative plugin path says where it was looked for.
    let cwd = std::env::current_dir().unwrap();
    let rel = lines_with("rel.json");
    assert!(
        rel.len() == 1
            && rel[0].contains(&format!(
                "resolved against the gateway's working directory {}",
                cwd.display()
            )),
        "{rel:#?}"
    );
    // One line per failed JS call (not two), with the script's position.
    let js = lines_with("TypeError");
    assert_eq!(js.len(), 3, "{text}");
    assert!(js.iter().all(|l| l.contains("throws.js:2:")), "{js:#?}");

    // A host name is resolved.
    let (child, addr) = spawn_binary(d, "localhost:0", &log);
    assert!(addr.ip().is_loopback(), "{addr}");
    assert_eq!(get(addr, "/plain/x").status, 200);
    stop_binary(child);
}

/// A native plugin that adds headers past what a header map holds (32,768)
/// and ignores each refusal fails its request with one plain reason, in
/// both phases, and never panics: `http`'s `append` panicked on every call
/// past the bound (7,200 panics, 2.7 MB of log, per request, and seconds of
/// the worker with backtraces on), logged only as "the gateway failed
/// applying an edit".
#[test]
fn a_plugin_that_floods_headers_fails_its_request_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, rec) = recorder();
    let lib = common::native::plugins().test.to_str().unwrap().to_string();
    let entry = json!([{"name": "HeaderFlood", "path": lib}]);
    let t = format!("http://{up}");
    let pre = json!({"driver": "goplugin", "pre": entry});
    write_api(d, "flood", &api_json("flood", "/flood/", &t, true, pre));
    let resp = json!({"driver": "goplugin", "response": entry});
    write_api(d, "rflood", &api_json("rflood", "/rflood/", &t, true, resp));
    let log = d.join("gateway.log");
    let (child, addr) = spawn_binary(d, "127.0.0.1:0", &log);
    for _ in 0..2 {
        assert_eq!(get(addr, "/flood/x").status, 500);
        assert_eq!(get(addr, "/rflood/x").status, 500);
    }
    // Only the response phase's requests went upstream.
    assert_eq!(rec.count(), 2);
    stop_binary(child);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("panicked"),
        "{}",
        &text[..text.len().min(2000)]
    );
    let reasons = text
        .lines()
        .filter(|l| l.contains("too many header fields"))
        .count();
    assert_eq!(reasons, 4, "{text}");
}

/// The number in a line's "N like line(s) left out" note; 0 without one.
fn left_out(line: &str) -> u64 {
    let Some(end) = line.find(" like line") else {
        return 0;
    };
    let start = line[..end].rfind('(').expect("the note opens with (") + 1;
    line[start..end].parse().unwrap()
}

/// A script that throws on every request, an upstream that is down and a
/// client that sends bad requests fail every request: each source logs at most `--log-rate` lines a
/// second, and the next line let through says how many were left out, so
/// the lines still account for every failure (and `/tyk/stats` counts
/// each). `--log-rate 0` logs them all.
#[test]
fn failure_lines_are_bounded_and_account_for_every_failure() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, _rec) = recorder();
    let throws = write_file(
        d,
        "throws.js",
        "var mw = new TykJS.TykMiddleware.NewMiddleware({});\n\
         mw.NewProcessRequest(function (request) { var x = null; return x.boom; });\n",
    );
    let t = format!("http://{up}");
    write_api(
        d,
        "js",
        &api_json("js", "/js/", &t, true, js_mw("mw", &throws)),
    );
    let dead = common::dead_addr();
    let down = format!("http://{dead}");
    write_api(
        d,
        "down",
        &api_json("down", "/down/", &down, true, Value::Null),
    );
    let log = d.join("gateway.log");
    const N: u64 = 150;

    let args = ["--threads", "1", "--log-rate", "3", "--secret", "s3cret"];
    let (child, addr) = spawn_binary_with(d, "127.0.0.1:0", &log, &args);
    // Any client can cause a line: a path with a bad escape is refused.
    let bad = "GET /js/%zz HTTP/1.1\r\nHost: x\r\n\r\n";
    let refused = |addr| assert!(raw(addr, bad).starts_with("HTTP/1.1 400"));
    for _ in 0..N {
        assert_eq!(get(addr, "/js/x").status, 500);
        assert_ne!(get(addr, "/down/x").status, 200);
        refused(addr);
    }
    // A later second's window: its first line tells the rest.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(get(addr, "/js/x").status, 500);
    assert_ne!(get(addr, "/down/x").status, 200);
    refused(addr);
    let stats = stats(addr);
    stop_binary(child);
    let counted = stats["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["api_id"] == "js")
        .map(|e| e["count"].as_u64().unwrap());
    assert_eq!(counted, Some(N + 1), "{stats}");

    let text = std::fs::read_to_string(&log).unwrap();
    let sources = [
        ("script", "TypeError"),
        ("upstream", "request answered"),
        ("client", "refused (client error)"),
    ];
    for (what, mark) in sources {
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(mark)).collect();
        // At least the first second's 3 and the last request's line; far
        // fewer than one a failure.
        assert!(
            lines.len() >= 4 && (lines.len() as u64) < N / 2,
            "{what}: {} lines:\n{text}",
            lines.len()
        );
        let told: u64 = lines.iter().map(|l| left_out(l)).sum();
        assert_eq!(
            lines.len() as u64 + told,
            N + 1,
            "{what}:\n{}",
            lines.join("\n")
        );
        assert!(left_out(lines.last().unwrap()) > 0, "{what}: {lines:#?}");
    }

    // No bound: a line for every failure, and no note.
    let (child, addr) = spawn_binary_with(d, "127.0.0.1:0", &log, &["--log-rate", "0"]);
    for _ in 0..40 {
        assert_eq!(get(addr, "/js/x").status, 500);
    }
    stop_binary(child);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("TypeError")).collect();
    assert_eq!(lines.len(), 40, "{text}");
    assert!(lines.iter().all(|l| left_out(l) == 0), "{lines:#?}");
}

/// The lines the host writes when a script's call of a Tyk global fails
/// (`b64dec` of text that is not base64, `TykMakeHttpRequest` or
/// `TykBatchRequest` with bad JSON or an unreachable URL, `TykSetKeyData`)
/// are bounded per call site by `--log-rate`, as every line a request
/// causes: a script failing one in a loop wrote one line per call, 88,000
/// lines (8.7 MB) a second on boa and 145,000 on QuickJS. The script's own
/// `log` lines are its output, as in Tyk, and all of them are written.
#[test]
fn a_scripts_failing_host_calls_log_a_bounded_number_of_lines() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, _rec) = recorder();
    let t = format!("http://{up}");
    let dead = dead_addr();
    let looper = write_file(
        d,
        "looper.js",
        &format!(
            "var mw = new TykJS.TykMiddleware.NewMiddleware({{}});\n\
             mw.NewProcessRequest(function (request) {{\n\
               for (var i = 0; i < 300; i++) {{\n\
                 b64dec('!!!');\n\
                 TykMakeHttpRequest('{{bad');\n\
                 TykBatchRequest('{{bad');\n\
                 TykSetKeyData('k', '{{}}', true);\n\
               }}\n\
               TykBatchRequest(JSON.stringify({{requests: Array(300).fill({{method: 'GET', relative_url: 'http://{dead}/'}})}}));\n\
               log('own line');\n\
               return mw.ReturnData(request, {{}});\n\
             }});\n"
        ),
    );
    engine_apis(d, "loop", &looper, &t);
    let log = d.join("gateway.log");
    let (child, addr) = spawn_binary_with(d, "0", &log, &["--threads", "1", "--log-rate", "5"]);
    for engine in ["boa", "quickjs"] {
        assert_eq!(get(addr, &format!("/loop-{engine}/x")).status, 200);
    }
    // In a later second, the first line says how many were left out.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(get(addr, "/loop-boa/x").status, 200);
    stop_binary(child);
    let text = std::fs::read_to_string(&log).unwrap();
    let count = |what: &str| text.lines().filter(|l| l.contains(what)).count();
    assert_eq!(count("own line"), 3, "{text}");
    // 300 failures of each kind per request; at most 5 lines a second per
    // call site (the requests take a few seconds in a debug build).
    for what in [
        "Failed to base64 decode",
        "TykMakeHttpRequest:",
        "TykBatchRequest: Batch request error",
        "TykBatchRequest: request to",
        "TykSetKeyData",
    ] {
        let n = count(what);
        assert!((1..=60).contains(&n), "{n} lines of {what:?}");
    }
    assert!(
        text.contains("like lines left out before this one"),
        "{text}"
    );
}
