//! `loadgen [options] URL` (ab-compatible) and `loadgen bench` (the gateway benchmark).

use clap::Parser;

fn main() {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `bench` is a mode, not a URL: ab's command line stays as ab's.
    let code = if args.get(1).is_some_and(|a| a == "bench") {
        args.remove(1);
        loadgen::bench::main(loadgen::bench::BenchArgs::parse_from(args))
    } else {
        match loadgen::cli::Args::try_parse_from(args) {
            Ok(args) => loadgen::app::main(args),
            Err(e) => match loadgen::cli::ab_option_missing(&e) {
                Some(why) => {
                    eprintln!("loadgen: {why}");
                    2
                }
                None => e.exit(),
            },
        }
    };
    std::process::exit(code);
}
