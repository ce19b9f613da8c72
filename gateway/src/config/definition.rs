//! The first phase of loading: a definition as a Tyk user writes it, typed
//! only where this gateway acts on a field (everything else stays in
//! [`ApiDefinition::definition`] for the lint).

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
    /// JS only: where calls run (`threads`, `inline`, `adaptive`); empty
    /// takes the gateway's choice (`--jsvm-threads`, and QuickJS's
    /// `--jsvm-inline-budget`). Not a Tyk field.
    #[serde(default)]
    pub placement: String,
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
        // The names live in `gateway-wire`, which the bench reads them from.
        use gateway_wire::definition::DriverFamily;
        DriverFamily::of(name).map(|f| match f {
            DriverFamily::Native => Driver::Native,
            DriverFamily::Js => Driver::Js,
            DriverFamily::Wasm => Driver::Wasm,
        })
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

/// Where an API's JS calls run (`custom_middleware.placement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// On VM threads of the API's own, beside each worker: a script that
    /// never ends inside a native step holds its thread, never the
    /// worker's other connections (at least one thread, `--jsvm-threads`
    /// when more).
    Threads,
    /// On the worker's I/O thread, as `--jsvm-threads 0` runs every API:
    /// no hand-off, and no isolation (boa cannot be stopped inside a
    /// builtin, so such a call holds the worker until it returns).
    Inline,
    /// QuickJS only: inline, each call within `--jsvm-inline-budget`,
    /// until one overruns it; then on VM threads for good.
    Adaptive,
}

impl Placement {
    /// Parses a definition's value; `None` for a name no placement has.
    pub fn parse(name: &str) -> Option<Placement> {
        match name {
            "threads" => Some(Placement::Threads),
            "inline" => Some(Placement::Inline),
            "adaptive" => Some(Placement::Adaptive),
            _ => None,
        }
    }
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
