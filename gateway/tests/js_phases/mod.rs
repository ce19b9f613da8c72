//! Shared by the JS phase tests (`js_answers.rs`, `js_response.rs`,
//! `virtual_endpoints.rs`): definitions for each JS engine, written to a
//! temp dir, served by the real gateway.
#![allow(dead_code)]

use std::path::Path;

use serde_json::{json, Value};

/// Every JS engine: each behaviour is checked on both.
pub const ENGINES: [&str; 2] = ["boa", "quickjs"];

/// Writes `text` as `dir/name`; returns its path.
pub fn script(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// A keyless API on `/<id>/` proxying to `target`, with JS middleware
/// `mw` (a `custom_middleware` object without driver and engine, which
/// are set here).
pub fn js_api(id: &str, target: &str, engine: &str, mut mw: Value) -> Value {
    mw["driver"] = json!("otto");
    mw["engine"] = json!(engine);
    super::common::api_json(id, &format!("/{id}/"), target, true, mw)
}

/// A `version_data` with one virtual endpoint, `GET /v`, answered by
/// `function` from the script file `file`.
pub fn file_endpoint(function: &str, file: &str) -> Value {
    virtual_version(json!([{
        "response_function_name": function,
        "function_source_type": "file",
        "function_source_uri": file,
        "path": "/v",
        "method": "GET",
        "use_session": false,
        "proxy_on_error": false
    }]))
}

/// A `version_data` with one version holding these virtual endpoints.
pub fn virtual_version(endpoints: Value) -> Value {
    json!({
        "not_versioned": true,
        "default_version": "Default",
        "versions": {"Default": {
            "name": "Default",
            "use_extended_paths": true,
            "extended_paths": {"virtual": endpoints}
        }}
    })
}

/// Tyk's answer to a virtual endpoint that cannot answer.
pub const ENDPOINT_FAILED: &str =
    "Error during virtual endpoint execution. Contact Administrator for more details.";

/// The path of `tests/js_fixtures/<name>`.
pub fn fixture(name: &str) -> String {
    format!("{}/tests/js_fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Every JS strategy, as `custom_middleware.strategy` names it.
pub const STRATEGIES: [&str; 3] = ["persistent", "tyk-json", "fresh"];

/// The functions of one fixture script that one phase each runs.
pub struct PhaseEntries<'a> {
    /// The script file.
    pub file: &'a str,
    /// Its request-phase middleware (`pre`).
    pub pre: &'a str,
    /// Its response middleware.
    pub response: &'a str,
    /// Its virtual endpoint function.
    pub endpoint: &'a str,
}

/// APIs on `engine` proxying to `target`: one per strategy running
/// `e.pre` (`/<engine>-<strategy>/`), one running `e.response` as response
/// middleware (`/<engine>-resp/`), one with `e.endpoint` as the virtual
/// endpoint `/v` (`/<engine>-virt/`).
pub fn write_phase_apis(dir: &Path, engine: &str, target: &str, e: &PhaseEntries<'_>) {
    let entry = |name: &str| json!([{"name": name, "path": e.file}]);
    for strategy in STRATEGIES {
        let id = format!("{engine}-{strategy}");
        let mw = json!({"strategy": strategy, "pre": entry(e.pre)});
        super::common::write_api(dir, &id, &js_api(&id, target, engine, mw));
    }
    let id = format!("{engine}-resp");
    let mw = json!({"response": entry(e.response)});
    super::common::write_api(dir, &id, &js_api(&id, target, engine, mw));
    let id = format!("{engine}-virt");
    let mut def = js_api(&id, target, engine, json!({}));
    def["version_data"] = file_endpoint(e.endpoint, e.file);
    super::common::write_api(dir, &id, &def);
}
