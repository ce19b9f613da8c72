//! Tyk API definitions: the JSON files a Tyk user already has.
//!
//! Only the fields this gateway acts on are typed. Every other field Tyk knows
//! (and there are hundreds) is accepted, but never silently: `lint` warns
//! about each one that would change what Tyk does with a request, and refuses
//! to serve open what Tyk would protect (authentication, IP and path access
//! lists, bundles); a key a small edit away from a known one gets "did you
//! mean". [`load_dir`] turns a directory of `*.json` files into validated
//! [`ApiSpec`]s, reporting each broken file by name and field without taking
//! the others down.
//!
//! Three outcomes per file, as in Tyk:
//!
//! - served ([`Loaded::apis`]);
//! - routed but failing closed ([`Loaded::refused`]): the definition is valid
//!   but asks for something this gateway cannot do safely; every request to
//!   it is answered 500, so its traffic can never fall through to a shorter
//!   listen path;
//! - not loaded ([`Loaded::errors`]): not a valid definition at all (bad JSON,
//!   no listen path or target), so there is nothing to route.

mod lint;
mod tyk_keys;
mod virtuals;

pub use virtuals::{VirtualEndpoint, VirtualSource};

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// One Tyk API definition, as written in a `*.json` file.
#[derive(Debug, Clone, Deserialize)]
pub struct ApiDefinition {
    /// Tyk's unique id of the API; exposed to JS as `spec.APIID`.
    #[serde(default)]
    pub api_id: String,
    /// Human name, used in logs.
    #[serde(default)]
    pub name: String,
    /// Organisation id; exposed to JS as `spec.OrgID`.
    #[serde(default)]
    pub org_id: String,
    /// Inactive APIs are skipped at load, as in Tyk.
    #[serde(default = "yes")]
    pub active: bool,
    /// Keyless APIs need no authentication. Authentication is not
    /// implemented, so `false` fails closed: routed, every request 500.
    #[serde(default)]
    pub use_keyless: bool,
    /// Internal APIs are reachable only from Tyk's own loops (`tyk://self`),
    /// never from outside: this gateway does not route them at all.
    #[serde(default)]
    pub internal: bool,
    /// Where the gateway listens and where it sends requests.
    pub proxy: Option<ProxyConfig>,
    /// Plugins run around the proxy.
    #[serde(default)]
    pub custom_middleware: CustomMiddleware,
    /// Free-form configuration handed to JS middleware as `spec.config_data`.
    #[serde(default)]
    pub config_data: Value,
    /// Hides `config_data` from middleware (blanked at load), as Tyk does.
    #[serde(default)]
    pub config_data_disabled: bool,
    /// Versioning; parsed so a user sees it is read, not acted on yet.
    #[serde(default)]
    pub version_data: Value,
    /// Where the version is read from; parsed, not acted on yet.
    #[serde(default)]
    pub definition: Value,
}

fn yes() -> bool {
    true
}

/// The `proxy` section of an API definition.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ProxyConfig {
    /// Raw path prefix this API answers under, e.g. `/gopl/`.
    #[serde(default)]
    pub listen_path: String,
    /// Upstream base URL, e.g. `http://localhost:8222`.
    #[serde(default)]
    pub target_url: String,
    /// Trim `listen_path` from the path before proxying.
    #[serde(default)]
    pub strip_listen_path: bool,
    /// Send the client's `Host` upstream instead of the target's.
    #[serde(default)]
    pub preserve_host_header: bool,
}

