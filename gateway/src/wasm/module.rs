//! Loading a module: the one engine, compilation, the checks that make a
//! file a proxy-wasm module, and linking against the host functions.
//!
//! All of it happens once per entry at load, on the loading thread. What it
//! produces, a [`wasmtime::InstancePre`], is `Send + Sync`: compiled machine
//! code plus resolved imports, from which each worker makes its own instance
//! in microseconds without compiling again.

use std::collections::HashSet;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use wasmtime::{Config, Engine, ExternType, InstancePre, Linker, Module, OptLevel};

use super::abi;
use super::host::{self, HostState};
use super::limits;

/// How often the epoch advances. A call's deadline is counted in these
/// ticks, so a runaway module is stopped within one tick after its
/// timeout. 10 ms keeps the ticker's own cost at 100 wake-ups a second.
pub const TICK: Duration = Duration::from_millis(10);

/// The process's one engine and linker, made on first use.
///
/// One engine because epochs are per engine: a single ticker thread then
/// serves every module, and code compiled for one API is never mixed with
/// another engine's. The linker holds the host functions, which do not
/// depend on the module, so it is built once too.
struct Shared {
    engine: Engine,
    linker: Linker<HostState>,
    /// The names of the `env` functions the linker defines.
    defined: HashSet<String>,
}

