//! A Tyk-compatible reverse proxy whose custom middleware runs either as a
//! native dynamic library or as JavaScript in an embedded engine, built to
//! measure what each costs.
//!
//! # Layout
//!
//! A request passes the modules in this order:
//!
//! - [`config`]: Tyk API definitions, loaded and validated from a directory.
//! - [`middleware`]: the middleware contract both drivers implement, and the chain runner.
//! - [`native`]: the native plugin host (libloading, versioned C ABI).
//! - [`js`]: the JS host (boa_engine with Tyk's JSVM API).
//! - [`stats`]: per-API, per-hook middleware call-time histograms.

pub mod config;
pub mod js;
pub mod middleware;
pub mod native;
pub mod stats;
