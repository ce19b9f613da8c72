//! The gateway's request path without middleware, end to end: real sockets,
//! the real gateway, the real mock upstream and a capturing upstream.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

fn target(addr: std::net::SocketAddr) -> String {
    format!("http://{addr}")
}

#[test]
fn routing_strips_and_joins_like_tyk() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    let t = target(up);
    write_api(
        dir.path(),
        "slash",
        &api_json("slash", "/gopl/", &t, true, Value::Null),
    );
    write_api(
        dir.path(),
        "bare",
        &api_json("bare", "/gopl", &format!("{t}/bare"), true, Value::Null),
    );
    write_api(
        dir.path(),
        "deep",
        &api_json(
            "deep",
            "/gopl/deep/",
            &format!("{t}/base"),
            true,
            Value::Null,
        ),
    );
    write_api(
        dir.path(),
        "keep",
        &api_json("keep", "/keep/", &format!("{t}/base/"), false, Value::Null),
    );
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);

    for (request, upstream) in [
        ("/gopl/hello/?a=1", "/hello/?a=1"),
        ("/gopl/", "/"),
        // Tyk's singleJoiningSlash: nothing left after the strip adds nothing.
        ("/gopl", "/bare"),
        ("/goplx?q=a%20b&q=c", "/bare/x?q=a%20b&q=c"),
        ("/gopl/deep/x", "/base/x"),
        ("/gopl/deeper", "/deeper"),
        ("/keep/a/b?z", "/base/keep/a/b?z"),
    ] {
        let got = get(gw.addr, request);
        assert_eq!(got.status, 200, "{request}");
        assert_eq!(got.text(), "recorded", "{request}");
        assert_eq!(
            rec.last().uri,
            upstream,
            "{request} should reach the upstream as {upstream}"
        );
    }
    let got = get(gw.addr, "/nothing/here");
    assert_eq!(got.status, 404);
    assert_eq!(got.text(), "Not Found");
    gw.stop();
}

#[test]
fn the_upstream_sees_what_the_client_sent_plus_proxy_headers() {
    let mock = mock();
    let dir = tempfile::tempdir().unwrap();
    write_api(
        dir.path(),
        "plain",
        &api_json("plain", "/plain/", &target(mock), true, Value::Null),
    );
    let gw = start_gateway(dir.path());
    let headers = [("X-Demo", "one"), ("Accept", "application/json")];

    // The same request to the upstream directly and through the gateway.
    let direct = send(mock, "GET", "/hello/", &headers, b"").json();
    let proxied = send(gw.addr, "GET", "/plain/hello/", &headers, b"");
    assert_eq!(proxied.status, 200);
    assert_eq!(proxied.headers["content-type"], "application/json");
    let proxied = proxied.json();
    assert_eq!(proxied["path"], direct["path"]);
    assert_eq!(proxied["method"], "GET");
    assert_eq!(proxied["message"], "hello from mock upstream");
    let mut expected = direct["headers"].clone();
    expected["X-Forwarded-For"] = json!("127.0.0.1");
    // The client sent no User-Agent: Tyk's director sets its own.
    expected["User-Agent"] = json!(gateway::upstream::TYK_USER_AGENT);
    // The gateway's name, by which it recognises a request that loops back
    // (Tyk sends no Via: the one header we add beyond Tyk's).
    let via = proxied["headers"]["Via"].as_str().unwrap_or_default();
    let name = via.strip_prefix("1.1 gw-").unwrap_or_default();
    assert!(
        name.len() == 16 && name.bytes().all(|b| b.is_ascii_hexdigit()),
        "Via: {via:?}"
    );
    expected["Via"] = json!(via);
    assert_eq!(
        proxied["headers"], expected,
        "only X-Forwarded-For, Tyk's default User-Agent and Via are added"
    );
    gw.stop();
}

