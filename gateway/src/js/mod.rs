//! The JS middleware host (`driver: "otto"`, `"goja"` or `"javascript"`):
//! Tyk's JSVM API on boa_engine (this module) or QuickJS (`quickjs/`), each
//! with three strategies ([`Strategy`]: `persistent`, `tyk-json`, `fresh`).
//!
//! # How it runs
//!
//! [`load`] reads an API's scripts and builds its context once on the loading
//! thread, so every error a user can fix (a file that cannot be read, a script
//! that does not compile or throws at top level, a `name` the scripts do not
//! define, an unknown `strategy`) fails that API's load and names the field
//! and file. Each worker then gets its own contexts per API in
//! [`ChainFactory::instantiate`]: boa's `Context` is not `Send`, and one
//! context per API keeps two APIs' globals (`var mw`) apart. Per request the
//! host builds the `request` object natively (`request.rs`; its object-valued
//! fields only when the script first reads them), runs a dispatch
//! expression compiled at build time, and reads back only the fields a script
//! may change: no parsing, no JSON text.
//!
//! # Where scripts run: VM threads (decided by measurement)
//!
//! By default (`--jsvm-threads 1`) each worker gives each JS API a VM thread
//! of its own (`vmthread.rs`, engine-agnostic: jobs run against a per-thread
//! state; boa's context here, QuickJS's runtime in `quickjs/`). The I/O thread moves the request to
//! the VM thread and awaits the answer until the deadline; it never runs
//! script code. Measured before (scripts inline on the I/O thread):
//! `/^(a+)+$/` on 27 `a`s held its worker 11-13 s under a 2 s timeout, and
//! `/plain/` requests on that worker waited up to 10 s; even a script the
//! interpreter budget slices raised `/plain/` p50 from 0.3 to 25 ms. Now a
//! runaway script holds only its own API's VM thread, and only until its
//! deadline: the request then gets its 500 from the I/O thread, and a thread
//! still inside a native step (regex, a `forEach` callback) is abandoned
//! (lowered to nice 19; it exits when the step returns) and replaced.
//!
//! The price is a thread hand-off (a job put in the VM thread's inbox,
//! `vmthread/inbox.rs`, and two wake-ups), engineered down by measurement (`gateway/benches/js_placement.sh`,
//! release, `--threads 1`, ab -c 10, 7 alternated rounds, gateway CPU per
//! request over the native plugin's, median):
//! - each worker is pinned to a core and its VM threads inherit it
//!   (`affinity.rs`): a wake-up never crosses cores, which on the test VM
//!   costs ~30 µs each way. +76 → +52 µs; mean call 755 → 84 µs.
//! - the job goes through an inbox woken by `unpark`, not
//!   `std::sync::mpsc` (whose receiver spins and yields before it parks, and
//!   whose waker mutex both sides contended on): context switches per call
//!   3.7 → 2.7 (inline: 0.7), route +39 → +30 µs (quick build, 7 rounds,
//!   paired medians; inline +14 µs in the same run).
//! - the inbox is a queue and the I/O task awaits its answer: the calls of
//!   one reactor turn join the thread's inbox while it runs and share one
//!   hand-off. Until then the lane was held until the answer, with the I/O
//!   thread blocked for it in place (`--jsvm-wait`, now ignored), so every
//!   call paid its own. boa's `/jsvm/` under `ab -c 10 -k`, `--threads
//!   2`, six alternated rounds, gateway CPU per request (`perf stat`):
//!   48.2-54.5 → 37.1-39.9 µs, context switches 2.4-2.6 → 1.6-1.9 (inline
//!   0.4-0.7), mean latency 0.35-0.41 → 0.29-0.32 ms.
//! - inline (`--jsvm-threads 0`, no isolation) the route costs +18 µs: the
//!   isolation costs ~34 µs per call on this machine, mostly the two
//!   context switches and the caches they leave cold. QuickJS can be
//!   stopped anywhere, so it starts inline and moves to a VM thread only
//!   when a call overruns (`quickjs/mod.rs`); boa cannot, so it never runs
//!   inline unless asked.
//!
//! `JSVM_THREADS=0|1 cargo bench -p gateway --bench js_call` gives the
//! call-level figures. With more than one thread per
//! API, calls go to the least busy; each thread has its own context.
//!
//! # What `--jsvm-timeout` guarantees
//!
//! - Every call is answered by its deadline (plus `vmthread::ABANDON_GRACE`,
//!   20 ms), whatever the script does, on VM threads; requests to other
//!   APIs never wait for it. Inline (`--jsvm-threads 0`), only script code
//!   run by the interpreter loop is stopped (at the next slice boundary,
//!   `budget::SLICE_BUDGET` cost units, tens of µs); a native step holds the
//!   worker until it returns.
//! - The deadline counts from when the request reaches the middleware,
//!   including any wait for the API's busy thread or context.
//! - A call stopped by the interpreter budget, or abandoned, loses its
//!   context: the next call gets a rebuilt one (top-level code runs again,
//!   globals reset).
//! - Unbounded recursion stops at depth 512 and a single frame's loops at
//!   10^8 iterations, each an uncatchable error (a 500, context kept).
//! - Native recursion (`JSON.stringify`, `String(array)`, `flat`) is bounded
//!   at `depth::MAX_NESTING` levels (a `RangeError`) on a 256 MiB script
//!   stack; the measurement behind both is in `depth.rs`.
//! - Memory (`memory.rs`): the thread's boa heap is counted by the
//!   gateway's allocator (`heap.rs`) and collected as it grows; at each slice
//!   boundary a call whose context holds more than `--jsvm-memory` after a
//!   collection is stopped, and after a call such a context is rebuilt. As
//!   a backstop the call is also stopped once the process's peak RSS has
//!   grown 256 MiB since the call's first yield. What no slice sees (a
//!   builtin's callback, one huge block like `"x".repeat(1e9)`'s) cannot
//!   be interrupted; on a VM thread the allocator stops the thread there
//!   for good, before its heap passes its ceiling (`heap::ceiling`), or
//!   the limit once abandoned (`heap::Halt`): the call fails at once, and
//!   the thread sleeps holding its heap. Inline, nothing bounds it.
//! - An exception fails its own request only: the dispatch catches it in
//!   the script (see `vm.rs` for the boa stack leak this avoids).
//! - A call whose body was 64 KiB or more is followed by a GC and a
//!   `malloc_trim`, so large bodies do not stay resident (`vm.rs`).
//!
//! # Layout
//!
//! - `prelude`: the TykJS prelude (`js/tyk_prelude.js`) and native globals.
//! - `request`: the MiniRequestObject, built per call; applying the answer.
//! - `vm`: one API's context on one worker; build and call.
//! - `budget`: the slice guard that enforces the timeout.
//! - `memory`: the heap's pacing and limit.
//! - `depth`: the nesting bound on boa's recursive builtins.
//! - `nesting`: script files too deep for boa's parser, refused at load.
//! - `vmthread`: VM threads, the hand-off and abandonment at the deadline.
//! - `tykjson`: the `tyk-json` strategy's JSON texts, both engines'.
//! - `bodies`: the bound on a body a script hands the host, both engines'.

