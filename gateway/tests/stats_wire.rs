//! The `/tyk/stats` wire format end to end: a real gateway records real
//! middleware calls, and loadgen's own reader (`bench::probe::Control`, the
//! code `loadgen bench` runs) reads them back over HTTP. Both sides use the
//! one definition in `gateway-wire`; this proves the path, the header, the
//! body's shape and every figure survive the trip.

mod common;

use common::{api_json, get, mock, send, start_gateway_with, write_api};
use gateway::server::GatewayConfig;
use loadgen::bench::probe::Control;
use serde_json::json;

const SECRET: &str = "wire-secret";

#[test]
fn gateway_stats_round_trip_through_loadgens_reader() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", mock());
    let js = format!("{}/../js/jsvm_hello.js", env!("CARGO_MANIFEST_DIR"));
    let mw = json!({"driver": "otto", "pre": [{"name": "jsvmHelloPreHook", "path": js}]});
    write_api(
        dir.path(),
        "js",
        &api_json("wire-js", "/js/", &up, true, mw),
    );
    // A second API whose script throws when asked: failure counts cross
    // the wire too.
    let faults = format!("{}/tests/js_fixtures/faults.js", env!("CARGO_MANIFEST_DIR"));
    let mw = json!({"driver": "otto", "pre": [{"name": "faultsMw", "path": faults}]});
    write_api(
        dir.path(),
        "faults",
        &api_json("wire-faults", "/faults/", &up, true, mw),
    );
    let gw = start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 2,
        secret: Some(SECRET.into()),
        ..GatewayConfig::default()
    });
    let control = Control {
        addr: gw.addr,
        secret: SECRET.into(),
    };
    const CALLS: u64 = 25;
    for _ in 0..CALLS {
        assert_eq!(get(gw.addr, "/js/hello").status, 200);
    }

    // What loadgen parsed is what the gateway holds: names and counts
    // exactly, times to the last bits (serde_json's default float parser
    // may be one unit in the last place off the shortest printed form).
    let read = control.stats().expect("loadgen reads /tyk/stats");
    let held = gw.stats.summaries();
    assert_eq!(read.len(), held.len());
    for (r, h) in read.iter().zip(&held) {
        assert_eq!(
            (&r.api_id, &r.hook, &r.middleware, r.count),
            (&h.api_id, &h.hook, &h.middleware, h.count)
        );
        for (a, b) in [
            (r.mean_us, h.mean_us),
            (r.p50_us, h.p50_us),
            (r.p90_us, h.p90_us),
            (r.p99_us, h.p99_us),
            (r.max_us, h.max_us),
        ] {
            assert!((a - b).abs() <= b.abs() * 1e-12, "{r:?} vs {h:?}");
        }
        match (&r.vm_thread, &h.vm_thread) {
            (Some(r), Some(h)) => {
                assert_eq!(r.count, h.count);
                for (a, b) in [
                    (r.mean_us, h.mean_us),
                    (r.p50_us, h.p50_us),
                    (r.p99_us, h.p99_us),
                ] {
                    assert!((a - b).abs() <= b.abs() * 1e-12, "{r:?} vs {h:?}");
                }
            }
            (r, h) => assert_eq!(r.is_none(), h.is_none(), "{r:?} vs {h:?}"),
        }
    }
    const THROWS: u64 = 4;
    for _ in 0..THROWS {
        let got = send(gw.addr, "GET", "/faults/x", &[("x-fault", "throw")], b"");
        assert_eq!(got.status, 500);
    }
    let body = control.stats_body().expect("loadgen reads the whole body");
    assert_eq!(body.errors, gw.stats.error_counts());
    assert_eq!(
        body.errors,
        [gateway_wire::ErrorCount {
            api_id: "wire-faults".into(),
            kind: gateway_wire::MwErrorKind::Threw.as_str().into(),
            count: THROWS,
        }]
    );
    let read: Vec<_> = read.into_iter().filter(|s| s.api_id == "wire-js").collect();
    let entry = &read[0];
    assert_eq!(
        (
            entry.api_id.as_str(),
            entry.hook.as_str(),
            entry.middleware.as_str()
        ),
        ("wire-js", "pre", "jsvmHelloPreHook")
    );
    assert_eq!(entry.count, CALLS);
    assert!(
        entry.p50_us > 0.0 && entry.p50_us <= entry.max_us,
        "{entry:?}"
    );
    assert!(entry.mean_us > 0.0, "{entry:?}");
    // boa runs on a VM thread by default: every call's job ran there, and
    // its own time there crossed the wire beside the call's.
    let vm = entry
        .vm_thread
        .as_ref()
        .expect("the job times on the VM thread");
    assert_eq!(vm.count, CALLS, "{entry:?}");
    assert!(vm.mean_us > 0.0 && vm.p50_us > 0.0, "{entry:?}");

    // loadgen's reset is the gateway's reset.
    control.reset().expect("loadgen resets /tyk/stats");
    let after = control.stats().unwrap();
    assert_eq!(after.len(), 2);
    assert!(
        after
            .iter()
            .all(|s| (s.count, s.mean_us) == (0, 0.0) && s.vm_thread.is_none()),
        "{after:?}"
    );
    assert!(control.stats_body().unwrap().errors.is_empty());

    // A wrong secret is refused, and loadgen says so rather than parsing.
    let wrong = Control {
        addr: gw.addr,
        secret: "nope".into(),
    };
    let err = wrong.stats().unwrap_err().to_string();
    assert!(err.contains("403"), "{err}");
    gw.stop();
}