#[test]
fn post_bodies_headers_and_host_reach_the_upstream() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    write_api(
        dir.path(),
        "a",
        &api_json("a", "/a/", &target(up), true, Value::Null),
    );
    let mut keep_host = api_json("b", "/b/", &target(up), true, Value::Null);
    keep_host["proxy"]["preserve_host_header"] = json!(true);
    write_api(dir.path(), "b", &keep_host);
    let gw = start_gateway(dir.path());

    let body = vec![b'x'; 200_000];
    let got = send(
        gw.addr,
        "POST",
        "/a/upload?id=7",
        &[
            ("Content-Type", "application/octet-stream"),
            ("X-Multi", "1"),
            ("X-Multi", "2"),
            ("X-Forwarded-For", "10.0.0.1"),
            ("Connection", "X-Hop"),
            ("X-Hop", "must not pass"),
            ("Proxy-Authorization", "secret"),
        ],
        &body,
    );
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["x-upstream"], "recorder");
    assert!(
        got.headers.get("keep-alive").is_none(),
        "hop-by-hop response header leaked"
    );
    let seen = rec.last();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.uri, "/upload?id=7");
    assert_eq!(seen.version, http::Version::HTTP_11);
    assert_eq!(seen.body.len(), body.len());
    assert_eq!(seen.headers["content-type"], "application/octet-stream");
    let multi: Vec<_> = seen.headers.get_all("x-multi").iter().collect();
    assert_eq!(multi, ["1", "2"]);
    assert_eq!(seen.headers["x-forwarded-for"], "10.0.0.1, 127.0.0.1");
    assert_eq!(
        seen.headers["host"],
        up.to_string(),
        "Host is rewritten to the target"
    );
    assert!(seen.headers.get("x-hop").is_none());
    assert!(seen.headers.get("proxy-authorization").is_none());

    let client_host = gw.addr.to_string();
    send(gw.addr, "GET", "/b/", &[], b"");
    assert_eq!(
        rec.last().headers["host"],
        client_host.as_str(),
        "preserve_host_header keeps it"
    );
    gw.stop();
}

#[test]
fn http10_clients_without_keepalive_still_reuse_upstream_connections() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    write_api(
        dir.path(),
        "a",
        &api_json("a", "/a/", &target(up), true, Value::Null),
    );
    let gw = start_gateway(dir.path());
    for i in 0..20 {
        // ab's request: HTTP/1.0, no keep-alive; the gateway must close.
        let resp = raw(gw.addr, &format!("GET /a/n{i} HTTP/1.0\r\nHost: x\r\nUser-Agent: ApacheBench/2.3\r\nAccept: */*\r\n\r\n"));
        assert!(resp.starts_with("HTTP/1.0 200"), "{resp}");
        assert!(resp.ends_with("recorded"), "{resp}");
    }
    assert_eq!(rec.count(), 20);
    assert!(rec
        .requests()
        .iter()
        .all(|s| s.version == http::Version::HTTP_11));
    // Two workers, each with its own pool, sequential requests: at most two.
    assert!(
        rec.connections() <= 2,
        "{} upstream connections for 20 requests",
        rec.connections()
    );
    gw.stop();
}

#[test]
fn keepalive_clients_send_many_requests_on_one_connection() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    write_api(
        dir.path(),
        "a",
        &api_json("a", "/a/", &target(up), true, Value::Null),
    );
    let gw = start_gateway(dir.path());
    let mut request = String::new();
    for i in 0..5 {
        request.push_str(&format!("GET /a/k{i} HTTP/1.1\r\nHost: x\r\n\r\n"));
    }
    request.push_str("GET /a/last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let resp = raw(gw.addr, &request);
    assert_eq!(resp.matches("HTTP/1.1 200 OK").count(), 6, "{resp}");
    assert_eq!(rec.count(), 6);
    gw.stop();
}