/// The `custom_middleware` section of an API definition.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CustomMiddleware {
    /// `goplugin`/`native`, or `otto`/`goja`/`javascript`. Empty means none.
    #[serde(default)]
    pub driver: String,
    /// JS engine for this API: `boa` or `quickjs`; empty means the gateway's
    /// `--jsvm-engine`. Not a Tyk field (Tyk ignores unknown fields).
    #[serde(default)]
    pub engine: String,
    /// Run before the listen path is stripped.
    #[serde(default)]
    pub pre: Vec<MiddlewareEntry>,
    /// Run after the listen path is stripped, just before proxying.
    #[serde(default)]
    pub post: Vec<MiddlewareEntry>,
    /// Run on the upstream's response before it goes to the client (JS
    /// and native drivers; the wasm driver refuses them: fail closed).
    #[serde(default)]
    pub response: Vec<MiddlewareEntry>,
    /// JS only: how scripts keep state across requests (`persistent`,
    /// `fresh`); empty takes the gateway's `--jsvm-strategy`. Tyk ignores
    /// the field.
    #[serde(default)]
    pub strategy: String,
}

/// One middleware in a `pre`/`post`/`response` list.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MiddlewareEntry {
    /// Exported symbol (native) or middleware object name (JS).
    #[serde(default)]
    pub name: String,
    /// Library (native) or script (JS) path; relative to the working directory.
    #[serde(default)]
    pub path: String,
    /// Skipped when true.
    #[serde(default)]
    pub disabled: bool,
    /// Parsed; sessions are out of scope, so it has no effect yet.
    #[serde(default)]
    pub require_session: bool,
    /// Position in the definition's list, counting disabled entries, so
    /// errors name the entry the user wrote (`pre[2]`).
    #[serde(skip)]
    pub index: usize,
}

/// Which engine runs an API's middleware.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// A dynamic library loaded with libloading (`goplugin`, `native`).
    Native,
    /// A script run in the embedded JS engine (`otto`, `goja`, `javascript`).
    Js,
    /// A proxy-wasm module run in wasmtime (`wasm`, `proxy-wasm`).
    Wasm,
}

impl Driver {
    /// Parses Tyk's driver names; `None` for a name no driver answers to.
    pub fn parse(name: &str) -> Option<Driver> {
        match name {
            "goplugin" | "native" => Some(Driver::Native),
            "otto" | "goja" | "javascript" => Some(Driver::Js),
            "wasm" | "proxy-wasm" => Some(Driver::Wasm),
            _ => None,
        }
    }

    /// The name logs and `GET /tyk/apis` use.
    pub fn as_str(self) -> &'static str {
        match self {
            Driver::Native => "native",
            Driver::Js => "javascript",
            Driver::Wasm => "wasm",
        }
    }
}

/// Which JS engine runs an API's scripts (`custom_middleware.engine`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum JsEngine {
    /// boa_engine, the default.
    #[default]
    Boa,
    /// QuickJS (the quickjs-ng fork, through rquickjs).
    QuickJs,
}

impl JsEngine {
    /// Parses an engine name; `None` for a name no engine answers to.
    pub fn parse(name: &str) -> Option<JsEngine> {
        match name {
            "boa" => Some(JsEngine::Boa),
            "quickjs" => Some(JsEngine::QuickJs),
            _ => None,
        }
    }

    /// The name a definition or `--jsvm-engine` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            JsEngine::Boa => "boa",
            JsEngine::QuickJs => "quickjs",
        }
    }
}

/// The phases middleware runs in: defined with the middleware contract,
/// re-exported here because definitions name them.
pub use crate::middleware::Hook;

