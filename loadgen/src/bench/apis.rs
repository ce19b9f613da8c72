//! The routes the bench measures, read from the user's API definitions.
//!
//! Every active definition in `--apis` with a listen path is a route,
//! labelled from its middleware (driver, JS engine and strategy); the
//! definitions are rewritten into a private directory so that targets point
//! at the bench's upstream and middleware paths are absolute (the gateway
//! may then run from anywhere). A definition whose middleware file is
//! missing is still given to the gateway (which fails it closed) but its
//! route is skipped, with the reason and how to build the file.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One route the bench measures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Route {
    /// Stable key: `native` and `js` (the seed's pair), `plain`,
    /// `plain-again` (the A/A control), `upstream`, or the API's id.
    pub key: String,
    /// Column title ("native plugin", "JS (VM)", "WebAssembly plugin", ...).
    pub label: String,
    /// Request path (the seed's `/gopl/hello/` and friends).
    pub path: String,
    /// The API serving it (none for the upstream itself and peers).
    pub api_id: Option<String>,
    /// The user's definition file it comes from (not the bench's copy).
    pub source: Option<PathBuf>,
    /// Whether the route runs middleware (then its echo must show a header
    /// the no-middleware route's does not).
    pub has_middleware: bool,
    /// The header (Go-canonical, as the echo prints it) that proves the
    /// middleware ran; found by the bench's check before the runs.
    pub marker: Option<String>,
}

impl Route {
    /// A route with no definition behind it (the upstream, a peer's routes).
    pub fn bare(key: &str, label: &str, path: &str, has_middleware: bool) -> Route {
        Route {
            key: key.into(),
            label: label.into(),
            path: path.into(),
            api_id: None,
            source: None,
            has_middleware,
            marker: None,
        }
    }

    /// "native plugin /gopl/hello/", for tables and messages.
    pub fn title(&self) -> String {
        format!("{} {}", self.label, self.path)
    }
}

/// A route read from a definition, or why it cannot be measured.
#[derive(Debug, Clone)]
pub struct Found {
    /// The route.
    pub route: Route,
    /// Why it is skipped before any request (its middleware file is missing).
    pub skipped: Option<String>,
}

const HOOKS: [&str; 4] = ["pre", "post", "post_key_auth", "response"];

/// The middleware entries of a definition, over every hook.
fn entries(def: &Value) -> Vec<&Value> {
    HOOKS
        .iter()
        .filter_map(|h| def["custom_middleware"][h].as_array())
        .flatten()
        .filter(|mw| !mw["disabled"].as_bool().unwrap_or(false))
        .collect()
}

/// A setting that may be given for the whole `custom_middleware` or on an entry.
fn setting<'a>(def: &'a Value, name: &str) -> Option<&'a str> {
    def["custom_middleware"][name]
        .as_str()
        .or_else(|| entries(def).iter().find_map(|mw| mw[name].as_str()))
}

/// The route's key and label from its middleware: the seed's pair keeps
/// the keys `native` and `js`; other kinds are keyed by their API id.
pub fn classify(def: &Value) -> (String, String) {
    let id = def["api_id"].as_str().unwrap_or("unnamed").to_string();
    let listen = def["proxy"]["listen_path"].as_str().unwrap_or("");
    if entries(def).is_empty() {
        return ("plain".into(), "no middleware".into());
    }
    let driver = setting(def, "driver").unwrap_or("").to_ascii_lowercase();
    let engine = setting(def, "engine").map(str::to_ascii_lowercase);
    let strategy = setting(def, "strategy").map(str::to_ascii_lowercase);
    match driver.as_str() {
        "goplugin" | "native" if id.starts_with("gopl-go") || listen.starts_with("/gopl-go/") => {
            (id, "Go plugin (the seed's main.go)".into())
        }
        "goplugin" | "native" => ("native".into(), "native plugin".into()),
        "otto" | "goja" | "javascript" => {
            let engine = engine.filter(|e| e != "boa");
            let strategy = strategy.filter(|s| s != "persistent");
            match (engine.as_deref(), strategy.as_deref()) {
                (None, None) => ("js".into(), "JS (VM)".into()),
                (Some("quickjs"), None) => (id, "JS QuickJS".into()),
                (Some("quickjs"), Some(s)) => (id, format!("JS QuickJS {s}")),
                (None, Some(s)) => (id, format!("JS {s}")),
                (Some(e), s) => (id, format!("JS {e} {}", s.unwrap_or("")).trim().to_string()),
            }
        }
        "wasm" | "proxy-wasm" => (id, "WebAssembly plugin".into()),
        _ => (id.clone(), id),
    }
}

/// Why a route's middleware cannot load, checked before the gateway tries:
/// a missing file, with how to build it.
fn missing_file(def: &Value, label: &str, source: &Path) -> Option<String> {
    for mw in entries(def) {
        let Some(p) = mw["path"].as_str() else {
            continue;
        };
        if Path::new(p).exists() {
            continue;
        }
        let how = if label.starts_with("Go plugin") {
            "the Go adapter is built only where the Go toolchain is installed (see plugins/README.md)"
        } else if p.ends_with(".so") || p.ends_with(".wasm") {
            "run `cargo build --release` first"
        } else {
            "check the path"
        };
        return Some(format!(
            "{}: middleware file {p} not found; {how}",
            source.display()
        ));
    }
    None
}

