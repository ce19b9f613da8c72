//! CPU accounting, checked against what a spinning child says it used.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use loadgen::cpu::CpuProbe;

/// Parses the first line of bash's `times` ("0m0.123s 0m0.004s"): user + sys.
fn parse_times(line: &str) -> f64 {
    line.split_whitespace()
        .map(|t| {
            let (m, s) = t.trim_end_matches('s').split_once('m').unwrap();
            m.parse::<f64>().unwrap() * 60.0 + s.parse::<f64>().unwrap()
        })
        .sum()
}

#[test]
fn the_probe_measures_a_spinning_child_to_the_millisecond() {
    // The child reports its own CPU time (bash `times`, 1 ms resolution)
    // before and after a busy loop; the probe brackets exactly the loop.
    let script =
        r#"times; read _; i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done; times; read _"#;
    let mut child = Command::new("bash")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut read_times = |out: &mut BufReader<_>| {
        line.clear();
        out.read_line(&mut line).unwrap();
        let own = parse_times(&line);
        line.clear();
        out.read_line(&mut line).unwrap(); // children's times, unused
        own
    };
    let before = read_times(&mut out);
    let probe = CpuProbe::start(&[child.id()]);
    writeln!(stdin, "go").unwrap();
    let after = read_times(&mut out);
    let (usage, _own) = probe.finish();
    writeln!(stdin, "end").unwrap();
    child.wait().unwrap();

    let measured = usage[0].cpu.as_ref().unwrap().as_secs_f64();
    let reported = after - before;
    assert!(
        reported > 0.05,
        "the loop should spin for a while: {reported}"
    );
    // 1 ms for each of bash's two roundings, plus reading and writing a line.
    assert!(
        (measured - reported).abs() < 0.005,
        "probe {measured:.4}s vs child {reported:.4}s"
    );
}

#[test]
fn a_process_that_cannot_be_read_is_reported_not_fatal() {
    // pid_max is at most 2^22: this pid cannot exist.
    let probe = CpuProbe::start(&[std::process::id(), 99_999_999]);
    let (usage, _own) = probe.finish();
    assert!(usage[0].cpu.is_ok());
    let err = usage[1].cpu.as_ref().unwrap_err();
    assert!(err.contains("99999999"), "{err}");
}
