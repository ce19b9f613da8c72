//! Values in a script's answer that are not what Tyk's fields hold, on
//! every engine and strategy: what Tyk's transport (`JSON.stringify` in
//! the VM, then Go's `encoding/json`) makes of them is what the gateway
//! does (`gateway/src/js/gostring.rs`). `tyk-json` is that transport, so
//! where `persistent` and `fresh` read the answer's objects directly they
//! must read them as it would.
//!
//! The first test gives named cases and Tyk's outcome for each. The second
//! is a seeded, differential fuzz: `js_fixtures/answer_fuzz.js` draws each answer from the request's
//! `X-Seed` (its own PRNG, so both engines draw the same values): values
//! of every JS type where Tyk wants a string, a map or a list. One gateway
//! serves the fixture under six APIs (two engines, three strategies) in
//! front of a recording upstream; each seed goes to all six, and what the
//! client gets (status, headers but `Date`, body) and what the upstream
//! gets (method, target, headers, body) must be the same for all six.
//!
//! It found, when written: `SetHeaders["X"] = undefined` failing the
//! request (Tyk leaves the entry out), a `null` value failing it (Go's
//! decoder makes it `""`), a `Date` refused as a header value (Tyk sends
//! its ISO text), boa reading non-enumerable properties (a RegExp's
//! `lastIndex` as a header), and QuickJS taking a `Date` `SessionMeta`
//! for an empty one. More seeds by hand:
//! `GATEWAY_FUZZ_SEED=7 GATEWAY_FUZZ_CASES=3000 cargo test -p gateway --test js_answer_fuzz`.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use gateway::server::GatewayConfig;
use serde_json::json;

/// What one request came to: the client's response and what the upstream
/// saw of it, if anything.
#[derive(Debug, PartialEq)]
struct Outcome {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
    upstream: Option<Upstream>,
}

/// What the upstream saw: method, target, headers (but `Host`), body.
#[derive(Debug, PartialEq)]
struct Upstream {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: String,
}

fn pairs(h: &http::HeaderMap, skip: &[&str]) -> Vec<(String, String)> {
    let mut v: Vec<_> = h
        .iter()
        .filter(|(n, _)| !skip.contains(&n.as_str()))
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

fn name(engine: gateway::config::JsEngine, strategy: gateway::js::Strategy) -> String {
    format!("{engine:?}-{strategy:?}").to_lowercase()
}

/// One gateway serving `fixture` (entry `entry`) under one API per engine
/// and strategy, named by [`name`], in front of a recording upstream.
fn start(fixture: &str, entry: &str) -> (common::TestGateway, common::Recorder, tempfile::TempDir) {
    let (up, rec) = common::recorder();
    let dir = tempfile::tempdir().unwrap();
    let script = format!("{}/tests/js_fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    for &(engine, strategy) in common::JS_COMBOS {
        let api = name(engine, strategy);
        let engine = match engine {
            gateway::config::JsEngine::Boa => "boa",
            gateway::config::JsEngine::QuickJs => "quickjs",
        };
        let strategy = match strategy {
            gateway::js::Strategy::Persistent => "persistent",
            gateway::js::Strategy::TykJson => "tyk-json",
            gateway::js::Strategy::Fresh => "fresh",
        };
        let mw = json!({
            "driver": "otto",
            "engine": engine,
            "strategy": strategy,
            "pre": [{ "name": entry, "path": script }],
        });
        common::write_api(
            dir.path(),
            &api,
            &common::api_json(&api, &format!("/{api}/"), &format!("http://{up}"), true, mw),
        );
    }
    let gw = common::start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 1,
        ..GatewayConfig::default()
    });
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    (gw, rec, dir)
}

/// What the upstream saw of the last request, if it saw it.
fn seen_since(rec: &common::Recorder, before: usize) -> Option<common::Seen> {
    (rec.count() > before).then(|| rec.last())
}

