//! loadgen: an ab-compatible load generator, the bench, and the mock upstream.
//!
//! # Layout
//!
//! - [`mock`]: the seed's mock upstream server.

pub mod mock;
