//! Source text a script compiles while it runs (`eval`, `new Function`),
//! bounded by the stack left to parse it.
//!
//! boa 0.22's parser, compiler and evaluator recurse once per level of
//! nesting and check no depth of their own: with a script doing
//! `eval(request.Body)`, a 20 KB body of 10,000 `(` overflowed a VM
//! thread's 256 MiB stack and aborted the gateway (a Rust stack overflow
//! cannot be caught). A level needs at least one character, so the stack a
//! source may need is bounded by its length: the worst is `(`, one
//! character a level (`cargo bench -p gateway --bench js_stack_depth --
//! --parser`, release build, bytes of stack per character: `(` 28,031,
//! `[` 25,790, `{a:` 9,381, `!` 2,288, `x=>` 1,158 (1,467 compiled),
//! `1?1:` 800, `if(1)` 576, `function f(){` 420; with `--profile dev`,
//! the tests' build, `(` takes 184,801).
//!
//! [`Hooks`] is the context's `HostEnsureCanCompileStrings`, which the spec
//! calls before `eval`, `Function`, `GeneratorFunction` and
//! `AsyncFunction` parse a string: a source longer than the stack left on
//! the thread can take at [`STACK_PER_CHAR`] is refused with a
//! `RangeError` (the call fails, 500, or the script catches it). On a VM
//! thread with a fresh call that is ~6,000 characters (~900 in the tests'
//! build); data belongs in
//! `JSON.parse`, which has its own bound (128 levels). QuickJS checks its
//! stack inside its parser and needs none of this.
//!
//! The API's own script files are not bound by their length: one too deep
//! for a script thread is found at load by parsing it in a child process
//! (`nesting.rs`).

use std::cell::Cell;

use boa_engine::context::HostHooks;
use boa_engine::realm::Realm;
use boa_engine::{Context, JsNativeError, JsResult, JsString};

use super::vmthread::SCRIPT_STACK_SIZE;

/// Stack one character of source may need, parsed, compiled and run: the
/// worst measured (a `(`, module docs), with a margin. In the release build
/// that is ~28 KB, so 40 KB. Builds with debug assertions (the tests', whose
/// boa is built at `opt-level = 2` without LTO) take ~185 KB, so 256 KB.
pub(crate) const STACK_PER_CHAR: usize = if cfg!(debug_assertions) {
    256 << 10
} else {
    40 << 10
};

/// Stack kept for everything after the parse (the call's own frames, the
/// host's reads of the answer); a proxy trap keeps the same (`proxy.rs`).
pub(crate) const RESERVE: usize = 16 << 20;

/// The longest source compiled where the stack left cannot be read (not
/// Linux): what a script thread's stack takes with two reserves used.
const FALLBACK_CHARS: usize = (SCRIPT_STACK_SIZE - 2 * RESERVE) / STACK_PER_CHAR;

/// The context's host hooks: [`Hooks::ensure_can_compile_strings`].
pub(crate) struct Hooks;

impl HostHooks for Hooks {
    fn ensure_can_compile_strings(
        &self,
        _realm: Realm,
        parameters: &[JsString],
        body: &JsString,
        direct: bool,
        _context: &mut Context,
    ) -> JsResult<()> {
        let len = body.len() + parameters.iter().map(JsString::len).sum::<usize>();
        let allowed = allowed_chars();
        if len <= allowed {
            return Ok(());
        }
        let what = if direct { "eval" } else { "compiling a string" };
        Err(JsNativeError::range()
            .with_message(format!(
                "{what}: {len} characters of source are more than this thread's stack can parse safely ({allowed} here; boa nests one level per character, each taking up to {} KB of stack); parse data with JSON.parse",
                STACK_PER_CHAR >> 10
            ))
            .into())
    }

    /// The largest `ArrayBuffer` (a typed array's too) a script may make:
    /// no more than its call may still allocate (`heap::room`), else
    /// boa's 1.5 GiB. boa reserves the whole block at once, and one past
    /// the heap's ceiling (`new Uint8Array(3e8)`) stopped the VM thread
    /// for good; it is boa's `RangeError` now, counted as out of memory.
    fn max_buffer_size(&self, _context: &mut Context) -> u64 {
        const BOA_S: u64 = 1_610_612_736;
        crate::heap::room().map_or(BOA_S, |room| (room as u64).min(BOA_S))
    }
}

/// How many characters of source the stack left can take.
fn allowed_chars() -> usize {
    match remaining_stack() {
        Some(left) => left.saturating_sub(RESERVE) / STACK_PER_CHAR,
        None => FALLBACK_CHARS,
    }
}

/// Bytes of stack left below this frame on this thread.
pub(crate) fn remaining_stack() -> Option<usize> {
    let here = 0u8;
    let here = std::ptr::addr_of!(here) as usize;
    stack_floor().map(|floor| here.saturating_sub(floor))
}

thread_local! {
    /// The lowest address of this thread's stack, read once.
    static FLOOR: Cell<Option<Option<usize>>> = const { Cell::new(None) };
}

pub(crate) fn stack_floor() -> Option<usize> {
    FLOOR.with(|f| match f.get() {
        Some(known) => known,
        None => {
            let read = read_floor();
            f.set(Some(read));
            read
        }
    })
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn read_floor() -> Option<usize> {
    // SAFETY: `attr` is initialised by pthread_getattr_np before it is
    // read, and destroyed once; the out-pointers are valid locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let r = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (r == 0 && !addr.is_null()).then_some(addr as usize)
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn read_floor() -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stack_left_is_read_and_shrinks_deeper_down() {
        fn deeper(n: usize) -> usize {
            let pad = [0u8; 4096];
            std::hint::black_box(&pad);
            if n == 0 {
                remaining_stack().unwrap()
            } else {
                deeper(n - 1)
            }
        }
        let size = 64 << 20;
        let (top, down) = std::thread::Builder::new()
            .stack_size(size)
            .spawn(|| (remaining_stack().unwrap(), deeper(100)))
            .unwrap()
            .join()
            .unwrap();
        assert!(top <= size && top > size - (1 << 20), "{top} of {size}");
        assert!(top - down >= 100 * 4096, "{top} -> {down}");
        let allowed = std::thread::Builder::new()
            .stack_size(size)
            .spawn(allowed_chars)
            .unwrap()
            .join()
            .unwrap();
        assert!(
            allowed.abs_diff((top - RESERVE) / STACK_PER_CHAR) <= 1,
            "{allowed}"
        );
    }
}
