//! The real binaries for end-to-end tests: where the gateway and
//! mock-upstream binaries are (built once), the add-header plugin, the repo's
//! API definitions pointed at them, `loadgen bench` itself, and the bench
//! report's schema.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Where the gateway and mock-upstream binaries are.
///
/// `cargo test --workspace` (the README's test command) has already built
/// both next to this package's `loadgen` binary, so the bench test reuses
/// them instead of compiling the gateway (and boa) a second time. Run alone
/// (`cargo test -p loadgen`), the gateway may be missing there: then they are
/// built into a separate target directory.
pub fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let own = Path::new(env!("CARGO_BIN_EXE_loadgen")).parent().unwrap();
        if own.join("gateway").is_file() && own.join("mock-upstream").is_file() {
            return own.to_path_buf();
        }
        cargo_build(&["-p", "gateway", "-p", "loadgen", "--bins"])
    })
}

/// The add-header plugin library (cargo test does not produce cdylibs).
pub fn plugin_so() -> &'static Path {
    static SO: OnceLock<PathBuf> = OnceLock::new();
    SO.get_or_init(|| cargo_build(&["-p", "add-header", "--lib"]).join("libadd_header.so"))
}

/// Runs a nested cargo build into a separate target directory (a nested
/// cargo on the outer test's target directory would wait for its lock).
pub fn cargo_build(args: &[&str]) -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-target");
    let out = Command::new(env!("CARGO"))
        .arg("build")
        .args(args)
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(workspace())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "build failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug")
}

/// The repo's definitions, with the plugin path pointing at the plugin we
/// built, and the Go plugin's at `tmp/go/` (where the bench builds it when
/// a Go toolchain is installed: never into the checkout's `target/release`,
/// and never by two tests at once).
pub fn apis_dir(tmp: &Path) -> PathBuf {
    let dir = tmp.join("apis");
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(workspace().join("apis")).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let so = plugin_so();
        let text = text.replace("target/release/libadd_header.so", so.to_str().unwrap());
        let go = tmp.join("go/libgo_add_header.so");
        let text = text.replace("target/release/libgo_add_header.so", go.to_str().unwrap());
        let js = workspace().join("js/");
        let text = text.replace("\"js/", &format!("\"{}", js.to_str().unwrap()));
        std::fs::write(dir.join(p.file_name().unwrap()), text).unwrap();
    }
    dir
}

/// Runs `loadgen bench ARGS` from the workspace root, with the binaries
/// above and ports chosen by the OS.
pub fn bench(args: &[&str]) -> Output {
    bench_with(args, &[])
}

/// As [`bench`], with `env` added to the bench's environment.
pub fn bench_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    super::dies_with_test(&mut Command::new(bin_dir().join("loadgen")))
        .envs(env.iter().copied())
        .arg("bench")
        .args([
            "--bin-dir",
            bin_dir().to_str().unwrap(),
            "--upstream-port",
            "0",
            "--gateway-port",
            "0",
        ])
        .args(args)
        .current_dir(workspace())
        .output()
        .unwrap()
}

/// The report's JSON must validate against the schema file in the repo.
pub fn validate(v: &Value) {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("loadgen/schema/bench-report.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "the report does not match its schema:\n{}",
        errors.join("\n")
    );
}

/// Every process the report lists has exited once the bench returned.
pub fn assert_children_gone(report: &Value) {
    for p in report["processes"].as_array().unwrap() {
        let pid = p["pid"].as_u64().unwrap();
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{} (pid {pid}) still running",
            p["name"]
        );
    }
}

/// Starts our binary `bin` (`gateway`, `mock-upstream`) from [`bin_dir`]
/// with `args` in `dir` (its log as `dir/BIN.log`), and waits until it
/// answers `ready_path`; returns it with its address.
pub fn start_ready(
    bin: &str,
    args: &[&str],
    dir: &Path,
    ready_path: &str,
) -> (loadgen::bench::procs::Child, std::net::SocketAddr) {
    use loadgen::bench::procs;
    let timeout = std::time::Duration::from_secs(20);
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let log = dir.join(format!("{bin}.log"));
    let mut child =
        procs::Child::start(bin, &bin_dir().join(bin), &args, dir, log, timeout).unwrap();
    let addr = child.addr.unwrap();
    procs::wait_ready(&mut child, addr, ready_path, timeout).unwrap();
    (child, addr)
}

/// The pids of `pid`'s children (its main thread's; the bench starts every
/// child from its main thread).
pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}