#[test]
fn upstream_down_answers_tyks_500() {
    let dir = tempfile::tempdir().unwrap();
    let dead = dead_addr();
    write_api(
        dir.path(),
        "a",
        &api_json("a", "/a/", &target(dead.addr()), true, Value::Null),
    );
    let gw = start_gateway(dir.path());
    let got = get(gw.addr, "/a/x");
    assert_eq!(got.status, 500);
    assert_eq!(got.headers["content-type"], "application/json");
    assert_eq!(
        got.text(),
        "{\n    \"error\": \"There was a problem proxying the request\"\n}"
    );
    gw.stop();
}

#[test]
fn bad_definitions_are_named_and_the_good_ones_serve() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    let t = target(up);
    let d = dir.path();
    write_api(
        d,
        "good",
        &api_json("good", "/good/", &t, true, Value::Null),
    );
    std::fs::write(
        d.join("broken.json"),
        b"{ \"api_id\": \"x\",\n  \"proxy\": { ",
    )
    .unwrap();
    write_api(
        d,
        "nolisten",
        &api_json("nolisten", "", &t, true, Value::Null),
    );
    let mut no_target = api_json("notarget", "/nt/", "", true, Value::Null);
    no_target["proxy"]
        .as_object_mut()
        .unwrap()
        .remove("target_url");
    write_api(d, "notarget", &no_target);
    write_api(
        d,
        "https",
        &api_json("https", "/https/", "https://example.com", true, Value::Null),
    );
    write_api(
        d,
        "zdup",
        &api_json("zdup", "/good/", &t, true, Value::Null),
    );
    let mut keyed = api_json("keyed", "/keyed/", &t, true, Value::Null);
    keyed["use_keyless"] = json!(false);
    write_api(d, "keyed", &keyed);
    let python = json!({"driver": "python", "pre": [{"name": "f", "path": "m.py"}]});
    write_api(d, "python", &api_json("python", "/py/", &t, true, python));
    let mut inactive = api_json("inactive", "/off/", &t, true, Value::Null);
    inactive["active"] = json!(false);
    write_api(d, "inactive", &inactive);
    std::fs::write(d.join("notes.txt"), b"not a definition").unwrap();
    // `*.json` entries that are not files are named, not skipped in
    // silence (and a FIFO is not read: that would wait forever).
    std::fs::create_dir(d.join("adir.json")).unwrap();
    std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling.json")).unwrap();
    let fifo = std::ffi::CString::new(d.join("fifo.json").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);

    let gw = start_gateway(d);
    let mut errors: Vec<(String, String, String)> = gw
        .load_errors
        .iter()
        .map(|e| {
            let file = e.file.file_name().unwrap().to_string_lossy().into_owned();
            (file, e.field.clone(), e.message.clone())
        })
        .collect();
    errors.sort();
    let fields: Vec<(&str, &str)> = errors
        .iter()
        .map(|(f, fld, _)| (f.as_str(), fld.as_str()))
        .collect();
    assert_eq!(
        fields,
        [
            ("adir.json", "-"),
            ("broken.json", "-"),
            ("dangling.json", "-"),
            ("fifo.json", "-"),
            ("https.json", "proxy.target_url"),
            ("keyed.json", "use_keyless"),
            ("nolisten.json", "proxy.listen_path"),
            ("notarget.json", "proxy.target_url"),
            ("python.json", "custom_middleware.driver"),
            ("zdup.json", "proxy.listen_path"),
        ],
        "{errors:#?}"
    );
    assert!(errors[0].2.contains("is a directory"), "{}", errors[0].2);
    assert!(
        errors[1].2.contains("line 2"),
        "JSON errors give the position: {}",
        errors[1].2
    );
    assert!(errors[2].2.contains("No such file"), "{}", errors[2].2);
    assert!(
        errors[3].2.contains("not a regular file"),
        "{}",
        errors[3].2
    );
    assert!(errors[4].2.contains("only http://"), "{}", errors[4].2);
    assert!(errors[8].2.contains("\"python\""), "{}", errors[8].2);

    assert_eq!(get(gw.addr, "/good/ok").status, 200);
    assert_eq!(rec.last().uri, "/ok");
    assert_eq!(
        get(gw.addr, "/off/").status,
        404,
        "inactive APIs are not served"
    );
    // Valid but needing authentication: routed, failing closed.
    assert_eq!(get(gw.addr, "/keyed/").status, 500);
    gw.stop();
}

