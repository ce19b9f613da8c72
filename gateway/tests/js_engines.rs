//! The JS behaviour scenarios (`js_scenarios/`) through the middleware
//! contract, on every engine with every strategy: real boa contexts and
//! QuickJS runtimes, the scripts in `tests/js_fixtures/`, driven as a worker
//! drives them (`load` -> `instantiate` -> `ApiChain::run`), on VM threads
//! (the default placement). Every strategy gives the same answers except
//! where the strategy is the difference (state kept across calls), which
//! each asserts for itself.
//!
//! Then the limits each engine has of its own: boa's loop-iteration bound
//! and inline yielding; QuickJS's time limit inside regexes and builtins,
//! its memory and stack limits.

mod js_scenarios;

use std::time::Duration;

use gateway::config::Hook;
use gateway::middleware::Flow;
use js_scenarios::*;

#[test]
fn seed_script_sets_its_header() {
    each(&ALL, js_scenarios::seed_script_sets_its_header);
}

#[test]
fn headers_are_canonical_arrays_and_only_set_delete_apply() {
    each(
        &ALL,
        js_scenarios::headers_are_canonical_arrays_and_only_set_delete_apply,
    );
}

#[test]
fn url_and_params_follow_tyk_order() {
    each(&ALL, js_scenarios::url_and_params_follow_tyk_order);
}

#[test]
fn body_rewrite_ignore_body_and_base64_helpers() {
    each(
        &ALL,
        js_scenarios::body_rewrite_ignore_body_and_base64_helpers,
    );
}

#[test]
fn every_call_sees_its_own_method_and_body() {
    each(&ALL, js_scenarios::every_call_sees_its_own_method_and_body);
}

#[test]
fn every_call_sees_its_own_url() {
    each(&ALL, js_scenarios::every_call_sees_its_own_url);
}

#[test]
fn return_overrides_answer_without_proxying() {
    each(&ALL, js_scenarios::return_overrides_answer_without_proxying);
}

#[test]
fn script_faults_fail_one_request_and_the_next_works() {
    each(
        &ALL,
        js_scenarios::script_faults_fail_one_request_and_the_next_works,
    );
}

#[test]
fn a_wrong_set_header_still_runs_every_getter_once() {
    each(
        &ALL,
        js_scenarios::a_wrong_set_header_still_runs_every_getter_once,
    );
}

#[test]
fn runaway_scripts_are_stopped_and_the_state_rebuilt() {
    each(
        &ALL,
        js_scenarios::runaway_scripts_are_stopped_and_the_state_rebuilt,
    );
}

#[test]
fn a_script_tampering_with_the_host_object_still_gets_each_request() {
    each(
        &ALL,
        js_scenarios::a_script_tampering_with_the_host_object_still_gets_each_request,
    );
}

#[test]
fn builtins_a_script_replaced_do_not_change_what_it_is_given() {
    each(
        &ALL,
        js_scenarios::builtins_a_script_replaced_do_not_change_what_it_is_given,
    );
}

#[test]
fn promise_jobs_run_after_the_answer_is_read() {
    each(
        &ALL,
        js_scenarios::promise_jobs_run_after_the_answer_is_read,
    );
}

#[test]
fn a_promise_chain_that_never_ends_stops_at_the_deadline() {
    each(
        &ALL,
        js_scenarios::a_promise_chain_that_never_ends_stops_at_the_deadline,
    );
}

#[test]
fn what_promise_jobs_and_weak_refs_hold_is_let_go() {
    each(
        &ALL,
        js_scenarios::what_promise_jobs_and_weak_refs_hold_is_let_go,
    );
}

#[test]
fn two_apis_with_the_same_global_names_stay_apart() {
    each(
        &ALL,
        js_scenarios::two_apis_with_the_same_global_names_stay_apart,
    );
}

#[test]
fn broken_scripts_fail_the_load_naming_file_field_and_line() {
    each(
        &ALL,
        js_scenarios::broken_scripts_fail_the_load_naming_file_field_and_line,
    );
}

#[test]
fn request_fields_behave_as_a_plain_object() {
    each(&ALL, js_scenarios::request_fields_behave_as_a_plain_object);
}

#[test]
fn request_keeps_ordinary_object_rules() {
    each(&ALL, js_scenarios::request_keeps_ordinary_object_rules);
}

#[test]
fn answer_getters_run_once_and_a_throw_fails_one_request() {
    each(
        &ALL,
        js_scenarios::answer_getters_run_once_and_a_throw_fails_one_request,
    );
}

