//! The JS behaviour scenarios, each a function of the engine and strategy
//! ([`Mode`]), so one suite (`js_engines.rs`) runs every one on boa and
//! QuickJS, each with `persistent`, `tyk-json` and `fresh`. What differs by
//! strategy (state kept across calls; Tyk's JSON map order in `tyk-json`)
//! and by engine (the wording of a stack overflow) is asserted per mode.
//!
//! This file is the harness (modes, specs, requests, a worker's [`Host`]);
//! the scenarios are grouped by subject: `object.rs` (the request object
//! and the answer), `state.rs` (what a context keeps, isolation, memory),
//! `faults.rs` (throws, runaways, broken scripts), `limits.rs` (the
//! engines' time, memory and stack limits).

// Each test binary that includes this module uses some of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use gateway::config::{ApiSpec, Driver, Hook, JsEngine, MiddlewareEntry, Target};
use gateway::middleware::{ApiChain, Flow, HostOptions, MwError, MwRequest};
use gateway::stats::Stats;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

mod faults;
mod limits;
mod object;
mod state;

// One flat namespace for the suites (`js_scenarios::name`); a suite that
// uses a few scenarios leaves the other groups' re-exports unused.
#[allow(unused_imports)]
pub use {faults::*, limits::*, object::*, state::*};