/// A validated, loadable API: what the router and the middleware hosts use.
///
/// `Default` is for tests and benches that build one by hand
/// (`..Default::default()` keeps them compiling as fields are added).
#[derive(Debug, Clone, Default)]
pub struct ApiSpec {
    /// The file it came from, for error messages and logs.
    pub file: PathBuf,
    /// `api_id`: the key of stats, logs and `/tyk/apis`; unique per directory.
    pub api_id: String,
    /// `name`: for people (logs); nothing routes by it.
    pub name: String,
    /// `org_id`: handed to JS as `spec.OrgID`, as Tyk does.
    pub org_id: String,
    /// `proxy.listen_path`.
    pub listen_path: String,
    /// `proxy.strip_listen_path`.
    pub strip_listen_path: bool,
    /// `proxy.preserve_host_header`.
    pub preserve_host_header: bool,
    /// `proxy.target_url`, parsed once at load so a bad URL fails the
    /// definition, not a request.
    pub target: Target,
    /// `None` when the API has no active middleware.
    pub driver: Option<Driver>,
    /// `custom_middleware.engine`; `None` means the gateway's default.
    pub engine: Option<JsEngine>,
    /// Enabled `pre` entries, in order.
    pub pre: Vec<MiddlewareEntry>,
    /// Enabled `post` entries, in order.
    pub post: Vec<MiddlewareEntry>,
    /// `config_data` (`null` when `config_data_disabled`): JS sees it as
    /// `spec.config_data`, native plugins as JSON text, wasm modules as their
    /// configuration buffers.
    pub config_data: Value,
    /// `config_data_disabled`: Tyk then leaves the `config_data` key out of
    /// the `spec` a script sees (`spec.config_data` is `undefined`).
    pub config_data_disabled: bool,
    /// `custom_middleware.strategy` as written (checked by the JS host).
    pub strategy: String,
    /// Enabled `response` entries, in order.
    pub response: Vec<MiddlewareEntry>,
    /// The served version's enabled `extended_paths.virtual` entries.
    pub virtual_endpoints: Vec<VirtualEndpoint>,
}

impl ApiSpec {
    /// Enabled entries of one hook.
    pub fn entries(&self, hook: Hook) -> &[MiddlewareEntry] {
        match hook {
            Hook::Pre => &self.pre,
            Hook::Post => &self.post,
            Hook::Response => &self.response,
            Hook::Virtual => &[],
        }
    }

    /// True when the API runs any middleware or virtual endpoint.
    pub fn has_middleware(&self) -> bool {
        !(self.pre.is_empty()
            && self.post.is_empty()
            && self.response.is_empty()
            && self.virtual_endpoints.is_empty())
    }
}

/// An upstream `http://host[:port][/base]` URL, split once at load.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Target {
    /// Host as written (name or address), without brackets.
    pub host: String,
    /// Port, 80 when the URL has none.
    pub port: u16,
    /// `host[:port]` as sent in `Host` headers.
    pub authority: String,
    /// Base path without a trailing slash; empty for `/` or none.
    pub base_path: String,
    /// The target URL's query (without `?`), put before the request's.
    pub query: Option<String>,
}

impl Target {
    /// Parses an `http://` target URL.
    pub fn parse(url: &str) -> Result<Target, String> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => {
                return Err(format!(
                    "{url:?} uses scheme {other:?}; only http:// upstreams are supported"
                ))
            }
            None => return Err(format!("{url:?} is not an absolute http:// URL")),
        }
        let authority = uri
            .authority()
            .ok_or_else(|| format!("{url:?} has no host"))?;
        if authority.as_str().contains('@') {
            return Err(format!(
                "{url:?}: credentials in the target URL are not supported"
            ));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("{url:?} has no host"));
        }
        let base_path = uri.path().trim_end_matches('/').to_string();
        Ok(Target {
            host: host.to_string(),
            port: authority.port_u16().unwrap_or(80),
            authority: authority.as_str().to_string(),
            base_path,
            query: uri.query().map(str::to_string),
        })
    }
}

/// A problem with one definition file: why it could not load, why it fails
/// closed, or what it asks for that is not implemented. Names the file and
/// the field.
#[derive(Debug, Clone)]
pub struct LoadError {
    /// The definition file, as the user's `--apis` directory names it.
    pub file: PathBuf,
    /// The JSON field at fault (`proxy.listen_path`), or `-` for the whole file.
    pub field: String,
    /// What is wrong, in plain words.
    pub message: String,
}

