//! loadgen
