//! The repo's own routes (`apis/`, their scripts and plugins, as `loadgen
//! bench` runs them) under the requests clients send besides the bench's
//! GET: every method, with and without a body, HEAD among them. A shipped
//! example that fails an ordinary request fails closed (500) and teaches
//! its readers the wrong thing: the response hook's script once parsed the
//! upstream's body as JSON unconditionally, and every HEAD through
//! `/jsvm-response/` got a 500.
//!
//! The Go route is left out (its library needs a Go toolchain and a build;
//! `gateway/tests/native_go.rs` covers the adapter).

mod common;

use common::bins::{apis_dir, start_ready, workspace};
use common::exchange;
use loadgen::bench::apis::prepare;
use serde_json::Value;

/// `method path` with `body`, closing the connection.
fn request(method: &str, path: &str, body: &[u8]) -> Vec<u8> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if !body.is_empty() {
        req += &format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
    }
    req += "\r\n";
    let mut req = req.into_bytes();
    req.extend_from_slice(body);
    req
}

#[test]
fn every_shipped_route_answers_every_method_with_and_without_a_body() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let up = ["--listen", "127.0.0.1:0", "--echo", "query,body"];
    let (_up, upstream) = start_ready("mock-upstream", &up, dir, "/");

    let shipped = apis_dir(dir);
    std::fs::remove_file(shipped.join("gopl-go-hello.json")).unwrap();
    let ready = dir.join("ready");
    let found = prepare(&shipped, &ready, &workspace(), upstream.port()).unwrap();
    let routes: Vec<_> = found.iter().map(|f| &f.route).collect();
    // Every kind the repo ships is here: the table below is not empty of
    // meaning.
    for path in [
        "/gopl/",
        "/jsvm/",
        "/jsvm-response/",
        "/jsvm-virtual/",
        "/wasm/",
        "/plain/",
    ] {
        assert!(
            routes.iter().any(|r| r.path.starts_with(path)),
            "{path} is not among the shipped routes {routes:?}"
        );
    }

    let gw = ["--apis", ready.to_str().unwrap(), "--listen", "127.0.0.1:0"];
    let (_gw, gateway) = start_ready("gateway", &gw, dir, "/plain/hello/");

    let json = br#"{"order": [1, 2, {"x": null}], "note": "caf\u00e9"}"#;
    let text = b"plain words, not JSON";
    let mut failures = Vec::new();
    for route in &routes {
        for method in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
            let bodies: &[&[u8]] = match method {
                "POST" | "PUT" | "PATCH" => &[json, text],
                _ => &[b""],
            };
            for body in bodies {
                let (status, got) = exchange(gateway, &request(method, &route.path, body));
                let what = format!(
                    "{method} {} with {} body bytes: {status}",
                    route.path,
                    body.len()
                );
                if status != 200 {
                    failures.push(what);
                    continue;
                }
                if method == "HEAD" {
                    assert!(got.is_empty(), "{what}: HEAD answered with a body");
                    continue;
                }
                if route.answers_itself {
                    continue;
                }
                // The upstream's echo: what the route proxied.
                let echo: Value = serde_json::from_slice(&got)
                    .unwrap_or_else(|e| panic!("{what}: not the upstream's echo: {e}"));
                assert_eq!(echo["method"], method, "{what}");
                assert_eq!(
                    echo["body"].as_str().unwrap_or_default().as_bytes(),
                    *body,
                    "{what}: the body changed on the way"
                );
            }
        }
    }
    let log = std::fs::read_to_string(dir.join("gw.log")).unwrap_or_default();
    assert!(
        failures.is_empty(),
        "shipped routes failed ordinary requests:\n{}\ngateway log:\n{}",
        failures.join("\n"),
        log.lines()
            .filter(|l| !l.contains(" INFO "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
