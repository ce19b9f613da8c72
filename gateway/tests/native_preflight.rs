//! The child process that tries a plugin library before the gateway loads it
//! (`native/preflight.rs`) holds none of the gateway's descriptors: the real
//! gateway binary on 127.0.0.1:0 and the C fixture `fixtures/fd_probe.c`,
//! whose constructor records the descriptors of each process that loads it.

mod common;

use std::collections::BTreeMap;

use common::native::{native_api, plugins, write_def};
use common::{dies_with_test, get, recorder, spawn_listening, stop_binary};

/// One process's record: descriptor -> what `/proc/self/fd` links it to.
type Fds = BTreeMap<i32, String>;

/// The probe's lines, "PID FD=TARGET ...", by pid.
fn records(text: &str) -> BTreeMap<u32, Fds> {
    text.lines()
        .map(|line| {
            let mut words = line.split(' ');
            let pid = words.next().unwrap().parse().unwrap();
            let fds = words
                .map(|w| {
                    let (fd, target) = w.split_once('=').unwrap();
                    (fd.parse().unwrap(), target.to_string())
                })
                .collect();
            (pid, fds)
        })
        .collect()
}

/// The child forked to dlopen a library held every descriptor the gateway
/// had open at that moment: its listening sockets (bound before the APIs
/// load), its log file, and on a busy gateway client connections. An
/// initialiser that leaves a daemon behind, or a child held up to the 30 s
/// limit, kept them: the port stayed bound, a client never saw end-of-file.
/// The child now holds /dev/null as stdin, its output pipe as stdout and
/// stderr, and its answer pipe as 3; nothing else. The gateway's own load of
/// the same library, in the gateway's process, shows what there was to
/// inherit.
#[test]
fn the_child_trying_a_library_holds_none_of_the_gateways_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, _rec) = recorder();
    let lib = plugins().fd_probe.as_path();
    let api = native_api("probe", "/probe/", &up.to_string(), &[(lib, "Probe")], &[]);
    write_def(d, "probe", &api);
    let probe = d.join("fds.txt");
    let log = d.join("gateway.log");
    let (child, addr) = spawn_listening(
        dies_with_test(&mut std::process::Command::new(env!(
            "CARGO_BIN_EXE_gateway"
        )))
        .args(["--apis", d.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .args(["--threads", "2"])
        .env("GW_FD_PROBE", &probe)
        .stderr(std::fs::File::create(&log).unwrap()),
    );
    let pid = child.id();
    // The library passed its check and serves.
    assert_eq!(get(addr, "/probe/x").status, 200);
    stop_binary(child);

    let text = std::fs::read_to_string(&probe).unwrap();
    let mut by_pid = records(&text);
    assert_eq!(
        by_pid.len(),
        2,
        "one load in the child, one in the gateway: {text}"
    );
    let own = by_pid.remove(&pid).unwrap_or_else(|| panic!("{text}"));
    assert!(
        own.values().any(|t| t.starts_with("socket:")),
        "the gateway held its listeners while it loaded the library: {text}"
    );
    let (_, tried) = by_pid.pop_first().unwrap();
    assert_eq!(
        tried.keys().copied().collect::<Vec<_>>(),
        [0, 1, 2, 3],
        "{text}"
    );
    assert_eq!(tried[&0], "/dev/null", "{text}");
    assert!(tried[&1].starts_with("pipe:"), "{text}");
    assert_eq!(tried[&1], tried[&2], "stdout and stderr: the output pipe");
    assert!(
        tried[&3].starts_with("pipe:") && tried[&3] != tried[&1],
        "{text}"
    );
}
