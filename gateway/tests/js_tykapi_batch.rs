//! Tyk's `TykBatchRequest` through the real gateway on both engines:
//! parallel unless `suppress_parallel_execution`, shown by a barrier server
//! that answers "together" only to requests in flight at once (concurrency
//! in the answers, not in a clock); bad JSON answers `undefined`.

mod common;
mod js_tykapi;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use serde_json::{json, Value};

use common::*;
use js_tykapi::*;

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
    for engine in ENGINES {
        // Shown with a failure's output: which engine failed.
        eprintln!("engine: {engine}");
        batch_requests_run_in_parallel_on(engine);
    }
}

fn batch_requests_run_in_parallel_on(engine: &str) {
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
        engine,
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
    for engine in ENGINES {
        // Shown with a failure's output: which engine failed.
        eprintln!("engine: {engine}");
        suppressed_batches_run_one_request_at_a_time_in_order_on(engine);
    }
}

fn suppressed_batches_run_one_request_at_a_time_in_order_on(engine: &str) {
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
        engine,
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
    for engine in ENGINES {
        // Shown with a failure's output: which engine failed.
        eprintln!("engine: {engine}");
        batch_request_with_bad_json_answers_undefined_on(engine);
    }
}

fn batch_request_with_bad_json_answers_undefined_on(engine: &str) {
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
        engine,
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

/// A batch reads at most 32 MiB of response bodies in all its replies
/// together (a single call's limit): a reply that would take it past that
/// fails, as Tyk's zero reply, and the others stand. Replies were bounded
/// one by one only, so a batch of N requests held N times 32 MiB at once
/// outside the script's heap count (20 replies of 30 MiB: 1.2 GB of RSS
/// for one request, and on boa the VM thread then parked for good holding
/// it).
#[test]
fn a_batch_reads_at_most_32_mib_of_bodies_in_all() {
    let twelve_mib = Bytes::from(vec![b'z'; 12 << 20]);
    let svc = upstream_fn(move |_req: Request<Incoming>| {
        let body = twelve_mib.clone();
        async move { Ok::<_, std::convert::Infallible>(Response::new(Full::new(body))) }
    });
    let urls: Vec<String> = (0..4).map(|i| format!("http://{svc}/{i}")).collect();
    let requests: Vec<Value> = urls
        .iter()
        .map(|u| json!({"method": "GET", "relative_url": u}))
        .collect();
    let arg = json!({"requests": requests, "suppress_parallel_execution": true});
    let script = answering(&format!(
        "var r = JSON.parse(TykBatchRequest(JSON.stringify({arg})));
         return r.map(function (x) {{ return [x.relative_url, x.code, x.body.length]; }});"
    ));
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        js_api(
            dir.path(),
            "big",
            "/big/",
            svc,
            engine,
            &script,
            Value::Null,
        );
        let gw = gateway(dir.path(), 1, 1);
        let got = get(gw.addr, "/big/");
        assert_eq!(got.status, StatusCode::OK, "{engine}: {}", got.text());
        assert_eq!(
            got.json(),
            json!([
                [urls[0], 200, 12 << 20],
                [urls[1], 200, 12 << 20],
                ["", 0, 0],
                ["", 0, 0]
            ]),
            "{engine}"
        );
        gw.stop();
    }
}