fn shared() -> Result<&'static Shared, String> {
    static SHARED: OnceLock<Result<Shared, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let mut config = Config::new();
            // Epoch interruption: generated code checks a counter at
            // function entries and loop headers, the cheapest way to stop
            // a module that loops forever (fuel would count every block).
            config.epoch_interruption(true);
            config.cranelift_opt_level(OptLevel::Speed);
            let engine = Engine::new(&config).map_err(|e| format!("{e:#}"))?;
            let mut linker = Linker::new(&engine);
            host::define(&mut linker).map_err(|e| format!("{e:#}"))?;
            let mut probe = wasmtime::Store::new(&engine, HostState::idle());
            let defined = linker
                .iter(&mut probe)
                .map(|(_, name, _)| name.to_string())
                .collect();
            let ticker = engine.clone();
            // Lives as long as the process, as the engine does (it is in a
            // static); sleeping, it costs nothing measurable.
            std::thread::Builder::new()
                .name("wasm-epoch".into())
                .spawn(move || loop {
                    std::thread::sleep(TICK);
                    ticker.increment_epoch();
                })
                .map_err(|e| format!("cannot start the wasm epoch thread: {e}"))?;
            Ok(Shared {
                engine,
                linker,
                defined,
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The engine every module is compiled for (stores are made from it).
pub fn engine() -> Result<&'static Engine, String> {
    shared().map(|s| &s.engine)
}

/// Compiles and links the module at `path` (binary `.wasm` or `.wat` text),
/// and picks the [`lifecycle`] module that drives it.
///
/// The error is a sentence naming the file: it could not be read, does not
/// compile, is not a proxy-wasm 0.2 module, or imports a function this host
/// does not define.
pub fn compile(path: &Path) -> Result<(InstancePre<HostState>, Module), String> {
    let shared = shared()?;
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let module = Module::new(&shared.engine, &bytes)
        .map_err(|e| format!("{shown} does not compile as WebAssembly: {e:#}"))?;
    check_exports(&module).map_err(|m| format!("{shown} {m}"))?;
    check_resources(&module).map_err(|m| format!("{shown} {m}"))?;
    check_imports(&module, &shared.defined).map_err(|m| format!("{shown} {m}"))?;
    let present = REQUEST_EXPORTS
        .map(|(name, _)| matches!(module.get_export(name), Some(ExternType::Func(_))));
    let pre = shared
        .linker
        .instantiate_pre(&module)
        .map_err(|e| format!("{shown} cannot be linked: {e:#}"))?;
    Ok((pre, lifecycle(present)?))
}

/// The per-request exports a module may have, besides the mandatory
/// `proxy_on_context_create`, with their ABI types as WebAssembly text.
const REQUEST_EXPORTS: [(&str, &str); 4] = [
    (
        "proxy_on_request_headers",
        "(param i32 i32 i32) (result i32)",
    ),
    ("proxy_on_request_body", "(param i32 i32 i32) (result i32)"),
    ("proxy_on_done", "(param i32) (result i32)"),
    ("proxy_on_delete", "(param i32)"),
];

/// The module that drives one request through a plugin in a single entry
/// into WebAssembly (see `instance.rs`), for a plugin that exports the
/// per-request functions `present` marks (in [`REQUEST_EXPORTS`] order).
///
/// Entering wasm from the host costs wasmtime a few hundred instructions
/// (the trap handler's setjmp, thread-local state, the stack limit); a call
/// from one instance's function to another's is a plain indirect call. So
/// instead of calling the plugin's four lifecycle exports one after the
/// other from the host, the host calls this module's `request` once and it
/// calls them, in the same order and with the same arguments. Its export:
///
/// `request(id, root, num_headers, body_len) -> action`: context create;
/// request headers (`end_of_stream` when `body_len` is 0); when they
/// continue, request body if the global `body_to_send` is not 0; done;
/// delete. It returns the last action. `body_to_send` starts at `body_len`
/// and the host functions that replace the body or send a local response
/// set it to what the body phase would get then (0 after a local response),
/// so deciding on the body phase costs no call out of wasm.
///
/// At most 16 variants exist; each is compiled once per process.
pub fn lifecycle(present: [bool; 4]) -> Result<Module, String> {
    static VARIANTS: [OnceLock<Result<Module, String>>; 16] = [const { OnceLock::new() }; 16];
    let index = present
        .iter()
        .enumerate()
        .fold(0, |acc, (i, &p)| acc | (usize::from(p) << i));
    VARIANTS[index]
        .get_or_init(|| {
            let engine = engine()?;
            Module::new(engine, lifecycle_text(present))
                .map_err(|e| format!("the host's lifecycle module does not compile: {e:#}"))
        })
        .clone()
}

/// The text of [`lifecycle`]'s module.
fn lifecycle_text([headers, body, done, delete]: [bool; 4]) -> String {
    let mut wat = String::from(
        "(module\n  (import \"plugin\" \"proxy_on_context_create\" (func $create (param i32 i32)))\n",
    );
    for ((name, ty), present) in REQUEST_EXPORTS.iter().zip([headers, body, done, delete]) {
        if present {
            let short = name.trim_start_matches("proxy_on_");
            wat += &format!("  (import \"plugin\" \"{name}\" (func ${short} {ty}))\n");
        }
    }
    if body {
        wat += "  (global $body_to_send (export \"body_to_send\") (mut i32) (i32.const 0))\n";
    }
    wat += "  (func (export \"request\") (param $id i32) (param $root i32) (param $count i32) \
            (param $body_len i32) (result i32)\n    (local $action i32) (local $n i32)\n";
    if body {
        // First, before any plugin code runs: every change is then seen.
        wat += "    (global.set $body_to_send (local.get $body_len))\n";
    }
    wat += "    (call $create (local.get $id) (local.get $root))\n";
    if headers {
        wat += "    (local.set $action (call $request_headers (local.get $id) (local.get $count) \
                (i32.eqz (local.get $body_len))))\n";
    }
    if body {
        wat += "    (if (i32.eqz (local.get $action)) (then\n      \
                (local.set $n (global.get $body_to_send))\n      \
                (if (local.get $n) (then (local.set $action \
                (call $request_body (local.get $id) (local.get $n) (i32.const 1)))))))\n";
    }
    if done {
        wat += "    (drop (call $done (local.get $id)))\n";
    }
    if delete {
        wat += "    (call $delete (local.get $id))\n";
    }
    wat += "    (local.get $action)))\n";
    wat
}

/// The exports the host calls when present. Exported as anything but a
/// function they would be taken as absent (a headers phase never called),
/// so they are refused.
const FUNCTION_EXPORTS: [&str; 10] = [
    "proxy_on_context_create",
    "proxy_on_request_headers",
    "proxy_on_request_body",
    "proxy_on_done",
    "proxy_on_delete",
    "proxy_on_vm_start",
    "proxy_on_configure",
    "_initialize",
    "malloc",
    "proxy_on_memory_allocate",
];

/// The exports without which the host cannot drive the module at all, and
/// those the host uses exported as the wrong kind of item.
fn check_exports(module: &Module) -> Result<(), String> {
    for export in module.exports() {
        let (name, ty) = (export.name(), export.ty());
        let must = match (&ty, name) {
            (ExternType::Memory(_), "memory") => continue,
            (_, "memory") => "a linear memory",
            (ExternType::Func(_), _) => continue,
            (_, name) if FUNCTION_EXPORTS.contains(&name) => "a function",
            _ => continue,
        };
        return Err(format!(
            "exports {name} as {}; the host uses it as {must}, so it must be one",
            kind_of(&ty)
        ));
    }
    let has = |name: &str| module.get_export(name).is_some();
    if !abi::ABI_MARKERS.iter().any(|m| has(m)) {
        return Err(format!(
            "exports none of {}: not a proxy-wasm 0.2 module",
            abi::ABI_MARKERS.join(", ")
        ));
    }
    for (name, why) in [
        ("proxy_on_context_create", "the host cannot create contexts"),
        ("memory", "the host cannot pass data"),
    ] {
        if !has(name) {
            return Err(format!("exports no {name}: {why}"));
        }
    }
    if !has("malloc") && !has("proxy_on_memory_allocate") {
        return Err(
            "exports neither malloc nor proxy_on_memory_allocate: the host cannot return data"
                .into(),
        );
    }
    Ok(())
}

/// Refuses a module with more memories or tables than an instance may
/// have ([`limits::MAX_MEMORIES`], [`limits::MAX_TABLES`]), before
/// instantiation would fail less plainly.
fn check_resources(module: &Module) -> Result<(), String> {
    let needs = module.resources_required();
    for (n, max, what) in [
        (needs.num_memories, limits::MAX_MEMORIES, "memories"),
        (needs.num_tables, limits::MAX_TABLES, "tables"),
    ] {
        if n as usize > max {
            return Err(format!(
                "defines {n} {what}; an instance may have at most {max} \
                 (they share its --wasm-memory budget)"
            ));
        }
    }
    Ok(())
}

/// Names the first import this host does not provide, in words a plugin
/// author can act on (the linker's own error says the same, less plainly).
fn check_imports(module: &Module, defined: &HashSet<String>) -> Result<(), String> {
    for import in module.imports() {
        let (m, n) = (import.module(), import.name());
        if m == "env" && defined.contains(n) {
            continue;
        }
        let kind = match import.ty() {
            ExternType::Func(_) => "function",
            ExternType::Memory(_) => "memory",
            _ => "item",
        };
        return Err(format!(
            "imports the {kind} {m}.{n}, which this host does not provide \
             (it implements the proxy-wasm 0.2 ABI's env.proxy_* functions; \
             build for wasm32-unknown-unknown, not WASI)"
        ));
    }
    Ok(())
}

/// An item's kind with its article, for messages.
fn kind_of(ty: &ExternType) -> &'static str {
    match ty {
        ExternType::Func(_) => "a function",
        ExternType::Memory(_) => "a linear memory",
        ExternType::Global(_) => "a global",
        ExternType::Table(_) => "a table",
        _ => "a tag",
    }
}
