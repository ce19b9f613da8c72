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
//! The count also bounds what no slice check reaches (a builtin's callback,
//! one huge block, a thread abandoned at its deadline): a VM thread that
//! entered a [`Halt`] is stopped for good at the allocation that would take
//! it past its bound, before it is made ([`Halt`], [`arm`]).
//!
//! The binary installs [`Counting`] as its global allocator (`main.rs`); a
//! program that does not (a test binary, a bench) still runs, with JS heaps
//! unbounded: [`installed`] tells the two apart.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The gateway's global allocator: the system's, counting the bytes of the
/// threads inside a [`Window`].
pub struct Counting;

thread_local! {
    /// Whether this thread's allocations count now.
    static ON: Cell<bool> = const { Cell::new(false) };
    /// Bytes allocated minus bytes freed inside windows on this thread.
    static BYTES: Cell<isize> = const { Cell::new(0) };
    /// The count past which [`crossed`] looks at this thread's ceiling
    /// (never, unless [`arm`]ed on a thread that entered a [`Halt`]).
    static NEXT: Cell<isize> = const { Cell::new(isize::MAX) };
    /// [`arm`]'s limit and ceiling.
    static SOFT: Cell<isize> = const { Cell::new(isize::MAX) };
    static HARD: Cell<isize> = const { Cell::new(isize::MAX) };
    /// [`arm`]'s ceiling without the bodies' share (what parked threads'
    /// budget is counted in).
    static BASE: Cell<usize> = const { Cell::new(0) };
    /// The [`Halt`] this thread entered (null: none).
    static HALT: Cell<*const Halt> = const { Cell::new(std::ptr::null()) };
}

/// Counts `size` more bytes, before they are allocated: a thread that
/// passes its ceiling stops here, without the allocation.
#[inline(always)]
fn grow(size: isize) {
    let b = BYTES.with(Cell::get).wrapping_add(size);
    BYTES.with(|c| c.set(b));
    if b > NEXT.with(Cell::get) {
        crossed(b, size);
    }
}

#[inline(always)]
fn shrink(size: isize) {
    BYTES.with(|c| c.set(c.get().wrapping_sub(size)));
}

