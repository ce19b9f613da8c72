//! Issue 15's globals through the real gateway: `TykMakeHttpRequest` and
//! `TykBatchRequest` against real local servers (a recorder, a slow one, a
//! barrier that answers only when requests arrive together), underscore's
//! `_`, `TykGetKeyData`/`TykSetKeyData`, per-file scope, bodies as bytes and
//! the type check of a script's `Session`. Every server is on 127.0.0.1:0;
//! nothing asserts a timing.
#![recursion_limit = "256"]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use gateway::config::JsEngine;
use gateway::server::GatewayConfig;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use serde_json::{json, Value};

use common::*;

/// Both engines, as a definition names them.
const ENGINES: [&str; 2] = ["boa", "quickjs"];

/// Writes `script` and an API on `listen` running it as a `pre` entry
/// named `mw`, on `engine`, with `config_data`.
fn js_api(
    dir: &Path,
    id: &str,
    listen: &str,
    target: SocketAddr,
    engine: &str,
    script: &str,
    config: Value,
) {
    let file = dir.join(format!("{id}.js"));
    std::fs::write(&file, script).unwrap();
    let mut api = api_json(
        id,
        listen,
        &format!("http://{target}"),
        true,
        json!({
            "driver": "otto",
            "engine": engine,
            "pre": [{"name": "mw", "path": file.to_str().unwrap()}]
        }),
    );
    api["config_data"] = config;
    write_api(dir, id, &api);
}

/// Starts a gateway over `dir`. The load (which parses and runs every
/// script once) happens on a thread with a script-sized stack: boa's
/// recursive-descent parser takes far more stack in a debug build than a
/// test thread's 2 MiB for a nested object literal.
fn gateway(dir: &Path, threads: usize, jsvm_threads: usize) -> TestGateway {
    let config = GatewayConfig {
        apis_dir: dir.to_path_buf(),
        threads,
        jsvm_threads,
        jsvm_engine: JsEngine::Boa,
        ..GatewayConfig::default()
    };
    let gw = std::thread::Builder::new()
        .stack_size(gateway::js::SCRIPT_STACK_SIZE)
        .spawn(move || start_gateway_with(config))
        .unwrap()
        .join()
        .unwrap();
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    gw
}

/// A script whose answer is `expr`'s value as JSON text (a 200 from the
/// script itself, nothing proxied).
fn answering(expr: &str) -> String {
    format!(
        r#"var mw = new TykJS.TykMiddleware.NewMiddleware({{}});
mw.NewProcessRequest(function (request, session, spec) {{
    var out = (function () {{ {expr} }})();
    request.ReturnOverrides.ResponseCode = 200;
    request.ReturnOverrides.ResponseBody = typeof out === "string" ? out : JSON.stringify(out);
    return mw.ReturnData(request, {{}});
}});
"#
    )
}

#[test]
fn make_http_request_calls_out_and_answers_tyks_json() {
    let (svc, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    let script = answering(
        r#"return TykMakeHttpRequest(JSON.stringify({
            Method: "POST", Domain: spec.config_data.svc, Resource: "/check?x=1",
            Headers: {"X-Test": "1", "Content-Type": "text/plain"}, Body: "hello"}));"#,
    );
    js_api(
        dir.path(),
        "call",
        "/call/",
        svc,
        "boa",
        &script,
        json!({"svc": format!("http://{svc}")}),
    );
    let gw = gateway(dir.path(), 1, 1);

    let got = get(gw.addr, "/call/");
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    let seen = rec.last();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.uri, "/check?x=1");
    assert_eq!(seen.headers["x-test"], "1");
    assert_eq!(seen.headers["connection"], "close", "Tyk sets r.Close");
    assert_eq!(seen.headers["user-agent"], "Go-http-client/1.1");
    assert_eq!(&seen.body[..], b"hello");
    // Tyk's TykJSHttpResponse: Code, Body, Headers, then the lower-case
    // copies, in that order (the text as the script received it).
    let text = got.text();
    let order: Vec<usize> = [
        "\"Code\"",
        "\"Body\"",
        "\"Headers\"",
        "\"code\"",
        "\"body\"",
        "\"headers\"",
    ]
    .iter()
    .map(|k| {
        text.find(k)
            .unwrap_or_else(|| panic!("{k} missing in {text}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    let v = got.json();
    assert_eq!(v["Code"], 200);
    assert_eq!(v["code"], 200);
    assert_eq!(v["Body"], "recorded");
    assert_eq!(v["Headers"]["X-Upstream"], json!(["recorder"]));
    assert_eq!(v["headers"], v["Headers"]);
    gw.stop();
}

#[test]
fn make_http_request_sends_form_data_and_follows_go_field_rules() {
    let (svc, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    // Lower-case field names: Go's decoder matches them case-insensitively.
    let script = answering(
        r#"var r = JSON.parse(TykMakeHttpRequest(JSON.stringify({
            method: "POST", domain: spec.config_data.svc, resource: "/form",
            FormData: {"b": "2 3", "a": "1"}})));
            return {code: r.code};"#,
    );
    js_api(
        dir.path(),
        "form",
        "/form/",
        svc,
        "boa",
        &script,
        json!({"svc": format!("http://{svc}")}),
    );
    let gw = gateway(dir.path(), 1, 1);
    let got = get(gw.addr, "/form/");
    assert_eq!(got.json(), json!({"code": 200}));
    let seen = rec.last();
    assert_eq!(seen.uri, "/form");
    assert_eq!(
        &seen.body[..],
        b"a=1&b=2+3",
        "keys sorted, as url.Values.Encode"
    );
    gw.stop();
}

