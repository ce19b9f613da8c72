//! boa's heap, bounded: collections paced by what the heap holds, and a
//! context past `--jsvm-memory` stopped or rebuilt.
//!
//! The count is [`crate::heap`]'s: every byte boa allocates on this thread
//! (boxes, array storage, strings, bytecode), inside the windows this module
//! opens around everything that runs boa ([`counted`], [`Vm::build`], the
//! context's drop). Two rules use it:
//!
//! - **Pacing.** Once the heap has grown by its size at the last collection
//!   (at least [`MIN_PACE`]), it is collected now. boa's own trigger counts
//!   its boxes only, and an array's 800 KB of elements is one small box:
//!   a script making that much garbage a call grew a worker by 800 MB
//!   before boa collected; paced, it stays within tens of MB.
//! - **Limit.** A heap past `--jsvm-memory` per context after a collection
//!   is live data: at a slice boundary the call stops (500,
//!   [`Stop::Heap`]); after a call the answer stands and the context is
//!   rebuilt (globals reset), with a warning. On a VM thread the heap is
//!   its one context's; inline, a worker's contexts share
//!   `contexts x limit`, and the one whose call finds it past that is the
//!   one rebuilt.
//!
//! [`Vm::build`]: super::vm::Vm::build

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use boa_engine::property::PropertyKey;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsSymbol, JsValue, NativeFunction};

use super::budget::Stop;
use crate::heap::{self, Contexts, Window};

/// The least growth between two paced collections.
pub(crate) const MIN_PACE: usize = 16 << 20;

thread_local! {
    /// The count at which this thread's heap is collected next.
    static NEXT: Cell<usize> = const { Cell::new(MIN_PACE) };
}

/// The heap was found past its limit: the live bytes after a collection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Over(pub(crate) usize);

/// Collects when the heap is due (paced, or past the limit), then checks
/// the live heap against `limit` per context (0: no limit). Cheap when
/// neither: two thread-local reads.
pub(crate) fn check(limit: usize) -> Result<(), Over> {
    let now = heap::bytes();
    let allowed = limit.saturating_mul(Contexts::live().max(1));
    if now < NEXT.with(Cell::get) && (limit == 0 || now <= allowed) {
        return Ok(());
    }
    if !heap::installed() {
        NEXT.with(|n| n.set(usize::MAX));
        return Ok(());
    }
    collect();
    heap::rearm();
    let live = heap::bytes();
    NEXT.with(|n| n.set(live.saturating_add(live.max(MIN_PACE))));
    if limit != 0 && live > allowed {
        return Err(Over(live));
    }
    Ok(())
}

/// A full collection of this thread's boa heap, counted.
pub(crate) fn collect() {
    let _w = Window::open();
    boa_engine::gc::force_collect();
}

/// The check at a slice boundary: a live heap past the limit stops the
/// call.
pub(crate) fn check_slice(limit: usize) -> Result<(), Stop> {
    check(limit).map_err(|_| Stop::Heap)
}

/// `fut` with this thread's allocations counted while it is polled (and
/// not while it waits: inline, the I/O thread serves others meanwhile).
pub(crate) fn counted<F: Future>(fut: F) -> Counted<F> {
    Counted { fut }
}

pub(crate) struct Counted<F> {
    fut: F,
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let _w = Window::open();
        // SAFETY: `fut` is structurally pinned: never moved out of `self`.
        unsafe { self.map_unchecked_mut(|c| &mut c.fut) }.poll(cx)
    }
}

thread_local! {
    /// Whether counting was on when a context's drop began ([`DropWindow`]).
    static DROP_WAS: Cell<bool> = const { Cell::new(false) };
}

/// A context's first field: its drop opens the window in which the
/// context's other fields drop, counted, up to its [`Tenant`] (last).
pub(crate) struct DropWindow(());

impl DropWindow {
    pub(crate) fn new() -> DropWindow {
        DropWindow(())
    }
}

impl Drop for DropWindow {
    fn drop(&mut self) {
        DROP_WAS.with(|w| w.set(heap::set_counting(true)));
    }
}

/// A context's last field: counted as built; its drop counts the
/// context's removal and, when it was the thread's last, collects what it
/// held and resets the count; then closes the [`DropWindow`].
pub(crate) struct Tenant(());

impl Tenant {
    pub(crate) fn new() -> Tenant {
        Contexts::added();
        Tenant(())
    }
}

impl Drop for Tenant {
    fn drop(&mut self) {
        Contexts::removed(boa_engine::gc::force_collect);
        heap::set_counting(DROP_WAS.with(Cell::get));
    }
}

/// `Symbol.for` and `Symbol.keyFor` on this context's own registry,
/// installed before the prelude. boa keeps `Symbol.for`'s keys in one
/// process-wide table that nothing ever empties: a script registering new
/// keys grew the process without bound, rebuilt contexts and `fresh` ones
/// alike (600 calls of 20,000 keys: 8.9 GB). Here the registry is two
/// objects of the context (key to symbol, symbol to key), counted and freed
/// with it, as goja keeps one per runtime. Same attributes and rules as the
/// builtins: the key is `ToString(key)` (a Symbol key throws), `keyFor` of a
/// non-symbol throws.
pub(crate) fn install_symbol_registry(ctx: &mut Context) -> JsResult<()> {
    let symbol = ctx.intrinsics().constructors().symbol().constructor();
    let by_key = JsObject::with_null_proto();
    let key_of = JsObject::with_null_proto();
    let registry = (by_key, key_of);
    let for_ = NativeFunction::from_copy_closure_with_captures(
        |_, args, (by_key, key_of): &(JsObject, JsObject), ctx| {
            let key = args.first().cloned().unwrap_or_default().to_string(ctx)?;
            let known = by_key.get(key.clone(), ctx)?;
            if known.is_symbol() {
                return Ok(known);
            }
            let sym = JsSymbol::new(Some(key.clone()))
                .ok_or_else(|| JsNativeError::range().with_message("too many symbols"))?;
            by_key.set(key.clone(), sym.clone(), true, ctx)?;
            key_of.set(PropertyKey::Symbol(sym.clone()), key, true, ctx)?;
            Ok(sym.into())
        },
        registry.clone(),
    );
    let key_for = NativeFunction::from_copy_closure_with_captures(
        |_, args, (_, key_of): &(JsObject, JsObject), ctx| match args
            .first()
            .and_then(JsValue::as_symbol)
        {
            Some(sym) => key_of.get(PropertyKey::Symbol(sym), ctx),
            None => Err(JsNativeError::typ()
                .with_message("Symbol.keyFor: the argument is not a symbol")
                .into()),
        },
        registry,
    );
    super::depth::replace(&symbol, "for", 1, for_, ctx)?;
    super::depth::replace(&symbol, "keyFor", 1, key_for, ctx)?;
    Ok(())
}

/// What a call or top-level code stopped at the limit was stopped for.
pub(crate) fn passed(limit: usize) -> String {
    format!("the JS heap passed --jsvm-memory ({})", mib(limit))
}

/// What a call whose VM thread the allocator stopped (`heap::Halt`) was
/// stopped for.
pub(crate) fn parked(held: usize, limit: usize) -> String {
    format!(
        "the JS heap reached {} and its next allocation inside one native step (a builtin's callback, or one huge block) would have passed its ceiling ({} for --jsvm-memory {}, plus {} bytes per byte of the call's bodies); its VM thread stays parked, holding that memory, until the gateway restarts",
        mib(held),
        mib(heap::ceiling(limit)),
        mib(limit),
        heap::BODY_FACTOR
    )
}

/// How the limit is shown in messages.
pub(crate) fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}