mod bodies;
mod budget;
mod compile;
mod depth;
mod forced;
mod gojson;
pub(crate) mod goquery;
mod gostring;
mod headtext;
mod jobs;
mod json;
mod memory;
mod nesting;
mod phase;
mod prelude;
mod proxy;
pub mod quickjs;
mod reactions;
mod request;
mod scope;
mod session;
mod sniff;
mod sources;
mod strbuild;
mod text;
mod tykapi;
mod tykjson;
mod vm;
mod vmthread;

pub use vmthread::SCRIPT_STACK_SIZE;

/// Installs the host's `JSON.parse` and `JSON.stringify` (`json.rs`) in a
/// boa context: for `cargo bench -p gateway --bench js_stack_depth`, which
/// measures them beside boa's own.
#[doc(hidden)]
pub fn install_host_json(ctx: &mut boa_engine::Context) -> boa_engine::JsResult<()> {
    json::install(ctx).map(drop)
}

/// The lowest address of this thread's stack (`compile.rs`, Linux with
/// glibc; `None` elsewhere): for the same bench's parser table, which reads
/// how much of a thread's stack a parse touched.
#[doc(hidden)]
pub fn stack_floor() -> Option<usize> {
    compile::stack_floor()
}

/// How an API's scripts keep state across requests
/// (`custom_middleware.strategy`, default `--jsvm-strategy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Strategy {
    /// One context per worker (and VM thread) and API, kept across
    /// requests: script globals persist. The one semantic departure from
    /// Tyk, taken because it is what makes a call cost microseconds.
    #[default]
    Persistent,
    /// Tyk's marshalling in a persistent context: each call's source is
    /// `<name>.DoProcessRequest(<request JSON>, <session JSON>, <spec
    /// JSON>)`, parsed and run, and the answer is JSON text decoded by the
    /// host (`tykjson.rs`), as Tyk's `mw_js_plugin.go` does. Globals
    /// persist as in `persistent`; what it adds is what Tyk's transport
    /// costs.
    TykJson,
    /// Tyk's semantics (otto's VM copy, goja's fresh runtime): every call
    /// runs in a context no earlier call touched. On boa the cheapest
    /// correct way is a new context per call (prelude and scripts evaluated
    /// again); on VM threads it is built right after the previous answer,
    /// off the request's path, but it costs the CPU all the same. On
    /// QuickJS one context's heap is copied once and put back before every
    /// call (`quickjs/fresh.rs`).
    Fresh,
}

