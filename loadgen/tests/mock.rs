//! loadgen against the real mock upstream, with and without keep-alive.

mod common;

use clap::Parser;
use loadgen::cli::Args;
use loadgen::Summary;

fn run(args: &[&str]) -> Summary {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(args);
    let cfg = Args::try_parse_from(argv).unwrap().into_config().unwrap();
    Summary::new(
        &cfg,
        &loadgen::run(&cfg, std::future::pending(), None).unwrap(),
    )
}

#[test]
fn every_echo_is_checked_and_counted() {
    let addr = common::mock_upstream();
    let url = format!("http://{addr}/some/path");
    for keepalive in [false, true] {
        let mut args = vec!["-n", "300", "-c", "6", "-H", "X-Probe: 42"];
        if keepalive {
            args.push("-k");
        }
        args.extend([
            "--expect-status",
            "200",
            "--expect-body-contains",
            "\"message\":\"hello from mock upstream\"",
            "--expect-body-contains",
            "\"path\":\"/some/path\"",
            "--expect-body-contains",
            "\"X-Probe\":\"42\"",
            &url,
        ]);
        let s = run(&args);
        assert_eq!(s.complete_requests, 300, "keepalive={keepalive}");
        assert_eq!(
            s.failed_requests.total, 0,
            "keepalive={keepalive}: {:?}",
            s.failed_requests
        );
        assert_eq!(s.status_codes.get(&200), Some(&300));
        // As ab counts them: every response that announced keep-alive.
        assert_eq!(s.keepalive_requests, if keepalive { 300 } else { 0 });
        assert_eq!(s.html_transferred_bytes, 300 * s.document_length);
    }
}
