//! `loadgen [options] URL` (ab-compatible) and `loadgen bench` (the gateway benchmark).

use clap::Parser;

fn main() {
    let code = loadgen::app::main(loadgen::cli::Args::parse());
    std::process::exit(code);
}