/// A listen path no request can match is refused naming the field, where
/// it used to load and never serve: requests are routed with their escapes
/// decoded (`/%74est/x` went to the `/` API), and a request path is ASCII
/// without `?`, `#` or control characters.
#[test]
fn listen_paths_no_request_can_match_are_refused() {
    let (up, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    let (d, t) = (dir.path(), target(up));
    let cases = [
        ("escaped", "/%74est/", "% escape"),
        ("query", "/q?x=1/", "? or #"),
        ("fragment", "/f#x/", "? or #"),
        ("tab", "/tab\tx/", "control character"),
        ("accent", "/caf\u{e9}/", "outside ASCII"),
    ];
    for (name, listen, _) in cases {
        write_api(d, name, &api_json(name, listen, &t, true, Value::Null));
    }
    write_api(d, "all", &api_json("all", "/", &t, false, Value::Null));
    let gw = start_gateway(d);
    assert_eq!(gw.load_errors.len(), cases.len(), "{:?}", gw.load_errors);
    for (name, _, why) in cases {
        let e = gw
            .load_errors
            .iter()
            .find(|e| e.file.ends_with(format!("{name}.json")))
            .unwrap_or_else(|| panic!("{name} was not refused: {:?}", gw.load_errors));
        assert_eq!(e.field, "proxy.listen_path");
        assert!(e.message.contains("can never match a request"), "{e}");
        assert!(e.message.contains(why), "{e}");
    }
    assert_eq!(get(gw.addr, "/test/x").status, 200);
    assert_eq!(rec.last().uri, "/test/x");
    gw.stop();
}

#[test]
fn with_no_definitions_the_gateway_still_answers_health_checks() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start_gateway(dir.path());
    let got = get(gw.addr, "/hello");
    assert_eq!(got.status, 200);
    let health = got.json();
    assert_eq!(health["status"], "pass");
    assert!(health["version"].is_string() && health["description"].is_string());
    assert_eq!(get(gw.addr, "/plain/").status, 404);
    gw.stop();
}

#[test]
fn the_repos_plain_definition_parses_and_serves() {
    // apis/ as shipped: plain-hello serves; the seed's two definitions parse.
    let mock = mock();
    let dir = tempfile::tempdir().unwrap();
    let apis = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../apis");
    for name in ["plain-hello", "gopl-hello", "jsvm-hello"] {
        let text = std::fs::read_to_string(apis.join(format!("{name}.json"))).unwrap();
        let parsed = gateway::config::parse_definition(&apis.join(name), text.as_bytes()).unwrap();
        assert_eq!(parsed.api_id, name);
        assert_eq!(
            parsed.proxy.as_ref().unwrap().target_url,
            "http://localhost:8222"
        );
        if name == "plain-hello" {
            let text = text.replace("localhost:8222", &mock.to_string());
            std::fs::write(dir.path().join("plain-hello.json"), text).unwrap();
        }
    }
    let gw = start_gateway(dir.path());
    let got = get(gw.addr, "/plain/hello/").json();
    assert_eq!(got["path"], "/hello/");
    gw.stop();
}

#[test]
fn shutdown_lets_the_request_in_flight_finish() {
    let (up, rec) = recorder_with_delay(Duration::from_millis(800));
    let dir = tempfile::tempdir().unwrap();
    write_api(
        dir.path(),
        "a",
        &api_json("a", "/a/", &target(up), true, Value::Null),
    );
    let mut gw = start_gateway(dir.path());
    let addr = gw.addr;
    let in_flight = std::thread::spawn(move || get(addr, "/a/slow"));
    // Wait (bounded) until the upstream has the request, then shut down.
    for _ in 0..500 {
        if rec.count() == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(rec.count(), 1, "the request never reached the upstream");
    gw.begin_stop();
    let got = in_flight.join().unwrap();
    assert_eq!(got.status, 200);
    assert_eq!(got.text(), "recorded");
    gw.join();
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still accepting after shutdown"
    );
}