impl LoadError {
    /// Builds an error for `file`, naming `field`.
    pub fn new(file: &Path, field: impl Into<String>, message: impl Into<String>) -> Self {
        LoadError {
            file: file.to_path_buf(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file.display())?;
        // `-` stands for the whole file: nothing to name twice.
        if self.field != "-" {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for LoadError {}

/// What loading a directory produced: the good APIs and each failure.
#[derive(Debug, Default)]
pub struct Loaded {
    /// APIs that validated, in file-name order.
    pub apis: Vec<ApiSpec>,
    /// Valid definitions that must not be served as written (authentication,
    /// a bundle, access lists, response middleware): routed, every request
    /// answered 500, with the reason.
    pub refused: Vec<(ApiSpec, LoadError)>,
    /// `"internal": true` APIs: valid, never routed from outside.
    pub internal: Vec<ApiSpec>,
    /// One entry per file that is not a valid definition (not routed).
    pub errors: Vec<LoadError>,
    /// Fields that change Tyk's behaviour but are not implemented here, and
    /// likely typos; each API is still served.
    pub warnings: Vec<LoadError>,
    /// Files skipped because `active` is false.
    pub inactive: Vec<PathBuf>,
}

/// Reads and validates every `*.json` in `dir` (not recursive), in name order.
///
/// Fails only when the directory itself cannot be read; each bad file is an
/// entry in [`Loaded::errors`].
pub fn load_dir(dir: &Path) -> std::io::Result<Loaded> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json") && p.is_file())
        .collect();
    files.sort();
    let mut loaded = Loaded::default();
    let mut seen_paths = HashSet::new();
    let mut seen_ids = HashSet::new();
    for file in files {
        let (def, findings) = match std::fs::read(&file)
            .map_err(|e| LoadError::new(&file, "-", format!("cannot read: {e}")))
            .and_then(|bytes| parse_checked(&file, &bytes))
        {
            Ok(parsed) => parsed,
            Err(e) => {
                loaded.errors.push(e);
                continue;
            }
        };
        if !def.active {
            loaded.inactive.push(file);
            continue;
        }
        let version_data = def.version_data.clone();
        let mut spec = match validate(&file, def) {
            Ok(spec) => spec,
            Err(e) => {
                loaded.errors.push(e);
                continue;
            }
        };
        // A broken virtual endpoint fails its API closed (below), as a
        // broken middleware does: its path must never reach the upstream.
        let mut findings = findings;
        match virtuals::parse(&file, &version_data) {
            Ok(list) => spec.virtual_endpoints = list,
            Err(e) => findings.refuse(e),
        }
        loaded.warnings.extend(findings.warnings);
        if findings.internal {
            // Never routed, so it cannot clash with a public listen path.
            loaded.internal.push(spec);
            continue;
        }
        if !seen_paths.insert(spec.listen_path.clone()) {
            loaded.errors.push(LoadError::new(
                &file,
                "proxy.listen_path",
                format!("{:?} is already served by another API", spec.listen_path),
            ));
        } else if !seen_ids.insert(spec.api_id.clone()) {
            seen_paths.remove(&spec.listen_path);
            loaded.errors.push(LoadError::new(
                &file,
                "api_id",
                format!("{:?} is already used by another API", spec.api_id),
            ));
        } else if let Some(why) = findings.refusal {
            loaded.refused.push((spec, why));
        } else {
            loaded.apis.push(spec);
        }
    }
    Ok(loaded)
}

/// Parses one definition's JSON, naming the line and column of a syntax error
/// and the field of a type error.
pub fn parse_definition(file: &Path, bytes: &[u8]) -> Result<ApiDefinition, LoadError> {
    parse_checked(file, bytes).map(|(def, _)| def)
}

/// Parses a definition and lints the raw JSON: warnings, typos, refusals.
fn parse_checked(file: &Path, bytes: &[u8]) -> Result<(ApiDefinition, lint::Findings), LoadError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        // serde_json's message already ends "at line L column C".
        LoadError::new(file, "-", format!("invalid JSON: {e}"))
    })?;
    if !value.is_object() {
        return Err(LoadError::new(
            file,
            "-",
            "an API definition must be a JSON object",
        ));
    }
    for (field, check) in [
        ("api_id", Value::is_string as fn(&Value) -> bool),
        ("proxy", Value::is_object),
        ("custom_middleware", Value::is_object),
    ] {
        if let Some(v) = value.get(field) {
            if !check(v) && !v.is_null() {
                return Err(LoadError::new(
                    file,
                    field,
                    format!("has the wrong type: {v}"),
                ));
            }
        }
    }
    let findings = lint::check(file, &value);
    // serde_path_to_error names the field a type error is in
    // (`proxy.strip_listen_path: invalid type: string "yes", expected a boolean`).
    let def = serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { "-".to_string() } else { field };
        LoadError::new(file, field, e.into_inner().to_string())
    })?;
    Ok((def, findings))
}

