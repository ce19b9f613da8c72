//! `loadgen bench` misconfigured: an output path that cannot be written
//! fails before the first run.

mod common;

use common::bins::{apis_dir, bench};

#[test]
fn a_chart_beside_the_markdown_that_cannot_be_written_fails_before_any_run() {
    let tmp = tempfile::tempdir().unwrap();
    let md = tmp.path().join("r.md");
    // Where the headline chart goes, a directory: only the chart fails.
    std::fs::create_dir(tmp.path().join("r-headline.svg")).unwrap();
    let apis = apis_dir(tmp.path());
    let out = bench(&[
        "-n",
        "20",
        "-c",
        "2",
        "--repeat",
        "1",
        "--warmup",
        "10",
        "--routes",
        "plain",
        "--apis",
        apis.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("r-headline.svg"), "{stderr}");
    assert!(out.stdout.is_empty(), "measured first");
    assert!(!md.exists());
}
