//! The `fresh` strategy on QuickJS: every call runs in a context no earlier
//! call touched (Tyk's semantics: a script counting calls in a global sees
//! 0, 0, 0), without building one per call.
//!
//! # How
//!
//! The runtime allocates in a region of its own (`snapshot.rs`). Once, on
//! the thread that owns it, [`Fresh::build`] makes the context every call
//! starts from: the intrinsics, the natives, the host code, the prelude
//! and `host.js`'s `host` (which took the builtins it uses then), and the
//! API's scripts and dispatch array loaded from bytecode as function
//! objects but not run. It then copies the region ([`Image`]). Each call
//! puts the image back, runs the scripts' top-level code (so, as before,
//! it runs per request, `log` lines and all), the dispatch and `host`,
//! and then the call. Whatever the previous call did (globals,
//! changed prototypes, closures, atoms, pending jobs, garbage) is gone
//! with the bytes that held it; no collector has to find it.
//!
//! Measured (`ENGINE=quickjs STRATEGY=fresh cargo bench --profile quick
//! -p gateway --bench js_call`, the seed's handler, CPU per call, median
//! of 3 rounds, two alternated runs on the busy 2-core machine): a context
//! built per call (a new full context, the setup from bytecode, a cycle
//! collection: ~1.6 M instructions) cost 261 and 202 µs; putting back the
//! image (~0.3 MiB) and running the scripts costs 23 and 21 µs (`fresh _`,
//! which loads underscore: 488 and 376 µs against 27 and 25 µs, since
//! underscore is in the image when a script uses `_`).
//!
//! # What the image must not be broken by
//!
//! - No handle to a JS value made after the image was taken may outlive
//!   the call: the next restore overwrites what it points to. Calls get
//!   their handles inside `Context::with` and drop them there; the
//!   handles this struct keeps were made before the image.
//! - A native (Rust) function's closure lives on Rust's heap and is freed
//!   when QuickJS finalizes its JS object. A script may drop the last
//!   reference (`delete log`), the collector would finalize it, and the
//!   next restore would bring back a JS object whose closure is gone. So
//!   [`Fresh::build`] keeps a reference to every native from Rust
//!   (`natives`): the globals that hold Rust functions, found by their
//!   class, and the ones no global holds (`setup_host` returns them, and
//!   `Math.random`). A native added elsewhere must be added there.
//! - Lazy Rust-side state of rquickjs (a class's prototype, made on first
//!   use) must exist before the image: every native is made before it.
//! - `Math.random`'s state is in the context: restored, every call would
//!   draw the same numbers. It is replaced by a native drawing from the
//!   thread's generator (`fastrand`).

use std::time::Instant;

use rquickjs::{qjs, Context, Ctx, Function, Object, Persistent, Runtime, Value};

use super::api::{self, BuildError, Fail, Program};
use super::engine::{self, Watch};
use super::snapshot::{Image, Region};
use crate::middleware::MwError;

/// A handle kept across calls (made before the image).
type Kept = Persistent<Value<'static>>;

/// One API's `fresh` state on one thread. Field order is drop order: the
/// kept handles before the context, the context before the runtime, the
/// runtime before its region.
pub(crate) struct Fresh {
    /// Every native function, kept alive (see the module's docs).
    natives: Vec<Kept>,
    /// Each script as a function object, with its field and file.
    scripts: Vec<(Kept, String, String)>,
    dispatch: Kept,
    /// `host.js`'s `host` (`api::setup_host`).
    host: Kept,
    /// The region as it was when the context was made.
    image: Image,
    /// A call ran since the image was last put back.
    dirty: bool,
    ctx: Context,
    rt: Runtime,
    pub(super) watch: std::rc::Rc<Watch>,
    _region: Region,
}

impl Fresh {
    /// Builds the context every call starts from, and its image.
    pub(crate) fn build(p: &Program) -> Result<Fresh, BuildError> {
        let error = |message: String| BuildError {
            field: "custom_middleware".into(),
            message,
        };
        let region = Region::new(region_size(p.memory)).map_err(error)?;
        let (rt, watch) = engine::runtime_in(region.arena(), p.memory).map_err(error)?;
        let ctx = Context::full(&rt)
            .map_err(|e| error(format!("cannot create a QuickJS context: {e}")))?;
        // The host's setup runs under the same time limit as a call.
        watch.arm(Instant::now() + p.timeout);
        let kept = ctx.with(|ctx| {
            let (unheld, host) = api::setup_host(&ctx, p)?;
            let random =
                replace_random(&ctx).map_err(|e| error(format!("JS host setup failed: {e}")))?;
            let mut natives = rust_globals(&ctx).map_err(|e| error(format!("JS host: {e}")))?;
            natives.extend(
                unheld
                    .into_iter()
                    .chain([random])
                    .map(|f| keep(&ctx, f.into_value())),
            );
            let read = |code: &[u8]| {
                engine::read(&ctx, code)
                    .map(|v| keep(&ctx, v))
                    .map_err(|e| error(format!("JS host setup failed: {e}")))
            };
            let mut scripts = Vec::with_capacity(p.scripts.len());
            for (code, field, file) in &p.scripts {
                scripts.push((read(code)?, field.clone(), file.clone()));
            }
            let host = keep(&ctx, host.into_value());
            Ok::<_, BuildError>((natives, scripts, read(&p.dispatch)?, host))
        });
        if watch.disarm() {
            return Err(error(format!(
                "the host's setup was stopped after {:?}",
                p.timeout
            )));
        }
        let (natives, scripts, dispatch, host) = kept?;
        // The image holds no garbage of the setup.
        rt.run_gc();
        let image = Image::take(&region);
        tracing::debug!(api_id = %p.api_id, bytes = image.len(), "QuickJS fresh image");
        Ok(Fresh {
            natives,
            scripts,
            dispatch,
            host,
            image,
            dirty: false,
            ctx,
            rt,
            watch,
            _region: region,
        })
    }

