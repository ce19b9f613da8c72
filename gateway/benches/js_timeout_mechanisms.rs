//! What each candidate timeout mechanism costs per call, on the seed's
//! handler (`js/jsvm_hello.js`) in one persistent boa context.
//!
//! To try this: 1. `cargo bench -p gateway --bench js_timeout_mechanisms`
//! 2. read the medians (ns per call, 5 alternated rounds).
//!
//! - `direct`: `JsObject::call` of `ProcessRequest` on the worker thread;
//!   only RuntimeLimits can stop a runaway script (iterations, not time).
//! - `sliced`: the dispatch expression compiled once, run with
//!   `evaluate_async_with_budget` and polled inline with a deadline check at
//!   each slice: what the host does.
//! - `vm-thread`: `sliced` on a dedicated VM thread, with the request sent
//!   over a channel and the answer sent back (the other design).

use std::future::Future;
use std::sync::mpsc;
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::{Duration, Instant};

use boa_engine::object::ObjectInitializer;
use boa_engine::property::Attribute;
use boa_engine::{js_string, Context, JsObject, JsValue, NativeFunction, Script, Source};

const PRELUDE: &str = include_str!("../../js/tyk_prelude.js");
const HELLO: &str = include_str!("../../js/jsvm_hello.js");
const CALLS: usize = 20_000;

struct Vm {
    ctx: Context,
    mw: JsObject,
    dispatch: Script,
}

fn vm() -> Vm {
    let mut ctx = Context::default();
    let noop = NativeFunction::from_fn_ptr(|_, _, _| Ok(JsValue::undefined()));
    ctx.register_global_callable(js_string!("log"), 1, noop)
        .unwrap();
    ctx.eval(Source::from_bytes(PRELUDE)).unwrap();
    ctx.eval(Source::from_bytes(HELLO)).unwrap();
    let mw = ctx
        .global_object()
        .get(js_string!("jsvmHelloPreHook"), &mut ctx)
        .unwrap()
        .as_object()
        .unwrap();
    let src = "jsvmHelloPreHook.ProcessRequest(__req, {}, {})";
    let dispatch = Script::parse(Source::from_bytes(src), None, &mut ctx).unwrap();
    Vm { ctx, mw, dispatch }
}

/// A request object with the fields the seed handler touches.
fn request(ctx: &mut Context) -> JsObject {
    let set = JsObject::with_object_proto(ctx.intrinsics());
    let headers = JsObject::with_object_proto(ctx.intrinsics());
    ObjectInitializer::new(ctx)
        .property(js_string!("Headers"), headers, Attribute::all())
        .property(js_string!("SetHeaders"), set, Attribute::all())
        .property(js_string!("Method"), js_string!("GET"), Attribute::all())
        .build()
}

fn read_back(ret: &JsValue, ctx: &mut Context) -> String {
    let r = ret
        .as_object()
        .unwrap()
        .get(js_string!("Request"), ctx)
        .unwrap();
    let set = r
        .as_object()
        .unwrap()
        .get(js_string!("SetHeaders"), ctx)
        .unwrap();
    let v = set
        .as_object()
        .unwrap()
        .get(js_string!("X-Custom-JSVM"), ctx)
        .unwrap();
    v.as_string().unwrap().to_std_string_lossy()
}

impl Vm {
    fn direct(&mut self) -> String {
        let req = request(&mut self.ctx);
        let f = self
            .mw
            .get(js_string!("ProcessRequest"), &mut self.ctx)
            .unwrap();
        let args = [req.into(), JsValue::undefined(), JsValue::undefined()];
        let ret = f
            .as_callable()
            .unwrap()
            .call(&self.mw.clone().into(), &args, &mut self.ctx)
            .unwrap();
        read_back(&ret, &mut self.ctx)
    }

    fn sliced(&mut self, deadline: Instant) -> String {
        let req = request(&mut self.ctx);
        self.ctx
            .global_object()
            .set(js_string!("__req"), req, false, &mut self.ctx)
            .unwrap();
        let ret = {
            let fut = self
                .dispatch
                .evaluate_async_with_budget(&mut self.ctx, 50_000);
            let mut fut = std::pin::pin!(fut);
            let mut cx = TaskContext::from_waker(Waker::noop());
            loop {
                if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                    break r.unwrap();
                }
                assert!(Instant::now() < deadline, "timed out");
            }
        };
        read_back(&ret, &mut self.ctx)
    }
}

fn median_ns(mut samples: Vec<u64>) -> u64 {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn time(mut f: impl FnMut() -> String) -> u64 {
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        let out = f();
        samples.push(t.elapsed().as_nanos() as u64);
        assert_eq!(out, "hello-from-jsvm");
    }
    median_ns(samples)
}

fn main() {
    let mut local = vm();
    // The VM thread owns its context; requests and answers cross channels.
    let (req_tx, req_rx) = mpsc::channel::<Instant>();
    let (resp_tx, resp_rx) = mpsc::channel::<String>();
    let worker = std::thread::spawn(move || {
        let mut vm = vm();
        for deadline in req_rx {
            let _ = resp_tx.send(vm.sliced(deadline));
        }
    });
    let budget = Duration::from_secs(5);
    let mut rows: Vec<(&str, Vec<u64>)> = vec![
        ("direct", vec![]),
        ("sliced", vec![]),
        ("vm-thread", vec![]),
    ];
    for _round in 0..5 {
        rows[0].1.push(time(|| local.direct()));
        rows[1]
            .1
            .push(time(|| local.sliced(Instant::now() + budget)));
        rows[2].1.push(time(|| {
            req_tx.send(Instant::now() + budget).unwrap();
            resp_rx.recv().unwrap()
        }));
    }
    drop(req_tx);
    worker.join().unwrap();
    println!("median ns per call over 5 alternated rounds of {CALLS} calls");
    for (name, medians) in rows {
        println!(
            "{name:>10}: {:>7} ns   rounds {medians:?}",
            median_ns(medians.clone())
        );
    }
}
