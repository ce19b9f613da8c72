//! Start-up loading: definitions in, routes out, and one log line for each.
//!
//! Every valid definition becomes a route, even when its middleware cannot
//! load: Tyk keeps such an API routed and answers each request to it with
//! 500, so its traffic can never fall through to a shorter listen path (a
//! `/` catch-all beside a broken auth-like plugin would otherwise serve the
//! plugin's traffic unchecked). Only files that are not valid definitions at
//! all (bad JSON, no listen path) and `internal` APIs are left unrouted.
//!
//! Each problem is logged here, once, in plain words with the user's file
//! path; requests that hit a failing route are then logged at debug only.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;

use crate::config::{self, ApiSpec, Driver, LoadError};
use crate::control::ApiListing;
use crate::middleware::{ApiChain, ChainFactory, HostOptions};
use crate::stats::Stats;
use crate::upstream::Resolver;
use crate::{js, native};

/// How an API is served on every worker.
pub(crate) enum Serving {
    /// No middleware: the streaming path.
    Plain,
    /// Middleware that loaded: each worker builds its own chain from this.
    Chain(Arc<dyn ChainFactory>),
    /// Cannot be served as written: every request is answered 500. The text
    /// is the load error, for the debug log of each request.
    FailClosed(Arc<str>),
}

/// A routed API.
pub(crate) struct LoadedApi {
    pub(crate) spec: Arc<ApiSpec>,
    pub(crate) serving: Serving,
}

impl LoadedApi {
    /// This worker's middleware chain (`None` without middleware, `Err` when
    /// the API fails closed). Called on the worker thread: JS contexts are
    /// built here and never leave it.
    pub(crate) fn chain(&self, stats: &Stats) -> Option<Result<ApiChain, String>> {
        match &self.serving {
            Serving::Plain => None,
            Serving::FailClosed(why) => Some(Err(why.to_string())),
            Serving::Chain(factory) => Some(
                factory
                    .instantiate()
                    .map(|c| ApiChain::new(&self.spec, c, stats))
                    .map_err(|e| {
                        tracing::error!(
                            "{}: middleware failed to start on a worker, so its requests are \
                             answered 500: {e}",
                            self.spec.file.display()
                        );
                        e.to_string()
                    }),
            ),
        }
    }
}

/// Everything start-up loading produced.
pub(crate) struct Load {
    /// Routed APIs, served or failing closed.
    pub(crate) apis: Vec<LoadedApi>,
    /// What `GET /tyk/apis` lists, internal APIs included.
    pub(crate) listing: Vec<ApiListing>,
    /// Files that did not load, and APIs that fail closed.
    pub(crate) errors: Vec<LoadError>,
    /// Fields not implemented, likely typos.
    pub(crate) warnings: Vec<LoadError>,
}

/// Loads every definition in `dir` and each API's middleware, logging what
/// happened to each file. Only an unreadable directory is an error.
pub(crate) fn load(dir: &Path, opts: &HostOptions, resolver: &Resolver) -> anyhow::Result<Load> {
    let loaded = config::load_dir(dir).with_context(|| {
        format!(
            "cannot read the API definitions directory {}",
            dir.display()
        )
    })?;
    for file in &loaded.inactive {
        tracing::info!("{}: \"active\" is false: not served", file.display());
    }
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    for e in &loaded.errors {
        tracing::error!("API definition not loaded: {e}");
    }
    let mut out = Load {
        apis: Vec::new(),
        listing: Vec::new(),
        errors: loaded.errors,
        warnings: loaded.warnings,
    };
    for spec in loaded.internal {
        tracing::info!(
            "{}: \"internal\" is true: {} is not routed from outside (Tyk serves it only to its own tyk://self loops)",
            spec.file.display(),
            spec.listen_path
        );
        out.listing.push(listing(&spec, "internal", None));
    }
    for (spec, why) in loaded.refused {
        out.fail_closed(Arc::new(spec), why);
    }
    for spec in loaded.apis {
        if let Err(m) = resolver.prepare(&spec.target.host) {
            // Not fatal: the host may resolve later (DNS up after us);
            // the connector retries on each new connection.
            tracing::warn!("{}: proxy.target_url: {m}", spec.file.display());
        }
        let factory = load_middleware(&spec, opts);
        let spec = Arc::new(spec);
        match factory {
            Ok(factory) => out.serve(spec, factory),
            Err(e) => out.fail_closed(spec, e),
        }
    }
    if out.apis.is_empty() {
        tracing::error!(
            "NO API LOADED from {}: every request except /hello will get 404",
            dir.display()
        );
    }
    Ok(out)
}