/// Tyk's `ValidListenPath`: a leading `/` added, `.`/`..` segments and
/// doubled slashes cleaned (Go's `path.Clean`), a trailing `/` kept.
pub fn normalize_listen_path(raw: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for seg in raw.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let mut out = format!("/{}", segments.join("/"));
    if raw.ends_with('/') && out != "/" {
        out.push('/');
    }
    out
}

fn validate(file: &Path, def: ApiDefinition) -> Result<ApiSpec, LoadError> {
    let err = |field: &str, msg: String| LoadError::new(file, field, msg);
    if def.api_id.is_empty() {
        return Err(err("api_id", "is missing or empty".into()));
    }
    let proxy = def.proxy.ok_or_else(|| err("proxy", "is missing".into()))?;
    if proxy.listen_path.is_empty() {
        return Err(err("proxy.listen_path", "is missing or empty".into()));
    }
    if proxy.listen_path.contains(' ') {
        return Err(err(
            "proxy.listen_path",
            format!("{:?} contains a space", proxy.listen_path),
        ));
    }
    let listen_path = normalize_listen_path(&proxy.listen_path);
    if listen_path != proxy.listen_path {
        tracing::info!(
            "{}: proxy.listen_path {:?} is served as {:?} (Tyk normalises it the same way)",
            file.display(),
            proxy.listen_path,
            listen_path
        );
    }
    if proxy.target_url.is_empty() {
        return Err(err("proxy.target_url", "is missing or empty".into()));
    }
    let target = Target::parse(&proxy.target_url).map_err(|m| err("proxy.target_url", m))?;
    let strategy = def.custom_middleware.strategy.clone();
    let engine = match def.custom_middleware.engine.as_str() {
        "" => None,
        name => Some(JsEngine::parse(name).ok_or_else(|| {
            err(
                "custom_middleware.engine",
                format!("{name:?} is not a JS engine; use \"boa\" or \"quickjs\""),
            )
        })?),
    };
    let config_data_disabled = def.config_data_disabled;
    let (pre, post, response, driver) = validate_middleware(file, def.custom_middleware)?;
    Ok(ApiSpec {
        file: file.to_path_buf(),
        api_id: def.api_id,
        name: def.name,
        org_id: def.org_id,
        listen_path,
        strip_listen_path: proxy.strip_listen_path,
        preserve_host_header: proxy.preserve_host_header,
        target,
        driver,
        pre,
        post,
        response,
        // Tyk leaves `config_data` out of what middleware sees when disabled.
        config_data: if config_data_disabled {
            Value::Null
        } else {
            def.config_data
        },
        config_data_disabled,
        engine,
        strategy,
        virtual_endpoints: Vec::new(),
    })
}

type Entries = Vec<MiddlewareEntry>;