impl Strategy {
    /// Parses a definition's or a flag's value.
    pub fn parse(s: &str) -> Result<Strategy, String> {
        match s {
            "persistent" => Ok(Strategy::Persistent),
            "tyk-json" => Ok(Strategy::TykJson),
            "fresh" => Ok(Strategy::Fresh),
            other => Err(format!(
                "{other:?} is not a JS strategy; use \"persistent\", \"tyk-json\" or \"fresh\""
            )),
        }
    }
}

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{ApiSpec, Hook, JsEngine, LoadError, Placement};
use crate::middleware::{
    Chain, ChainFactory, Flow, HostOptions, Middleware, MwError, MwFuture, MwRequest,
};
use crate::stats::RunRecorder;

use jobs::{Done, Job};
use vm::{CallError, Sources, Vm};
use vmthread::{RunError, Slot, VmPool};

/// Loads an API's JS middleware: reads the scripts and builds one context to
/// prove they compile and define every entry's object.
pub fn load(spec: &ApiSpec, opts: &HostOptions) -> Result<Arc<dyn ChainFactory>, LoadError> {
    if spec.engine.unwrap_or(opts.jsvm_engine) == JsEngine::QuickJs {
        return quickjs::load(spec, opts);
    }
    // On a script thread's stack, as every later parse of these scripts:
    // boa's parser recurses per level of nesting (`nesting.rs`).
    nesting::on_script_stack(|| load_boa(spec, opts))
        .unwrap_or_else(|why| Err(LoadError::new(&spec.file, "custom_middleware", why)))
}