#[test]
fn make_http_request_failures_answer_undefined_and_the_request_goes_on() {
    let (svc, rec) = recorder();
    let dead = dead_addr();
    let dir = tempfile::tempdir().unwrap();
    let script = answering(&format!(
        r#"return [
            typeof TykMakeHttpRequest(),
            typeof TykMakeHttpRequest("{{not json"),
            typeof TykMakeHttpRequest(JSON.stringify({{Method: "GET"}})),
            typeof TykMakeHttpRequest(JSON.stringify({{Method: 5, Domain: "http://{svc}"}})),
            typeof TykMakeHttpRequest(JSON.stringify({{Domain: "http://{dead}", Resource: "/"}})),
            typeof TykMakeHttpRequest(JSON.stringify({{Domain: "https://{svc}", Resource: "/"}})),
            typeof TykMakeHttpRequest(JSON.stringify({{Domain: "/relative"}}))
        ];"#
    ));
    js_api(
        dir.path(),
        "fails",
        "/fails/",
        svc,
        "boa",
        &script,
        Value::Null,
    );
    let gw = gateway(dir.path(), 1, 1);
    let got = get(gw.addr, "/fails/");
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    assert_eq!(got.json(), json!(vec!["undefined"; 7]));
    // The https attempt reached the server as a plain connection at most;
    // no request was recorded from any of them.
    assert_eq!(rec.count(), 0);
    // A script that then parses the missing answer fails its own request.
    let dir2 = tempfile::tempdir().unwrap();
    let parse = answering(&format!(
        r#"return JSON.parse(TykMakeHttpRequest(JSON.stringify({{Domain: "http://{dead}"}})));"#
    ));
    js_api(
        dir2.path(),
        "parse",
        "/parse/",
        svc,
        "boa",
        &parse,
        Value::Null,
    );
    let gw2 = gateway(dir2.path(), 1, 1);
    assert_eq!(
        get(gw2.addr, "/parse/").status,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    gw.stop();
    gw2.stop();
}

#[test]
fn inline_scripts_refuse_to_block_the_io_thread() {
    for engine in ENGINES {
        let (svc, rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        let script = answering(
            r#"return [typeof TykMakeHttpRequest(JSON.stringify({Domain: spec.config_data.svc, Resource: "/"})),
                       typeof TykBatchRequest(JSON.stringify({requests: [{method: "GET", relative_url: spec.config_data.svc + "/"}]}))];"#,
        );
        js_api(
            dir.path(),
            "inline",
            "/inline/",
            svc,
            engine,
            &script,
            json!({"svc": format!("http://{svc}")}),
        );
        let gw = gateway(dir.path(), 1, 0);
        let got = get(gw.addr, "/inline/");
        assert_eq!(got.json(), json!(["undefined", "undefined"]), "{engine}");
        assert_eq!(
            rec.count(),
            0,
            "{engine}: nothing may be sent from an I/O thread"
        );
        gw.stop();
    }
}

