//! Nothing silently ignored: what a definition asks for that this gateway
//! does not do, read from the raw JSON before it is typed.
//!
//! Three kinds of finding, each naming the file and the field:
//!
//! - **refusal**: serving the API without the feature would open what the
//!   user closed (authentication, auth plugins, a bundle whose contents we
//!   cannot run, IP allow and deny lists, path allow and deny lists, response
//!   middleware that may redact). The API stays routed and fails closed:
//!   every request is answered 500.
//! - **warning**: the feature changes what Tyk does with a request (rate
//!   limits, CORS, header injection, versioning, load balancing, ...) but
//!   serving without it opens nothing: "not implemented: requests are served
//!   without it".
//! - **typo**: an unknown key one or two edits away from a known one gets
//!   "did you mean". Other unknown keys are ignored, as Tyk ignores them.
//!
//! Each check looks only at a field's *active* form: Tyk's dashboard exports
//! every field with its off value (`"CORS": {"enable": false}`,
//! `"global_rate_limit": {"rate": 0}`), and those must stay quiet.

use std::path::Path;

use serde_json::{Map, Value};

use super::tyk_keys::{ENTRY_KEYS, MIDDLEWARE_KEYS, PROXY_KEYS, TOP_LEVEL_KEYS};
use super::LoadError;

/// What the lint found in one definition.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    /// Served without these (logged at load).
    pub(crate) warnings: Vec<LoadError>,
    /// The first reason this API must fail closed, if any.
    pub(crate) refusal: Option<LoadError>,
    /// `"internal": true`: never routed from outside.
    pub(crate) internal: bool,
}

impl Findings {
    /// Adds a reason to fail closed found outside the lint (a broken
    /// virtual endpoint); the first reason stays the one requests name.
    pub(crate) fn refuse(&mut self, e: LoadError) {
        if self.refusal.is_none() {
            self.refusal = Some(e);
        } else {
            self.warnings.push(e);
        }
    }
}

const NOT_IMPLEMENTED: &str = "not implemented: requests are served without it";

/// Lints one parsed definition.
pub(crate) fn check(file: &Path, def: &Value) -> Findings {
    let mut out = Lint {
        file,
        findings: Findings::default(),
    };
    out.findings.internal = def.get("internal").is_some_and(truthy);
    out.typos(def);
    out.auth(def);
    out.access_lists(def);
    out.middleware(def);
    out.versions(def);
    out.top_level_features(def);
    out.findings
}

struct Lint<'a> {
    file: &'a Path,
    findings: Findings,
}

