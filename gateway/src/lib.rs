//! A Tyk-compatible reverse proxy whose custom middleware runs either as a
//! native dynamic library or as JavaScript in an embedded engine, built to
//! measure what each costs.
//!
//! # Layout
//!
//! A request passes the modules in this order:
//!
//! - [`server`]: startup, one single-threaded runtime and listener per worker, shutdown.
//! - [`wire`]: the client's bytes before hyper: heads checked as sent, header and idle timeouts.
//! - [`conn`]: one client connection: HTTP/1 over the checked stream, its part in shutdown.
//! - [`h1down`]: the gateway's own HTTP/1 server side for the common requests (hyper for the rest).
//! - [`front`]: what every request passes first: head checks, path cleaning, own endpoints.
//! - [`path`]: path cleaning as Tyk's router (gorilla/mux): 301 for dot segments.
//! - [`control`]: the gateway's own endpoints: `/hello` and the `/tyk/` control API.
//! - [`config`]: Tyk API definitions, loaded and validated from a directory.
//! - `loader`: start-up: every valid definition routed, failing closed when it must.
//! - [`router`]: longest-prefix listen-path routing, strip and join.
//! - [`proxy`]: one request's path: route, middleware chains, upstream.
//! - [`middleware`]: the middleware contract both drivers implement, and the chain runner.
//! - [`native`]: the native plugin host (libloading, versioned C ABI).
//! - [`js`]: the JS host (boa_engine with Tyk's JSVM API).
//! - [`body`]: the client's request body with its timeout.
//! - [`wasm`]: the WebAssembly host (wasmtime, the proxy-wasm ABI).
//! - [`response`]: virtual endpoints and response middleware: the phases that answer.
//! - [`upstream`]: sending upstream (safe retry of stale connections), header hygiene.
//! - [`hop`]: this gateway's name in `Via`, by which a request that loops back is known.
//! - [`pool`]: the per-worker upstream connection pool, and the response body going back.
//! - [`error`]: proxy errors and the one place they map to Tyk's answers.
//! - [`stats`]: per-API, per-hook middleware call-time histograms.
//! - [`lograte`]: the bound on log lines that failing requests cause.

// Every public item says what it is for: the crate is read by people
// carrying the work on, and its tests and benches use the public API.
#![deny(missing_docs)]

pub mod affinity;
pub mod arenas;
pub mod body;
pub mod config;
pub mod conn;
pub mod control;
pub mod error;
mod forked;
pub mod front;
pub mod h1down;
pub mod h1up;
pub mod heap;
pub mod hop;
mod intern;
pub mod js;
mod loader;
pub mod lograte;
pub mod middleware;
pub mod native;
pub mod path;
pub mod pool;
pub mod proxy;
pub mod response;
pub mod router;
pub mod server;
pub mod stats;
pub mod upstream;
pub mod wasm;
pub mod wire;