/// A server that answers a request `200 together` once `n` requests are
/// in flight at the same time, or `503 alone` after `wait`: concurrency
/// shows in the answers, not in a clock.
fn barrier_server(n: usize, wait: Duration) -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let addr = l.local_addr().unwrap();
    let arrived = Arc::new(AtomicUsize::new(0));
    let all_here = Arc::new(tokio::sync::Notify::new());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            loop {
                let (s, _) = l.accept().await.unwrap();
                let (arrived, all_here) = (arrived.clone(), all_here.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |_req: Request<Incoming>| {
                        let (arrived, all_here) = (arrived.clone(), all_here.clone());
                        async move {
                            // Registered before counting, so a notify that
                            // follows cannot be missed.
                            let notified = all_here.notified();
                            tokio::pin!(notified);
                            notified.as_mut().enable();
                            let (status, body) = if arrived.fetch_add(1, Ordering::SeqCst) + 1 >= n
                            {
                                all_here.notify_waiters();
                                (200, "together")
                            } else if tokio::time::timeout(wait, notified).await.is_ok() {
                                (200, "together")
                            } else {
                                (503, "alone")
                            };
                            // `arrived` counts requests in flight together.
                            arrived.fetch_sub(1, Ordering::SeqCst);
                            let mut resp =
                                Response::new(Full::new(Bytes::from_static(body.as_bytes())));
                            *resp.status_mut() = StatusCode::from_u16(status).unwrap();
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                        .await;
                });
            }
        });
    });
    addr
}

fn batch_script(urls: &[String], sequential: bool) -> String {
    let requests: Vec<Value> = urls
        .iter()
        .map(|u| json!({"method": "GET", "relative_url": u, "headers": {"X-Batch": "1"}, "body": ""}))
        .collect();
    let arg = json!({"requests": requests, "suppress_parallel_execution": sequential});
    answering(&format!("return TykBatchRequest(JSON.stringify({arg}));"))
}

#[test]
fn batch_requests_run_in_parallel() {
    let dir = tempfile::tempdir().unwrap();
    let (svc, rec) = recorder();
    let dead = dead_addr();
    // Parallel: both barrier requests are in flight at once, so both are
    // answered "together"; a failed one is Tyk's zero reply.
    let barrier = barrier_server(2, Duration::from_secs(4));
    let urls = vec![
        format!("http://{barrier}/one"),
        format!("http://{barrier}/two"),
        format!("http://{svc}/three"),
        format!("http://{dead}/four"),
    ];
    js_api(
        dir.path(),
        "batch",
        "/batch/",
        svc,
        "boa",
        &batch_script(&urls, false),
        Value::Null,
    );
    let gw = gateway(dir.path(), 1, 1);

    let got = get(gw.addr, "/batch/");
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    let replies = got.json();
    let replies = replies.as_array().unwrap();
    assert_eq!(replies.len(), 4);
    let by_url = |u: &str| replies.iter().find(|r| r["relative_url"] == u).cloned();
    for u in &urls[..2] {
        let r = by_url(u).unwrap_or_else(|| panic!("no reply for {u}: {replies:?}"));
        assert_eq!(
            (r["code"].clone(), r["body"].clone()),
            (json!(200), json!("together"))
        );
    }
    let three = by_url(&urls[2]).unwrap();
    assert_eq!(three["body"], "recorded");
    assert_eq!(three["headers"]["X-Upstream"], json!(["recorder"]));
    assert_eq!(rec.last().headers["x-batch"], "1");
    assert!(
        replies.contains(&json!({"relative_url": "", "code": 0, "headers": null, "body": ""})),
        "the unreachable one is the zero reply: {replies:?}"
    );

    gw.stop();
}

#[test]
fn suppressed_batches_run_one_request_at_a_time_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (svc, _rec) = recorder();
    // Sequential: the first waits alone (503), then the second (503).
    let barrier = barrier_server(2, Duration::from_millis(500));
    let seq = vec![format!("http://{barrier}/a"), format!("http://{barrier}/b")];
    js_api(
        dir.path(),
        "seq",
        "/seq/",
        svc,
        "boa",
        &batch_script(&seq, true),
        Value::Null,
    );
    let gw = gateway(dir.path(), 1, 1);
    let got = get(gw.addr, "/seq/");
    let replies = got.json();
    let bodies: Vec<(Value, Value)> = replies
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["relative_url"].clone(), r["body"].clone()))
        .collect();
    assert_eq!(
        bodies,
        vec![
            (json!(seq[0]), json!("alone")),
            (json!(seq[1]), json!("alone"))
        ],
        "in order, one at a time"
    );
    gw.stop();
}