impl Lint<'_> {
    fn warn(&mut self, field: &str, message: String) {
        let e = LoadError::new(self.file, field, message);
        self.findings.warnings.push(e);
    }

    fn not_implemented(&mut self, field: &str, what: &str) {
        self.warn(field, format!("{what}: {NOT_IMPLEMENTED}"));
    }

    fn refuse(&mut self, field: &str, message: String) {
        let e = LoadError::new(self.file, field, message);
        // The first reason is the one every request's log names; the rest
        // are still worth knowing.
        if self.findings.refusal.is_none() {
            self.findings.refusal = Some(e);
        } else {
            self.findings.warnings.push(e);
        }
    }

    /// Features whose absence would serve open what Tyk protects.
    fn refuse_unsafe(&mut self, field: &str, what: &str) {
        self.refuse(
            field,
            format!(
                "{what} is not implemented, and serving without it would let through \
                 requests Tyk rejects"
            ),
        );
    }

    /// Unknown keys near a known one, in each section Tyk users write by hand.
    fn typos(&mut self, def: &Value) {
        let sections: [(&str, Option<&Value>, &[&str]); 3] = [
            ("", Some(def), TOP_LEVEL_KEYS),
            ("proxy.", def.get("proxy"), PROXY_KEYS),
            (
                "custom_middleware.",
                def.get("custom_middleware"),
                MIDDLEWARE_KEYS,
            ),
        ];
        for (prefix, section, known) in sections {
            if let Some(obj) = section.and_then(Value::as_object) {
                self.typos_in(prefix, obj, known);
            }
        }
        let mw = def.get("custom_middleware");
        for hook in ["pre", "post", "post_key_auth", "response"] {
            let list = mw.and_then(|m| m.get(hook)).and_then(Value::as_array);
            for (i, entry) in list.into_iter().flatten().enumerate() {
                if let Some(obj) = entry.as_object() {
                    let prefix = format!("custom_middleware.{hook}[{i}].");
                    self.typos_in(&prefix, obj, ENTRY_KEYS);
                }
            }
        }
    }

    fn typos_in(&mut self, prefix: &str, obj: &Map<String, Value>, known: &[&str]) {
        for key in obj.keys() {
            if known.contains(&key.as_str()) {
                continue;
            }
            if let Some(near) = did_you_mean(key, known) {
                self.warn(
                    &format!("{prefix}{key}"),
                    format!("unknown field, ignored: did you mean \"{prefix}{near}\"?"),
                );
            }
        }
    }

    /// `use_keyless: false` means Tyk demands a credential on every request.
    fn auth(&mut self, def: &Value) {
        let keyless = def.get("use_keyless").is_some_and(truthy);
        let mw = def.get("custom_middleware");
        let auth_check = mw
            .and_then(|m| m.get("auth_check"))
            .filter(|e| entry_enabled(e));
        let post_key_auth = mw
            .and_then(|m| m.get("post_key_auth"))
            .filter(|v| any_enabled(v));
        if keyless {
            // Tyk runs these only on APIs that authenticate: it ignores them too.
            for (field, present) in [
                ("custom_middleware.auth_check", auth_check.is_some()),
                ("custom_middleware.post_key_auth", post_key_auth.is_some()),
            ] {
                if present {
                    self.warn(
                        field,
                        "is not run, because \"use_keyless\" is true (Tyk does not run it either)"
                            .into(),
                    );
                }
            }
            return;
        }
        let method = AUTH_METHODS
            .iter()
            .find(|(key, _)| def.get(*key).is_some_and(truthy))
            .map(|(_, name)| *name)
            .or(auth_check.map(|_| "an auth plugin (custom_middleware.auth_check)"))
            .unwrap_or("an auth key (Tyk's default)");
        self.refuse(
            "use_keyless",
            format!(
                "false means Tyk would require {method} on every request, and \
                 authentication is not implemented here; set \"use_keyless\": true to serve \
                 this API without authentication"
            ),
        );
    }

    /// IP allow/deny lists (top level) and the bundle, both unsafe to skip.
    fn access_lists(&mut self, def: &Value) {
        let ip_control = !def.get("ip_access_control_disabled").is_some_and(truthy);
        for (switch, list, what) in [
            ("enable_ip_whitelisting", "allowed_ips", "the IP allow list"),
            (
                "enable_ip_blacklisting",
                "blacklisted_ips",
                "the IP deny list",
            ),
        ] {
            let on = def.get(switch).is_some_and(truthy);
            if ip_control && on && def.get(list).is_some_and(truthy) {
                self.refuse_unsafe(list, what);
            }
        }
        let bundle = def.get("custom_middleware_bundle").is_some_and(truthy);
        if bundle
            && !def
                .get("custom_middleware_bundle_disabled")
                .is_some_and(truthy)
        {
            self.refuse_unsafe(
                "custom_middleware_bundle",
                "loading middleware from a bundle",
            );
        }
    }

    /// Response middleware runs on the JS and native drivers; a driver
    /// without a response phase (wasm here) must not serve the upstream's
    /// answer unchecked: it may redact or check what the upstream says.
    fn middleware(&mut self, def: &Value) {
        let mw = def.get("custom_middleware");
        let response = mw.and_then(|m| m.get("response"));
        let driver = mw.and_then(|m| m.get("driver")).and_then(Value::as_str);
        let has_phase = !matches!(driver, Some("wasm" | "proxy-wasm"));
        if response.is_some_and(any_enabled) && !has_phase {
            self.refuse_unsafe(
                "custom_middleware.response",
                "response middleware on the wasm driver (it may redact or check what the \
                 upstream answers; the JS and native drivers run it)",
            );
        }
    }

    /// `version_data`: versioning itself, and each version's path and header
    /// settings (Tyk applies the default version's even when not versioned).
    fn versions(&mut self, def: &Value) {
        let Some(vd) = def.get("version_data") else {
            return;
        };
        let versions = vd.get("versions").and_then(Value::as_object);
        let not_versioned = vd.get("not_versioned").is_none_or(truthy);
        if !not_versioned && versions.is_some_and(|v| v.len() > 1) {
            self.not_implemented(
                "version_data.not_versioned",
                "is false: choosing a version per request (definition.location/key)",
            );
        }
        for (name, v) in versions.into_iter().flatten() {
            let at = format!("version_data.versions.{name}");
            self.version(&at, v);
        }
    }

    fn version(&mut self, at: &str, v: &Value) {
        let field = |f: &str| format!("{at}.{f}");
        for (list, unsafe_to_skip) in [
            ("white_list", true),
            ("black_list", true),
            ("ignored", false),
        ] {
            if v.pointer(&format!("/paths/{list}")).is_some_and(truthy) {
                let what = format!("the {list} of paths");
                match unsafe_to_skip {
                    true => self.refuse_unsafe(&field(&format!("paths.{list}")), &what),
                    false => self.not_implemented(&field(&format!("paths.{list}")), &what),
                }
            }
        }
        if let Some(ext) = v.get("extended_paths").and_then(Value::as_object) {
            for (kind, entries) in ext {
                if !truthy(entries) {
                    continue;
                }
                let f = field(&format!("extended_paths.{kind}"));
                let what = format!("per-endpoint {kind}");
                match kind.as_str() {
                    "white_list" | "black_list" | "internal" => self.refuse_unsafe(&f, &what),
                    // Served: JS virtual endpoints (`virtuals.rs`).
                    "virtual" => {}
                    _ => self.not_implemented(&f, &what),
                }
            }
        }
        for (fields, switch, what) in [
            (
                ["global_headers", "global_headers_remove"],
                "global_headers_disabled",
                "adding or removing request headers",
            ),
            (
                ["global_response_headers", "global_response_headers_remove"],
                "global_response_headers_disabled",
                "adding or removing response headers",
            ),
        ] {
            if v.get(switch).is_some_and(truthy) {
                continue;
            }
            for f in fields {
                if v.get(f).is_some_and(truthy) {
                    self.not_implemented(&field(f), what);
                }
            }
        }
        let size_limit_off = v.get("global_size_limit_disabled").is_some_and(truthy);
        if !size_limit_off && v.get("global_size_limit").is_some_and(truthy) {
            self.not_implemented(&field("global_size_limit"), "the request size limit");
        }
        if v.get("override_target").is_some_and(truthy) {
            self.not_implemented(&field("override_target"), "a per-version target");
        }
    }

    /// Switches at the top level and in `proxy`.
    fn top_level_features(&mut self, def: &Value) {
        for (pointer, what) in FEATURES {
            if def.pointer(pointer).is_some_and(truthy) {
                let field = pointer.trim_start_matches('/').replace('/', ".");
                self.not_implemented(&field, what);
            }
        }
        let rate = def.pointer("/global_rate_limit/rate").is_some_and(truthy);
        if rate
            && !def
                .pointer("/global_rate_limit/disabled")
                .is_some_and(truthy)
        {
            self.not_implemented("global_rate_limit", "the API-wide rate limit");
        }
        let lb = def
            .pointer("/proxy/enable_load_balancing")
            .is_some_and(truthy);
        if lb && def.pointer("/proxy/target_list").is_some_and(truthy) {
            self.not_implemented(
                "proxy.target_list",
                "load balancing (every request goes to proxy.target_url)",
            );
        }
        let domain = def.get("domain").is_some_and(truthy);
        if domain && !def.get("domain_disabled").is_some_and(truthy) {
            self.not_implemented("domain", "matching the Host header (served on every host)");
        }
        let overrides = def.get("error_overrides").is_some_and(truthy);
        if overrides && !def.get("error_overrides_disabled").is_some_and(truthy) {
            self.not_implemented("error_overrides", "custom error bodies");
        }
        let protocol = def.get("protocol").and_then(Value::as_str).unwrap_or("");
        if !matches!(protocol, "" | "http") {
            self.not_implemented("protocol", &format!("{protocol:?} (served as plain http)"));
        }
    }
}

