//! Virtual endpoints: `version_data.versions.<v>.extended_paths.virtual`,
//! the paths Tyk answers from a JS function instead of the upstream.
//!
//! Read from the raw JSON of the one version Tyk would serve (the only one,
//! else `default_version`, else `Default`), and only when that version has
//! `use_extended_paths` on, as Tyk compiles extended paths only then.
//!
//! A path is matched as Tyk matches every extended path (`generateRegex`
//! with its default, unanchored options): mux parameters `{id}` become
//! `([^/]+)`, `/*/` becomes `/[^/]+/` and a trailing `/*` becomes `/.*`,
//! and the result is a Go regular expression searched anywhere in the path
//! (Go's RE2 syntax is what the `regex` crate speaks). It is tried against
//! the decoded path with the listen path stripped, as Tyk's
//! `CheckSpecMatchesStatus` does ([`VirtualEndpoint::matches`]).

use std::borrow::Cow;
use std::path::Path;

use serde_json::Value;

use super::LoadError;

/// Where a virtual endpoint's script comes from (`function_source_type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VirtualSource {
    /// `"file"`: `function_source_uri` is a script path.
    File(String),
    /// `"blob"`: `function_source_uri` is the script, base64-encoded.
    Blob(String),
    /// Any other type (as written). Tyk only logs it at load and never
    /// loads a script, so the endpoint's path fails per request; the JS
    /// host does the same (`js/sources.rs`).
    Unknown(String),
}

/// One enabled virtual endpoint of the served version.
#[derive(Debug, Clone)]
pub struct VirtualEndpoint {
    /// The definition field it came from, for errors and logs
    /// (`version_data.versions.Default.extended_paths.virtual[0]`).
    pub field: String,
    /// `response_function_name`: a global function of its script.
    pub function: String,
    /// `function_source_type` and `function_source_uri`.
    pub source: VirtualSource,
    /// `path` as written.
    pub path: String,
    /// `method`: the one method it answers (exactly, as Tyk compares it).
    pub method: String,
    /// `use_session`: sessions do not exist here, so the script gets `{}`.
    pub use_session: bool,
    /// `proxy_on_error`: a failing function proxies the request instead of
    /// answering 500.
    pub proxy_on_error: bool,
    /// `path` as Tyk compiles it.
    pub regex: regex::Regex,
}

impl Default for VirtualEndpoint {
    fn default() -> Self {
        VirtualEndpoint {
            field: String::new(),
            function: String::new(),
            source: VirtualSource::File(String::new()),
            path: String::new(),
            method: String::new(),
            use_session: false,
            proxy_on_error: false,
            regex: regex::Regex::new("$^").expect("a valid regex"),
        }
    }
}

impl VirtualEndpoint {
    /// True when this endpoint answers `method` on `path` (the request's
    /// path as sent, percent-encoded) of an API on `listen_path`.
    ///
    /// Tyk matches `r.URL.Path`, the decoded path (`/a%20b` is `/a b`,
    /// `%2F` a `/`), with the listen path stripped (`getMatchPathAndMethod`,
    /// unless the listen path is `/`), and `matchesPath` strips it once
    /// more before trying both: so a pattern never sees the listen path of
    /// a request that carries it once.
    pub fn matches(&self, method: &str, listen_path: &str, path: &str) -> bool {
        if method != self.method {
            return false;
        }
        let decoded = crate::path::decode(path);
        let once = if listen_path == "/" {
            decoded
        } else {
            strip_listen_path(listen_path, &decoded)
        };
        let twice = strip_listen_path(listen_path, &once);
        self.regex.is_match(&twice) || self.regex.is_match(&once)
    }
}

/// Tyk's `httputil.StripListenPath` for a plain listen path: the prefix
/// trimmed when the path has it, and a leading `/` always.
fn strip_listen_path<'a>(listen_path: &str, path: &'a str) -> Cow<'a, str> {
    let rest = path.strip_prefix(listen_path).unwrap_or(path);
    if rest.starts_with('/') {
        Cow::Borrowed(rest)
    } else {
        Cow::Owned(format!("/{rest}"))
    }
}

