//! Faults: a script that throws or answers badly fails its one request and
//! the next works; a runaway is stopped and its state rebuilt; a broken
//! script fails the load naming the file, the field and the line.

use super::*;

fn faults(mode: Mode) -> gateway::config::ApiSpec {
    spec(
        mode,
        "faults",
        ("faultsMw", fixture("faults.js")),
        serde_json::Value::Null,
    )
}

pub fn script_faults_fail_one_request_and_the_next_works(mode: Mode) {
    let h = host_counting(&faults(mode));
    for (fault, needle) in [
        ("throw", "boom from js"),
        ("nothing", "return value must be an object"),
        ("shape", "Request must be an object"),
        ("number", r#"SetHeaders["X-N"] must be a string"#),
        ("crlf", "X-Evil"),
        // Past what a header map holds: refused, where `insert` panicked.
        ("flood", "too many header fields"),
        ("recurse", stack_overflow(mode)),
    ] {
        let msg = h.err(&mut get("/faults/", &[("x-fault", fault)]));
        assert!(msg.contains(needle), "{fault}: {msg}");
        assert!(msg.contains("faultsMw"), "{fault}: {msg}");
        h.ok(&mut get("/faults/", &[]));
    }
    // The state survived every fault above (persistent and tyk-json: the
    // counter kept going; fresh: every call starts at 1).
    let mut req = get("/faults/", &[]);
    h.ok(&mut req);
    let want = if is_fresh(mode) { "1" } else { "15" };
    assert_eq!(header(&req, "x-calls"), want);
}

/// A wrong `SetHeaders` value fails the call naming it, and every getter
/// of the container still ran, once, as when Tyk's encoder reads them all
/// before its decoder meets the wrong one.
pub fn a_wrong_set_header_still_runs_every_getter_once(mode: Mode) {
    let h = host_counting(&faults(mode));
    let msg = h.err(&mut get("/faults/", &[("x-fault", "getters")]));
    assert!(
        msg.contains(r#"SetHeaders["X-N"] must be a string"#),
        "{msg}"
    );
    let mut req = get("/faults/", &[]);
    h.ok(&mut req);
    let want = if is_fresh(mode) { "0" } else { "1" };
    assert_eq!(header(&req, "x-getters"), want);
}

pub fn runaway_scripts_are_stopped_and_the_state_rebuilt(mode: Mode) {
    let h = host_with(&faults(mode), Duration::from_millis(300), 64 << 20);
    // boa cannot stop a loop inside a builtin's callback: its VM thread is
    // abandoned, and the replacement builds its context within the next
    // call's deadline, which on a loaded machine with a debug build can take
    // longer than 300 ms (`js_hardening.rs` and the iteration-limit test
    // cover that case).
    let faults: &[&str] = match mode.engine {
        "boa" => &["loop", "catchloop", "alloc"],
        _ => &["loop", "catchloop", "callbackloop", "alloc"],
    };
    for &fault in faults {
        let msg = h.err(&mut get("/faults/", &[("x-fault", fault)]));
        assert!(
            msg.contains("jsvm timeout") || msg.contains("memory"),
            "{fault}: {msg}"
        );
        // A stopped context is discarded: the rebuilt one counts afresh.
        // Its build (right after the stop, on the VM thread) counts against
        // the next call's 300 ms, which a loaded machine running a debug
        // build can pass: such a call times out, and the next one is
        // served, by a context that still counts from 1.
        let mut served = None;
        for _ in 0..10 {
            let mut req = get("/faults/", &[]);
            match h.run(&mut req) {
                Ok(gateway::middleware::Flow::Continue) => {
                    served = Some(req);
                    break;
                }
                Err(e) if e.to_string().contains("jsvm timeout") => continue,
                other => panic!("{fault}: {other:?}"),
            }
        }
        let req = served.unwrap_or_else(|| panic!("{fault}: no call served after the stop"));
        assert_eq!(header(&req, "x-calls"), "1", "{fault}");
    }
}

fn load_err(s: &gateway::config::ApiSpec) -> String {
    match gateway::js::load(s, &HostOptions::default()) {
        Ok(_) => panic!("{} loaded", s.api_id),
        Err(e) => e.to_string(),
    }
}

pub fn broken_scripts_fail_the_load_naming_file_field_and_line(mode: Mode) {
    let none = serde_json::Value::Null;
    let msg = load_err(&spec(
        mode,
        "bad",
        ("broken", fixture("syntax_error.js")),
        none.clone(),
    ));
    assert!(msg.contains("apis/bad.json"), "{msg}");
    assert!(msg.contains("custom_middleware.pre[0].path"), "{msg}");
    assert!(msg.contains("syntax_error.js"), "{msg}");
    assert!(msg.contains("line 4"), "{msg}");

    let s = spec(
        mode,
        "none",
        ("jsvmHelloPreHook", fixture("no_object.js")),
        none.clone(),
    );
    let msg = load_err(&s);
    assert!(msg.contains("custom_middleware.pre[0].name"), "{msg}");
    assert!(msg.contains("no object \"jsvmHelloPreHook\""), "{msg}");

    let s = spec(
        mode,
        "missing",
        ("x", fixture("does_not_exist.js")),
        none.clone(),
    );
    let msg = load_err(&s);
    assert!(
        msg.contains("cannot read") && msg.contains("does_not_exist.js"),
        "{msg}"
    );

    let msg = load_err(&spec(
        mode,
        "ident",
        ("not-an-id", fixture("clash_a.js")),
        none,
    ));
    assert!(msg.contains("not a JavaScript identifier"), "{msg}");
}

/// A script that defines its own getter where the host puts the request,
/// then freezes the host's hand-over object (boa's `__tykHost`): each call
/// still sees its own request, and a throw still fails its request (500),
/// never passing it on.
pub fn a_script_tampering_with_the_host_object_still_gets_each_request(mode: Mode) {
    let s = spec(
        mode,
        "tamper",
        ("tamperMw", fixture("host_tamper.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    for i in 0..5 {
        let url = format!("/tamper/call-{i}");
        let probe = format!("p{i}");
        let mut req = get(&url, &[("x-probe", probe.as_str())]);
        h.ok(&mut req);
        assert_eq!(header(&req, "x-seen-url"), url);
        assert_eq!(header(&req, "x-seen-probe"), probe);
        let msg = h.err(&mut get("/tamper/t", &[("x-throw", "1")]));
        assert!(msg.contains("thrown past a frozen host"), "{msg}");
    }
}

/// A script whose top level replaced builtins (`String.prototype.split`,
/// `indexOf`, `Array.isArray`, `Object.defineProperty`, `Symbol`) and gave
/// every object a setter for the header its deny rule reads still gets the
/// request's headers and query as they are: its deny rule still denies.
/// QuickJS built `request.Headers` with the script's `split`, and the
/// denied request was proxied.
pub fn builtins_a_script_replaced_do_not_change_what_it_is_given(mode: Mode) {
    let s = spec(
        mode,
        "tampered",
        ("tamperedMw", fixture("builtin_tamper.js")),
        serde_json::Value::Null,
    );
    let h = host(&s);
    for _ in 0..3 {
        let mut req = get("/tampered/x?q=1&q=2", &[("x-probe", "a"), ("x-probe", "b")]);
        h.ok(&mut req);
        assert_eq!(header(&req, "x-seen-probe"), "a|b");
        assert_eq!(header(&req, "x-seen-q"), "1|2");
        match h.run(&mut get("/tampered/x", &[("x-block", "1")])) {
            Ok(Flow::Respond(resp)) => assert_eq!(resp.status, 403),
            other => panic!("expected the 403 the script answers, got {other:?}"),
        }
    }
}
