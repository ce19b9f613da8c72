//! A Tyk-compatible reverse proxy whose custom middleware runs either as a
//! native dynamic library or as JavaScript in an embedded engine, built to
//! measure what each costs.
//!
//! # Layout
//!
//! A request passes the modules in this order:
//!
//! - [`server`]: startup, one single-threaded runtime and listener per worker, shutdown.
//! - [`control`]: the gateway's own endpoints: `/hello` and the `/tyk/` control API.
//! - [`config`]: Tyk API definitions, loaded and validated from a directory.
//! - [`router`]: longest-prefix listen-path routing, strip and join.
//! - [`proxy`]: one request's path: route, middleware chains, upstream.
//! - [`middleware`]: the middleware contract both drivers implement, and the chain runner.
//! - [`native`]: the native plugin host (libloading, versioned C ABI).
//! - [`js`]: the JS host (boa_engine with Tyk's JSVM API).
//! - [`wasm`]: the WebAssembly host (wasmtime, the proxy-wasm ABI).
//! - [`upstream`]: the per-worker pooled client and hop-by-hop header hygiene.
//! - [`error`]: proxy errors and the one place they map to Tyk's answers.
//! - [`stats`]: per-API, per-hook middleware call-time histograms.

pub mod config;
pub mod control;
pub mod error;
pub mod js;
pub mod middleware;
pub mod native;
pub mod proxy;
pub mod router;
pub mod server;
pub mod stats;
pub mod upstream;
pub mod wasm;