/// Tyk's `PreparePathRegexp` with its defaults (no prefix or suffix
/// anchoring).
pub fn tyk_path_regex(path: &str) -> String {
    let mut pattern = path.to_string();
    let opens = pattern.matches('{').count();
    if opens > 0 && opens == pattern.matches('}').count() {
        let mut out = String::with_capacity(pattern.len());
        let mut rest = pattern.as_str();
        while let Some(i) = rest.find('{') {
            match rest[i..].find('}') {
                // `{[^}]+}`: at least one character between the braces.
                Some(j) if j > 1 => {
                    out.push_str(&rest[..i]);
                    out.push_str("([^/]+)");
                    rest = &rest[i + j + 1..];
                }
                _ => {
                    out.push_str(&rest[..=i]);
                    rest = &rest[i + 1..];
                }
            }
        }
        out.push_str(rest);
        pattern = out;
    }
    if pattern.contains("/*") {
        pattern = pattern.replace("/*/", "/[^/]+/").replace("/*", "/.*");
    }
    pattern
}

/// The virtual endpoints of the version Tyk would serve.
pub(crate) fn parse(file: &Path, version_data: &Value) -> Result<Vec<VirtualEndpoint>, LoadError> {
    let Some((name, version)) = served_version(version_data) else {
        return Ok(Vec::new());
    };
    if !version.get("use_extended_paths").is_some_and(|v| v == true) {
        return Ok(Vec::new());
    }
    let list = match version.pointer("/extended_paths/virtual") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(other) => {
            let field = format!("version_data.versions.{name}.extended_paths.virtual");
            return Err(LoadError::new(
                file,
                field,
                format!("must be a list, got {other}"),
            ));
        }
    };
    let mut out = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        let field = format!("version_data.versions.{name}.extended_paths.virtual[{i}]");
        if entry.get("disabled").is_some_and(|v| v == true) {
            continue;
        }
        out.push(endpoint(file, field, entry)?);
    }
    Ok(out)
}

/// The only version, else `default_version`, else `Default`.
fn served_version(vd: &Value) -> Option<(&str, &Value)> {
    let versions = vd.get("versions")?.as_object()?;
    if versions.len() == 1 {
        return versions.iter().next().map(|(k, v)| (k.as_str(), v));
    }
    let default = vd
        .get("default_version")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("Default");
    versions
        .get_key_value(default)
        .map(|(k, v)| (k.as_str(), v))
}