#[test]
fn values_tyk_s_decoder_takes_are_taken_and_the_rest_refused_everywhere() {
    let (gw, rec, _dir) = start("go_values.js", "valuesMw");
    for &(engine, strategy) in common::JS_COMBOS {
        let api = name(engine, strategy);
        let case = |c: &str| {
            let before = rec.count();
            let got = common::send(
                gw.addr,
                "GET",
                &format!("/{api}/p?x=1"),
                &[("x-case", c), ("x-b", "b")],
                b"",
            );
            (got, seen_since(&rec, before))
        };
        // Proxied, with the header as Tyk sets it (or leaves it out).
        let proxied = |c: &str| {
            let (got, seen) = case(c);
            assert_eq!(got.status, 200, "{api} {c}: {}", got.text());
            let seen = seen.unwrap_or_else(|| panic!("{api} {c}: not proxied"));
            assert_eq!(seen.headers["x-ran"], c, "{api} {c}");
            seen
        };
        let refused = |c: &str| {
            let (got, seen) = case(c);
            assert_eq!(got.status, 500, "{api} {c}: {}", got.text());
            assert!(seen.is_none(), "{api} {c}: proxied");
        };
        // Left out by JSON.stringify: nothing set.
        for c in ["undefined-header", "function-header", "hidden-header"] {
            let seen = proxied(c);
            for h in ["x-user", "x-fn", "x-hidden"] {
                assert!(!seen.headers.contains_key(h), "{api} {c}: {h} set");
            }
        }
        // JSON null, which Go decodes into a string as "".
        assert_eq!(proxied("null-header").headers["x-null"], "", "{api}");
        assert_eq!(proxied("nan-header").headers["x-nan"], "", "{api}");
        // What toJSON returns; a String object's string.
        assert_eq!(
            proxied("date-header").headers["x-date"],
            "1970-01-01T00:00:00.000Z",
            "{api}"
        );
        assert_eq!(proxied("boxed-header").headers["x-boxed"], "boxed", "{api}");
        // A RegExp's only own property (lastIndex) is not enumerable: the
        // SetHeaders it replaced (with X-Ran) is gone, nothing is set.
        let (got, seen) = case("regexp-headers");
        assert_eq!(got.status, 200, "{api}: {}", got.text());
        let seen = seen.expect("proxied");
        assert!(!seen.headers.contains_key("x-ran"), "{api}");
        assert!(!seen.headers.contains_key("lastindex"), "{api}");
        // Query: undefined left out, null "", a Date its text; a null list
        // adds nothing, a null item "".
        let seen = proxied("params");
        let (_, query) = seen.uri.split_once('?').expect("a query");
        let mut params: Vec<&str> = query.split('&').collect();
        params.sort_unstable();
        assert_eq!(
            params,
            ["d=1970-01-01T00%3A00%3A00.000Z", "g=", "g=1", "n=", "x=1"],
            "{api}: {}",
            seen.uri
        );
        // Lists: a Proxy of an array is a list; a null or left-out item "".
        assert!(!proxied("list-items").headers.contains_key("x-b"), "{api}");
        assert!(
            !proxied("list-to-json").headers.contains_key("x-b"),
            "{api}"
        );
        // What Go's decoder refuses fails the request, wherever it is in
        // the answer: a number for a string; an array (a Proxy of one) for
        // a map; an override field with no override code; an edit beside
        // an override that answers; a Date as SessionMeta (a string); a
        // number or a string for a boolean.
        for c in [
            "number-header",
            "proxied-map",
            "no-code-bad-header",
            "code-bad-edit",
            "date-meta",
            "number-ignore-body",
            "string-override-error",
            // A URL that is no absolute path or URL (Tyk proxies an empty
            // or relative one, and skips the rest of the answer for one
            // Go cannot parse): a broken answer, failed closed.
            "url-undefined",
            "url-null",
            "url-empty",
            "url-relative",
            "url-unparseable",
        ] {
            refused(c);
        }
        // An override's headers by the same rules.
        let (got, seen) = case("code-null-header");
        assert_eq!(got.status, 200, "{api}: {}", got.text());
        assert!(seen.is_none(), "{api}: an override was proxied");
        assert_eq!(got.text(), "forced", "{api}");
        assert_eq!(got.headers["x-r"], "", "{api}");
        assert!(!got.headers.contains_key("x-s"), "{api}");
        assert_eq!(got.headers["x-d"], "1970-01-01T00:00:00.000Z", "{api}");
        // NaN as the code is JSON null: no override.
        proxied("nan-code");
        // A null boolean is false: the script's body goes upstream. So is
        // a toJSON answering null; a Boolean object is its value (the
        // client's empty body goes upstream).
        assert_eq!(&proxied("null-ignore-body").body[..], b"replaced", "{api}");
        assert_eq!(
            &proxied("to-json-ignore-body").body[..],
            b"replaced",
            "{api}"
        );
        assert_eq!(&proxied("boxed-ignore-body").body[..], b"", "{api}");
    }
    gw.stop();
}