/// Rewrites every `*.json` of `src` into `dst` and returns one route per
/// active definition with a listen path: the seed's pair first, then
/// no middleware, then the others by file name.
pub fn prepare(
    src: &Path,
    dst: &Path,
    root: &Path,
    upstream_port: u16,
) -> anyhow::Result<Vec<Found>> {
    std::fs::create_dir_all(dst).with_context(|| format!("cannot create {}", dst.display()))?;
    let shown = if src.is_absolute() {
        src.to_path_buf()
    } else {
        root.join(src)
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(src)
        .with_context(|| {
            format!(
                "cannot read the API definitions directory {} (looked in {}); run the bench from the repo root or pass --apis DIR",
                src.display(),
                shown.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut found: Vec<Found> = Vec::new();
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
        rewrite(&mut def, root, upstream_port);
        std::fs::write(dst.join(&name), serde_json::to_string_pretty(&def)?)?;
        let active = def["active"].as_bool().unwrap_or(true);
        let Some(listen) = def["proxy"]["listen_path"].as_str().filter(|_| active) else {
            continue;
        };
        let (mut key, label) = classify(&def);
        if found.iter().any(|f| f.route.key == key) {
            // A second definition of the same kind: its own key.
            key = def["api_id"].as_str().unwrap_or(listen).to_string();
        }
        let source = file.clone();
        found.push(Found {
            skipped: missing_file(&def, &label, &source),
            route: Route {
                key,
                path: format!("{}/hello/", listen.trim_end_matches('/')),
                api_id: def["api_id"].as_str().map(str::to_string),
                source: Some(source),
                has_middleware: !entries(&def).is_empty(),
                marker: None,
                label,
            },
        });
    }
    let order = |k: &str| ["native", "js", "plain"].iter().position(|x| *x == k);
    // Stable: the others keep file order after the seed's three.
    found.sort_by_key(|f| order(&f.route.key).unwrap_or(usize::MAX));
    Ok(found)
}

/// Points the definition at the bench's upstream and makes relative
/// middleware paths absolute against `root`.
fn rewrite(def: &mut Value, root: &Path, upstream_port: u16) {
    def["proxy"]["target_url"] = Value::String(format!("http://127.0.0.1:{upstream_port}"));
    // A script that calls a service (apis/jsvm-makehttp.json) calls the
    // same upstream, named in `config_data.upstream`.
    if let Some(up) = def
        .get_mut("config_data")
        .and_then(|c| c.get_mut("upstream"))
    {
        *up = Value::String(format!("http://127.0.0.1:{upstream_port}"));
    }
    for hook in HOOKS {
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
}

/// The header names an echo body shows (`{"headers":{"Accept":...}}`).
pub fn echoed_headers(body: &str) -> Vec<String> {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v["headers"]
                .as_object()
                .map(|m| m.keys().cloned().collect())
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(mw: Value) -> Value {
        json!({"api_id": "x-hello", "proxy": {"listen_path": "/x/"}, "custom_middleware": mw})
    }

    #[test]
    fn labels_come_from_driver_engine_and_strategy() {
        let pre = |extra: Value| {
            let mut m = json!({"pre": [{"name": "f", "path": "p"}]});
            for (k, v) in extra.as_object().unwrap() {
                m[k] = v.clone();
            }
            def(m)
        };
        let label = |d: Value| classify(&d);
        assert_eq!(
            label(def(json!({}))),
            ("plain".into(), "no middleware".into())
        );
        assert_eq!(
            label(pre(json!({"driver": "goplugin"}))),
            ("native".into(), "native plugin".into())
        );
        assert_eq!(
            label(pre(json!({"driver": "otto"}))),
            ("js".into(), "JS (VM)".into())
        );
        assert_eq!(
            label(pre(json!({"driver": "otto", "strategy": "tyk-json"}))).1,
            "JS tyk-json"
        );
        assert_eq!(
            label(pre(json!({"driver": "goja", "strategy": "fresh"}))).1,
            "JS fresh"
        );
        assert_eq!(
            label(pre(json!({"driver": "otto", "engine": "quickjs"}))),
            ("x-hello".into(), "JS QuickJS".into())
        );
        assert_eq!(
            label(pre(json!({"driver": "wasm"}))).1,
            "WebAssembly plugin"
        );
        let mut go = pre(json!({"driver": "goplugin"}));
        go["proxy"]["listen_path"] = json!("/gopl-go/");
        assert_eq!(label(go).1, "Go plugin (the seed's main.go)");
        assert_eq!(
            label(pre(json!({"driver": "python"}))),
            ("x-hello".into(), "x-hello".into())
        );
        // A disabled entry is no middleware.
        let off = def(json!({"driver": "otto", "pre": [{"name": "f", "disabled": true}]}));
        assert_eq!(label(off).0, "plain");
    }

    #[test]
    fn echoed_header_names_are_read_from_the_echo() {
        let body = r#"{"headers":{"Accept":"*/*","X-Custom-Jsvm":"hi"},"message":"m"}"#;
        assert_eq!(echoed_headers(body), vec!["Accept", "X-Custom-Jsvm"]);
        assert!(echoed_headers("not json").is_empty());
    }
}