fn endpoint(file: &Path, field: String, e: &Value) -> Result<VirtualEndpoint, LoadError> {
    let err = |f: &str, m: String| LoadError::new(file, format!("{field}.{f}"), m);
    let text = |f: &str| -> Result<String, LoadError> {
        match e.get(f) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(err(f, format!("must be a string, got {other}"))),
        }
    };
    let flag = |f: &str| -> Result<bool, LoadError> {
        match e.get(f) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(err(f, format!("must be true or false, got {other}"))),
        }
    };
    // An empty or unknown function, source type or source is not a
    // definition error in Tyk: the script is not loaded (logged once) and
    // requests to the endpoint's path fail. The JS host reproduces that
    // per endpoint (`js/sources.rs`), naming these fields.
    let function = text("response_function_name")?;
    let uri = text("function_source_uri")?;
    let source = match text("function_source_type")?.as_str() {
        "file" => VirtualSource::File(uri),
        "blob" => VirtualSource::Blob(uri),
        other => VirtualSource::Unknown(other.to_string()),
    };
    let path = text("path")?;
    if path.is_empty() {
        return Err(err("path", "is missing or empty".into()));
    }
    let pattern = tyk_path_regex(&path);
    let regex = regex::Regex::new(&pattern).map_err(|e| {
        err(
            "path",
            format!("{path:?} is not a valid path pattern ({pattern:?}): {e}"),
        )
    })?;
    let method = text("method")?;
    if method.is_empty() {
        return Err(err("method", "is missing or empty".into()));
    }
    let (use_session, proxy_on_error) = (flag("use_session")?, flag("proxy_on_error")?);
    Ok(VirtualEndpoint {
        field,
        function,
        source,
        path,
        method,
        use_session,
        proxy_on_error,
        regex,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_compile_as_tyks_prepare_path_regexp() {
        assert_eq!(tyk_path_regex("/users/{id}"), "/users/([^/]+)");
        assert_eq!(tyk_path_regex("/a/{x}/b/{y}"), "/a/([^/]+)/b/([^/]+)");
        assert_eq!(tyk_path_regex("/files/*"), "/files/.*");
        assert_eq!(tyk_path_regex("/a/*/b"), "/a/[^/]+/b");
        assert_eq!(tyk_path_regex("^/exact$"), "^/exact$");
        assert_eq!(tyk_path_regex("/{unbalanced"), "/{unbalanced");
    }

    fn one(path: &str) -> VirtualEndpoint {
        VirtualEndpoint {
            method: "GET".into(),
            regex: regex::Regex::new(&tyk_path_regex(path)).unwrap(),
            ..Default::default()
        }
    }

    #[test]
    fn matching_is_unanchored_on_the_decoded_stripped_path() {
        let v = one("/hello");
        assert!(v.matches("GET", "/api/", "/api/hello"));
        assert!(v.matches("GET", "/api/", "/api/hello/world"), "unanchored");
        assert!(v.matches("GET", "/api/", "/api/say/hello"), "unanchored");
        assert!(!v.matches("POST", "/api/", "/api/hello"), "method");
        assert!(!v.matches("get", "/api/", "/api/hello"), "method case");
        let v = one("/users/{id}");
        assert!(v.matches("GET", "/api/", "/api/users/42"));
        assert!(!v.matches("GET", "/api/", "/api/users/"));
        // Tyk matches r.URL.Path: decoded.
        let v = one("^/a b$");
        assert!(v.matches("GET", "/api/", "/api/a%20b"));
        assert!(!v.matches("GET", "/api/", "/api/a%2520b"), "decoded once");
        let v = one("^/a/b$");
        assert!(v.matches("GET", "/api/", "/api/a%2Fb"));
        let v = one("^/a%20b$");
        assert!(!v.matches("GET", "/api/", "/api/a%20b"), "not the raw path");
        // The listen path is stripped (twice, as Tyk does), never matched.
        let v = one("^/api/x$");
        assert!(!v.matches("GET", "/api/", "/api/x"));
        assert!(v.matches("GET", "/api/", "/api/api/x"));
        let v = one("^/x$");
        assert!(v.matches("GET", "/api/", "/api/x"));
        assert!(v.matches("GET", "/api/", "/api/api/x"));
        assert!(v.matches("GET", "/", "/x"));
    }

    #[test]
    fn the_served_versions_enabled_entries_are_read_and_bad_ones_named() {
        let vd = |virt: Value| {
            json!({"not_versioned": true, "versions": {"Default": {
                "use_extended_paths": true, "extended_paths": {"virtual": virt}}}})
        };
        let good = json!({"response_function_name": "f", "function_source_type": "blob",
            "function_source_uri": "Zg==", "path": "/v", "method": "GET"});
        let off = json!({"disabled": true, "path": ""});
        let got = parse(Path::new("a.json"), &vd(json!([off, good]))).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].source, VirtualSource::Blob("Zg==".into()));
        assert_eq!(
            got[0].field,
            "version_data.versions.Default.extended_paths.virtual[1]"
        );
        // A source Tyk cannot load fails its path, not the definition.
        let mut bad = good.clone();
        bad["function_source_type"] = json!("url");
        let got = parse(Path::new("a.json"), &vd(json!([bad]))).unwrap();
        assert_eq!(got[0].source, VirtualSource::Unknown("url".into()));
        let mut bad = good.clone();
        bad["function_source_type"] = json!(3);
        let e = parse(Path::new("a.json"), &vd(json!([bad]))).unwrap_err();
        assert!(e.field.ends_with("virtual[0].function_source_type"), "{e}");
        let mut bad = good.clone();
        bad["path"] = json!("/(unclosed");
        let e = parse(Path::new("a.json"), &vd(json!([bad]))).unwrap_err();
        assert!(e.field.ends_with("virtual[0].path"), "{e}");
        // Tyk compiles extended paths only with use_extended_paths.
        let mut off = vd(json!([good]));
        off["versions"]["Default"]["use_extended_paths"] = json!(false);
        assert!(parse(Path::new("a.json"), &off).unwrap().is_empty());
    }
}