#[test]
fn every_engine_and_strategy_reads_a_random_answer_as_tyk_s_transport_does() {
    let panics = common::fuzz::panics();
    let panics_before = panics.load(Ordering::SeqCst);
    let (gw, rec, _dir) = start("answer_fuzz.js", "fuzzMw");

    let (mut rng, cases) = common::fuzz::source(0x5eed_a115, 300);
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    for _ in 0..cases {
        let seed = rng.u32(..).to_string();
        let post = rng.bool();
        let mut outcomes = Vec::new();
        for &(engine, strategy) in common::JS_COMBOS {
            let api = name(engine, strategy);
            let before = rec.count();
            let (method, body): (&str, &[u8]) = if post {
                ("POST", br#"{"k":"v"}"#)
            } else {
                ("GET", b"")
            };
            let got = common::send(
                gw.addr,
                method,
                &format!("/{api}/p/a?x=1&y=2"),
                &[("x-seed", &seed), ("x-a", "from-client"), ("x-b", "b")],
                body,
            );
            let upstream = seen_since(&rec, before).map(|seen| Upstream {
                method: seen.method.to_string(),
                target: seen.uri,
                headers: pairs(&seen.headers, &["host", "x-seed"]),
                body: String::from_utf8_lossy(&seen.body).into_owned(),
            });
            outcomes.push((
                api,
                Outcome {
                    status: got.status.as_u16(),
                    headers: pairs(&got.headers, &["date"]),
                    body: got.text(),
                    upstream,
                },
            ));
        }
        let (first, expected) = &outcomes[0];
        for (api, got) in &outcomes[1..] {
            assert_eq!(
                got,
                expected,
                "X-Seed {seed} ({method}): {api} answered otherwise than {first} \
                 (replay: send X-Seed {seed} to each API of this test)",
                method = if post { "POST" } else { "GET" },
            );
        }
        *statuses.entry(expected.status).or_default() += 1;
    }
    // The answers are varied enough to mean something: some go through,
    // some are refused, some answer for the upstream.
    assert!(
        statuses.get(&200).copied().unwrap_or(0) > cases / 10,
        "{statuses:?}"
    );
    assert!(
        statuses.get(&500).copied().unwrap_or(0) > cases / 10,
        "{statuses:?}"
    );
    assert!(statuses.len() >= 3, "{statuses:?}");

    // Nothing panicked, and every API still serves a plain answer.
    assert_eq!(
        panics.load(Ordering::SeqCst),
        panics_before,
        "a panic in this process: the gateway's, or another test's of this file"
    );
    for &(engine, strategy) in common::JS_COMBOS {
        let api = name(engine, strategy);
        let got = common::send(
            gw.addr,
            "GET",
            &format!("/{api}/p/a"),
            &[("x-seed", "plain")],
            b"",
        );
        assert_eq!(got.status, 200, "{api}: {}", got.text());
        assert_eq!(rec.last().headers["x-fuzz"], "plain", "{api}");
    }
    gw.stop();
}
