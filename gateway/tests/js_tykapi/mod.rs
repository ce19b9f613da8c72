//! Shared by the tests of Tyk's JS globals (`js_tykapi_*.rs`): an API
//! running one script as a `pre` entry, a gateway with a script-sized
//! stack for the load, and a script that answers with a value.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use gateway::config::JsEngine;
use gateway::server::GatewayConfig;
use serde_json::{json, Value};

use super::common::*;

/// Both engines, as a definition names them.
pub const ENGINES: [&str; 2] = ["boa", "quickjs"];

/// Writes `script` and an API on `listen` running it as a `pre` entry
/// named `mw`, on `engine`, with `config_data`.
pub fn js_api(
    dir: &Path,
    id: &str,
    listen: &str,
    target: SocketAddr,
    engine: &str,
    script: &str,
    config: Value,
) {
    let file = dir.join(format!("{id}.js"));
    std::fs::write(&file, script).unwrap();
    let mut api = api_json(
        id,
        listen,
        &format!("http://{target}"),
        true,
        json!({
            "driver": "otto",
            "engine": engine,
            "pre": [{"name": "mw", "path": file.to_str().unwrap()}]
        }),
    );
    api["config_data"] = config;
    write_api(dir, id, &api);
}

/// Starts a gateway over `dir`. The load (which parses and runs every
/// script once) happens on a thread with a script-sized stack: boa's
/// recursive-descent parser takes far more stack in a debug build than a
/// test thread's 2 MiB for a nested object literal.
pub fn gateway(dir: &Path, threads: usize, jsvm_threads: usize) -> TestGateway {
    gateway_with(GatewayConfig {
        apis_dir: dir.to_path_buf(),
        threads,
        jsvm_threads,
        jsvm_engine: JsEngine::Boa,
        ..GatewayConfig::default()
    })
}

/// One worker with one VM thread over `dir`, calls held to `timeout`, the
/// strategy named (`None`: the default): the set-up of the tests that
/// run a script on every strategy.
pub fn one_vm_thread(dir: &Path, timeout: Duration, strategy: Option<&str>) -> GatewayConfig {
    let default = GatewayConfig::default();
    GatewayConfig {
        apis_dir: dir.to_path_buf(),
        threads: 1,
        jsvm_threads: 1,
        jsvm_timeout: timeout,
        jsvm_strategy: strategy.map_or(default.jsvm_strategy, |s| {
            gateway::js::Strategy::parse(s).unwrap()
        }),
        ..default
    }
}

/// [`gateway`] with the whole configuration given.
pub fn gateway_with(config: GatewayConfig) -> TestGateway {
    let gw = gateway_loading(config);
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    gw
}

/// [`gateway_with`], whatever the load found (`load_errors`).
pub fn gateway_loading(config: GatewayConfig) -> TestGateway {
    std::thread::Builder::new()
        .stack_size(gateway::js::SCRIPT_STACK_SIZE)
        .spawn(move || start_gateway_with(config))
        .unwrap()
        .join()
        .unwrap()
}

/// A script whose answer is `expr`'s value as JSON text (a 200 from the
/// script itself, nothing proxied).
pub fn answering(expr: &str) -> String {
    format!(
        r#"var mw = new TykJS.TykMiddleware.NewMiddleware({{}});
mw.NewProcessRequest(function (request, session, spec) {{
    var out = (function () {{ {expr} }})();
    request.ReturnOverrides.ResponseCode = 200;
    request.ReturnOverrides.ResponseBody = typeof out === "string" ? out : JSON.stringify(out);
    return mw.ReturnData(request, {{}});
}});
"#
    )
}
