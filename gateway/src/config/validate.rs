//! Validating: one parsed definition checked field by field into the
//! [`ApiSpec`] the router and the middleware hosts use; the first field at
//! fault is the error.

use std::path::Path;

use serde_json::Value;

use super::{
    ApiDefinition, ApiSpec, CustomMiddleware, Driver, JsEngine, LoadError, MiddlewareEntry,
    Placement, Target,
};

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

/// Checks `def` (read from `file`) into an [`ApiSpec`]: its id, its proxy
/// settings, its JS engine, then its middleware entries.
pub(super) fn validate(file: &Path, def: ApiDefinition) -> Result<ApiSpec, LoadError> {
    let err = |field: &str, msg: String| LoadError::new(file, field, msg);
    if def.api_id.is_empty() {
        return Err(err("api_id", "is missing or empty".into()));
    }
    let proxy = def.proxy.ok_or_else(|| err("proxy", "is missing".into()))?;
    let listen_path = listen_path(file, &proxy.listen_path)?;
    if proxy.target_url.is_empty() {
        return Err(err("proxy.target_url", "is missing or empty".into()));
    }
    let target = Target::parse(&proxy.target_url).map_err(|m| err("proxy.target_url", m))?;
    let strategy = def.custom_middleware.strategy.clone();
    let engine = engine(file, &def.custom_middleware.engine)?;
    let placement = placement(file, &def.custom_middleware.placement)?;
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
            def.config_data.clone()
        },
        config_data_written: def.config_data,
        config_data_disabled,
        engine,
        strategy,
        placement,
        virtual_endpoints: Vec::new(),
    })
}

/// `proxy.listen_path`, checked and normalised as Tyk serves it.
fn listen_path(file: &Path, raw: &str) -> Result<String, LoadError> {
    let field = "proxy.listen_path";
    if raw.is_empty() {
        return Err(LoadError::new(file, field, "is missing or empty"));
    }
    if raw.contains(' ') {
        return Err(LoadError::new(
            file,
            field,
            format!("{raw:?} contains a space"),
        ));
    }
    // What no request path can match: routing sees a path with its
    // escapes decoded (as Tyk's router does), and a request path is ASCII
    // without `?`, `#` or control characters. Such a listen path used to
    // load and never serve (`/%74est/` requests went to a `/` API).
    let never = if raw.contains('%') {
        Some("has a % escape, and requests are matched with their escapes decoded (write the character itself)")
    } else if raw.contains(['?', '#']) {
        Some("has a ? or #, which end a request's path")
    } else if raw.chars().any(|c| c.is_control()) {
        Some("has a control character")
    } else if !raw.is_ascii() {
        Some("has a character outside ASCII, which a request path carries only escaped")
    } else {
        None
    };
    if let Some(why) = never {
        return Err(LoadError::new(
            file,
            field,
            format!("{raw:?} can never match a request: it {why}"),
        ));
    }
    let listen_path = normalize_listen_path(raw);
    if listen_path != raw {
        tracing::info!(
            "{}: proxy.listen_path {raw:?} is served as {listen_path:?} (Tyk normalises it the same way)",
            file.display(),
        );
    }
    Ok(listen_path)
}

/// `custom_middleware.engine`: `None` when the definition names none.
fn engine(file: &Path, name: &str) -> Result<Option<JsEngine>, LoadError> {
    match name {
        "" => Ok(None),
        name => JsEngine::parse(name).map(Some).ok_or_else(|| {
            LoadError::new(
                file,
                "custom_middleware.engine",
                format!("{name:?} is not a JS engine; use \"boa\" or \"quickjs\""),
            )
        }),
    }
}

fn placement(file: &Path, name: &str) -> Result<Option<Placement>, LoadError> {
    match name {
        "" => Ok(None),
        name => Placement::parse(name).map(Some).ok_or_else(|| {
            LoadError::new(
                file,
                "custom_middleware.placement",
                format!(
                    "{name:?} is not a JS placement; use \"threads\", \"inline\" or \"adaptive\""
                ),
            )
        }),
    }
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
