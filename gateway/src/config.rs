//! Tyk API definitions: the JSON files a Tyk user already has.
//!
//! Only the fields this gateway acts on are typed; every other field Tyk knows
//! (and there are hundreds) is accepted and ignored, as Tyk itself ignores
//! fields it does not know. [`load_dir`] turns a directory of `*.json` files
//! into validated [`ApiSpec`]s, reporting each broken file by name and field
//! without taking the others down.

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
    /// Keyless APIs need no authentication. Authentication is out of scope for
    /// now, so `false` is refused at load rather than silently served open.
    #[serde(default)]
    pub use_keyless: bool,
    /// Where the gateway listens and where it sends requests.
    pub proxy: Option<ProxyConfig>,
    /// Plugins run around the proxy.
    #[serde(default)]
    pub custom_middleware: CustomMiddleware,
    /// Free-form configuration handed to JS middleware as `spec.config_data`.
    #[serde(default)]
    pub config_data: Value,
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
    /// Run before the listen path is stripped.
    #[serde(default)]
    pub pre: Vec<MiddlewareEntry>,
    /// Run after the listen path is stripped, just before proxying.
    #[serde(default)]
    pub post: Vec<MiddlewareEntry>,
    /// Response middleware: parsed; refused at load when present, since the
    /// response phase is not implemented.
    #[serde(default)]
    pub response: Vec<MiddlewareEntry>,
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
}

/// The middleware hooks a request passes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    /// Before the listen path is stripped.
    Pre,
    /// After the listen path is stripped.
    Post,
}

impl Hook {
    /// Tyk's name for the hook.
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::Pre => "pre",
            Hook::Post => "post",
        }
    }
}

/// A validated, loadable API: what the router and the middleware hosts use.
#[derive(Debug, Clone)]
pub struct ApiSpec {
    /// The file it came from, for error messages and logs.
    pub file: PathBuf,
    /// `api_id`.
    pub api_id: String,
    /// `name`.
    pub name: String,
    /// `org_id`.
    pub org_id: String,
    /// `proxy.listen_path`.
    pub listen_path: String,
    /// `proxy.strip_listen_path`.
    pub strip_listen_path: bool,
    /// `proxy.preserve_host_header`.
    pub preserve_host_header: bool,
    /// The parsed target.
    pub target: Target,
    /// `None` when the API has no active middleware.
    pub driver: Option<Driver>,
    /// Enabled `pre` entries, in order.
    pub pre: Vec<MiddlewareEntry>,
    /// Enabled `post` entries, in order.
    pub post: Vec<MiddlewareEntry>,
    /// `config_data`.
    pub config_data: Value,
}

impl ApiSpec {
    /// Enabled entries of one hook.
    pub fn entries(&self, hook: Hook) -> &[MiddlewareEntry] {
        match hook {
            Hook::Pre => &self.pre,
            Hook::Post => &self.post,
        }
    }
}

/// An upstream `http://host[:port][/base]` URL, split once at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Host as written (name or address), without brackets.
    pub host: String,
    /// Port, 80 when the URL has none.
    pub port: u16,
    /// `host[:port]` as sent in `Host` headers.
    pub authority: String,
    /// Base path without a trailing slash; empty for `/` or none.
    pub base_path: String,
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
        if uri.query().is_some() {
            return Err(format!(
                "{url:?}: a query string in the target URL is not supported"
            ));
        }
        let base_path = uri.path().trim_end_matches('/').to_string();
        Ok(Target {
            host: host.to_string(),
            port: authority.port_u16().unwrap_or(80),
            authority: authority.as_str().to_string(),
            base_path,
        })
    }
}

/// Why one definition file could not load. Names the file and the field.
#[derive(Debug, Clone)]
pub struct LoadError {
    /// The definition file.
    pub file: PathBuf,
    /// The JSON field at fault (`proxy.listen_path`), or `-` for the whole file.
    pub field: String,
    /// What is wrong.
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
        write!(
            f,
            "{}: {}: {}",
            self.file.display(),
            self.field,
            self.message
        )
    }
}

impl std::error::Error for LoadError {}

