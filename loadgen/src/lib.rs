//! loadgen: an ab-compatible HTTP load generator with HDR-histogram percentiles and
//! CPU accounting, and `loadgen bench`, the gateway benchmark.
//!
//! A run is a pipeline (after oha): flags are validated once into a
//! [`RunConfig`]; the driver's workers produce per-request timings into
//! per-thread HDR histograms, merged at the end; one [`Summary`] is rendered
//! by printers that write to any `impl Write`.
//!
//! # Layout
//! - [`cli`]: the ab command line, validated into a [`RunConfig`].
//! - [`config`]: the validated run (target, request, work mode, checks).
//! - [`driver`]: the one driver loop (threads, tickets, rate schedule, stop).
//! - [`http1`]: one HTTP/1 exchange on a raw socket, with ab's timestamps.
//! - [`connect`]: opening a connection and sending the request, cheaply.
//! - [`record`]: per-thread histograms and counters, and their merge.
//! - [`cpu`]: CPU time of other processes and of loadgen itself.
//! - [`progress`]: the live progress line on a terminal.
//! - [`verbose`]: ab's `-v N` lines during the run.
//! - [`report`]: the summary and its printers (text, JSON, CSV, .hgrm).
//! - [`app`]: `loadgen URL` from arguments to exit code.
//! - [`bench`]: `loadgen bench`, the seed's benchmark against the gateway.
//! - [`mock`]: the seed's mock upstream server; [`mock_http`] its
//!   hand-written HTTP/1.1 connection loop.
#![deny(missing_docs)]

pub mod app;
pub mod bench;
pub mod cli;
pub mod config;
pub mod connect;
pub mod cpu;
pub mod driver;
pub mod http1;
pub mod mock;
pub mod mock_http;
pub mod progress;
pub mod record;
pub mod report;
pub mod verbose;

pub use config::{RunConfig, WorkMode};
pub use driver::{run, RunResult};
pub use report::Summary;