fn load_boa(spec: &ApiSpec, opts: &HostOptions) -> Result<Arc<dyn ChainFactory>, LoadError> {
    let mut read = sources::read(spec)?;
    let hooks = std::mem::take(&mut read.hooks);
    sources::scope(&mut read);
    let strategy = match spec.strategy.as_str() {
        "" => opts.jsvm_strategy,
        s => Strategy::parse(s)
            .map_err(|m| LoadError::new(&spec.file, "custom_middleware.strategy", m))?,
    };
    let make = |read: &sources::ApiScripts| Sources {
        api_id: spec.api_id.clone(),
        org_id: spec.org_id.clone(),
        config_data: (!spec.config_data_disabled).then(|| spec.config_data.clone()),
        scripts: read.scripts.clone(),
        entries: read.entries.clone(),
        response: read.response.clone(),
        endpoints: read.endpoints.clone(),
        sessions: read.sessions.clone(),
        timeout: opts.jsvm_timeout,
        memory: opts.jsvm_memory,
        strategy,
    };
    // A virtual endpoint that cannot build is set aside (its path fails),
    // anything else fails the API's load.
    let mut checked = std::collections::HashSet::new();
    let vm = sources::without_broken(spec, &mut read, |read| {
        for s in &read.scripts {
            if checked.insert(s.field.clone()) {
                fits(spec, s)?;
            }
        }
        Vm::build(&make(read)).map_err(|e| (e.field, e.message))
    })?;
    let sources = Arc::new(make(&read));
    // Logged here, once: workers rebuild the same context and would repeat it.
    for t in &vm.thrown {
        tracing::warn!(
            "{}: {t} (the objects it defined still serve, as in Tyk)",
            spec.file.display()
        );
    }
    let threads = match spec.placement {
        None => opts.jsvm_threads,
        Some(Placement::Threads) => opts.jsvm_threads.max(1),
        Some(Placement::Inline) => 0,
        Some(Placement::Adaptive) => {
            return Err(LoadError::new(
                &spec.file,
                "custom_middleware.placement",
                "\"adaptive\" needs engine \"quickjs\": boa cannot be stopped inside a builtin, so a \
                 call that overran its slice on the I/O thread could not be moved; use \"threads\" or \
                 \"inline\"",
            ))
        }
    };
    Ok(Arc::new(JsFactory {
        sources,
        hooks,
        timeout: opts.jsvm_timeout,
        file: spec.file.clone(),
        threads,
        strategy,
        slots: read.slots,
    }))
}

/// Refuses a script too deeply nested for boa to parse on a script thread,
/// before the build parses it (`nesting.rs`), as a build error would.
fn fits(spec: &ApiSpec, s: &vm::ScriptFile) -> Result<(), (String, String)> {
    match nesting::check(&s.text) {
        nesting::Verdict::Fits => Ok(()),
        nesting::Verdict::TooDeep(why) => Err((
            s.field.clone(),
            format!("{}: does not compile: {why}", s.file.display()),
        )),
        nesting::Verdict::Unchecked(why) => {
            tracing::warn!(
                "{}: {}: {}: its nesting was not checked ({why}); loading it anyway",
                spec.file.display(),
                s.field,
                s.file.display()
            );
            Ok(())
        }
    }
}

/// Builds per-worker JS chains for one API.
struct JsFactory {
    sources: Arc<Sources>,
    /// The hook of each entry in `sources.entries`.
    hooks: Vec<Hook>,
    timeout: Duration,
    file: PathBuf,
    /// VM threads per worker (`--jsvm-threads`); 0 runs scripts inline.
    threads: usize,
    strategy: Strategy,
    /// The definition's virtual endpoints, loaded or set aside.
    slots: Vec<sources::Slot>,
}