/// The one scenario where strategies differ by design: a global counting
/// calls. Persistent and tyk-json keep it; fresh is Tyk's (each call sees a
/// context no earlier call touched, as Tyk's `TestGoja_FreshRuntimePerRequest`
/// expects).
#[test]
fn set_headers_stay_right_call_after_call() {
    each(&ALL, js_scenarios::set_headers_stay_right_call_after_call);
}

#[test]
fn an_answer_nested_a_million_deep_fails_its_request_only() {
    each(
        &[BOA_PERSISTENT, BOA_TYK_JSON, QJS_PERSISTENT, QJS_TYK_JSON],
        js_scenarios::an_answer_nested_a_million_deep_fails_its_request_only,
    );
}

#[test]
fn eval_of_a_deeply_nested_body_fails_its_request_only() {
    each(
        &ALL,
        js_scenarios::eval_of_a_deeply_nested_body_fails_its_request_only,
    );
}

#[test]
fn proxies_keep_their_rules_and_a_million_deep_chain_fails_its_request_only() {
    each(
        &[BOA_PERSISTENT, BOA_TYK_JSON, QJS_PERSISTENT, QJS_TYK_JSON],
        js_scenarios::proxies_keep_their_rules_and_a_million_deep_chain_fails_its_request_only,
    );
}

#[test]
fn failing_answers_thousands_of_times() {
    each(
        &[BOA_PERSISTENT, QJS_PERSISTENT, QJS_TYK_JSON, QJS_FRESH],
        js_scenarios::failing_answers_thousands_of_times,
    );
}

#[test]
fn state_persists_or_not_as_the_strategy_says() {
    each(&ALL, |mode| {
        let want = match mode.strategy {
            "fresh" => ["0", "0", "0"],
            _ => ["0", "1", "2"],
        };
        assert_eq!(counts(mode), want);
    });
}

// boa's own bounds.

#[test]
fn boa_a_loop_inside_a_native_callback_hits_the_iteration_limit() {
    each(&[BOA_PERSISTENT, BOA_TYK_JSON], |mode| {
        let s = spec(
            mode,
            "faults",
            ("faultsMw", fixture("faults.js")),
            serde_json::Value::Null,
        );
        let h = host_with(&s, Duration::from_secs(60), 64 << 20);
        let msg = h.err(&mut get("/faults/", &[("x-fault", "callbackloop")]));
        assert!(msg.contains("iteration"), "{msg}");
        h.ok(&mut get("/faults/", &[]));
    });
}

/// Inline (`--jsvm-threads 0`), boa slices a running script and yields, so
/// another API on the same worker is served before the runaway is stopped.
#[test]
fn boa_inline_a_runaway_call_yields_so_other_apis_keep_serving() {
    each(&[BOA_PERSISTENT, BOA_TYK_JSON], |mode| {
        let faults = spec(
            mode,
            "faults",
            ("faultsMw", fixture("faults.js")),
            serde_json::Value::Null,
        );
        let slow = host_inline(&faults, Duration::from_secs(2));
        let other = spec(
            mode,
            "clash-a",
            ("mw", fixture("clash_a.js")),
            serde_json::Value::Null,
        );
        let fast = host_inline(&other, Duration::from_secs(5));
        // One thread, one runtime: the fast call can only finish first if
        // the runaway call yields between slices.
        let done = slow.block_on(async {
            let mut looping = get("/faults/", &[("x-fault", "loop")]);
            let mut quick = get("/clash-a/", &[]);
            let runaway = slow.chain().run(Hook::Pre, &mut looping);
            let served = async {
                tokio::task::yield_now().await;
                fast.chain().run(Hook::Pre, &mut quick).await
            };
            tokio::pin!(runaway);
            tokio::select! {
                biased;
                r = served => {
                    assert!(matches!(r, Ok(Flow::Continue)));
                    assert!(runaway.await.is_err());
                    "served-first"
                }
                _ = &mut runaway => "runaway-first",
            }
        });
        assert_eq!(done, "served-first");
    });
}

// QuickJS's own limits, in every strategy.

#[test]
fn quickjs_the_timeout_stops_regexes_and_builtin_callbacks() {
    each(
        &QUICKJS,
        js_scenarios::the_timeout_stops_regexes_and_builtin_callbacks,
    );
}

#[test]
fn quickjs_unbounded_allocation_hits_the_memory_limit_and_the_next_request_works() {
    each(
        &QUICKJS,
        js_scenarios::unbounded_allocation_hits_the_memory_limit,
    );
}

#[test]
fn quickjs_deep_data_and_unbounded_recursion_hit_the_stack_limit() {
    each(
        &QUICKJS,
        js_scenarios::deep_data_and_unbounded_recursion_hit_the_stack_limit,
    );
}