#[test]
fn batch_request_with_bad_json_answers_undefined() {
    let (svc, _rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    let script = answering(
        r#"return [typeof TykBatchRequest("{invalid json}"),
                   typeof TykBatchRequest(JSON.stringify({requests: "x"})),
                   TykBatchRequest(JSON.stringify({requests: []}))];"#,
    );
    js_api(
        dir.path(),
        "badbatch",
        "/badbatch/",
        svc,
        "boa",
        &script,
        Value::Null,
    );
    let gw = gateway(dir.path(), 1, 1);
    assert_eq!(
        get(gw.addr, "/badbatch/").json(),
        json!(["undefined", "undefined", "[]"])
    );
    gw.stop();
}

/// The issue's stall test: with one I/O thread, while a script waits on a
/// slow service, `/plain/` and another JS API are answered before it ends.
#[test]
fn a_waiting_script_does_not_stall_other_requests() {
    let slow_delay = Duration::from_secs(2);
    let (slow, slow_rec) = recorder_with_delay(slow_delay);
    let up = mock();
    let dir = tempfile::tempdir().unwrap();
    let waits = answering(
        r#"var r = JSON.parse(TykMakeHttpRequest(JSON.stringify({Domain: spec.config_data.svc, Resource: "/slow"})));
           return {code: r.Code};"#,
    );
    js_api(
        dir.path(),
        "waits",
        "/waits/",
        up,
        "boa",
        &waits,
        json!({"svc": format!("http://{slow}")}),
    );
    js_api(
        dir.path(),
        "quick",
        "/quick/",
        up,
        "boa",
        &answering("return {quick: true};"),
        Value::Null,
    );
    write_api(
        dir.path(),
        "plain",
        &api_json(
            "plain",
            "/plain/",
            &format!("http://{up}"),
            true,
            Value::Null,
        ),
    );
    let gw = gateway(dir.path(), 1, 1);
    let addr = gw.addr;

    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let waiter = std::thread::spawn(move || {
        let got = get(addr, "/waits/");
        d.store(true, Ordering::SeqCst);
        got
    });
    // Until the slow service holds the script's call (bounded: 20 s).
    for _ in 0..2000 {
        if slow_rec.count() > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        slow_rec.count(),
        1,
        "the script never called the slow service"
    );
    assert_eq!(get(addr, "/plain/hello").status, StatusCode::OK);
    assert_eq!(get(addr, "/quick/").json(), json!({"quick": true}));
    assert!(
        !done.load(Ordering::SeqCst),
        "the other requests were answered only after the waiting script ended"
    );
    let got = waiter.join().unwrap();
    assert_eq!(got.json(), json!({"code": 200}));
    gw.stop();
}