impl ChainFactory for JsFactory {
    /// Builds no context: each is built where it runs, at the API's first
    /// call on this worker (inline) or by its VM thread when that starts
    /// (`VmPool`). The load-time build proved the scripts compile; a build
    /// that fails here after all (top-level code that throws at random)
    /// fails each call with 500, naming the field.
    fn instantiate(&self) -> Result<Chain, MwError> {
        let api = Rc::new(if self.threads == 0 {
            ApiVm::Inline(Box::new(InlineVm {
                vm: tokio::sync::Mutex::new(None),
                sources: self.sources.clone(),
                file: self.file.clone(),
                timeout: self.timeout,
                fresh: self.strategy == Strategy::Fresh,
            }))
        } else {
            // The VM threads build their own contexts (boa's are not
            // `Send`).
            let sources = self.sources.clone();
            let file = self.file.clone();
            let build: vmthread::Builder<Vm> = Arc::new(move || build_vm(&sources, &file));
            let name = format!("gw-js-{}", self.sources.api_id);
            ApiVm::Threads(ThreadedVm {
                pool: VmPool::new(&name, self.threads, self.timeout, build),
                timeout: self.timeout,
                memory: self.sources.memory,
                fresh: self.strategy == Strategy::Fresh,
            })
        });
        let mut chain = Chain::default();
        for (index, ((name, _), hook)) in self.sources.entries.iter().zip(&self.hooks).enumerate() {
            let mw: Box<dyn Middleware> = Box::new(JsMiddleware {
                name: name.clone(),
                index,
                api: api.clone(),
                runs: None,
            });
            match hook {
                Hook::Pre => chain.pre.push(mw),
                _ => chain.post.push(mw),
            }
        }
        for (index, (name, _)) in self.sources.response.iter().enumerate() {
            chain.response.push(Box::new(jobs::JsResponse {
                name: name.clone(),
                index,
                api: api.clone(),
                runs: None,
            }));
        }
        chain.endpoints =
            sources::endpoint_chain(&self.slots, &self.sources.endpoints, |index, name| {
                Box::new(jobs::JsEndpoint {
                    name: name.to_string(),
                    index,
                    api: api.clone(),
                    runs: None,
                })
            });
        Ok(chain)
    }
}

/// One API's JS on one worker, shared by that API's entries: where its
/// calls run.
enum ApiVm {
    /// On the I/O thread itself (`--jsvm-threads 0`), yielding at slices.
    Inline(Box<InlineVm>),
    /// On VM threads of its own (the default).
    Threads(ThreadedVm),
}

impl ApiVm {
    /// Runs `job` where this API's context lives; hands the job back (its
    /// request and response, edited) with the outcome.
    /// On a VM thread, the job's own time there goes to `runs`.
    async fn run(
        &self,
        name: &str,
        job: Job,
        runs: Option<&RunRecorder>,
    ) -> (Job, Result<Done, MwError>) {
        match self {
            ApiVm::Inline(vm) => vm.run(name, job).await,
            ApiVm::Threads(vm) => vm.run(name, job, runs).await,
        }
    }

    async fn call(
        &self,
        index: usize,
        name: &str,
        req: &mut MwRequest,
        runs: Option<&RunRecorder>,
    ) -> Result<Flow, MwError> {
        let job = Job::Request {
            index,
            req: take_request(req),
        };
        let (back, done) = self.run(name, job, runs).await;
        if let Job::Request { req: back, .. } = back {
            *req = back;
        }
        match done? {
            Done::Flow(flow) => Ok(flow),
            _ => Err(MwError::internal(format!(
                "{name}: the JS host answered the wrong phase"
            ))),
        }
    }
}

/// Why a context that answered is dropped: what it keeps is past
/// `--jsvm-memory` (`memory.rs`).
/// A script that keeps too much on every call would log on every call: the
/// lines are bounded (`--log-rate`).
fn retire_warning(name: &str, live: usize, limit: usize) {
    static GATE: crate::lograte::LogGate = crate::lograte::LogGate::new();
    if let Some(left_out) = GATE.admit() {
        tracing::warn!(
            "{name}: the JS heap holds {} after this call, past --jsvm-memory ({}): the context is rebuilt (globals reset){}",
            memory::mib(live),
            memory::mib(limit),
            crate::lograte::LeftOut(left_out)
        );
    }
}

