//! Where the gateway's threads run, read from `/proc/self/task` through a
//! real gateway serving real requests:
//! - `--cpu-affinity` (`affinity.rs`): each worker on a core of its own, and
//!   the VM threads of its JS APIs on that same core, so a script call's
//!   hand-off never crosses cores; with `cpu_affinity` off, or with no VM
//!   thread to keep beside a worker, the kernel places them.
//! - QuickJS's placement (`js/quickjs/mod.rs`): an API starts inline (no VM
//!   thread), and the first call that overruns the inline budget moves it to
//!   a VM thread and is answered from there, its globals started over.
//!
//! A binary of its own: it looks at every thread of the process, and no
//! other test may start gateway threads beside it.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use gateway::server::GatewayConfig;
use serde_json::json;

/// Thread name → the CPUs each thread of that name may run on.
fn masks() -> BTreeMap<String, Vec<Vec<usize>>> {
    let mut out: BTreeMap<String, Vec<Vec<usize>>> = BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let (Ok(comm), Ok(status)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("status")),
        ) else {
            continue; // the thread exited while we looked
        };
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list in status")
            .trim()
            .to_string();
        out.entry(comm.trim().to_string())
            .or_default()
            .push(parse_list(&list));
    }
    out
}

/// `0-2,5` → `[0, 1, 2, 5]`.
fn parse_list(list: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

/// `<suffix>b` on boa and `<suffix>q` on QuickJS, both running
/// `spin_counter.js`.
fn write_js_apis(dir: &Path, suffix: &str) {
    let up = format!("http://{}", common::mock());
    let script = format!(
        "{}/tests/js_fixtures/spin_counter.js",
        env!("CARGO_MANIFEST_DIR")
    );
    for engine in ["boa", "quickjs"] {
        let id = format!("{suffix}{}", &engine[..1]);
        let mw = json!({
            "driver": "otto",
            "engine": engine,
            "pre": [{ "name": "spinCounter", "path": script }]
        });
        let v = common::api_json(&id, &format!("/{id}/"), &up, true, mw);
        common::write_api(dir, &id, &v);
    }
}

/// `id` on `engine` running `spin_counter.js`, placed as `placement` says
/// (`custom_middleware.placement`; "" leaves it to the gateway).
fn write_placed(dir: &Path, id: &str, engine: &str, placement: &str) {
    let up = format!("http://{}", common::mock());
    let script = format!(
        "{}/tests/js_fixtures/spin_counter.js",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut mw = json!({
        "driver": "otto",
        "engine": engine,
        "pre": [{ "name": "spinCounter", "path": script }]
    });
    if !placement.is_empty() {
        mw["placement"] = json!(placement);
    }
    let v = common::api_json(id, &format!("/{id}/"), &up, true, mw);
    common::write_api(dir, id, &v);
}

/// A gateway with `threads` workers serving the definitions in `dir`, the
/// rest of `config` as given.
fn start(dir: &Path, threads: usize, config: GatewayConfig) -> common::TestGateway {
    common::start_gateway_with(GatewayConfig {
        apis_dir: dir.to_path_buf(),
        threads,
        ..config
    })
}

/// The script's call count as the upstream saw it (`X-Calls`).
fn calls(gw: &common::TestGateway, api: &str, spin_ms: u32) -> String {
    let spin = spin_ms.to_string();
    let headers: &[(&str, &str)] = if spin_ms > 0 {
        &[("X-Spin", &spin)]
    } else {
        &[]
    };
    let got = common::send(gw.addr, "GET", &format!("/{api}/hello"), headers, b"");
    assert_eq!(got.status, 200, "{}", got.text());
    got.json()["headers"]["X-Calls"]
        .as_str()
        .unwrap_or_else(|| panic!("no X-Calls in {}", got.text()))
        .to_string()
}

/// Serves both APIs, and moves the QuickJS one to its VM thread with a
/// call that overruns the inline budget.
fn serve_both(gw: &common::TestGateway, suffix: &str) {
    assert_eq!(calls(gw, &format!("{suffix}b"), 0), "1");
    assert_eq!(calls(gw, &format!("{suffix}q"), 0), "1");
    assert_eq!(
        calls(gw, &format!("{suffix}q"), 20),
        "1",
        "re-run in a fresh context"
    );
}

#[test]
fn workers_and_their_vm_threads_share_a_core_unless_affinity_is_off_or_idle() {
    let process = parse_list(
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim(),
    );

    // Pinned (the default): one worker, so every thread is known.
    let dir = tempfile::tempdir().unwrap();
    write_js_apis(dir.path(), "pin");
    let gw = start(dir.path(), 1, GatewayConfig::default());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    serve_both(&gw, "pin");
    let m = masks();
    assert_eq!(
        m["gw-js-pinq"].len(),
        1,
        "one VM thread after the move: {m:?}"
    );
    let worker = &m["gw-worker-0"];
    assert_eq!(worker.len(), 1, "{m:?}");
    assert_eq!(
        worker[0],
        vec![process[0]],
        "worker 0 on the first allowed CPU: {m:?}"
    );
    for vm in ["gw-js-pinb", "gw-js-pinq"] {
        let threads = m.get(vm).unwrap_or_else(|| panic!("no {vm} thread: {m:?}"));
        for mask in threads {
            assert_eq!(mask, &worker[0], "{vm} on its worker's core: {m:?}");
        }
    }
    gw.stop();

    // Two workers: each on its own CPU where there are two.
    let dir = tempfile::tempdir().unwrap();
    write_js_apis(dir.path(), "two");
    let gw = start(dir.path(), 2, GatewayConfig::default());
    serve_both(&gw, "two");
    let m = masks();
    let (w0, w1) = (&m["gw-worker-0"][0], &m["gw-worker-1"][0]);
    assert_eq!((w0.len(), w1.len()), (1, 1), "{m:?}");
    if process.len() >= 2 {
        assert_ne!(w0, w1, "two workers, two CPUs: {m:?}");
    }
    for mask in m["gw-js-twob"].iter().chain(&m["gw-js-twoq"]) {
        assert!(
            mask == w0 || mask == w1,
            "a VM thread on a worker's core: {m:?}"
        );
    }
    gw.stop();

    // QuickJS starts inline: no VM thread until a call overruns the
    // budget; then one, and the API's state starts over there.
    let dir = tempfile::tempdir().unwrap();
    write_js_apis(dir.path(), "ad");
    let gw = start(dir.path(), 1, GatewayConfig::default());
    for n in 1..=3 {
        assert_eq!(calls(&gw, "adq", 0), n.to_string());
    }
    assert!(
        !masks().contains_key("gw-js-adq"),
        "inline: no VM thread yet"
    );
    // boa starts its VM thread at its first call (`VmPool::new`).
    assert!(
        !masks().contains_key("gw-js-adb"),
        "no VM thread before the first call"
    );
    assert_eq!(calls(&gw, "adb", 0), "1");
    assert!(
        masks().contains_key("gw-js-adb"),
        "boa runs on its VM thread"
    );
    // Under the budget (1 ms): still inline, state kept.
    assert_eq!(calls(&gw, "adq", 0), "4");
    assert_eq!(
        calls(&gw, "adq", 30),
        "1",
        "moved, run again from a fresh context"
    );
    assert!(masks().contains_key("gw-js-adq"), "moved to a VM thread");
    assert_eq!(calls(&gw, "adq", 0), "2");
    // On the VM thread a long call is simply run (no budget there).
    assert_eq!(calls(&gw, "adq", 30), "3");
    // `/tyk/stats` times the jobs that ran on a VM thread beside the
    // calls: all of boa's; QuickJS's from the move on (the call that
    // overran, run again there, and the two after it), out of its 7.
    let entry = |api: &str| {
        let all = gw.stats.summaries();
        all.into_iter()
            .find(|s| s.api_id == api)
            .unwrap_or_else(|| panic!("no stats for {api}"))
    };
    let (b, q) = (entry("adb"), entry("adq"));
    assert_eq!(b.count, 1, "{b:?}");
    assert_eq!(b.vm_thread.as_ref().map(|v| v.count), Some(1), "{b:?}");
    assert_eq!(q.count, 7, "{q:?}");
    assert_eq!(q.vm_thread.as_ref().map(|v| v.count), Some(3), "{q:?}");
    gw.stop();

    // Off: the kernel's placement, the process's whole mask.
    let dir = tempfile::tempdir().unwrap();
    write_js_apis(dir.path(), "off");
    let gw = start(
        dir.path(),
        1,
        GatewayConfig {
            cpu_affinity: false,
            ..GatewayConfig::default()
        },
    );
    serve_both(&gw, "off");
    let m = masks();
    assert_eq!(m["gw-worker-0"], vec![process.clone()], "{m:?}");
    for vm in ["gw-js-offb", "gw-js-offq"] {
        for mask in &m[vm] {
            assert_eq!(mask, &process, "{vm}: {m:?}");
        }
    }
    gw.stop();

    // Auto with no VM thread to keep beside a worker (no JS API, or
    // scripts inline): nothing is pinned, a pinned worker would only
    // crowd its core.
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    let v = common::api_json("plain", "/plain/", &up, true, serde_json::Value::Null);
    common::write_api(dir.path(), "plain", &v);
    let gw = start(dir.path(), 1, GatewayConfig::default());
    let got = common::send(gw.addr, "GET", "/plain/hello", &[], b"");
    assert_eq!(got.status, 200, "{}", got.text());
    let m = masks();
    assert_eq!(m["gw-worker-0"], vec![process.clone()], "no JS API: {m:?}");
    gw.stop();
    let dir = tempfile::tempdir().unwrap();
    write_js_apis(dir.path(), "inl");
    let gw = start(
        dir.path(),
        1,
        GatewayConfig {
            jsvm_threads: 0,
            ..GatewayConfig::default()
        },
    );
    assert_eq!(calls(&gw, "inlb", 0), "1");
    let m = masks();
    assert_eq!(m["gw-worker-0"], vec![process.clone()], "JS inline: {m:?}");
    assert!(!m.contains_key("gw-js-inlb"), "no VM thread inline: {m:?}");
    // Inline, a call has no job elsewhere to time.
    let all = gw.stats.summaries();
    let b = all.iter().find(|s| s.api_id == "inlb").expect("inlb stats");
    assert_eq!((b.count, &b.vm_thread), (1, &None), "{b:?}");
    gw.stop();

    // A definition's `placement` overrides the gateway's choice for its
    // API alone: boa inline beside boa on its VM thread, QuickJS on VM
    // threads from its first call, QuickJS inline for good (a call past
    // the budget does not move it). A placement an engine cannot honour,
    // or one that does not exist, fails that API's load, naming the field.
    let dir = tempfile::tempdir().unwrap();
    write_placed(dir.path(), "pdb", "boa", "");
    write_placed(dir.path(), "pib", "boa", "inline");
    write_placed(dir.path(), "ptq", "quickjs", "threads");
    write_placed(dir.path(), "piq", "quickjs", "inline");
    write_placed(dir.path(), "pab", "boa", "adaptive");
    write_placed(dir.path(), "pxq", "quickjs", "sideways");
    let gw = start(dir.path(), 1, GatewayConfig::default());
    let errors: Vec<String> = gw.load_errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    for (file, what) in [
        ("pab.json", "needs engine"),
        ("pxq.json", "is not a JS placement"),
    ] {
        assert!(
            errors.iter().any(|e| e.contains(file)
                && e.contains("custom_middleware.placement")
                && e.contains(what)),
            "{file}: {errors:?}"
        );
    }
    for api in ["pdb", "pib", "ptq", "piq"] {
        assert_eq!(calls(&gw, api, 0), "1", "{api}");
    }
    assert_eq!(calls(&gw, "piq", 30), "2", "inline for good: state kept");
    assert_eq!(calls(&gw, "ptq", 0), "2");
    let m = masks();
    for api in ["pdb", "ptq"] {
        assert!(m.contains_key(&format!("gw-js-{api}")), "{api}: {m:?}");
    }
    for api in ["pib", "piq"] {
        assert!(!m.contains_key(&format!("gw-js-{api}")), "{api}: {m:?}");
    }
    let all = gw.stats.summaries();
    let ran = |api: &str| {
        let s = all.iter().find(|s| s.api_id == api).expect("stats");
        s.vm_thread.as_ref().map(|v| v.count)
    };
    assert_eq!(
        [ran("pdb"), ran("pib"), ran("ptq"), ran("piq")],
        [Some(1), None, Some(2), None]
    );
    gw.stop();

    // Placed inline, an API needs no VM thread, so its worker is left to
    // the kernel even with `--jsvm-threads 1`; placed on threads, its VM
    // thread is kept beside its worker even with `--jsvm-threads 0`.
    let dir = tempfile::tempdir().unwrap();
    write_placed(dir.path(), "oib", "boa", "inline");
    let gw = start(dir.path(), 1, GatewayConfig::default());
    assert_eq!(calls(&gw, "oib", 0), "1");
    let m = masks();
    assert_eq!(m["gw-worker-0"], vec![process.clone()], "inline: {m:?}");
    gw.stop();
    let dir = tempfile::tempdir().unwrap();
    write_placed(dir.path(), "otb", "boa", "threads");
    let gw = start(
        dir.path(),
        1,
        GatewayConfig {
            jsvm_threads: 0,
            ..GatewayConfig::default()
        },
    );
    assert_eq!(calls(&gw, "otb", 0), "1");
    let m = masks();
    let worker = &m["gw-worker-0"];
    assert_eq!(worker, &vec![vec![process[0]]], "pinned: {m:?}");
    assert_eq!(m["gw-js-otb"], *worker, "beside its worker: {m:?}");
    gw.stop();
}
