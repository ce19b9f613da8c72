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
