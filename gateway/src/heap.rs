//! How much heap a thread's JS engine holds: a counting global allocator.
//!
//! boa has no heap limit, and its collector decides when to run from a count
//! of its own boxes only: an array's elements, a string's bytes and a
//! compiled function's code live outside that count. A script that makes
//! 800 KB of garbage a call (`new Array(100000).fill(1.5)`) grew a worker by
//! 800 MB before boa collected; one that keeps 1 MiB a call grew without
//! end. QuickJS has its own allocator with a limit (`--jsvm-memory`); boa
//! allocates through Rust's global allocator, so the count is taken there.
//!
//! [`Counting`] wraps the system allocator. On a thread inside a
//! [`Window`] every allocation adds its size to the thread's count and every
//! free subtracts it; outside one it only pays a thread-local load. The JS
//! host opens a window around whatever runs boa (building a context, a call,
//! dropping a context, a collection), so the count is the boa heap of that
//! thread: boa's collector is per thread, and so is its heap.
//!
//! The count is exact for what boa allocates and frees. What it gets wrong
//! is host data crossing the window's edge: a header value the host makes
//! from a script's answer is counted and later freed on the I/O thread,
//! outside any window (tens of bytes per such call). That drift is bounded:
//! the count is set back to zero whenever the thread holds no context
//! ([`Contexts`]), and a context over its limit is rebuilt (the JS host's
//! policy is in `js/memory.rs`).
//!
//! The binary installs [`Counting`] as its global allocator (`main.rs`); a
//! program that does not (a test binary, a bench) still runs, with JS heaps
//! unbounded: [`installed`] tells the two apart.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::OnceLock;

/// The gateway's global allocator: the system's, counting the bytes of the
/// threads inside a [`Window`].
pub struct Counting;

thread_local! {
    /// Whether this thread's allocations count now.
    static ON: Cell<bool> = const { Cell::new(false) };
    /// Bytes allocated minus bytes freed inside windows on this thread.
    static BYTES: Cell<isize> = const { Cell::new(0) };
}

#[inline(always)]
fn add(delta: isize) {
    if ON.with(Cell::get) {
        BYTES.with(|b| b.set(b.get().wrapping_add(delta)));
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments and
// only reads or writes this thread's two `Cell`s besides (const-initialised,
// no destructor: touching them neither allocates nor can fail).
unsafe impl GlobalAlloc for Counting {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        add(-(layout.size() as isize));
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// This thread's allocations count while it lives (windows nest: the
/// outer one's state comes back on drop).
#[must_use = "the window closes when dropped"]
pub struct Window {
    was: bool,
}

impl Window {
    /// Counts this thread's allocations until dropped.
    pub fn open() -> Window {
        Window {
            was: ON.with(|on| on.replace(true)),
        }
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        ON.with(|on| on.set(self.was));
    }
}

/// Runs `f` with this thread's allocations not counted: the host's own data
/// that crosses a window's edge (a request's header values made from a
/// script's answer and freed on the I/O thread; a header map shared with
/// the I/O thread's read buffer).
pub fn uncounted<R>(f: impl FnOnce() -> R) -> R {
    let was = ON.with(|on| on.replace(false));
    let r = f();
    ON.with(|on| on.set(was));
    r
}

/// `bytes` made in a window leave it with the host (a body string moved
/// into a response): the count forgets them, as it will not see them freed.
pub fn released(bytes: usize) {
    BYTES.with(|b| b.set(b.get().wrapping_sub(bytes as isize)));
}

/// A value the host keeps inside the JS heap (an object's host data) whose
/// memory is the host's: neither made nor freed in the count.
#[derive(Default)]
pub struct Uncounted<T>(std::mem::ManuallyDrop<T>);

impl<T> Uncounted<T> {
    /// Wraps `make()`, made uncounted.
    pub fn make(make: impl FnOnce() -> T) -> Uncounted<T> {
        Uncounted(std::mem::ManuallyDrop::new(uncounted(make)))
    }
}

impl<T> std::ops::Deref for Uncounted<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> Drop for Uncounted<T> {
    fn drop(&mut self) {
        // SAFETY: the value is dropped once, here, and not used after.
        uncounted(|| unsafe { std::mem::ManuallyDrop::drop(&mut self.0) });
    }
}

/// Turns counting on this thread on or off; returns what it was. For a
/// window that [`Window`]'s scope cannot express (a struct's fields
/// dropping in order: `js/memory.rs`).
pub fn set_counting(on: bool) -> bool {
    ON.with(|c| c.replace(on))
}

/// This thread's count: bytes allocated minus bytes freed in its windows.
pub fn bytes() -> usize {
    BYTES.with(Cell::get).max(0) as usize
}

/// Whether [`Counting`] is the global allocator (probed once: a box made
/// inside a window either moves this thread's count or it does not).
pub fn installed() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let _w = Window::open();
        let before = BYTES.with(Cell::get);
        let probe = std::hint::black_box(Box::new([0u8; 64]));
        let moved = BYTES.with(Cell::get) != before;
        drop(probe);
        moved
    })
}

/// How many JS contexts live on this thread: when the last one goes (and
/// its heap is collected), the count starts again from zero, leaving any
/// drift behind.
pub struct Contexts;

thread_local! {
    static CONTEXTS: Cell<usize> = const { Cell::new(0) };
}

impl Contexts {
    /// A context was built on this thread.
    pub fn added() {
        CONTEXTS.with(|c| c.set(c.get() + 1));
    }

    /// A context on this thread was dropped; `collect` frees what it held
    /// (it runs inside a window). Returns how many remain.
    pub fn removed(collect: impl FnOnce()) -> usize {
        let left = CONTEXTS.with(|c| {
            c.set(c.get().saturating_sub(1));
            c.get()
        });
        if left == 0 {
            let _w = Window::open();
            collect();
            BYTES.with(|b| b.set(0));
        }
        left
    }

    /// Contexts on this thread now.
    pub fn live() -> usize {
        CONTEXTS.with(Cell::get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // This crate's unit tests do not install `Counting`, so only the parts
    // that do not need it are checked here; `tests/js_memory.rs` installs
    // it and checks the counts and the limits through a gateway.
    #[test]
    fn windows_nest_and_restore() {
        assert!(!ON.with(Cell::get));
        {
            let _outer = Window::open();
            {
                let _inner = Window::open();
                assert!(ON.with(Cell::get));
            }
            assert!(
                ON.with(Cell::get),
                "the inner window kept the outer one open"
            );
        }
        assert!(!ON.with(Cell::get));
        assert!(!installed(), "the test harness uses the system allocator");
    }

    #[test]
    fn last_context_resets_the_count() {
        BYTES.with(|b| b.set(4096));
        Contexts::added();
        Contexts::added();
        assert_eq!(Contexts::removed(|| {}), 1);
        assert_eq!(bytes(), 4096);
        let mut collected = false;
        assert_eq!(Contexts::removed(|| collected = true), 0);
        assert!(collected);
        assert_eq!(bytes(), 0);
    }
}
