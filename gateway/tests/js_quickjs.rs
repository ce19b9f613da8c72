//! The JS behaviour scenarios on the QuickJS engine, through the middleware
//! contract: real QuickJS runtimes, the scripts in `tests/js_fixtures/`,
//! driven as a worker drives them (`load` -> `instantiate` ->
//! `ApiChain::run`). Each scenario is a function of the engine and strategy
//! names, run here for `quickjs` with `persistent` and `fresh`, so one
//! parametrized suite can run it for every engine.
//!
//! Then the limits only QuickJS has: a time limit that also stops regexes
//! and builtins' callbacks, a memory limit, a stack limit.

mod js_scenarios;

use gateway::middleware::HostOptions;
use js_scenarios::*;

#[test]
fn seed_script_sets_its_header_persistent() {
    seed_script_sets_its_header(PERSISTENT);
}

#[test]
fn seed_script_sets_its_header_fresh() {
    seed_script_sets_its_header(FRESH);
}

#[test]
fn headers_are_canonical_arrays_and_only_set_delete_apply_both() {
    headers_are_canonical_arrays_and_only_set_delete_apply(PERSISTENT);
    headers_are_canonical_arrays_and_only_set_delete_apply(FRESH);
}

#[test]
fn url_and_params_follow_tyk_order_both() {
    url_and_params_follow_tyk_order(PERSISTENT);
    url_and_params_follow_tyk_order(FRESH);
}

#[test]
fn body_rewrite_ignore_body_and_base64_helpers_both() {
    body_rewrite_ignore_body_and_base64_helpers(PERSISTENT);
    body_rewrite_ignore_body_and_base64_helpers(FRESH);
}

#[test]
fn every_call_sees_its_own_method_and_body_both() {
    every_call_sees_its_own_method_and_body(PERSISTENT);
    every_call_sees_its_own_method_and_body(FRESH);
}

#[test]
fn return_overrides_answer_without_proxying_both() {
    return_overrides_answer_without_proxying(PERSISTENT);
    return_overrides_answer_without_proxying(FRESH);
}

#[test]
fn script_faults_fail_one_request_and_the_next_works_both() {
    script_faults_fail_one_request_and_the_next_works(PERSISTENT);
    script_faults_fail_one_request_and_the_next_works(FRESH);
}

#[test]
fn runaway_scripts_are_stopped_and_the_state_rebuilt_both() {
    runaway_scripts_are_stopped_and_the_state_rebuilt(PERSISTENT);
    runaway_scripts_are_stopped_and_the_state_rebuilt(FRESH);
}

#[test]
fn two_apis_with_the_same_global_names_stay_apart_both() {
    two_apis_with_the_same_global_names_stay_apart(PERSISTENT);
    two_apis_with_the_same_global_names_stay_apart(FRESH);
}

#[test]
fn broken_scripts_fail_the_load_naming_file_field_and_line_both() {
    broken_scripts_fail_the_load_naming_file_field_and_line(PERSISTENT);
    broken_scripts_fail_the_load_naming_file_field_and_line(FRESH);
}

#[test]
fn request_fields_behave_as_a_plain_object_both() {
    request_fields_behave_as_a_plain_object(PERSISTENT);
    request_fields_behave_as_a_plain_object(FRESH);
}

#[test]
fn state_persists_or_not_as_the_strategy_says() {
    assert_eq!(counts(PERSISTENT), ["0", "1", "2"]);
    // Tyk's TestGoja_FreshRuntimePerRequest.
    assert_eq!(counts(FRESH), ["0", "0", "0"]);
}

// The limits QuickJS enforces, in both strategies.

#[test]
fn the_timeout_stops_regexes_and_builtin_callbacks_both() {
    for mode in [PERSISTENT, FRESH] {
        the_timeout_stops_regexes_and_builtin_callbacks(mode);
    }
}

#[test]
fn unbounded_allocation_hits_the_memory_limit_and_the_next_request_works() {
    for mode in [PERSISTENT, FRESH] {
        unbounded_allocation_hits_the_memory_limit(mode);
    }
}

#[test]
fn deep_data_and_unbounded_recursion_hit_the_stack_limit_both() {
    for mode in [PERSISTENT, FRESH] {
        deep_data_and_unbounded_recursion_hit_the_stack_limit(mode);
    }
}

#[test]
fn tyk_json_is_refused_on_quickjs_naming_the_field() {
    let s = spec(
        Mode {
            engine: "quickjs",
            strategy: "tyk-json",
        },
        "tj",
        ("counterMw", fixture("counter.js")),
        serde_json::Value::Null,
    );
    let e = gateway::js::load(&s, &HostOptions::default())
        .err()
        .expect("tyk-json loads");
    assert_eq!(e.field, "custom_middleware.strategy");
}