// SAFETY: every method forwards to `System` with the caller's arguments.
// Besides, it reads and writes this thread's `Cell`s (const-initialised,
// no destructor: touching them neither allocates nor can fail) and, past
// an armed ceiling, may put the thread to sleep for good ([`crossed`]):
// it never unwinds and never returns a block it did not get from `System`.
// Outside a window each method is one thread-local test and a tail call
// (the counting paths are out of line, so the plain path keeps no frame).
unsafe impl GlobalAlloc for Counting {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ON.with(Cell::get) {
            // SAFETY: the caller's contract, passed on.
            return unsafe { counted_alloc(layout, false) };
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if ON.with(Cell::get) {
            // SAFETY: the caller's contract, passed on.
            return unsafe { counted_alloc(layout, true) };
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ON.with(Cell::get) {
            shrink(layout.size() as isize);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ON.with(Cell::get) {
            // SAFETY: the caller's contract, passed on.
            return unsafe { counted_realloc(ptr, layout, new_size) };
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// [`GlobalAlloc::alloc`] (or `alloc_zeroed`) inside a window.
///
/// # Safety
/// `GlobalAlloc::alloc`'s contract.
#[inline(never)]
unsafe fn counted_alloc(layout: Layout, zeroed: bool) -> *mut u8 {
    grow(layout.size() as isize);
    // SAFETY: the caller's contract, passed on.
    let p = unsafe {
        if zeroed {
            System.alloc_zeroed(layout)
        } else {
            System.alloc(layout)
        }
    };
    if p.is_null() {
        shrink(layout.size() as isize);
    }
    p
}

/// [`GlobalAlloc::realloc`] inside a window.
///
/// # Safety
/// `GlobalAlloc::realloc`'s contract.
#[inline(never)]
unsafe fn counted_realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    let delta = new_size as isize - layout.size() as isize;
    if delta > 0 {
        grow(delta);
    }
    // SAFETY: the caller's contract, passed on.
    let p = unsafe { System.realloc(ptr, layout, new_size) };
    if p.is_null() {
        if delta > 0 {
            shrink(delta);
        }
    } else if delta < 0 {
        shrink(-delta);
    }
    p
}

/// How far past [`arm`]'s limit a VM thread's heap may get inside one
/// native step before the thread is stopped there: the slice checks
/// (`js/memory.rs`) hold the live heap to the limit between steps, and
/// paced garbage may double it; what a builtin's callback or one huge
/// allocation adds is met here. At least [`CEILING_MARGIN`] over the limit:
/// boa's own steps make large transient blocks (`"x".repeat(n)` first
/// makes a vector of `n` 16-byte slices: 16 MiB for a 1 MiB string).
pub const CEILING_FACTOR: usize = 4;
/// The least the ceiling lies over the limit (see [`CEILING_FACTOR`]).
pub const CEILING_MARGIN: usize = 64 << 20;

/// The ceiling for a limit: see [`CEILING_FACTOR`].
pub fn ceiling(limit: usize) -> usize {
    limit
        .saturating_mul(CEILING_FACTOR)
        .max(limit.saturating_add(CEILING_MARGIN))
}

/// Past the limit, how much growth between two looks at whether the
/// thread was abandoned.
const STEP: isize = 1 << 20;

/// Abandoned VM threads still running their last native step.
static RUNNING_ABANDONED: AtomicUsize = AtomicUsize::new(0);
/// VM threads stopped in the allocator, the bytes they hold, and the
/// largest ceiling among them.
static PARKED: AtomicUsize = AtomicUsize::new(0);
static PARKED_BYTES: AtomicUsize = AtomicUsize::new(0);
static PARKED_CEILING: AtomicUsize = AtomicUsize::new(0);

/// [`Halt`]'s state bits.
const ABANDONED: u8 = 1;
const PARKED_BIT: u8 = 2;

/// What a VM thread and its pool share about stopping it.
///
/// boa runs a builtin's callback (`forEach`, `Array.from`, `sort`,
/// `replace`, a `JSON.parse` reviver) in a nested loop that never yields,
/// so the slice checks cannot stop a call growing its heap there, and a
/// thread abandoned at its deadline runs on until its native step ends:
/// it grew by gigabytes. A thread that [`Halt::enter`]s and is [`arm`]ed
/// stops at an allocation instead (before making it), for good:
///
/// - while its call is live, once its count would pass the ceiling
///   ([`ceiling`]: 4 x the limit, at least the limit + 64 MiB; plus
///   [`BODY_FACTOR`] bytes per byte of the call's bodies);
/// - once abandoned, once its count would pass the limit.
///
/// A stopped thread sleeps forever, keeping what it holds (at most the
/// ceiling): nothing can unwind it from inside the allocator, and nothing
/// else can free a boa heap. The pool sees [`Halt::held`] and answers its
/// call at once. Between calls (a context rebuilt after one) the thread is
/// [`disarm`]ed. [`out_of_service`] counts the abandoned threads still
/// running and the parked ones (one state word per thread, so a thread
/// abandoned and parked at once is counted once, as parked).
#[derive(Default)]
pub struct Halt {
    state: AtomicU8,
    held: AtomicUsize,
}

impl Halt {
    /// Tells the thread that no one waits for its call any more.
    pub fn abandon(&self) {
        let was = self.state.fetch_or(ABANDONED, Ordering::SeqCst);
        if was == 0 {
            RUNNING_ABANDONED.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Whether [`Halt::abandon`] was called.
    pub fn abandoned(&self) -> bool {
        self.state.load(Ordering::SeqCst) & ABANDONED != 0
    }

    /// The thread's count when it stopped; 0 while it runs.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// The thread is about to exit (its step ended): an abandoned one no
    /// longer counts as running.
    pub fn exiting(&self) {
        if self.state.load(Ordering::SeqCst) == ABANDONED {
            RUNNING_ABANDONED.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// This thread obeys `self` until the guard drops.
    pub fn enter(self: &Arc<Halt>) -> Entered {
        let keep = self.clone();
        HALT.with(|h| h.set(Arc::as_ptr(&keep)));
        Entered { _halt: keep }
    }

    /// Stops this thread for good, holding `held` bytes.
    fn stop(&self, held: isize) -> ! {
        let held = held.max(1) as usize;
        PARKED.fetch_add(1, Ordering::SeqCst);
        PARKED_BYTES.fetch_add(held, Ordering::SeqCst);
        PARKED_CEILING.fetch_max(BASE.with(Cell::get), Ordering::SeqCst);
        self.held.store(held, Ordering::SeqCst);
        if self.state.fetch_or(PARKED_BIT, Ordering::SeqCst) == ABANDONED {
            RUNNING_ABANDONED.fetch_sub(1, Ordering::SeqCst);
        }
        loop {
            // nanosleep: allocates nothing and holds no lock.
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

/// See [`Halt::enter`]; keeps the `Halt` alive while the thread points at it.
pub struct Entered {
    _halt: Arc<Halt>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        HALT.with(|h| h.set(std::ptr::null()));
        NEXT.with(|n| n.set(isize::MAX));
    }
}

/// How much heap a call may make per byte of the bodies it was given, over
/// its [`ceiling`]: what a script does with a large body is bounded by the
/// body (32 MiB at most), not by `--jsvm-memory`. Measured: `tyk-json`
/// pastes the body into the call's source as base64, and boa's parser made
/// ~13 bytes per body byte (a 16 MiB body peaked near 210 MiB);
/// `JSON.parse` then `JSON.stringify` of a 32 MiB body ~8.
pub const BODY_FACTOR: usize = 32;

/// Sets this thread's limit (`--jsvm-memory`) and ceiling for the call
/// that runs next, given `body` bytes of request and response bodies;
/// effective on a thread inside a [`Halt::enter`], until [`disarm`].
pub fn arm(limit: usize, body: usize) {
    let base = ceiling(limit);
    let hard = base.saturating_add(body.saturating_mul(BODY_FACTOR));
    SOFT.with(|s| s.set(limit.min(isize::MAX as usize) as isize));
    HARD.with(|h| h.set(hard.min(isize::MAX as usize) as isize));
    BASE.with(|b| b.set(base));
    rearm();
}

/// No bound between calls (a context rebuilt after one: its top-level
/// code passed the load-time check, and no call waits for it).
pub fn disarm() {
    SOFT.with(|s| s.set(isize::MAX));
    HARD.with(|h| h.set(isize::MAX));
    NEXT.with(|n| n.set(isize::MAX));
}

/// How much more this thread may allocate in the running call before the
/// allocator stops it for good (its ceiling, [`arm`]); `None` where nothing
/// stops it (not a VM thread, between calls). The host asks before it hands
/// a script one large block of its own making (a call out's answer), which
/// should fail that call rather than park the thread.
pub fn room() -> Option<usize> {
    let hard = HARD.with(Cell::get);
    if HALT.with(Cell::get).is_null() || hard == isize::MAX {
        return None;
    }
    Some(hard.saturating_sub(BYTES.with(Cell::get)).max(0) as usize)
}

/// Sets where the next look at the ceiling is due from the count now (after
/// a collection freed some).
pub fn rearm() {
    let b = BYTES.with(Cell::get);
    let (soft, hard) = (SOFT.with(Cell::get), HARD.with(Cell::get));
    let next = if HALT.with(Cell::get).is_null() {
        isize::MAX
    } else if b < soft {
        soft
    } else {
        b.saturating_add(STEP).min(hard)
    };
    NEXT.with(|n| n.set(next));
}

/// The count would be `b` with the allocation of `size` under way, past
/// [`NEXT`]: stops the thread if it is over its bound, else sets the next
/// look.
#[cold]
#[inline(never)]
fn crossed(b: isize, size: isize) {
    entered(|halt| {
        let (soft, hard) = (SOFT.with(Cell::get), HARD.with(Cell::get));
        if b > hard || (b > soft && halt.abandoned()) {
            shrink(size);
            halt.stop(b - size);
        }
    });
    rearm();
}

/// `f` on the [`Halt`] this thread entered, if any.
fn entered<R>(f: impl FnOnce(&Halt) -> R) -> Option<R> {
    let halt = HALT.with(Cell::get);
    // SAFETY: `Halt::enter` set it from an `Arc` that its guard keeps
    // alive, and the guard clears it before letting go; `f` cannot keep
    // the reference.
    (!halt.is_null()).then(|| f(unsafe { &*halt }))
}

/// Whether this thread is a VM thread whose call was abandoned (its
/// answer no longer wanted).
pub fn abandoned_here() -> bool {
    entered(Halt::abandoned).unwrap_or(false)
}

/// Most VM threads parked at once: past it, or past
/// [`PARKED_CEILINGS`], a pool replaces no thread it loses.
pub const MAX_PARKED: usize = 64;
/// What parked threads may hold together, in ceilings (the largest of
/// theirs, without the bodies' share): 1 GiB at the default
/// `--jsvm-memory` (64 MiB, ceiling 256 MiB). A thread stopped before one
/// huge block holds little, so many of those fit; four that filled their
/// ceiling use it up.
pub const PARKED_CEILINGS: usize = 4;

/// VM threads out of service, process-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfService {
    /// Abandoned at a deadline, still running their last native step.
    pub running: usize,
    /// Stopped for good in the allocator ([`Halt`]).
    pub parked: usize,
    /// What the parked ones hold.
    pub parked_bytes: usize,
    /// What they may hold together ([`PARKED_CEILINGS`]; 0 when none is
    /// parked).
    pub parked_budget: usize,
}

impl OutOfService {
    /// Whether parked threads are at [`MAX_PARKED`] or their budget.
    pub fn parked_full(&self) -> bool {
        self.parked >= MAX_PARKED || (self.parked > 0 && self.parked_bytes >= self.parked_budget)
    }
}

/// VM threads out of service now.
pub fn out_of_service() -> OutOfService {
    OutOfService {
        running: RUNNING_ABANDONED.load(Ordering::SeqCst),
        parked: PARKED.load(Ordering::SeqCst),
        parked_bytes: PARKED_BYTES.load(Ordering::SeqCst),
        parked_budget: PARKED_CEILING
            .load(Ordering::SeqCst)
            .saturating_mul(PARKED_CEILINGS),
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

/// For changes made inside [`uncounted`] (what they allocate or free must
/// stay out of the count too).
impl<T> std::ops::DerefMut for Uncounted<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
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

    /// Waits (bounded) until `halt` says its thread stopped; its count then.
    fn stopped(halt: &Halt) -> usize {
        for _ in 0..500 {
            if halt.held() > 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        halt.held()
    }

    #[test]
    fn a_halted_thread_stops_past_its_ceiling_or_past_its_limit_once_abandoned() {
        // The rules of `crossed`, driven through `grow` as the allocator
        // would (the counts here are made up: this harness does not install
        // `Counting`). Each thread that stops sleeps for good, as in the
        // gateway, and is left behind when the test process exits.
        const MIB: isize = 1 << 20;
        let live = Arc::new(Halt::default());
        let h = live.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _in = h.enter();
            arm(MIB as usize, 0);
            grow(MIB / 2);
            let under = NEXT.with(Cell::get);
            // Past the limit while live: only the next look moves, a MiB on.
            grow(2 * MIB);
            let past = NEXT.with(Cell::get);
            tx.send((under, past)).unwrap();
            grow(MIB);
            // 3.5 MiB now; the ceiling is 65 MiB (the limit + 64 MiB).
            grow(61 * MIB);
            grow(MIB);
            unreachable!("the ceiling let the count reach 65.5 MiB");
        });
        assert_eq!(rx.recv().unwrap(), (MIB, 7 * MIB / 2));
        assert_eq!(stopped(&live), 129 << 19, "stopped before counting the MiB");
        assert!(!live.abandoned());

        let late = Arc::new(Halt::default());
        let h = late.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _in = h.enter();
            arm(MIB as usize, 0);
            grow(MIB / 2);
            tx.send(()).unwrap();
            while !h.abandoned() {
                std::thread::yield_now();
            }
            // Abandoned: growing within the limit goes on; past it, stops.
            grow(MIB / 4);
            grow(MIB / 2);
            unreachable!("an abandoned thread passed its limit");
        });
        rx.recv().unwrap();
        late.abandon();
        assert_eq!(stopped(&late), 3 << 18);
        // Both parked; the one abandoned first no longer counts as running.
        let now = out_of_service();
        assert_eq!((now.running, now.parked), (0, 2));
        assert_eq!(now.parked_bytes, (129 << 19) + (3 << 18));
        assert_eq!(now.parked_budget, 4 * 65 * MIB as usize);
        assert!(!now.parked_full());
        // Abandoning a parked thread does not count it as running.
        live.abandon();
        assert_eq!(out_of_service().running, 0);

        // A thread that entered no `Halt` is never stopped, and an
        // armed one's look is off again once it leaves.
        std::thread::spawn(|| {
            arm(MIB as usize, 0);
            grow(64 * MIB);
            assert_eq!(NEXT.with(Cell::get), isize::MAX);
            let halt = Arc::new(Halt::default());
            {
                let _in = halt.enter();
                arm(MIB as usize, 0);
                assert_eq!(
                    NEXT.with(Cell::get),
                    65 * MIB,
                    "past the limit: the ceiling"
                );
                // A call given a 1 MiB body may make 32 MiB more.
                arm(MIB as usize, MIB as usize);
                assert_eq!(HARD.with(Cell::get), 97 * MIB);
                disarm();
                assert_eq!(NEXT.with(Cell::get), isize::MAX);
            }
            assert_eq!(NEXT.with(Cell::get), isize::MAX);
        })
        .join()
        .unwrap();
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
