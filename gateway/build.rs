//! Builds the WebAssembly plugins (`plugins/add-header-wasm`: the seed's
//! AddHeader and the tests' probe) for `wasm32-unknown-unknown`, so the
//! README's `cargo build --release` produces `target/wasm/add_header_wasm.wasm`
//! for `apis/wasm-hello.json`, and `cargo test` the modules its tests load.
//!
//! Why here: a wasm cdylib cannot be a member of the host workspace (a
//! workspace build would build it for the host too), so the plugin crate is
//! its own workspace, excluded from ours, and the gateway, which is what
//! loads it, builds it. The nested cargo gets its own target directory
//! (`target/wasm/build`): the outer cargo holds the lock on ours.
//!
//! The wasm32 target is a rustup component. When it is missing this script
//! runs `rustup target add wasm32-unknown-unknown` (what `.ci/run` does up
//! front). When that fails too, or there is no rustup, the gateway still
//! builds: a warning says why, `target/wasm/BUILD-FAILED.txt` keeps the
//! reason, the wasm API fails closed with its file named, and the wasm tests
//! fail quoting that file. Built without the `wasm` feature, the gateway
//! has no use for the modules and this script builds nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-unknown-unknown";

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest
        .parent()
        .expect("gateway/ is in the workspace")
        .to_path_buf();
    let plugin = workspace.join("plugins/add-header-wasm");
    for watched in ["Cargo.toml", "Cargo.lock", "src", "examples"] {
        println!("cargo:rerun-if-changed={}", plugin.join(watched).display());
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    let target_dir = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    };
    let out = target_dir.join("wasm");
    println!("cargo:rustc-env=GATEWAY_WASM_PLUGINS={}", out.display());
    std::fs::create_dir_all(&out).expect("create target/wasm");
    // Without the `wasm` feature nothing loads the modules: skip their build.
    if std::env::var_os("CARGO_FEATURE_WASM").is_none() {
        return;
    }
    let failed = out.join("BUILD-FAILED.txt");
    match ensure_target().and_then(|()| build(&plugin, &out)) {
        Ok(()) => {
            let _ = std::fs::remove_file(&failed);
        }
        Err(why) => {
            let text = format!(
                "The WebAssembly plugins were not built: {why}\n\
                 Install the target with `rustup target add {TARGET}` and build again.\n"
            );
            for line in text.lines() {
                println!("cargo:warning={line}");
            }
            std::fs::write(&failed, text).expect("write BUILD-FAILED.txt");
        }
    }
}

fn rustc() -> String {
    std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into())
}

/// True when the toolchain running this build has the wasm32 standard library.
fn target_installed() -> bool {
    let out = Command::new(rustc())
        .args(["--print", "target-libdir", "--target", TARGET])
        .output();
    let Ok(out) = out else { return false };
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    out.status.success()
        && std::fs::read_dir(&dir).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().starts_with("libcore-"))
        })
}

/// Installs the wasm32 target through rustup when it is missing.
fn ensure_target() -> Result<(), String> {
    if target_installed() {
        return Ok(());
    }
    println!("cargo:warning=installing the {TARGET} target with rustup (needed for the WebAssembly plugins)");
    // RUSTUP_TOOLCHAIN (set by rustup's cargo proxy) is inherited, so the
    // target is added to the toolchain running this build.
    let status = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .map_err(|e| {
            format!("the {TARGET} target is not installed, and rustup could not be run: {e}")
        })?;
    if !status.success() || !target_installed() {
        return Err(format!(
            "the {TARGET} target is not installed, and `rustup target add {TARGET}` failed ({status})"
        ));
    }
    Ok(())
}

/// Builds the plugin crate's library and probe example, then copies the
/// modules to `out` under short names.
fn build(plugin: &Path, out: &Path) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let build_dir = out.join("build");
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--locked",
        "--lib",
        "--example",
        "probe",
    ])
    .args(["--target", TARGET])
    .arg("--manifest-path")
    .arg(plugin.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(&build_dir);
    // Flags meant for the host build (say `-C target-cpu=native`) must not
    // reach the wasm one.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building plugins/add-header-wasm failed ({status})"
        ));
    }
    let release = build_dir.join(TARGET).join("release");
    for (from, to) in [
        (release.join("add_header_wasm.wasm"), "add_header_wasm.wasm"),
        (release.join("examples/probe.wasm"), "probe.wasm"),
    ] {
        std::fs::copy(&from, out.join(to))
            .map_err(|e| format!("cannot copy {}: {e}", from.display()))?;
    }
    Ok(())
}
