//! The gateway's `/tyk/stats` control API, as the bench reads it: the real
//! gateway and mock-upstream binaries with the repo's definitions; the
//! secret is required, and the counts match the traffic sent.

mod common;

use common::bins::{apis_dir, bin_dir, workspace};
use loadgen::bench::probe::{self, Control};

#[test]
fn tyk_stats_needs_the_secret_and_counts_known_traffic() {
    use loadgen::bench::procs::Child;
    let tmp = tempfile::tempdir().unwrap();
    let apis = apis_dir(tmp.path());
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let timeout = std::time::Duration::from_secs(20);
    let mut up = Child::start(
        "mock-upstream",
        &bin_dir().join("mock-upstream"),
        &args(&["--listen", "127.0.0.1:0"]),
        tmp.path(),
        tmp.path().join("up.log"),
        timeout,
    )
    .unwrap();
    let up_addr = up.addr.unwrap();
    loadgen::bench::procs::wait_ready(&mut up, up_addr, "/", timeout).unwrap();
    let routes = loadgen::bench::apis::prepare(
        &apis,
        &tmp.path().join("defs"),
        &workspace(),
        up_addr.port(),
    )
    .unwrap();
    let defs = tmp.path().join("defs");
    let mut gw = Child::start(
        "gateway",
        &bin_dir().join("gateway"),
        &args(&[
            "--apis",
            defs.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--secret",
            "s3cret",
        ]),
        tmp.path(),
        tmp.path().join("gw.log"),
        timeout,
    )
    .unwrap();
    let gw_addr = gw.addr.unwrap();
    loadgen::bench::procs::wait_ready(&mut gw, gw_addr, "/hello", timeout).unwrap();

    let (status, _) = probe::get(gw_addr, "/tyk/stats", &[]).unwrap();
    assert_eq!(status, 403);
    let (status, _) =
        probe::get(gw_addr, "/tyk/stats", &[("X-Tyk-Authorization", "wrong")]).unwrap();
    assert_eq!(status, 403);

    let control = Control {
        addr: gw_addr,
        secret: "s3cret".into(),
    };
    control.reset().unwrap();
    for r in &routes {
        for _ in 0..7 {
            let _ = probe::get(gw_addr, &r.route.path, &[]).unwrap();
        }
    }
    let stats = control.stats().unwrap();
    // Every API whose middleware loaded ran it once per request; APIs
    // without middleware have no entry.
    for r in &routes {
        let entry = stats
            .iter()
            .find(|s| Some(&s.api_id) == r.route.api_id.as_ref());
        match (r.route.has_middleware, entry) {
            (_, Some(e)) => {
                assert_eq!(e.count, 7, "{e:?}");
                assert!(e.p50_us > 0.0 && e.p50_us <= e.max_us, "{e:?}");
            }
            (false, None) => {}
            (true, None) => {
                let (status, _) = probe::get(gw_addr, &r.route.path, &[]).unwrap();
                // Middleware that did not load fails closed (Tyk's 500),
                // so nothing ran and nothing was recorded.
                assert_eq!(
                    status, 500,
                    "{} has middleware that ran but was not recorded",
                    r.route.path
                );
            }
        }
    }
    control.reset().unwrap();
    assert!(control.stats().unwrap().iter().all(|s| s.count == 0));
}