/// The 500 message of a call stopped at its deadline.
fn timed_out(name: &str, timeout: Duration) -> MwError {
    MwError::timed_out(format!(
        "{name}: stopped after the jsvm timeout ({timeout:?})"
    ))
}

/// A call's result as the chain sees it. A stopped VM must be discarded by
/// the caller.
fn outcome<T>(
    name: &str,
    timeout: Duration,
    memory_limit: usize,
    r: Result<T, CallError>,
) -> Result<T, MwError> {
    match r {
        Ok(v) => Ok(v),
        Err(CallError::Failed(e) | CallError::Spent(e)) => Err(e.context(name)),
        Err(CallError::Stopped(budget::Stop::Timeout)) => Err(timed_out(name, timeout)),
        Err(CallError::Stopped(budget::Stop::Memory)) => Err(MwError::out_of_memory(format!(
            "{name}: stopped for runaway memory growth"
        ))),
        Err(CallError::Stopped(budget::Stop::Heap)) => Err(MwError::out_of_memory(format!(
            "{name}: stopped: {}",
            memory::passed(memory_limit)
        ))),
    }
}

fn build_vm(sources: &Sources, file: &Path) -> Result<Vm, MwError> {
    Vm::build(sources).map_err(|e| {
        MwError::not_loaded(format!(
            "{}: building the JS context failed: {}: {}",
            file.display(),
            e.field,
            e.message
        ))
    })
}

/// Scripts run inline on the I/O thread.
struct InlineVm {
    /// `None` after a stopped call discarded the context; the next call
    /// rebuilds it. The async mutex serialises calls: a call suspended at a
    /// slice boundary still owns the VM's frame stack.
    vm: tokio::sync::Mutex<Option<Vm>>,
    sources: Arc<Sources>,
    /// The API's definition file, for errors.
    file: PathBuf,
    timeout: Duration,
    /// [`Strategy::Fresh`]: the context is dropped after every call.
    fresh: bool,
}

impl InlineVm {
    async fn run(&self, name: &str, mut job: Job) -> (Job, Result<Done, MwError>) {
        let deadline = Instant::now() + self.timeout;
        let mut slot = self.vm.lock().await;
        if Instant::now() >= deadline {
            return (job, Err(timed_out(name, self.timeout)));
        }
        // A context built here (the API's first call on this worker, or
        // after one was discarded) is not part of the call: the call's
        // time starts once it is built, as on a VM thread (`vmthread.rs`,
        // `built`).
        let (vm, deadline) = match &mut *slot {
            Some(vm) => (vm, deadline),
            empty => match build_vm(&self.sources, &self.file) {
                Ok(vm) => (empty.insert(vm), Instant::now() + self.timeout),
                Err(e) => return (job, Err(e.context(name))),
            },
        };
        let r = job.run(vm, deadline).await;
        let retired = vm.retired();
        if let Some(live) = retired {
            retire_warning(name, live, self.sources.memory);
        }
        if self.fresh || retired.is_some() || r.as_ref().is_err_and(CallError::discards_context) {
            // Fresh: no later call may see this one's state. Stopped (or
            // spent): the VM stopped mid-frame and cannot be resumed
            // safely. Either way the next call builds a new context.
            *slot = None;
        }
        // boa cannot be stopped inside one native step (a backtracking
        // regex, a loop in a builtin's callback): inline, such a call runs
        // to its end however late, and its answer used to be applied (a
        // 200 after seconds past `--jsvm-timeout`). Too late is a timeout,
        // as a VM thread's caller sees it at the deadline; the context
        // finished its call normally and is kept.
        if r.is_ok() && Instant::now() >= deadline {
            return (job, Err(timed_out(name, self.timeout)));
        }
        (job, outcome(name, self.timeout, self.sources.memory, r))
    }
}