/// Our underscore against underscore's documented behaviour, on both
/// engines: the same expressions, the same answers.
#[test]
fn underscore_behaves_as_documented() {
    let cases = r#"
        var r = {};
        var out = [], ctx = {m: 10};
        _.each([1, 2, 3], function (v, i, list) { out.push(v * this.m + i + list.length); }, ctx);
        r.eachContext = out;
        var keys = [];
        r.eachReturns = _.each({a: 1, b: 2}, function (v, k) { keys.push(k + v); }) !== undefined;
        r.eachObject = keys;
        r.mapObject = _.map({a: 1, b: 2}, function (v, k) { return k + v * 2; });
        r.mapProperty = _.map([{n: "x"}, {n: "y"}], "n");
        r.filter = _.filter([1, 2, 3, 4, 5, 6], function (n) { return n % 2 === 0; });
        r.filterMatch = _.filter([{a: 1, b: 2}, {a: 2}, {a: 1}], {a: 1});
        r.find = _.find([1, 2, 3, 4], function (n) { return n > 2; });
        r.findNone = _.find([1, 2], function (n) { return n > 5; }) === undefined;
        r.reduce = _.reduce([1, 2, 3], function (memo, n) { return memo + n; }, 10);
        r.reduceNoMemo = _.reduce([[0, 1], [2, 3]], function (a, b) { return a.concat(b); });
        r.reduceObject = _.reduce({a: 1, b: 2}, function (memo, v, k) { return memo + k + v; }, "");
        r.keys = _.keys({one: 1, two: 2});
        r.keysOfPrimitive = _.keys(5);
        r.values = _.values({one: 1, two: 2});
        var dest = {a: 1};
        r.extendSame = _.extend(dest, {b: 2}, {a: 3}) === dest;
        r.extend = dest;
        r.pick = _.pick({name: "moe", age: 50, userid: "moe1"}, "name", "age");
        r.pickArray = _.pick({name: "moe", age: 50}, ["age"]);
        r.pickFn = _.pick({name: "moe", age: 50}, function (v) { return typeof v === "number"; });
        r.omit = _.omit({name: "moe", age: 50, userid: "moe1"}, "userid");
        r.omitFn = _.omit({name: "moe", age: 50}, function (v) { return typeof v === "number"; });
        r.contains = [_.contains([1, 2, 3], 3), _.contains([1, 2], 5), _.contains({a: 7}, 7), _.contains([NaN], NaN), _.contains([1, 2, 3], 1, 1)];
        r.isEmpty = [_.isEmpty({}), _.isEmpty([]), _.isEmpty(""), _.isEmpty(null), _.isEmpty(undefined), _.isEmpty({a: 1}), _.isEmpty([0]), _.isEmpty("x")];
        r.has = [_.has({a: 1}, "a"), _.has({a: 1}, "toString"), _.has({a: {b: 1}}, ["a", "b"]), _.has(null, "a")];
        var orig = {a: {deep: 1}, b: 2}, copy = _.clone(orig);
        r.clone = [copy !== orig, copy.a === orig.a, copy.b, _.clone(5), _.clone([1, 2]).length];
        r.types = [_.isString("s"), _.isString(1), _.isArray([]), _.isArray({length: 0}), _.isObject({}), _.isObject(function () {}),
                   _.isObject(null), _.isObject("s"), _.isFunction(_.each), _.isFunction({})];
        r.first = [_.first([5, 4, 3]), _.first([5, 4, 3], 2), _.first([]) === undefined];
        r.last = [_.last([5, 4, 3]), _.last([5, 4, 3], 2), _.last([], 2)];
        r.uniq = _.uniq([1, 2, 1, 4, 1, 3]);
        r.uniqSorted = _.uniq([1, 1, 2, 2, 3], true);
        r.uniqIteratee = _.uniq([{id: 1, n: "a"}, {id: 2}, {id: 1, n: "b"}], function (x) { return x.id; });
        r.uniqProperty = _.uniq([{id: 1, n: "a"}, {id: 1, n: "b"}], "id");
        r.sortBy = _.sortBy([1, 2, 3, 4, 5, 6], function (n) { return Math.sin(n); });
        r.sortByStable = _.pluck(_.sortBy([{n: "a", k: 1}, {n: "b", k: 0}, {n: "c", k: 1}, {n: "d", k: 0}], "k"), "n");
        r.sortByUndefinedLast = _.sortBy([3, undefined, 1], _.identity);
        r.groupBy = _.groupBy([1.3, 2.1, 2.4], function (n) { return Math.floor(n); });
        r.groupByLength = _.groupBy(["one", "two", "three"], "length");
        r.without = _.without([1, 2, 1, 0, 3, 1, 4], 0, 1);
        r.template = _.template("hello: <%= name %> <%- html %><% if (n) { %>!<% } %>")({name: "moe", html: "<b>", n: 1});
        return r;
    "#;
    let expected = json!({
        "eachContext": [13, 24, 35],
        "eachReturns": true,
        "eachObject": ["a1", "b2"],
        "mapObject": ["a2", "b4"],
        "mapProperty": ["x", "y"],
        "filter": [2, 4, 6],
        "filterMatch": [{"a": 1, "b": 2}, {"a": 1}],
        "find": 3,
        "findNone": true,
        "reduce": 16,
        "reduceNoMemo": [0, 1, 2, 3],
        "reduceObject": "a1b2",
        "keys": ["one", "two"],
        "keysOfPrimitive": [],
        "values": [1, 2],
        "extendSame": true,
        "extend": {"a": 3, "b": 2},
        "pick": {"name": "moe", "age": 50},
        "pickArray": {"age": 50},
        "pickFn": {"age": 50},
        "omit": {"name": "moe", "age": 50},
        "omitFn": {"name": "moe"},
        "contains": [true, false, true, true, false],
        "isEmpty": [true, true, true, true, true, false, false, false],
        "has": [true, false, true, false],
        "clone": [true, true, 2, 5, 2],
        "types": [true, false, true, false, true, true, false, false, true, false],
        "first": [5, [5, 4], true],
        "last": [3, [4, 3], []],
        "uniq": [1, 2, 4, 3],
        "uniqSorted": [1, 2, 3],
        "uniqIteratee": [{"id": 1, "n": "a"}, {"id": 2}],
        "uniqProperty": [{"id": 1, "n": "a"}],
        "sortBy": [5, 4, 6, 3, 1, 2],
        "sortByStable": ["b", "d", "a", "c"],
        "sortByUndefinedLast": [1, 3, null],
        "groupBy": {"1": [1.3], "2": [2.1, 2.4]},
        "groupByLength": {"3": ["one", "two"], "5": ["three"]},
        "without": [2, 3, 4],
        "template": "hello: moe &lt;b&gt;!"
    });
    for engine in ENGINES {
        let (up, _rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        js_api(
            dir.path(),
            "under",
            "/under/",
            up,
            engine,
            &answering(cases),
            Value::Null,
        );
        let gw = gateway(dir.path(), 1, 1);
        let got = get(gw.addr, "/under/");
        assert_eq!(got.status, StatusCode::OK, "{engine}: {}", got.text());
        let v = got.json();
        for (k, want) in expected.as_object().unwrap() {
            assert_eq!(&v[k], want, "{engine}: _.{k}");
        }
        gw.stop();
    }
}

/// `_` is loaded on first use, per context, in every strategy; a script
/// may replace it.
#[test]
fn underscore_is_there_in_fresh_contexts_and_can_be_replaced() {
    for engine in ENGINES {
        let (up, _rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        js_api(
            dir.path(),
            "fresh",
            "/fresh/",
            up,
            engine,
            &answering("return _.keys({a: 1});"),
            Value::Null,
        );
        let mut def: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("fresh.json")).unwrap()).unwrap();
        def["custom_middleware"]["strategy"] = json!("fresh");
        write_api(dir.path(), "fresh", &def);
        js_api(
            dir.path(),
            "mine",
            "/mine/",
            up,
            engine,
            &format!(
                "var _ = {{keys: function () {{ return 'mine'; }}}};\n{}",
                answering("return _.keys({});")
            ),
            Value::Null,
        );
        let gw = gateway(dir.path(), 1, 1);
        for _ in 0..3 {
            assert_eq!(get(gw.addr, "/fresh/").json(), json!(["a"]), "{engine}");
        }
        assert_eq!(get(gw.addr, "/mine/").text(), "mine", "{engine}");
        gw.stop();
    }
}