/// Requests tied into cycles through the fields QuickJS's persistent host
/// keeps natively are freed by its cycle collector: 400 calls holding 64
/// KiB each stay within an 8 MiB limit. (Not `tyk-json`: its answer is
/// JSON text, which a cycle cannot be.)
#[test]
fn quickjs_request_cycles_are_collected() {
    each(&[QJS_PERSISTENT, QJS_FRESH], |mode| {
        let s = spec(
            mode,
            "cycles",
            ("cyclesMw", fixture("cycles.js")),
            serde_json::Value::Null,
        );
        let h = host_with(&s, Duration::from_secs(5), 8 << 20);
        for i in 0..400 {
            let plain = if i % 2 == 0 { "" } else { "1" };
            let mut req = get("/cycles/", &[("x-plain", plain)]);
            if plain.is_empty() {
                req.headers.remove("x-plain");
            }
            h.ok(&mut req);
            assert_eq!(js_scenarios::header(&req, "x-cycle"), "yes");
        }
    });
}

/// The same limits hold where QuickJS runs inline on the I/O thread.
#[test]
fn quickjs_inline_limits_hold_too() {
    each(&QUICKJS, |mode| {
        let s = spec(
            mode,
            "limits",
            ("limitsMw", fixture("limits.js")),
            serde_json::Value::Null,
        );
        let h = host_inline(&s, Duration::from_millis(200));
        for name in ["regex", "foreach", "deepjson"] {
            let msg = h.err(&mut get("/limits/", &[("x-fault", name)]));
            assert!(
                msg.contains("jsvm timeout") || msg.contains("call stack size exceeded"),
                "{name}: {msg}"
            );
            let mut req = get("/limits/", &[]);
            h.ok(&mut req);
            assert_eq!(header(&req, "x-ok"), "yes");
        }
    });
}

/// A QuickJS API that starts inline runs a bodiless request's chain in
/// place, on the client's request as the server parsed it (lent, not
/// moved into a middleware request), until a call overruns the inline
/// slice: that call changes nothing and defers, the API moves to its VM
/// thread, and from then on its chain is awaited there. `tyk-json`
/// (whose calls take a middleware request) is never run in place; an API
/// placed inline for good always is.
#[test]
fn a_quickjs_chain_runs_in_place_until_a_call_overruns_its_slice() {
    use gateway::middleware::{HostOptions, LentRequest, ReqMut};
    let spin = ("spinCounter", fixture("spin_counter.js"));
    let lent_call = |host: &Host, spin_ms: &str| {
        let mut head = http::Request::get("/q/x")
            .header("X-Spin", spin_ms)
            .body(gateway::body::ClientIn::empty())
            .unwrap();
        let mut lent = LentRequest::new(&mut head, "127.0.0.1:1".parse().unwrap());
        let (hook, end) = host.chain().run_first_now(ReqMut::Lent(&mut lent));
        assert_eq!(hook, Hook::Pre);
        drop(lent);
        let calls = head
            .headers()
            .get("x-calls")
            .map(|v| v.to_str().unwrap().to_string());
        (end.map(|r| r.map_err(|e| e.to_string())), calls)
    };

    // A slice no ordinary call of a debug build overruns, even on a
    // loaded machine, and a spin well past it.
    let host = host_opts(
        &spec(QJS_PERSISTENT, "q", spin.clone(), serde_json::json!({})),
        HostOptions {
            jsvm_inline_budget: Duration::from_millis(100),
            ..HostOptions::default()
        },
    );
    assert!(host.chain().runs_in_place() && host.chain().first_defers());
    for n in ["1", "2"] {
        let (end, calls) = lent_call(&host, "0");
        assert!(matches!(end, Some(Ok(Flow::Continue))), "{end:?}");
        assert_eq!(calls.as_deref(), Some(n), "edited in the client's request");
    }
    // Overruns the slice: deferred, the request untouched.
    let (end, calls) = lent_call(&host, "300");
    assert!(end.is_none(), "{end:?}");
    assert_eq!(calls, None, "a deferred call changes nothing");
    assert!(!host.chain().runs_in_place(), "the API moved");
    // The awaited path runs it on the VM thread, in a new context.
    let mut req = get("/q/x", &[("X-Spin", "300")]);
    host.ok(&mut req);
    assert_eq!(header(&req, "x-calls"), "1");

    let json = host_opts(
        &spec(QJS_TYK_JSON, "j", spin.clone(), serde_json::json!({})),
        HostOptions::default(),
    );
    assert!(!json.chain().runs_in_place(), "tyk-json is awaited");

    let inline = host_inline(
        &spec(QJS_PERSISTENT, "i", spin, serde_json::json!({})),
        Duration::from_secs(5),
    );
    assert!(inline.chain().runs_in_place() && !inline.chain().first_defers());
}
