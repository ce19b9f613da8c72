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

//!
//! # Layout
//!
//! - `definition`: the JSON as a Tyk user writes it ([`ApiDefinition`]).
//! - `read`: a directory's files read, parsed and linted ([`load_dir`]).
//! - `validate`: one parsed definition checked into an [`ApiSpec`].
//! - `virtuals`: `version_data`'s virtual endpoints.
//! - `lint`, `tyk_keys`: every field Tyk knows, and what ignoring it means.
//! - this file: what loading produces ([`ApiSpec`], [`Loaded`], [`LoadError`]).

mod definition;
mod lint;
mod read;
mod tyk_keys;
mod validate;
mod virtuals;

pub use definition::{
    ApiDefinition, CustomMiddleware, Driver, JsEngine, MiddlewareEntry, Placement, ProxyConfig,
};
pub use read::{load_dir, parse_definition};
pub use validate::normalize_listen_path;
pub use virtuals::{VirtualEndpoint, VirtualSource};

use std::fmt;
use std::path::{Path, PathBuf};

/// The phases middleware runs in: defined with the middleware contract,
/// re-exported here because definitions name them.
pub use crate::middleware::Hook;
use serde_json::Value;

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
    /// `config_data` as written, even when `config_data_disabled`: what
    /// Tyk's `APIDefinition.ConfigData` holds, which a Tyk Go plugin reads
    /// through `ctx.GetDefinition` (Tyk blanks it only for JS).
    pub config_data_written: Value,
    /// `custom_middleware.strategy` as written (checked by the JS host).
    pub strategy: String,
    /// `custom_middleware.placement`; `None` means the gateway's choice.
    pub placement: Option<Placement>,
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
        // `port_u16` is `None` for a port that is not a number up to 65535
        // as well as for none: `:99999` silently became port 80.
        let port = match authority.as_str()[authority.host().len()..].strip_prefix(':') {
            None | Some("") => 80,
            Some(text) => match text.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => return Err(format!("{url:?}: port {text:?} is not a port (1 to 65535)")),
            },
        };
        let base_path = uri.path().trim_end_matches('/').to_string();
        Ok(Target {
            host: host.to_string(),
            port,
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
#[cfg(test)]
mod parse_tests;

#[cfg(test)]
mod tests {
    use super::validate::validate;
    use super::*;

    #[test]
    fn a_null_leaves_a_field_as_absent_as_go_reads_it() {
        let json = br#"{"api_id": "n", "name": null, "use_keyless": true, "active": true,
            "proxy": {"listen_path": "/n/", "target_url": "http://h:1",
                      "strip_listen_path": null, "preserve_host_header": null},
            "custom_middleware": null,
            "config_data": {"kept": null, "list": [null]}}"#;
        let def = parse_definition(Path::new("n.json"), json).unwrap();
        let spec = validate(Path::new("n.json"), def).unwrap();
        assert_eq!(spec.listen_path, "/n/");
        assert!(!spec.strip_listen_path, "null is the zero value");
        assert!(spec.pre.is_empty());
        // config_data reaches scripts as written, nulls and all.
        assert_eq!(
            spec.config_data,
            serde_json::json!({"kept": null, "list": [null]})
        );
    }

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
        // A port that is not one is refused, not taken as 80.
        for bad in [
            "http://127.0.0.1:99999",
            "http://h:0/",
            "http://[::1]:70000/x",
        ] {
            let e = Target::parse(bad).unwrap_err();
            assert!(e.contains("is not a port"), "{bad}: {e}");
        }
        let port = |url| Target::parse(url).unwrap().port;
        assert_eq!(port("http://h/"), 80);
        assert_eq!(port("http://h:/"), 80);
        assert_eq!(port("http://[::1]:65535/"), 65535);
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
