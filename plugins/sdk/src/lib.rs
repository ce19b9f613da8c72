//! plugin ABI
