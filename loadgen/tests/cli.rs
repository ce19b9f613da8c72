//! The `loadgen` binary: ab's report lines, output files, exit codes on bad
//! input, and Ctrl-C.

mod common;

use std::process::{Command, Output, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{Mode, Server};
use serde_json::Value;

const HELLO: Mode = Mode::Ok {
    status: 200,
    body: "hello",
};

fn loadgen(args: &[&str]) -> Output {
    common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_loadgen")))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_text_report_has_abs_lines_in_abs_order() {
    let srv = Server::start(HELLO);
    let out = loadgen(&["-n", "30", "-c", "3", &srv.url("/doc")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines = [
        "Server Software:        testsrv",
        "Server Hostname:        127.0.0.1",
        "Document Path:          /doc",
        "Document Length:        5 bytes",
        "Concurrency Level:      3",
        "Time taken for tests:",
        "Complete requests:      30",
        "Failed requests:        0",
        "Total transferred:",
        "HTML transferred:       150 bytes",
        "Requests per second:",
        "Time per request:",
        "(mean, across all concurrent requests)",
        "Transfer rate:",
        "CPU time consumed:",
        "Connection Times (ms)",
        "Connect:",
        "Processing:",
        "Waiting:",
        "Total:",
        "Percentage of the requests served within a certain time (ms)",
        "    50%",
        "    66%",
        "    99%",
        "  99.9%",
        " 99.99%",
        "   100%",
    ];
    let mut at = 0;
    for l in lines {
        let found = text[at..]
            .find(l)
            .unwrap_or_else(|| panic!("{l:?} missing after byte {at}:\n{text}"));
        at += found + l.len();
    }
    assert!(text.contains("(longest request)"));
}

#[test]
fn json_csv_and_hgrm_outputs_follow_their_schemas() {
    let srv = Server::start(HELLO);
    let dir = tempfile::tempdir().unwrap();
    let (json, csv, hgrm) = (
        dir.path().join("r.json"),
        dir.path().join("p.csv"),
        dir.path().join("r.hgrm"),
    );
    let out = loadgen(&[
        "-n",
        "20",
        "-c",
        "2",
        "-q",
        "--json",
        json.to_str().unwrap(),
        "--percentiles-csv",
        csv.to_str().unwrap(),
        "--hgrm",
        hgrm.to_str().unwrap(),
        &srv.url("/"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "loadgen.report/1");
    assert_eq!(v["complete_requests"], 20);
    assert_eq!(v["failed_requests"]["total"], 0);
    assert_eq!(v["document_length"], 5);
    assert_eq!(v["status_codes"]["200"], 20);
    for key in [
        "time_taken_s",
        "requests_per_second",
        "time_per_request_ms",
        "time_per_request_all_ms",
        "transfer_rate_kib_s",
    ] {
        assert!(
            v[key].as_f64().is_some_and(|x| x > 0.0),
            "{key}: {}",
            v[key]
        );
    }
    for phase in ["connect", "processing", "waiting", "total"] {
        for stat in ["min", "mean", "sd", "median", "max"] {
            assert!(
                v["connection_times_ms"][phase][stat].is_number(),
                "{phase}.{stat}"
            );
        }
    }
    let pcts = v["percentiles_ms"].as_array().unwrap();
    let percents: Vec<f64> = pcts
        .iter()
        .map(|p| p["percent"].as_f64().unwrap())
        .collect();
    assert_eq!(
        percents,
        [50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 99.9, 99.99, 100.0]
    );
    let ms: Vec<f64> = pcts.iter().map(|p| p["ms"].as_f64().unwrap()).collect();
    assert!(ms.windows(2).all(|w| w[0] <= w[1]), "{ms:?}");
    assert!(v["corrected_percentiles_ms"].is_null());
    let cpu = v["cpu"].as_array().unwrap();
    assert_eq!(cpu.last().unwrap()["name"], "loadgen");

    let csv = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "Percentage served,Time in ms");
    assert_eq!(rows.len(), 102);
    assert!(rows[101].starts_with("100,"));

    let hgrm = std::fs::read_to_string(&hgrm).unwrap();
    assert!(hgrm
        .lines()
        .next()
        .unwrap()
        .contains("Value     Percentile TotalCount 1/(1-Percentile)"));
    assert!(hgrm.contains("#[Mean    ="));
    let max_line = hgrm.lines().find(|l| l.starts_with("#[Max")).unwrap();
    assert!(max_line.trim_end().ends_with("20]"), "{max_line}");
}

/// ab's display flags: `-d` leaves the percentile table out, `-S` prints
/// Connection Times as min, avg and max only.
#[test]
fn d_and_s_trim_the_report_as_ab_does() {
    let srv = Server::start(HELLO);
    let out = loadgen(&["-q", "-n", "5", "-d", "-S", &srv.url("/")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Complete requests:      5"), "{text}");
    assert!(!text.contains("Percentage of the requests"), "{text}");
    let times = text
        .lines()
        .skip_while(|l| !l.starts_with("Connection Times (ms)"))
        .nth(1)
        .unwrap_or_else(|| panic!("no Connection Times: {text}"));
    assert_eq!(
        times.split_whitespace().collect::<Vec<_>>(),
        ["min", "avg", "max"]
    );
    let total = text.lines().find(|l| l.starts_with("Total:")).unwrap();
    assert_eq!(total.split_whitespace().count(), 4, "{total}");
    // Without them, both are there.
    let out = loadgen(&["-q", "-n", "5", &srv.url("/")]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Percentage of the requests"), "{text}");
    assert!(text.contains("[+/-sd]"), "{text}");
}

#[test]
fn json_to_stdout_replaces_the_text_report() {
    let srv = Server::start(HELLO);
    let out = loadgen(&["-n", "3", "--json", "-", &srv.url("/")]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["complete_requests"], 3);
}

#[test]
fn bad_input_is_one_clear_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.txt");
    let cases: [(&[&str], &str); 13] = [
        (&["not a url"], "invalid URL"),
        // A port that does not fit, or none after the colon, was port 80.
        (
            &["http://127.0.0.1:70000/"],
            "port \"70000\" is not a number from 1 to 65535",
        ),
        (&["http://127.0.0.1:/"], "port \"\" is not a number"),
        (&["http://[::1]:65536/"], "invalid URL"),
        // -t 1e19 overflowed the deadline's clock reading: a panic.
        (&["-t", "1e19", "http://127.0.0.1:1/"], "longer than a year"),
        (&["https://127.0.0.1/"], "unsupported scheme \"https\""),
        (
            &["-n", "5", "-c", "10", "http://127.0.0.1:1/"],
            "-c 10 > -n 5",
        ),
        (
            &["-p", missing.to_str().unwrap(), "http://127.0.0.1:1/"],
            "cannot read -p file",
        ),
        (
            &["-H", "NoColon", "http://127.0.0.1:1/"],
            "malformed header -H \"NoColon\"",
        ),
        (&["-n", "abc", "http://127.0.0.1:1/"], "-n"),
        // ab's options loadgen lacks are named as such, with what to use.
        (
            &["-X", "proxy:3128", "http://127.0.0.1:1/"],
            "-X is an ab option loadgen does not have: it goes through a proxy",
        ),
        (
            &["-kg", "out.tsv", "http://127.0.0.1:1/"],
            "-g is an ab option loadgen does not have: it writes gnuplot data; use -e",
        ),
        (&["-w", "http://127.0.0.1:1/"], "HTML; use --json"),
    ];
    for (args, needle) in cases {
        let out = loadgen(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// `loadgen bench`'s usage errors all exit 2, as clap's own do (an
/// unknown flag, a value that does not parse); `-n` below `-c` and
/// `--repeat 0` exited 1, as if the bench had run and failed. ab mode
/// keeps 2 for `-c` above `-n` too (above): ab itself exits 22 (EINVAL)
/// for that and for an unknown flag alike, so 2 for both is the same rule.
/// An unknown `--routes` name and a malformed `--compare` were found only
/// once mock-upstream ran (the routes come from the definitions, rewritten
/// for its port), and exited 1.
#[test]
fn bench_usage_errors_exit_2_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-binaries");
    // The repo's definitions (the test runs in loadgen/, which has none).
    let apis = common::bins::workspace().join("apis");
    let bench = |args: &[&str]| {
        let head = ["bench", "--bin-dir", missing.to_str().unwrap()];
        loadgen(&[&head[..], &["--apis", apis.to_str().unwrap()], args].concat())
    };
    let cases: [(&[&str], &str); 15] = [
        (&["-n", "5", "-c", "10"], "-n 5 must be at least -c 10"),
        (&["-c", "0"], "-c at least 1"),
        (&["--repeat", "0"], "--repeat must be at least 1"),
        (&["--cpus", "x"], "\"x\" is not a core number"),
        (&["--cpus", "gateway=100000"], "core 100000 does not exist"),
        (
            &["--routes", "plain,nosuch"],
            "--routes: no route \"nosuch\"; the routes are native, js, plain, ",
        ),
        (
            &["--compare", "tyk"],
            "--compare \"tyk\": expected NAME=BASE_URL",
        ),
        (
            &["--compare", "=http://localhost/"],
            "--compare \"=http://localhost/\": expected NAME=BASE_URL",
        ),
        (
            &["--compare", "tyk=notaurl"],
            "--compare \"tyk=notaurl\": invalid URL \"notaurl\"",
        ),
        (
            &["--compare", "tyk=https://localhost/"],
            "--compare \"tyk=https://localhost/\": unsupported scheme \"https\"",
        ),
        // A path would be dropped and the routes measured at the root;
        // a name the report already uses, or one given twice, would mix
        // two gateways' rows.
        (
            &["--compare", "tyk=http://localhost:8080/prefix"],
            "the base URL has a path (/prefix)",
        ),
        (
            &["--compare", "ours=http://localhost:8080/"],
            "\"ours\" names this gateway's own rows or a --peer's",
        ),
        (
            &["--compare", "nginx=http://localhost:8080"],
            "\"nginx\" names this gateway's own rows or a --peer's",
        ),
        (
            &[
                "--compare",
                "tyk=http://localhost:8080",
                "--compare",
                "tyk=http://localhost:9090",
            ],
            "\"tyk\" is given twice",
        ),
        // clap's own, for comparison.
        (&["--no-such-flag"], "--no-such-flag"),
    ];
    for (args, needle) in cases {
        // No binaries where it would look: a usage error is found first.
        let out = bench(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("not found"), "{args:?}: {err}");
    }
    // Well formed, they pass: the bench goes on to look for its binaries.
    // A route by API id or listen path; a peer whose host does not
    // resolve is no usage error (it is looked up once the peer is planned).
    // Ports the OS picks: the defaults (8222, 8091) may be in use here.
    let any_port = ["--upstream-port", "0", "--gateway-port", "0"];
    for args in [
        &["--routes", "/jsvm/,plain-hello,upstream"][..],
        &["--compare", "tyk=http://no-such-host.invalid/"],
    ] {
        let out = bench(&[&any_port[..], args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("mock-upstream binary not found"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn an_unreachable_host_exits_1_with_the_reason() {
    let dead = common::DeadPort::new();
    let port = dead.port();
    let out = loadgen(&["-n", "3", &format!("http://127.0.0.1:{port}/")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot connect to 127.0.0.1") && err.contains("refused"),
        "{err}"
    );
    let out = loadgen(&["-n", "3", "http://no-such-host.invalid/"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn ctrl_c_stops_the_run_and_prints_what_was_done() {
    let srv = Server::start(HELLO);
    let child = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_loadgen")))
        .args(["-t", "20", "-c", "2", "-k", &srv.url("/")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while srv.requests.load(Ordering::SeqCst) < 20 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: plain kill(2) on the child we spawned.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    // As a shell reports a command stopped by Ctrl-C, after the report.
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Interrupted"), "{text}");
    let complete: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Complete requests:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(complete >= 20);
}

#[test]
fn durations_ab_flags_and_the_status_line() {
    let srv = Server::start(HELLO);
    // -t takes a duration as well as seconds.
    let out = loadgen(&["-t", "300ms", "-c", "2", "-k", &srv.url("/")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Status codes:           200: "), "{text}");
    assert!(text.contains("3 significant digits"), "{text}");
    for bad in ["0s", "soon"] {
        let out = loadgen(&["-t", bad, &srv.url("/")]);
        assert_eq!(out.status.code(), Some(2), "-t {bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(bad),
            "-t {bad}"
        );
    }
    // ab's -l: bodies of varying length are not Length failures.
    let varying = Server::start(Mode::Varying);
    let failed = |extra: &[&str]| {
        let mut args = vec!["-n", "20", "-c", "1", "-k", "--json", "-"];
        args.extend_from_slice(extra);
        let url = varying.url("/");
        args.push(&url);
        let v: Value = serde_json::from_slice(&loadgen(&args).stdout).unwrap();
        v["failed_requests"]["length"].as_u64().unwrap()
    };
    assert!(failed(&[]) > 0);
    assert_eq!(failed(&["-l"]), 0);
    // And, as ab's, the report does not pretend there is one length.
    let out = loadgen(&["-n", "4", "-l", "-k", &varying.url("/")]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Document Length:        Variable\n"),
        "{text}"
    );
}

#[test]
fn head_put_cookie_and_basic_auth_go_on_the_wire_as_ab_sends_them() {
    use clap::Parser;
    let cfg = |args: &[&str]| {
        let mut argv = vec!["loadgen"];
        argv.extend_from_slice(args);
        argv.push("http://127.0.0.1:9/x");
        let cfg = loadgen::cli::Args::try_parse_from(argv)
            .unwrap()
            .into_config()
            .unwrap();
        (String::from_utf8(cfg.request.to_vec()).unwrap(), cfg.head)
    };
    let (req, head) = cfg(&["-i"]);
    assert!(req.starts_with("HEAD /x HTTP/1.0\r\n") && head, "{req}");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("body");
    std::fs::write(&file, "abc").unwrap();
    let (req, _) = cfg(&["-u", file.to_str().unwrap()]);
    assert!(
        req.starts_with("PUT /x HTTP/1.0\r\n") && req.ends_with("Content-Length: 3\r\n\r\nabc"),
        "{req}"
    );
    let (req, _) = cfg(&["-C", "a=1", "-C", "b=2", "-A", "user:pw", "-r"]);
    assert!(req.contains("Cookie: a=1; b=2\r\n"), "{req}");
    assert!(
        req.contains("Authorization: Basic dXNlcjpwdw==\r\n"),
        "{req}"
    );
    let out = loadgen(&["-A", "nocolon", "http://127.0.0.1:9/"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("user:password"));
}

#[test]
fn outputs_and_cpu_pids_are_checked_before_any_request() {
    let srv = Server::start(HELLO);
    let out = loadgen(&[
        "-n",
        "5",
        "--json",
        "/nonexistent-dir/r.json",
        &srv.url("/"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write /nonexistent-dir/r.json"));
    let out = loadgen(&["-n", "5", "--cpu-pid", "999999999", &srv.url("/")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cpu-pid 999999999"));
    assert_eq!(srv.requests.load(Ordering::SeqCst), 0);
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    let srv = Server::start(HELLO);
    let mut child = common::dies_with_test(&mut Command::new(env!("CARGO_BIN_EXE_loadgen")))
        .args(["-n", "50", "-c", "2", &srv.url("/")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away at once, as `| head -0` would.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}

/// Lines of `text` that start with `prefix`.
fn count(text: &str, prefix: &str) -> usize {
    text.lines().filter(|l| l.starts_with(prefix)).count()
}

#[test]
fn verbosity_levels_print_abs_lines() {
    let ok = Server::start(HELLO);
    let missing = Server::start(Mode::Ok {
        status: 404,
        body: "nope",
    });
    let run = |level: &str, url: String| {
        let out = loadgen(&["-n", "12", "-c", "3", "-q", "-v", level, &url]);
        assert_eq!(out.status.code(), Some(0), "-v {level}");
        String::from_utf8(out.stdout).unwrap()
    };
    // Below 2: nothing beyond the report.
    let one = run("1", missing.url("/x"));
    assert!(
        !one.contains("INFO:") && !one.contains("WARNING:") && !one.contains("LOG:"),
        "{one}"
    );
    // 2: the request sent, and a warning per non-2xx answer.
    let two = run("2", missing.url("/x"));
    assert!(
        two.contains("INFO: GET header == \n---\nGET /x HTTP/1.0\r\n"),
        "{two}"
    );
    assert_eq!(
        count(&two, "WARNING: Response code not 2xx (404)"),
        12,
        "{two}"
    );
    assert_eq!(count(&two, "LOG:"), 0, "{two}");
    // 3: every response code.
    let three = run("3", ok.url("/"));
    assert_eq!(count(&three, "LOG: Response code = 200"), 12, "{three}");
    assert_eq!(count(&three, "LOG: header received:"), 0, "{three}");
    // 4: every response head.
    let four = run("4", ok.url("/"));
    assert_eq!(count(&four, "LOG: header received:"), 12, "{four}");
    assert_eq!(count(&four, "Server: testsrv"), 12, "{four}");
    // The report still follows, whole.
    assert!(four.contains("Complete requests:      12"), "{four}");
    let bad = loadgen(&["-v", "loud", &ok.url("/")]);
    assert_eq!(bad.status.code(), Some(2));
}

/// `Keep-Alive requests:` of a text report.
fn keep_alive_requests(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("Keep-Alive requests:"))
        .unwrap_or_else(|| panic!("no Keep-Alive requests line:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn keep_alive_requests_are_counted_as_real_ab_counts_them() {
    let ab = Command::new("ab").arg("-V").output();
    if !ab.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: ab is not installed (Debian: apt-get install apache2-utils)");
        return;
    }
    // A server that keeps every connection alive, and one that closes each
    // connection after its 5th response (which then says Connection: close).
    // One connection at a time, so that both clients see the same closes.
    for (mode, c, want) in [(HELLO, "4", 200), (Mode::CloseEvery(5), "1", 160)] {
        let srv = Server::start(mode);
        let url = srv.url("/");
        let args = ["-k", "-n", "200", "-c", c, "-v", "3", url.as_str()];
        let ab = Command::new("ab").args(args).output().unwrap();
        let ab = String::from_utf8_lossy(&ab.stdout).into_owned();
        let ours = loadgen(&args);
        let ours = String::from_utf8(ours.stdout).unwrap();
        assert_eq!(keep_alive_requests(&ab), want, "{mode:?}: ab says\n{ab}");
        assert_eq!(
            keep_alive_requests(&ours),
            want,
            "{mode:?}: loadgen says\n{ours}"
        );
        // -v 3 prints one line per response code in ab's words, as ab does.
        assert_eq!(
            count(&ours, "LOG: Response code = 200"),
            count(&ab, "LOG: Response code = 200"),
            "{mode:?}"
        );
    }
}