    /// Puts the image back, runs the scripts, the dispatch and the host,
    /// and calls `f` with `call`.
    pub(crate) fn call<T>(
        &mut self,
        p: &Program,
        f: impl for<'js> FnOnce(&Ctx<'js>, &Function<'js>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        if self.dirty {
            self.image.restore();
        }
        self.dirty = true;
        let (scripts, dispatch, host) = (&self.scripts, &self.dispatch, &self.host);
        self.ctx.with(|ctx| {
            let restore = |k: &Kept| {
                k.clone()
                    .restore(&ctx)
                    .map_err(|e| Fail::Script(MwError::internal(format!("JS host: {e}"))))
            };
            let mut funcs = Vec::with_capacity(scripts.len());
            for (k, field, file) in scripts {
                funcs.push((restore(k)?, field.as_str(), file.as_str()));
            }
            let dispatch = restore(dispatch)?;
            let host: Function = restore(host)?
                .get()
                .map_err(|e| Fail::Script(MwError::internal(format!("JS host: {e}"))))?;
            let call =
                api::setup_scripts(&ctx, p, &funcs, &dispatch, &host, false).map_err(|e| {
                    if engine::is_out_of_memory(&e.message) {
                        Fail::Memory
                    } else {
                        Fail::Script(MwError::not_loaded(format!("{}: {}", e.field, e.message)))
                    }
                })?;
            f(&ctx, &call)
        })
    }
}

impl Fresh {
    /// Once a call and its promise jobs are done: puts the image back now,
    /// rather than before the next call, when the call grew the heap past
    /// what a restore keeps resident. The pages it dirtied stayed resident
    /// until the next call of this API on this thread: one 40 MB string
    /// kept 40 MB for as long as the API was idle (up to twice
    /// `--jsvm-memory` per context). A small call leaves the copy to the
    /// next call, off this one's answer.
    pub(crate) fn trim(&mut self) {
        if self.dirty && self.image.outgrown() {
            self.image.restore();
            self.dirty = false;
        }
    }

    /// The runtime (its job queue: `engine::run_jobs`).
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.rt
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        // Back to the state the kept handles were made in, so that
        // dropping them (the fields, next) frees what they hold and the
        // runtime finds no object left.
        if self.dirty {
            self.image.restore();
        }
        self.natives.clear();
    }
}

/// The region a runtime with `memory` (`--jsvm-memory`, 0: unlimited) may
/// fill: address space only, reserved with room for the allocator's
/// rounding (`snapshot.rs`).
fn region_size(memory: usize) -> usize {
    match memory {
        0 => 4 << 30,
        m => m.saturating_mul(2).saturating_add(16 << 20),
    }
}

fn keep<'js>(ctx: &Ctx<'js>, v: Value<'js>) -> Kept {
    Persistent::save(ctx, v)
}

/// The global object's values that are Rust functions (made by rquickjs's
/// `Function::new`, recognised by their class).
fn rust_globals(ctx: &Ctx<'_>) -> rquickjs::Result<Vec<Kept>> {
    let probe = Function::new(ctx.clone(), || ())?;
    // SAFETY: JS_GetClassID only reads the value's header.
    let class = |v: &Value<'_>| unsafe { qjs::JS_GetClassID(v.as_raw()) };
    let rust = class(probe.as_value());
    let mut out = Vec::new();
    for key in ctx.globals().keys::<String>() {
        let v: Value = ctx.globals().get(key?)?;
        if v.is_function() && class(&v) == rust {
            out.push(keep(ctx, v));
        }
    }
    Ok(out)
}

/// `Math.random` as a native drawing from the thread's generator, with the
/// builtin's name, length and attributes. Returns it (no global holds it).
fn replace_random<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<Function<'js>> {
    let math: Object = ctx.globals().get("Math")?;
    let random = Function::new(ctx.clone(), fastrand::f64)?.with_name("random")?;
    math.prop(
        "random",
        rquickjs::object::Property::from(random.clone())
            .writable()
            .configurable(),
    )?;
    Ok(random)
}