/// Switches that change request handling and are simply skipped here:
/// (JSON pointer, what it does).
const FEATURES: &[(&str, &str)] = &[
    ("/CORS/enable", "CORS handling"),
    ("/listen_port", "a listener of its own (served on --listen)"),
    (
        "/proxy/service_discovery/use_discovery_service",
        "service discovery",
    ),
    ("/proxy/proxy_url", "an outbound proxy"),
    ("/enable_context_vars", "context variables"),
    ("/cache_options/enable_cache", "response caching"),
    ("/enable_batch_request_support", "batch requests"),
    ("/response_processors", "response processors"),
    ("/upstream_auth/enabled", "upstream authentication"),
    ("/request_signing/is_enabled", "request signing"),
    ("/graphql/enabled", "GraphQL handling"),
];

/// Top-level switches that each mean "authenticate this way" when keyless is off.
const AUTH_METHODS: &[(&str, &str)] = &[
    ("use_basic_auth", "basic authentication (use_basic_auth)"),
    ("enable_jwt", "a JWT (enable_jwt)"),
    ("use_oauth2", "OAuth 2.0 (use_oauth2)"),
    ("use_openid", "OpenID Connect (use_openid)"),
    ("external_oauth", "external OAuth (external_oauth)"),
    (
        "enable_signature_checking",
        "an HMAC signature (enable_signature_checking)",
    ),
    (
        "use_mutual_tls_auth",
        "a client certificate (use_mutual_tls_auth)",
    ),
    ("use_go_plugin_auth", "an auth plugin (use_go_plugin_auth)"),
    (
        "enable_coprocess_auth",
        "an auth plugin (enable_coprocess_auth)",
    ),
    (
        "custom_plugin_auth_enabled",
        "an auth plugin (custom_plugin_auth_enabled)",
    ),
];