/// Scripts run on VM threads (`vmthread.rs`); the I/O thread only hands
/// the request over and awaits the answer until the deadline.
struct ThreadedVm {
    pool: VmPool<Vm>,
    timeout: Duration,
    /// `--jsvm-memory`.
    memory: usize,
    /// [`Strategy::Fresh`]: the context is dropped after every call.
    fresh: bool,
}

impl ThreadedVm {
    async fn run(
        &self,
        name: &str,
        job: Job,
        runs: Option<&RunRecorder>,
    ) -> (Job, Result<Done, MwError>) {
        let deadline = Instant::now() + self.timeout;
        let fresh = self.fresh;
        // What the caller gets back when the job never returns (timeout):
        // the phase's data is lost with the abandoned thread, and the
        // request fails anyway.
        let placeholder = job.placeholder();
        let memory = self.memory;
        let work = move |slot: &mut Slot<Vm>, deadline: Instant| {
            let mut job = job;
            let mut retired = None;
            let r = match slot.get() {
                Ok(vm) => {
                    // The call's bound in the allocator (`heap::Halt`); a
                    // build is not bounded there: its top-level code is
                    // the one the load-time check ran.
                    crate::heap::arm(memory, job.body_len());
                    let r = budget::block_on(job.run(vm, deadline));
                    crate::heap::disarm();
                    retired = vm.retired();
                    r
                }
                Err(e) => Err(CallError::Failed(e)),
            };
            if fresh || retired.is_some() || r.as_ref().is_err_and(CallError::discards_context) {
                slot.discard();
            }
            (job, r, retired)
        };
        match self.pool.run(deadline, runs, work).await {
            Ok((back, r, retired)) => {
                if let Some(live) = retired {
                    retire_warning(name, live, self.memory);
                }
                (back, outcome(name, self.timeout, self.memory, r))
            }
            Err(RunError::Timeout) => (placeholder, Err(timed_out(name, self.timeout))),
            Err(RunError::Parked(held)) => (
                placeholder,
                Err(MwError::out_of_memory(format!(
                    "{name}: stopped: {}",
                    memory::parked(held, self.memory)
                ))),
            ),
            Err(RunError::Unavailable(m)) => {
                (placeholder, Err(MwError::internal(format!("{name}: {m}"))))
            }
        }
    }
}

/// VM threads taken out of service, process-wide (`GET /tyk/stats`).
pub fn threads_out_of_service() -> gateway_wire::JsThreads {
    let out = crate::heap::out_of_service();
    gateway_wire::JsThreads {
        abandoned: out.running as u64,
        parked: out.parked as u64,
        parked_bytes: out.parked_bytes as u64,
    }
}

/// Moves the request out for a VM thread, leaving an empty one (no
/// allocation) that is overwritten when the answer comes back.
pub(crate) fn take_request(req: &mut MwRequest) -> MwRequest {
    std::mem::replace(req, empty_request(req.remote_addr))
}

/// A request with nothing in it (no allocation).
pub(crate) fn empty_request(remote_addr: std::net::SocketAddr) -> MwRequest {
    MwRequest::new(
        http::Method::GET,
        http::Uri::default(),
        http::HeaderMap::new(),
        bytes::Bytes::new(),
        remote_addr,
    )
}

/// One middleware entry on one worker.
struct JsMiddleware {
    name: String,
    index: usize,
    api: Rc<ApiVm>,
    /// The time its calls run on a VM thread.
    runs: Option<RunRecorder>,
}

impl Middleware for JsMiddleware {
    fn name(&self) -> &str {
        &self.name
    }

    fn time_vm_runs(&mut self, runs: RunRecorder) {
        if let ApiVm::Threads(_) = &*self.api {
            self.runs = Some(runs);
        }
    }

    fn call<'a>(&'a self, req: &'a mut MwRequest) -> MwFuture<'a> {
        MwFuture::pending(
            self.api
                .call(self.index, &self.name, req, self.runs.as_ref()),
        )
    }
}