/// What loading a directory produced: the good APIs and each failure.
#[derive(Debug, Default)]
pub struct Loaded {
    /// APIs that validated, in file-name order.
    pub apis: Vec<ApiSpec>,
    /// One entry per file that did not load.
    pub errors: Vec<LoadError>,
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
        let def = match std::fs::read(&file)
            .map_err(|e| LoadError::new(&file, "-", format!("cannot read: {e}")))
            .and_then(|bytes| parse_definition(&file, &bytes))
        {
            Ok(def) => def,
            Err(e) => {
                loaded.errors.push(e);
                continue;
            }
        };
        if !def.active {
            loaded.inactive.push(file);
            continue;
        }
        match validate(&file, def) {
            Ok(spec) if !seen_paths.insert(spec.listen_path.clone()) => {
                loaded.errors.push(LoadError::new(
                    &file,
                    "proxy.listen_path",
                    format!("{:?} is already served by another API", spec.listen_path),
                ));
            }
            Ok(spec) if !seen_ids.insert(spec.api_id.clone()) => {
                seen_paths.remove(&spec.listen_path);
                loaded.errors.push(LoadError::new(
                    &file,
                    "api_id",
                    format!("{:?} is already used by another API", spec.api_id),
                ));
            }
            Ok(spec) => loaded.apis.push(spec),
            Err(e) => loaded.errors.push(e),
        }
    }
    Ok(loaded)
}

/// Parses one definition's JSON, naming the line and column of a syntax error
/// and the field of a type error.
pub fn parse_definition(file: &Path, bytes: &[u8]) -> Result<ApiDefinition, LoadError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        LoadError::new(
            file,
            "-",
            format!(
                "invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ),
        )
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
    serde_json::from_value(value).map_err(|e| LoadError::new(file, "-", e.to_string()))
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
    if !proxy.listen_path.starts_with('/') {
        return Err(err(
            "proxy.listen_path",
            format!("{:?} must start with '/'", proxy.listen_path),
        ));
    }
    if proxy.target_url.is_empty() {
        return Err(err("proxy.target_url", "is missing or empty".into()));
    }
    let target = Target::parse(&proxy.target_url).map_err(|m| err("proxy.target_url", m))?;
    if !def.use_keyless {
        return Err(err(
            "use_keyless",
            "is false, but authentication is not supported yet: set \"use_keyless\": true".into(),
        ));
    }
    let mw = def.custom_middleware;
    let enabled = |v: Vec<MiddlewareEntry>| -> Vec<MiddlewareEntry> {
        v.into_iter()
            .enumerate()
            .map(|(index, e)| MiddlewareEntry { index, ..e })
            .filter(|e| !e.disabled)
            .collect()
    };
    let (pre, post, response) = (enabled(mw.pre), enabled(mw.post), enabled(mw.response));
    let driver = if pre.is_empty() && post.is_empty() && response.is_empty() {
        None
    } else {
        let driver = Driver::parse(&mw.driver).ok_or_else(|| {
            err(
                "custom_middleware.driver",
                format!(
                    "{:?} is not supported; use \"goplugin\" (or \"native\"), \"otto\" (or \"goja\", \"javascript\") or \"wasm\" (or \"proxy-wasm\")",
                    mw.driver
                ),
            )
        })?;
        if !response.is_empty() {
            return Err(err(
                "custom_middleware.response",
                "response middleware is not supported yet".into(),
            ));
        }
        for (hook, list) in [("pre", &pre), ("post", &post)] {
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
        Some(driver)
    };
    Ok(ApiSpec {
        file: file.to_path_buf(),
        api_id: def.api_id,
        name: def.name,
        org_id: def.org_id,
        listen_path: proxy.listen_path,
        strip_listen_path: proxy.strip_listen_path,
        preserve_host_header: proxy.preserve_host_header,
        target,
        driver,
        pre,
        post,
        config_data: def.config_data,
    })
}

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
    fn driver_names_follow_tyk() {
        assert_eq!(Driver::parse("goplugin"), Some(Driver::Native));
        assert_eq!(Driver::parse("otto"), Some(Driver::Js));
        assert_eq!(Driver::parse("goja"), Some(Driver::Js));
        assert_eq!(Driver::parse("wasm"), Some(Driver::Wasm));
        assert_eq!(Driver::parse("proxy-wasm"), Some(Driver::Wasm));
        assert_eq!(Driver::parse("python"), None);
    }
}