#[test]
fn key_data_answers_as_tyk_does_for_an_unknown_key() {
    for engine in ENGINES {
        let (up, _rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        let script = answering(
            r#"return [JSON.parse(TykGetKeyData("some-key", spec.APIID)),
                       typeof TykSetKeyData("some-key", JSON.stringify({rate: 1}), "1"),
                       typeof TykSetKeyData("some-key", "not json", "0")];"#,
        );
        js_api(
            dir.path(),
            "keys",
            "/keys/",
            up,
            engine,
            &script,
            Value::Null,
        );
        let gw = gateway(dir.path(), 1, 1);
        assert_eq!(
            get(gw.addr, "/keys/").json(),
            json!([{"status": "error", "message": "Key not found"}, "undefined", "undefined"]),
            "{engine}"
        );
        gw.stop();
    }
}

/// A pre and a post file that both declare `var handler` (and both entries
/// are named `handler`) each run their own.
#[test]
fn each_file_has_its_own_scope() {
    let hook = |header: &str| {
        format!(
            r#"var handler = new TykJS.TykMiddleware.NewMiddleware({{}});
var shared = "{header}";
handler.NewProcessRequest(function (request, session, spec) {{
    request.SetHeaders["{header}"] = shared;
    return handler.ReturnData(request, {{}});
}});
"#
        )
    };
    for engine in ENGINES {
        let up = mock();
        let dir = tempfile::tempdir().unwrap();
        let (pre, post) = (dir.path().join("pre.js"), dir.path().join("post.js"));
        std::fs::write(&pre, hook("X-Pre")).unwrap();
        std::fs::write(&post, hook("X-Post")).unwrap();
        let api = api_json(
            "scoped",
            "/scoped/",
            &format!("http://{up}"),
            true,
            json!({
                "driver": "otto",
                "engine": engine,
                "pre": [{"name": "handler", "path": pre.to_str().unwrap()}],
                "post": [{"name": "handler", "path": post.to_str().unwrap()}]
            }),
        );
        write_api(dir.path(), "scoped", &api);
        let gw = gateway(dir.path(), 1, 1);
        let got = get(gw.addr, "/scoped/x");
        assert_eq!(got.status, StatusCode::OK, "{engine}: {}", got.text());
        let echo = got.json();
        assert_eq!(echo["headers"]["X-Pre"], "X-Pre", "{engine}: {echo}");
        assert_eq!(echo["headers"]["X-Post"], "X-Post", "{engine}: {echo}");
        gw.stop();
    }
}

