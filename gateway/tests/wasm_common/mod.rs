//! Shared by the wasm tests: where the modules are, API definitions with
//! wasm middleware, and a worker's view of one API's chain.

#![allow(dead_code)] // each test binary uses a different subset

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use gateway::config::{load_dir, ApiSpec, Hook, LoadError};
use gateway::middleware::{ApiChain, ChainFactory, Flow, MwError, MwRequest};
use gateway::stats::Stats;
use gateway::wasm::{self, WasmLimits};
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use serde_json::{json, Value};

/// An SDK-built module from `plugins/add-header-wasm`, built by the
/// gateway's build script: `add_header_wasm.wasm` or `probe.wasm`.
pub fn sdk_module(file: &str) -> PathBuf {
    let dir = Path::new(env!("GATEWAY_WASM_PLUGINS"));
    let path = dir.join(file);
    if !path.exists() {
        let why = std::fs::read_to_string(dir.join("BUILD-FAILED.txt"))
            .unwrap_or_else(|_| "no reason recorded".into());
        panic!("{} is missing: {why}", path.display());
    }
    path
}

/// A `.wat` module from `gateway/tests/wasm_fixtures`.
pub fn fixture(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/wasm_fixtures")
        .join(file)
}

/// A keyless API definition whose `pre` runs the given `(module, name)`s.
pub fn wasm_api(api_id: &str, listen_path: &str, target: &str, pre: &[(&Path, &str)]) -> Value {
    let pre: Vec<Value> = pre
        .iter()
        .map(|(m, n)| json!({"name": n, "path": m.to_str().unwrap()}))
        .collect();
    json!({
        "name": api_id,
        "api_id": api_id,
        "org_id": "default",
        "active": true,
        "use_keyless": true,
        "proxy": {
            "listen_path": listen_path,
            "target_url": format!("http://{target}"),
            "strip_listen_path": true
        },
        "custom_middleware": {"driver": "wasm", "pre": pre}
    })
}

/// Loads one definition through the real loader (from a temp dir).
pub fn spec_of(def: &Value) -> ApiSpec {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("api.json"), def.to_string()).unwrap();
    let mut loaded = load_dir(dir.path()).unwrap();
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    loaded.apis.remove(0)
}

/// What `wasm::load` says about a definition whose `pre` is `module`.
pub fn load_error(module: &Path) -> LoadError {
    let spec = spec_of(&wasm_api(
        "api",
        "/api/",
        "127.0.0.1:9",
        &[(module, "Plugin")],
    ));
    match wasm::load(&spec, &WasmLimits::default()) {
        Ok(_) => panic!("{} loaded", module.display()),
        Err(e) => e,
    }
}

pub fn request(method: Method, path: &str, headers: &[(&str, &str)], body: &str) -> MwRequest {
    let mut map = HeaderMap::new();
    for (n, v) in headers {
        map.append(
            HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    MwRequest::new(
        method,
        path.parse().unwrap(),
        map,
        Bytes::from(body.to_string()),
        SocketAddr::from(([127, 0, 0, 1], 4242)),
    )
}

/// A worker's view: the chain instantiated on this thread, run as a worker
/// runs it (current-thread runtime).
pub struct Worker {
    pub chain: ApiChain,
    pub stats: Stats,
    rt: tokio::runtime::Runtime,
}

impl Worker {
    pub fn new(spec: &ApiSpec, limits: WasmLimits) -> Worker {
        let factory = wasm::load(spec, &limits).expect("loads");
        Worker::from_factory(spec, &*factory)
    }

    pub fn from_factory(spec: &ApiSpec, factory: &dyn ChainFactory) -> Worker {
        let stats = Stats::default();
        let chain = ApiChain::new(spec, factory.instantiate().unwrap(), &stats);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        Worker { chain, stats, rt }
    }

    pub fn run(&self, req: &mut MwRequest) -> Result<Flow, MwError> {
        self.rt.block_on(self.chain.run(Hook::Pre, req))
    }
}
