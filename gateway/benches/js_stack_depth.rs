//! Native stack bytes per nesting level for the boa builtins that recurse in
//! Rust rather than in the interpreter (prints, never asserts).
//!
//! boa's recursion limit counts interpreter frames; these builtins recurse
//! on the machine stack instead, one or more Rust frames per level of the
//! value they walk. The JS host sizes its VM threads' stacks and its depth
//! bound (`js/depth.rs`) from these figures.
//!
//! To try this: `cargo bench -p gateway --bench js_stack_depth` (release
//! figures are the ones that matter; dev builds use more stack per frame).
//!
//! Method: each case nests a value `LEVELS` deep whose innermost level calls
//! `probe()`, a native function that records the address of one of its
//! locals. The distance from the thread's first frame to that address,
//! divided by the depth, is the stack one level costs.

use std::cell::Cell;

use boa_engine::{js_string, Context, JsValue, NativeFunction, Source};

thread_local! {
    static LOWEST: Cell<usize> = const { Cell::new(usize::MAX) };
}

const LEVELS: usize = 2_000;

/// `(name, setup building `deep` LEVELS deep with probe() innermost, the
/// expression that walks it)`. A name starting with "host " runs in a
/// context with the gateway's own `JSON` functions (`js/json.rs`).
const CASES: &[(&str, &str, &str)] = &[
    (
        "host JSON.stringify(object)",
        "var deep = {toJSON: function () { probe(); return 1; }}; for (var i = 0; i < N; i++) deep = {a: deep};",
        "JSON.stringify(deep)",
    ),
    (
        "host JSON.stringify(array)",
        "var deep = {toJSON: function () { probe(); return 1; }}; for (var i = 0; i < N; i++) deep = [deep];",
        "JSON.stringify(deep)",
    ),
    (
        "JSON.stringify(object)",
        "var deep = {toJSON: function () { probe(); return 1; }}; for (var i = 0; i < N; i++) deep = {a: deep};",
        "JSON.stringify(deep)",
    ),
    (
        "JSON.stringify(array)",
        "var deep = {toJSON: function () { probe(); return 1; }}; for (var i = 0; i < N; i++) deep = [deep];",
        "JSON.stringify(deep)",
    ),
    (
        "String(array) (join)",
        "var deep = {toString: function () { probe(); return ''; }}; for (var i = 0; i < N; i++) deep = [deep];",
        "String(deep)",
    ),
    (
        "Array.prototype.flat(Infinity)",
        "var deep = [{}]; for (var i = 0; i < N; i++) deep = [deep]; Object.defineProperty(Object.prototype, 'x', {get: function () { return 1; }});",
        "(function () { var s = 0; var p = new Proxy([], {get: function (t, k) { if (k === 'length') { probe(); return 0; } return t[k]; }}); var d = p; for (var i = 0; i < N; i++) d = [d]; d.flat(Infinity); })()",
    ),
    (
        "prototype chain lookup",
        "var deep = {get hit() { probe(); return 1; }}; for (var i = 0; i < N; i++) deep = Object.create(deep);",
        "deep.hit",
    ),
    (
        "Proxy chain [[Get]]",
        "var deep = {get hit() { probe(); return 1; }}; for (var i = 0; i < N; i++) deep = new Proxy(deep, {});",
        "deep.hit",
    ),
    (
        "bound function chain",
        "var deep = function () { probe(); }; for (var i = 0; i < N; i++) deep = deep.bind(null);",
        "deep()",
    ),
];

fn stack_addr() -> usize {
    let x = 0u8;
    std::hint::black_box(&x) as *const u8 as usize
}

fn measure(host: bool, setup: &str, walk: &str) -> Result<f64, String> {
    let base = stack_addr();
    LOWEST.with(|l| l.set(usize::MAX));
    let mut ctx = Context::default();
    if host {
        gateway::js::install_host_json(&mut ctx).map_err(|e| e.to_string())?;
    }
    let probe = NativeFunction::from_fn_ptr(|_, _, _| {
        let sp = stack_addr();
        LOWEST.with(|l| l.set(l.get().min(sp)));
        Ok(JsValue::undefined())
    });
    ctx.register_global_callable(js_string!("probe"), 0, probe)
        .map_err(|e| e.to_string())?;
    let mut limits = ctx.runtime_limits();
    limits.set_recursion_limit(usize::MAX);
    ctx.set_runtime_limits(limits);
    let src = format!("var N = {LEVELS}; {setup}");
    ctx.eval(Source::from_bytes(&src))
        .map_err(|e| e.to_string())?;
    ctx.eval(Source::from_bytes(walk))
        .map_err(|e| e.to_string())?;
    let lowest = LOWEST.with(Cell::get);
    if lowest == usize::MAX {
        return Err("probe() never ran".into());
    }
    Ok((base - lowest) as f64 / LEVELS as f64)
}

fn main() {
    println!("native stack per nesting level, {LEVELS} levels deep");
    for (name, setup, walk) in CASES {
        let (setup, walk) = (setup.to_string(), walk.to_string());
        let host = name.starts_with("host ");
        // A large stack so every case reaches its innermost level.
        let got = std::thread::Builder::new()
            .stack_size(1 << 30)
            .spawn(move || measure(host, &setup, &walk))
            .unwrap()
            .join()
            .unwrap();
        match got {
            Ok(b) => println!("  {name:<34} {b:>8.0} bytes/level"),
            Err(e) => println!("  {name:<34} failed: {e}"),
        }
    }
}