/// True for a value that switches something on: `true`, a non-zero number, a
/// non-empty string, array or object.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// A middleware entry that names something and is not disabled.
fn entry_enabled(e: &Value) -> bool {
    let named = ["name", "path", "code"]
        .iter()
        .any(|k| e.get(*k).is_some_and(truthy));
    named && !e.get("disabled").is_some_and(truthy)
}

fn any_enabled(list: &Value) -> bool {
    list.as_array().is_some_and(|l| l.iter().any(entry_enabled))
}

/// The known key closest to `key`, if it is a plausible typo of it: one edit
/// for short keys, two for longer ones, or the same letters in another case.
fn did_you_mean<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let budget = if key.len() <= 4 { 1 } else { 2 };
    known
        .iter()
        .map(|k| {
            let case_only = k.eq_ignore_ascii_case(key);
            let d = if case_only {
                0
            } else {
                strsim::damerau_levenshtein(key, k)
            };
            (d, *k)
        })
        .filter(|(d, _)| *d <= budget)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lint(v: Value) -> Findings {
        check(Path::new("a.json"), &v)
    }

    #[test]
    fn near_misses_get_did_you_mean_and_far_keys_stay_quiet() {
        let f = lint(json!({
            "custom_middlware": {}, "proxy": {"strip_listen_pth": true},
            "use_keyless": true, "x-my-note": "hi", "Proxy": {}
        }));
        let texts: Vec<String> = f.warnings.iter().map(|w| w.to_string()).collect();
        assert!(
            texts.iter().any(|t| t.contains("custom_middlware")
                && t.contains("did you mean \"custom_middleware\"?")),
            "{texts:?}"
        );
        assert!(
            texts.iter().any(|t| t.contains("proxy.strip_listen_pth")
                && t.contains("\"proxy.strip_listen_path\"")),
            "{texts:?}"
        );
        assert!(
            texts.iter().any(|t| t.contains("\"proxy\"?")),
            "case: {texts:?}"
        );
        assert!(!texts.iter().any(|t| t.contains("x-my-note")), "{texts:?}");
        assert_eq!(did_you_mean("id", TOP_LEVEL_KEYS), Some("id"));
    }

    #[test]
    fn off_values_as_tyk_exports_them_are_quiet() {
        let f = lint(json!({
            "use_keyless": true, "CORS": {"enable": false}, "global_rate_limit": {"rate": 0, "per": 0},
            "enable_ip_whitelisting": false, "allowed_ips": ["10.0.0.1"], "domain": "",
            "custom_middleware_bundle": "", "listen_port": 0,
            "version_data": {"not_versioned": true, "versions": {"Default": {
                "name": "Default", "use_extended_paths": true,
                "extended_paths": {"ignored": [], "white_list": []},
                "global_headers": {}, "paths": {"ignored": [], "white_list": [], "black_list": []}}}}
        }));
        assert!(f.warnings.is_empty(), "{:?}", f.warnings);
        assert!(f.refusal.is_none(), "{:?}", f.refusal);
    }
}