pub fn fixture(name: &str) -> String {
    format!("{}/tests/js_fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Which engine and strategy a scenario runs on.
#[derive(Clone, Copy, Debug)]
pub struct Mode {
    pub engine: &'static str,
    pub strategy: &'static str,
}

const fn mode(engine: &'static str, strategy: &'static str) -> Mode {
    Mode { engine, strategy }
}

pub const BOA_PERSISTENT: Mode = mode("boa", "persistent");
pub const BOA_TYK_JSON: Mode = mode("boa", "tyk-json");
pub const BOA_FRESH: Mode = mode("boa", "fresh");
pub const QJS_PERSISTENT: Mode = mode("quickjs", "persistent");
pub const QJS_TYK_JSON: Mode = mode("quickjs", "tyk-json");
pub const QJS_FRESH: Mode = mode("quickjs", "fresh");

/// Every engine with every strategy.
pub const ALL: [Mode; 6] = [
    BOA_PERSISTENT,
    BOA_TYK_JSON,
    BOA_FRESH,
    QJS_PERSISTENT,
    QJS_TYK_JSON,
    QJS_FRESH,
];

/// QuickJS's modes (its own limits: memory, a timeout inside builtins).
pub const QUICKJS: [Mode; 3] = [QJS_PERSISTENT, QJS_TYK_JSON, QJS_FRESH];

/// Runs `scenario` on every mode, naming the mode of a failure. Each runs
/// on a thread with the stack a gateway worker has
/// ([`gateway::js::SCRIPT_STACK_SIZE`]), as scripts run inline
/// (`host_inline`) do there: the test thread's 2 MiB would be the limit
/// otherwise, not the host's own bounds.
pub fn each(modes: &[Mode], scenario: impl Fn(Mode) + Sync) {
    for &m in modes {
        let r = std::thread::scope(|s| {
            std::thread::Builder::new()
                .name(format!("{}-{}", m.engine, m.strategy))
                .stack_size(gateway::js::SCRIPT_STACK_SIZE)
                .spawn_scoped(s, || scenario(m))
                .expect("a scenario thread")
                .join()
        });
        if let Err(e) = r {
            eprintln!("failed on {} / {}", m.engine, m.strategy);
            std::panic::resume_unwind(e);
        }
    }
}

pub fn spec(
    mode: Mode,
    api_id: &str,
    script: (&str, String),
    config: serde_json::Value,
) -> ApiSpec {
    ApiSpec {
        file: PathBuf::from(format!("apis/{api_id}.json")),
        api_id: api_id.into(),
        name: api_id.into(),
        org_id: "org-1".into(),
        listen_path: format!("/{api_id}/"),
        strip_listen_path: true,
        preserve_host_header: false,
        target: Target::parse("http://127.0.0.1:9").unwrap(),
        driver: Some(Driver::Js),
        engine: Some(JsEngine::parse(mode.engine).expect("engine name")),
        strategy: mode.strategy.into(),
        pre: vec![MiddlewareEntry {
            name: script.0.into(),
            path: script.1,
            ..Default::default()
        }],
        post: Vec::new(),
        config_data: config,
        config_data_written: serde_json::Value::Null,
        ..Default::default()
    }
}

pub fn request(method: Method, uri: &str, headers: &[(&str, &str)], body: &str) -> MwRequest {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    MwRequest::new(
        method,
        uri.parse().unwrap(),
        map,
        Bytes::from(body.to_string()),
        "127.0.0.1:40000".parse().unwrap(),
    )
}

pub fn get(uri: &str, headers: &[(&str, &str)]) -> MwRequest {
    request(Method::GET, uri, headers, "")
}

/// One worker's view of one API.
pub struct Host {
    chain: ApiChain,
    rt: tokio::runtime::Runtime,
}

pub fn host_with(spec: &ApiSpec, timeout: Duration, memory: usize) -> Host {
    host_opts(
        spec,
        HostOptions {
            jsvm_timeout: timeout,
            jsvm_memory: memory,
            ..HostOptions::default()
        },
    )
}

/// Scripts run inline on the calling thread (`--jsvm-threads 0`).
pub fn host_inline(spec: &ApiSpec, timeout: Duration) -> Host {
    host_opts(
        spec,
        HostOptions {
            jsvm_timeout: timeout,
            jsvm_threads: 0,
            ..HostOptions::default()
        },
    )
}

pub fn host_opts(spec: &ApiSpec, opts: HostOptions) -> Host {
    let factory = gateway::js::load(spec, &opts).unwrap_or_else(|e| panic!("load: {e}"));
    let chain = factory.instantiate().expect("instantiate");
    Host {
        chain: ApiChain::new(spec, chain, &Stats::default()),
        rt: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
    }
}

pub fn host(spec: &ApiSpec) -> Host {
    host_with(spec, Duration::from_secs(5), 64 << 20)
}

/// [`host`] on VM threads from the first call, for tests that count
/// across calls: a QuickJS API that starts inline moves to a VM thread the
/// first time a call overruns `--jsvm-inline-budget` (1 ms, which a
/// debug build on a loaded machine can), and gets a new context there, so
/// its globals, and the counts, start over.
pub fn host_counting(spec: &ApiSpec) -> Host {
    host_opts(
        spec,
        HostOptions {
            jsvm_inline_budget: Duration::ZERO,
            ..HostOptions::default()
        },
    )
}

impl Host {
    pub fn chain(&self) -> &ApiChain {
        &self.chain
    }

    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    pub fn run(&self, req: &mut MwRequest) -> Result<Flow, MwError> {
        self.rt.block_on(self.chain.run(Hook::Pre, req))
    }

    pub fn ok(&self, req: &mut MwRequest) {
        match self.run(req) {
            Ok(Flow::Continue) => {}
            other => panic!("expected Continue, got {other:?}"),
        }
    }

    pub fn err(&self, req: &mut MwRequest) -> String {
        match self.run(req) {
            Err(e) => e.to_string(),
            other => panic!("expected an error, got {other:?}"),
        }
    }
}

pub fn header<'a>(req: &'a MwRequest, name: &str) -> &'a str {
    req.headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", req.headers))
        .to_str()
        .unwrap()
}

fn is_fresh(mode: Mode) -> bool {
    mode.strategy == "fresh"
}

fn is_tyk_json(mode: Mode) -> bool {
    mode.strategy == "tyk-json"
}

/// How the engine words a stack overflow.
fn stack_overflow(mode: Mode) -> &'static str {
    match mode.engine {
        "boa" => "recursive calls",
        _ => "call stack size exceeded",
    }
}
