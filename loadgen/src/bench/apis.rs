//! The API definitions the bench's gateway serves: the user's `apis/`,
//! rewritten into a private directory so that targets point at the bench's
//! upstream port and middleware paths are absolute (the gateway may then run
//! from anywhere). The routes to measure are read from the same definitions.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One route the bench measures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Route {
    /// Stable key: `native`, `js`, `plain` or `upstream`.
    pub key: String,
    /// Column title.
    pub label: String,
    /// Request path (the seed's `/gopl/hello/` and friends).
    pub path: String,
    /// The API serving it (none for the upstream itself).
    pub api_id: Option<String>,
    /// A header name the upstream's echo must show (the middleware ran).
    pub marker: Option<String>,
}

/// Echo header names (Go-canonical, as the mock upstream prints them) that
/// prove each seed middleware ran.
pub const NATIVE_MARKER: &str = "X-Custom-Goplugin";
/// See [`NATIVE_MARKER`].
pub const JS_MARKER: &str = "X-Custom-Jsvm";

fn role(def: &Value) -> Option<(&'static str, &'static str, Option<&'static str>)> {
    let mw = &def["custom_middleware"];
    let has_mw = ["pre", "post", "post_key_auth", "response"]
        .iter()
        .any(|h| mw[h].as_array().is_some_and(|a| !a.is_empty()));
    if !has_mw {
        return Some(("plain", "no middleware", None));
    }
    match mw["driver"]
        .as_str()
        .unwrap_or("")
        .to_ascii_lowercase()
        .as_str()
    {
        "goplugin" | "native" => Some(("native", "native plugin", Some(NATIVE_MARKER))),
        "otto" | "goja" | "javascript" => Some(("js", "JS (VM)", Some(JS_MARKER))),
        _ => None,
    }
}

/// Rewrites every `*.json` of `src` into `dst` and returns the gateway
/// routes found (one per role, in the order native, js, plain).
pub fn prepare(
    src: &Path,
    dst: &Path,
    root: &Path,
    upstream_port: u16,
) -> anyhow::Result<Vec<Route>> {
    std::fs::create_dir_all(dst).with_context(|| format!("cannot create {}", dst.display()))?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(src)
        .with_context(|| {
            format!(
                "cannot read the API definitions directory {}",
                src.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut routes: Vec<Route> = Vec::new();
    for file in files {
        let name = file.file_name().expect("a file name").to_owned();
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let Ok(mut def) = serde_json::from_str::<Value>(&text) else {
            // Copied as is: the gateway reports what is wrong with it, and
            // the other definitions still load.
            std::fs::write(dst.join(&name), text)?;
            continue;
        };
        def["proxy"]["target_url"] = Value::String(format!("http://127.0.0.1:{upstream_port}"));
        for hook in ["pre", "post", "post_key_auth", "response"] {
            // `get_mut`, not indexing: indexing would insert null fields.
            let list = def
                .get_mut("custom_middleware")
                .and_then(|m| m.get_mut(hook));
            if let Some(list) = list.and_then(Value::as_array_mut) {
                for mw in list {
                    if let Some(p) = mw["path"].as_str().filter(|p| Path::new(p).is_relative()) {
                        mw["path"] = Value::String(root.join(p).to_string_lossy().into_owned());
                    }
                }
            }
        }
        if let (Some((key, label, marker)), Some(listen)) =
            (role(&def), def["proxy"]["listen_path"].as_str())
        {
            if !routes.iter().any(|r| r.key == key) {
                routes.push(Route {
                    key: key.into(),
                    label: label.into(),
                    path: format!("{}/hello/", listen.trim_end_matches('/')),
                    api_id: def["api_id"].as_str().map(str::to_string),
                    marker: marker.map(str::to_string),
                });
            }
        }
        std::fs::write(dst.join(&name), serde_json::to_string_pretty(&def)?)?;
    }
    let order = |k: &str| ["native", "js", "plain"].iter().position(|x| *x == k);
    routes.sort_by_key(|r| order(&r.key));
    Ok(routes)
}

/// The seed's three routes on another gateway (`--compare`), by path.
pub fn peer_routes() -> Vec<Route> {
    let r = |key: &str, label: &str, path: &str, marker: Option<&str>| Route {
        key: key.into(),
        label: label.into(),
        path: path.into(),
        api_id: None,
        marker: marker.map(str::to_string),
    };
    vec![
        r(
            "native",
            "native plugin",
            "/gopl/hello/",
            Some(NATIVE_MARKER),
        ),
        r("js", "JS (VM)", "/jsvm/hello/", Some(JS_MARKER)),
        r("plain", "no middleware", "/plain/hello/", None),
    ]
}

/// Every marker header, to check that `plain` shows none of them.
pub fn all_markers() -> [&'static str; 2] {
    [NATIVE_MARKER, JS_MARKER]
}
