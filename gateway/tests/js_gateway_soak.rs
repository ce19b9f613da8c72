//! The JS host's memory over a long run, through a real gateway: in a test
//! binary of its own, because it reads the whole process's resident memory
//! and other tests running beside it in one process (big bodies, many
//! contexts) would move that figure.

mod common;

use std::path::Path;
use std::time::Duration;

use gateway::server::GatewayConfig;
use serde_json::{json, Value};

fn fixture(name: &str) -> String {
    format!("{}/tests/js_fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn js(name: &str, path: String) -> Value {
    json!({ "driver": "otto", "pre": [{ "name": name, "path": path }] })
}

fn write(dir: &Path, id: &str, target: &str, mw: Value) {
    let mut v = common::api_json(id, &format!("/{id}/"), target, true, mw);
    v["config_data"] = json!({ "greeting": "hi" });
    common::write_api(dir, id, &v);
}

#[test]
fn a_hundred_thousand_requests_through_one_vm_keep_memory_flat() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    write(
        dir.path(),
        "soak",
        &up,
        js("headersMw", fixture("headers.js")),
    );
    let gw = common::start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 1,
        ..GatewayConfig::default()
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let addr = gw.addr;
    // One keep-alive connection, bounded in count; the time bound is the
    // per-request timeout.
    let rss = |phase: &str| {
        let kb = rss_kb();
        eprintln!("soak {phase}: {kb} KiB");
        kb
    };
    let run = |n: usize| {
        rt.block_on(async {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (mut tx, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .unwrap();
            tokio::spawn(conn);
            for _ in 0..n {
                let req = http::Request::get("/soak/x?a=1")
                    .header("host", "soak")
                    .header("x-api-key", "k")
                    .header("x-multi", "m")
                    .body(http_body_util::Empty::<bytes::Bytes>::new())
                    .unwrap();
                let resp = tokio::time::timeout(Duration::from_secs(10), tx.send_request(req))
                    .await
                    .expect("response within 10 s")
                    .unwrap();
                assert_eq!(resp.status(), 200);
                http_body_util::BodyExt::collect(resp.into_body())
                    .await
                    .unwrap();
            }
        })
    };
    run(20_000);
    let before = rss("after 20,000");
    run(80_000);
    let after = rss("after 100,000");
    assert_eq!(
        gw.stats.summaries().iter().map(|c| c.count).sum::<u64>(),
        100_000
    );
    assert!(
        after < before + 32 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    gw.stop();
}

/// Resident set size of this process (gateway in-process), from /proc.
fn rss_kb() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    statm
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 4
}