/// The API's middleware factory: its driver's, and, for virtual endpoints
/// of an API whose driver is not JS (or that has none), the JS host's
/// beside it (Tyk runs virtual endpoints in its JSVM whatever the driver).
fn load_middleware(
    spec: &ApiSpec,
    opts: &HostOptions,
) -> Result<Option<Arc<dyn ChainFactory>>, LoadError> {
    let driver = match spec.driver {
        None => None,
        Some(Driver::Native) => Some(native::load(spec, opts)?),
        Some(Driver::Js) => return js::load(spec, opts).map(Some),
        Some(Driver::Wasm) => Some(crate::wasm::load(spec, &opts.wasm)?),
    };
    if spec.virtual_endpoints.is_empty() {
        return Ok(driver);
    }
    let endpoints = js::load(spec, opts)?;
    Ok(Some(match driver {
        None => endpoints,
        Some(d) => Arc::new(Merged(vec![d, endpoints])),
    }))
}

/// Several drivers' factories for one API: each worker's chain is theirs
/// appended, list by list.
struct Merged(Vec<Arc<dyn ChainFactory>>);

impl ChainFactory for Merged {
    fn instantiate(&self) -> Result<crate::middleware::Chain, crate::middleware::MwError> {
        let mut chain = crate::middleware::Chain::default();
        for f in &self.0 {
            chain = chain.merge(f.instantiate()?);
        }
        Ok(chain)
    }
}

impl Load {
    fn serve(&mut self, spec: Arc<ApiSpec>, factory: Option<Arc<dyn ChainFactory>>) {
        let mut how = match spec.driver {
            None => "no middleware".to_string(),
            Some(d) => format!("{} middleware", d.as_str()),
        };
        if !spec.virtual_endpoints.is_empty() {
            how.push_str(&format!(
                ", {} virtual endpoint(s) in JS",
                spec.virtual_endpoints.len()
            ));
        }
        tracing::info!(
            "API loaded: {} ({}) serves {} -> {}, {how}",
            spec.file.display(),
            spec.api_id,
            spec.listen_path,
            spec.target.authority
        );
        self.listing.push(listing(&spec, "serving", None));
        let serving = factory.map_or(Serving::Plain, Serving::Chain);
        self.apis.push(LoadedApi { spec, serving });
    }

    fn fail_closed(&mut self, spec: Arc<ApiSpec>, why: LoadError) {
        tracing::error!(
            "API fails closed (every request to {} is answered 500): {why}",
            spec.listen_path
        );
        self.listing
            .push(listing(&spec, "failing", Some(why.to_string())));
        let text: Arc<str> = why.to_string().into();
        self.errors.push(why);
        self.apis.push(LoadedApi {
            spec,
            serving: Serving::FailClosed(text),
        });
    }
}

fn listing(spec: &ApiSpec, status: &'static str, error: Option<String>) -> ApiListing {
    ApiListing {
        api_id: spec.api_id.clone(),
        file: spec.file.display().to_string(),
        listen_path: spec.listen_path.clone(),
        driver: spec.driver.map_or("none", Driver::as_str).to_string(),
        status,
        error,
    }
}