/// The enabled `pre`/`post`/`response` entries and their driver; every entry
/// must name its object and file.
fn validate_middleware(
    file: &Path,
    mw: CustomMiddleware,
) -> Result<(Entries, Entries, Entries, Option<Driver>), LoadError> {
    let err = |field: &str, msg: String| LoadError::new(file, field, msg);
    let enabled = |v: Vec<MiddlewareEntry>| -> Vec<MiddlewareEntry> {
        v.into_iter()
            .enumerate()
            .map(|(index, e)| MiddlewareEntry { index, ..e })
            .filter(|e| !e.disabled)
            .collect()
    };
    let (pre, post, response) = (enabled(mw.pre), enabled(mw.post), enabled(mw.response));
    if pre.is_empty() && post.is_empty() && response.is_empty() {
        return Ok((pre, post, response, None));
    }
    let driver = Driver::parse(&mw.driver).ok_or_else(|| {
        err(
            "custom_middleware.driver",
            format!(
                "{:?} is not supported; use \"goplugin\" (or \"native\"), \"otto\" (or \"goja\", \"javascript\") or \"wasm\" (or \"proxy-wasm\")",
                mw.driver
            ),
        )
    })?;
    for (hook, list) in [("pre", &pre), ("post", &post), ("response", &response)] {
        for e in list.iter() {
            let i = e.index;
            if e.name.is_empty() {
                return Err(err(
                    &format!("custom_middleware.{hook}[{i}].name"),
                    "is missing or empty".into(),
                ));
            }
            if e.path.is_empty() {
                return Err(err(
                    &format!("custom_middleware.{hook}[{i}].path"),
                    "is missing or empty".into(),
                ));
            }
        }
    }
    Ok((pre, post, response, Some(driver)))
}

#[cfg(test)]
mod parse_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_into_host_port_and_base() {
        let t = Target::parse("http://localhost:8222").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.base_path.as_str()),
            ("localhost", 8222, "")
        );
        let t = Target::parse("http://h:1/base/").unwrap();
        assert_eq!(
            (t.authority.as_str(), t.base_path.as_str()),
            ("h:1", "/base")
        );
        assert_eq!(Target::parse("http://[::1]/").unwrap().host, "::1");
        assert!(Target::parse("https://h/")
            .unwrap_err()
            .contains("only http://"));
        assert!(Target::parse("localhost:8222").is_err());
        assert!(Target::parse("not a url").is_err());
    }

    #[test]
    fn entry_errors_count_disabled_entries() {
        let json = br#"{"api_id": "a", "use_keyless": true,
            "proxy": {"listen_path": "/a/", "target_url": "http://h:1"},
            "custom_middleware": {"driver": "goplugin", "pre": [
                {"name": "Off", "path": "x.so", "disabled": true},
                {"name": "", "path": "x.so"}]}}"#;
        let def = parse_definition(Path::new("a.json"), json).unwrap();
        let e = validate(Path::new("a.json"), def).unwrap_err();
        assert_eq!(e.field, "custom_middleware.pre[1].name");
    }

    #[test]
    fn engine_names_parse_and_a_wrong_one_names_the_field() {
        let def = |engine: &str| {
            let json = format!(
                r#"{{"api_id": "a", "use_keyless": true,
                "proxy": {{"listen_path": "/a/", "target_url": "http://h:1"}},
                "custom_middleware": {{"driver": "otto", "engine": "{engine}",
                    "pre": [{{"name": "m", "path": "m.js"}}]}}}}"#
            );
            let def = parse_definition(Path::new("a.json"), json.as_bytes()).unwrap();
            validate(Path::new("a.json"), def)
        };
        assert_eq!(def("quickjs").unwrap().engine, Some(JsEngine::QuickJs));
        assert_eq!(def("boa").unwrap().engine, Some(JsEngine::Boa));
        assert_eq!(def("").unwrap().engine, None);
        let e = def("v8").unwrap_err();
        assert_eq!(e.field, "custom_middleware.engine");
        assert!(e.message.contains("\"v8\""), "{e}");
    }

    #[test]
    fn driver_names_follow_tyk() {
        assert_eq!(Driver::parse("goplugin"), Some(Driver::Native));
        assert_eq!(Driver::parse("otto"), Some(Driver::Js));
        assert_eq!(Driver::parse("goja"), Some(Driver::Js));
        assert_eq!(Driver::parse("wasm"), Some(Driver::Wasm));
        assert_eq!(Driver::parse("proxy-wasm"), Some(Driver::Wasm));
        assert_eq!(Driver::parse("python"), None);
    }
}
