//! Native stack bytes per nesting level for the boa builtins that recurse in
//! Rust rather than in the interpreter (prints, never asserts).
//!
//! boa's recursion limit counts interpreter frames; these builtins recurse
//! on the machine stack instead, one or more Rust frames per level of the
//! value they walk. The JS host sizes its VM threads' stacks and its depth
//! bound (`js/depth.rs`) from these figures.
//!
//! To try this: `cargo bench -p gateway --bench js_stack_depth` (release
//! figures are the ones that matter; dev builds use more stack per frame);
//! `-- --parser` prints only the parser's table.
//!
//! The parser's table: boa's parser and compiler recurse once per level of
//! source nesting (`js/compile.rs`, `js/nesting.rs`). There is no callback
//! inside them to probe from, so each depth is parsed on a fresh thread and
//! the stack it touched is read afterwards (the lowest resident page of the
//! thread's stack, `mincore`).
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

/// Source nested `levels` deep in each shape the parser recurses on:
/// `(name, characters that open a level, text)`. A level needs only its
/// opening characters to recurse (an unclosed `((((` nests as deep), so
/// bytes per character is per level over those.
fn sources(levels: usize) -> Vec<(&'static str, usize, String)> {
    let expr = |open: &str, close: &str| {
        format!("var x = {}1{};", open.repeat(levels), close.repeat(levels))
    };
    vec![
        ("( ... )", 1, expr("(", ")")),
        ("[ ... ]", 1, expr("[", "]")),
        ("{a: ... }", 3, expr("{a:", "}")),
        ("x => ...", 3, expr("x=>", "")),
        ("1 ? 1 : ...", 4, expr("1?1:", "")),
        ("! ...", 1, expr("!", "")),
        ("if (1) ...", 5, format!("{}x;", "if(1)".repeat(levels))),
        (
            "function f() { ... }",
            13,
            format!("{}{}", "function f(){".repeat(levels), "}".repeat(levels)),
        ),
    ]
}

/// Bytes of this thread's stack touched below `entry` while `f` ran: the
/// lowest resident page of the thread's (fresh, untouched) stack mapping,
/// read with `mincore`.
fn high_water(entry: usize, f: impl FnOnce()) -> usize {
    f();
    let floor = gateway::js::stack_floor().expect("the stack's bounds (Linux, glibc)");
    // SAFETY: sysconf has no preconditions; mincore reads the residency of
    // this thread's own stack mapping, [floor, entry), into a vector of one
    // byte per page.
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let pages = (entry - floor) / page;
        let mut resident = vec![0u8; pages];
        assert_eq!(
            libc::mincore(
                floor as *mut libc::c_void,
                pages * page,
                resident.as_mut_ptr().cast()
            ),
            0
        );
        let lowest = resident.iter().position(|r| r & 1 == 1).unwrap_or(pages);
        entry - (floor + lowest * page)
    }
}

/// Stack per nesting level of boa's parser (and compiler) for `text` of
/// each depth, on a fresh thread each: the difference of two depths, so
/// the frames every parse has cancel out.
fn parse_cost(levels: [usize; 2], text: impl Fn(usize) -> String, compile: bool) -> f64 {
    let used = levels.map(|n| {
        let text = text(n);
        std::thread::Builder::new()
            .stack_size(2 << 30)
            .spawn(move || {
                let entry = stack_addr();
                high_water(entry, || {
                    let mut ctx = Context::default();
                    let script =
                        boa_engine::Script::parse(Source::from_bytes(&text), None, &mut ctx);
                    if compile {
                        let script = script.expect("the nested source parses");
                        script.codeblock(&mut ctx).expect("and compiles");
                    }
                })
            })
            .unwrap()
            .join()
            .unwrap()
    });
    (used[1] as f64 - used[0] as f64) / (levels[1] - levels[0]) as f64
}

fn parser() {
    let levels = [1_000, 3_000];
    println!();
    println!(
        "boa's parser: native stack per nesting level of source, {} and {} levels deep",
        levels[0], levels[1]
    );
    println!("(`gateway/src/js/compile.rs` bounds eval by STACK_PER_CHAR, the worst bytes per character)");
    println!(
        "  {:<22} {:>13} {:>13} {:>22}",
        "shape", "parse B/level", "B/character", "parse+compile B/level"
    );
    for (i, (name, chars, _)) in sources(1).into_iter().enumerate() {
        let text = move |n: usize| sources(n).swap_remove(i).2;
        let parse = parse_cost(levels, text, false);
        let both = parse_cost(levels, text, true);
        println!(
            "  {name:<22} {parse:>13.0} {:>13.0} {both:>22.0}",
            parse / chars as f64
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--parser") {
        return parser();
    }
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
    parser();
}