/// Definitions mangled field by field, from a fixed seed: a definition
/// that uses most of what a definition can say (JS `pre`, `post` and
/// `response` middleware on either engine, a virtual endpoint, the proxy's
/// options) with one to three of its values replaced by values of other
/// types and shapes (null, booleans, huge and negative numbers, empty,
/// odd and long strings, paths, arrays, objects, deep nesting) or removed.
/// 200 of them, loaded twenty at a time beside a good definition: the gateway starts,
/// nothing panics, every mangled definition either loads (its routes
/// answer, whatever the status) or is refused naming its file and a
/// field, and the good one serves all along.
#[test]
fn mangled_definitions_are_refused_by_name_or_served_and_never_take_others_down() {
    use std::sync::atomic::Ordering;

    let panics = common::fuzz::panics();
    let panics_before = panics.load(Ordering::SeqCst);

    let (up, _rec) = recorder();
    let scripts = tempfile::tempdir().unwrap();
    let js = |name: &str, text: &str| {
        let p = scripts.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let pre = js(
        "pre.js",
        "var m = new TykJS.TykMiddleware.NewMiddleware({});\n\
         m.NewProcessRequest(function (request, session, spec) {\n\
             request.SetHeaders[\"X-Pre\"] = spec.APIID;\n\
             return m.ReturnData(request, {});\n\
         });\n",
    );
    let resp = js(
        "resp.js",
        "var r = new TykJS.TykMiddleware.NewMiddleware({});\n\
         r.NewProcessResponse(function (response, request, session, spec) {\n\
             response.SetHeaders[\"X-Resp\"] = \"1\";\n\
             return r.ReturnResponseData(response, {});\n\
         });\n",
    );
    let virt = js(
        "virt.js",
        "function virt(request, session, spec) {\n\
             return TykJsResponse({Body: \"virtual\", Code: 200}, session.meta_data);\n\
         }\n",
    );
    const ENGINES: [&str; 2] = ["boa", "quickjs"];
    let base = |i: usize| {
        json!({
            "name": format!("Fuzz {i}"),
            "api_id": format!("f{i}"),
            "org_id": "default",
            "active": true,
            "use_keyless": true,
            "version_data": {
                "not_versioned": true,
                "versions": {"Default": {
                    "name": "Default",
                    "use_extended_paths": true,
                    "extended_paths": {"virtual": [{
                        "response_function_name": "virt",
                        "function_source_type": "file",
                        "function_source_uri": virt,
                        "path": "/v",
                        "method": "GET",
                        "use_session": false,
                        "proxy_on_error": false
                    }]}
                }}
            },
            "proxy": {
                "listen_path": format!("/f{i}/"),
                "target_url": format!("http://{up}"),
                "strip_listen_path": true,
                "preserve_host_header": false
            },
            "custom_middleware": {
                "driver": "otto",
                "engine": ENGINES[i % 2],
                "strategy": "persistent",
                "pre": [{"name": "m", "path": pre}],
                "post": [{"name": "m", "path": pre}],
                "response": [{"name": "r", "path": resp}]
            }
        })
    };
    let mut deep = json!("bottom");
    for _ in 0..100 {
        deep = json!({ "d": [deep] });
    }
    let odd: Vec<Value> = vec![
        Value::Null,
        json!(true),
        json!(false),
        json!(0),
        json!(-1),
        json!(1e308),
        json!(18446744073709551615u64),
        json!(0.5),
        json!(""),
        json!(" "),
        json!("x"),
        json!("/"),
        json!("../../etc"),
        json!("\u{0}\u{7f}\r\n"),
        json!("http://"),
        json!("http://127.0.0.1:1/"),
        json!("quickjs"),
        json!("fresh"),
        json!("tyk-json"),
        json!("python"),
        json!("blob"),
        json!("x".repeat(5000)),
        json!([]),
        json!([null]),
        json!({}),
        json!({"name": 1}),
        deep,
    ];

    // Every path in `v` (object keys, array indexes), the root left out.
    fn paths(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        let children: Vec<(String, &Value)> = match v {
            Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), v)).collect(),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, v)| (i.to_string(), v))
                .collect(),
            _ => return,
        };
        for (k, child) in children {
            at.push(k);
            out.push(at.clone());
            paths(child, at, out);
            at.pop();
        }
    }
    fn parent<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
        path.iter().try_fold(v, |v, k| match v {
            Value::Object(m) => m.get_mut(k),
            Value::Array(a) => a.get_mut(k.parse::<usize>().ok()?),
            _ => None,
        })
    }

    let (mut rng, _) = common::fuzz::source(0xdef5_f022, 0);
    let good_dir = |d: &std::path::Path| {
        // Loaded first (files are read in name order), so no mangled
        // listen path can take its route.
        write_api(
            d,
            "00-good",
            &api_json("good", "/good/", &target(up), true, Value::Null),
        );
    };
    let mut refused = 0;
    for batch in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        good_dir(dir.path());
        let mut mangled = Vec::new();
        for j in 0..20 {
            let i = batch * 20 + j;
            let mut def = base(i);
            let mut what = Vec::new();
            for _ in 0..rng.usize(1..=3) {
                let mut all = Vec::new();
                paths(&def, &mut Vec::new(), &mut all);
                if all.is_empty() {
                    break;
                }
                let path = all[rng.usize(..all.len())].clone();
                let (last, up_to) = path.split_last().unwrap();
                let Some(holder) = parent(&mut def, up_to) else {
                    continue;
                };
                if rng.u8(..4) == 0 {
                    match holder {
                        Value::Object(m) => drop(m.remove(last)),
                        Value::Array(a) => drop(a.remove(last.parse::<usize>().unwrap())),
                        _ => {}
                    }
                    what.push(format!("{} removed", path.join(".")));
                } else {
                    let value = odd[rng.usize(..odd.len())].clone();
                    let short: String = value.to_string().chars().take(40).collect();
                    what.push(format!("{} = {short}", path.join(".")));
                    match holder {
                        Value::Object(m) => drop(m.insert(last.clone(), value)),
                        Value::Array(a) => a[last.parse::<usize>().unwrap()] = value,
                        _ => {}
                    }
                }
            }
            write_api(dir.path(), &format!("f{i}"), &def);
            mangled.push((i, what));
        }
        let gw = start_gateway(dir.path());
        let cases = format!("{mangled:#?}");
        assert_eq!(
            get(gw.addr, "/good/x").status,
            200,
            "batch {batch}: {cases}"
        );
        for (i, what) in &mangled {
            let file = format!("f{i}.json");
            let errors: Vec<_> = gw
                .load_errors
                .iter()
                .filter(|e| e.file.file_name().is_some_and(|f| f == file.as_str()))
                .collect();
            for e in &errors {
                assert!(
                    !e.field.is_empty() && !e.message.is_empty(),
                    "{file} ({what:?}): {e:?}"
                );
            }
            if errors.is_empty() {
                // Loaded: its routes answer (any status: a middleware
                // that could not load answers 500), never hang.
                for path in [format!("/f{i}/x"), format!("/f{i}/v")] {
                    let got = get(gw.addr, &path);
                    assert!(got.status.as_u16() >= 200, "{path} ({what:?})");
                }
            } else {
                refused += 1;
            }
        }
        assert_eq!(
            get(gw.addr, "/good/y").status,
            200,
            "batch {batch}: {cases}"
        );
        gw.stop();
    }
    assert_eq!(
        panics.load(Ordering::SeqCst),
        panics_before,
        "something panicked"
    );
    // The mangling reaches what definitions are checked for.
    assert!(refused > 20, "only {refused} of 200 refused");
}
