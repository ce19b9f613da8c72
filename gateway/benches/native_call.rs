//! What one native middleware call costs, without the network: the real
//! plugin libraries (release builds) loaded through the driver, called the
//! way a worker calls them. A benchmark, not a test: it prints, never asserts.
//!
//! To try this: `cargo bench -p gateway --bench native_call`. It runs a
//! bounded number of batches (BATCHES x CALLS calls per symbol) and prints
//! the median batch's time per call, for the bare `Middleware::call` and for
//! `ApiChain::run` (which adds the timing and recording the stats show).
//!
//! With a Go toolchain (`$GO`, else `go` on PATH) it also builds the seed's
//! own `main.go` through `plugins/go-adapter/build.sh` and measures
//! `AddHeader` through the Go adapter, next to the Rust one. `GW_GO_MODE=inline`
//! measures the adapter without its time-budget goroutine; `GO=/usr/lib/go-1.19/bin/go`
//! another toolchain.
//!
//! `EVICT_KB=512` adds calls with cold caches, as `wasm_call`'s switch of
//! the same name: a buffer that size written between calls (untimed), the
//! recorded p50 and mean printed.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use gateway::config::{load_dir, Hook};
use gateway::middleware::{ApiChain, HostOptions};
use gateway::stats::Stats;

#[path = "common/mw.rs"]
mod common;
use common::{poll_once, request};

/// The path the benches' requests ask for.
const PATH: &str = "/gopl/hello/";
const BATCHES: usize = 21;
const CALLS: usize = 20_000;

fn build_plugins(ws: &Path) -> PathBuf {
    // Own target dir: `cargo bench` holds the main one's lock while running.
    let target = ws.join("target/plugin-bench");
    let status = Command::new(option_env!("CARGO").unwrap_or("cargo"))
        .current_dir(ws)
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "add-header",
            "-p",
            "test-plugins",
        ])
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("run cargo");
    assert!(status.success(), "building the plugins failed");
    target.join("release")
}

/// The seed's main.go as a Go adapter library, or why there is none.
fn build_go(ws: &Path) -> Result<(PathBuf, String), String> {
    let go = std::env::var("GO").unwrap_or_else(|_| "go".to_string());
    let version = Command::new(&go)
        .arg("version")
        .output()
        .map_err(|e| format!("no Go toolchain ({go}: {e})"))?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let tag: String = version.split(' ').nth(2).unwrap_or("go").to_string();
    let out = ws.join(format!("target/plugin-bench/go/{tag}/libgo_add_header.so"));
    let ok = Command::new("bash")
        .arg(ws.join("plugins/go-adapter/build.sh"))
        .arg(ws.join("plugins/go-add-header"))
        .arg(&out)
        .env("GO", &go)
        .status()
        .map_err(|e| e.to_string())?
        .success();
    if !ok {
        return Err("plugins/go-adapter/build.sh failed".into());
    }
    Ok((out, version))
}

/// Median time per call over the batches, with the 10th and 90th
/// percentile batches as the spread.
struct Spread {
    p10: f64,
    median: f64,
    p90: f64,
}

fn spread_ns(mut f: impl FnMut()) -> Spread {
    let mut per_call: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..CALLS {
                f();
            }
            start.elapsed().as_nanos() as f64 / CALLS as f64
        })
        .collect();
    per_call.sort_by(f64::total_cmp);
    Spread {
        p10: per_call[BATCHES / 10],
        median: per_call[BATCHES / 2],
        p90: per_call[BATCHES * 9 / 10],
    }
}

fn median_ns(mut f: impl FnMut()) -> f64 {
    let mut per_call: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..CALLS {
                f();
            }
            start.elapsed().as_nanos() as f64 / CALLS as f64
        })
        .collect();
    per_call.sort_by(f64::total_cmp);
    per_call[BATCHES / 2]
}

fn main() {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let libs = build_plugins(&ws);
    let mut targets = vec![
        ("Noop".to_string(), libs.join("libtest_plugins.so"), "Noop"),
        (
            "AddHeader".to_string(),
            libs.join("libadd_header.so"),
            "AddHeader",
        ),
    ];
    match build_go(&ws) {
        Ok((lib, version)) => {
            // The library is built inline (build.sh's default); GW_GO_MODE,
            // when set, overrides it at load.
            let mode = std::env::var("GW_GO_MODE").unwrap_or_else(|_| "inline".into());
            println!("Go adapter: {version}, GW_GO_MODE={mode}");
            targets.push(("Go AddHeader".to_string(), lib, "AddHeader"));
        }
        Err(why) => println!("Go adapter row skipped: {why}"),
    }
    for (label, lib, symbol) in targets {
        let dir = tempfile::tempdir().unwrap();
        let def = serde_json::json!({
            "api_id": symbol, "use_keyless": true,
            "proxy": {"listen_path": "/b/", "target_url": "http://127.0.0.1:9"},
            "custom_middleware": {"driver": "goplugin",
                "pre": [{"name": symbol, "path": lib}]}
        });
        std::fs::write(dir.path().join("b.json"), def.to_string()).unwrap();
        let spec = load_dir(dir.path()).unwrap().apis.remove(0);
        let factory = gateway::native::load(&spec, &HostOptions::default()).unwrap();

        let chain = factory.instantiate().unwrap();
        let mw = &chain.pre[0];
        // Each call gets a request built as the gateway builds one (a clone
        // would leave its header list full, so the plugin's header would grow
        // it); building it is measured separately and subtracted.
        let build = median_ns(|| drop(black_box(request(PATH))));
        let bare = spread_ns(|| {
            let mut req = request(PATH);
            let _ = black_box(poll_once(mw.call(&mut req)));
        });
        let stats = Stats::default();
        let api = ApiChain::new(&spec, factory.instantiate().unwrap(), &stats);
        let run = median_ns(|| {
            let mut req = request(PATH);
            let _ = black_box(poll_once(api.run(Hook::Pre, &mut req)));
        });
        let p50 = stats.summaries()[0].p50_us * 1000.0;
        if let Some(kb) = common::evict_kb() {
            common::cold_calls(&label, &spec, &*factory, PATH, kb, 5_000);
        }
        println!(
            "{label:>12}: call {:7.1} ns (p10 {:.1}, p90 {:.1})  ApiChain::run {:7.1} ns  (building the request {build:.1} ns subtracted; recorded p50 {p50:.0} ns)",
            bare.median - build,
            bare.p10 - build,
            bare.p90 - build,
            run - build,
        );
    }
}