#[test]
fn an_untouched_body_reaches_the_upstream_byte_for_byte() {
    let body: Vec<u8> = vec![b'a', 0xff, 0x00, 0xfe, b'z', 0xc3];
    let header_only = r#"var mw = new TykJS.TykMiddleware.NewMiddleware({});
mw.NewProcessRequest(function (request) {
    request.SetHeaders["X-Seen-Length"] = String(request.Body.length);
    return mw.ReturnData(request, {});
});"#;
    let number = r#"var mw = new TykJS.TykMiddleware.NewMiddleware({});
mw.NewProcessRequest(function (request) { request.Body = 42; return mw.ReturnData(request, {}); });"#;
    for engine in ENGINES {
        let (up, rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        js_api(
            dir.path(),
            "bytes",
            "/bytes/",
            up,
            engine,
            header_only,
            Value::Null,
        );
        js_api(
            dir.path(),
            "number",
            "/number/",
            up,
            engine,
            number,
            Value::Null,
        );
        let gw = gateway(dir.path(), 1, 1);
        let got = send(
            gw.addr,
            "POST",
            "/bytes/",
            &[("content-type", "application/octet-stream")],
            &body,
        );
        assert_eq!(got.status, StatusCode::OK, "{engine}");
        let seen = rec.last();
        assert_eq!(&seen.body[..], &body[..], "{engine}");
        assert!(
            seen.headers.contains_key("x-seen-length"),
            "{engine}: the script ran"
        );
        let got = send(gw.addr, "POST", "/number/", &[], b"original");
        assert_eq!(got.status, StatusCode::OK, "{engine}: {}", got.text());
        let seen = rec.last();
        assert_eq!(&seen.body[..], b"42", "{engine}: as Tyk's b64enc(42)");
        assert_eq!(seen.headers["content-length"], "2", "{engine}");
        gw.stop();
    }
}

#[test]
fn a_malformed_session_in_the_answer_is_a_500_as_in_tyk() {
    let script = |ret: &str| {
        format!(
            "var mw = new TykJS.TykMiddleware.NewMiddleware({{}});\nmw.NewProcessRequest(function (request) {{ return {ret}; }});"
        )
    };
    let cases = [
        (
            "notobject",
            "mw.ReturnAuthData(request, \"not a session\")",
            500,
        ),
        (
            "badrate",
            "mw.ReturnAuthData(request, {rate: \"fast\"})",
            500,
        ),
        ("badmeta", "mw.ReturnData(request, {count: 5})", 500),
        (
            "goodsession",
            "mw.ReturnAuthData(request, {rate: 5, meta_data: {n: 1}})",
            200,
        ),
        ("goodmeta", "mw.ReturnData(request, {user: \"moe\"})", 200),
    ];
    for engine in ENGINES {
        let (up, _rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        for (id, ret, _) in cases {
            js_api(
                dir.path(),
                id,
                &format!("/{id}/"),
                up,
                engine,
                &script(ret),
                Value::Null,
            );
        }
        let gw = gateway(dir.path(), 1, 1);
        for (id, ret, status) in cases {
            let got = get(gw.addr, &format!("/{id}/"));
            assert_eq!(
                got.status.as_u16(),
                status,
                "{engine}: {ret}: {}",
                got.text()
            );
        }
        gw.stop();
    }
}
