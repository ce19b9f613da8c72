//! `mock-upstream`: the seed's mock server. Answers every request with a JSON
//! echo of its method, path and headers.
//!
//! Shared-nothing, like the gateway: each thread has its own current-thread
//! tokio runtime and its own `SO_REUSEPORT` listener on the same address, so
//! the kernel spreads connections over the threads and a request never
//! crosses threads (a multi-threaded runtime costs ~2.7 context switches per
//! request here, which is most of an upstream's CPU).
//!
//! One thread per four cores by default, not one per core: what a request
//! costs the mock is mostly the kernel waking a thread for it, and a thread
//! that has more connections finds more requests waiting when it wakes (on
//! 2 cores, through the gateway: 0.47 context switches per request with one
//! thread, 0.65 with two, and ~20% less CPU). One thread answers well over
//! 50,000 requests a second, more than a gateway on the same cores can send.
//!
//! To try this: 1. `cargo run --release --bin mock-upstream` 2. `curl -s
//! localhost:8222/any/path -H 'X-Demo: 1'`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use clap::Parser;

#[derive(Parser)]
#[command(
    version,
    about = "The seed's mock upstream: echoes method, path and headers as JSON"
)]
struct Args {
    /// Port to listen on
    #[arg(long, env = "MOCK_PORT", default_value_t = 8222)]
    port: u16,
    /// Full address to listen on; overrides --port (default 127.0.0.1:PORT)
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Server threads, each with its own listener and runtime (default: one
    /// per four cores, at least one)
    #[arg(long)]
    threads: Option<usize>,
    /// Also echo these request parts: `query`, `body` or `query,body`
    /// (default none: the seed's JSON, byte for byte). A body over 1 MiB is
    /// read but not echoed: it is answered 413 Content Too Large
    #[arg(long, value_name = "FIELDS", value_parser = loadgen::mock::Echo::parse, default_value = "none")]
    echo: loadgen::mock::Echo,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let addr = args
        .listen
        .unwrap_or_else(|| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), args.port));
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().div_ceil(4)))
        .max(1);
    let listeners = match loadgen::mock::bind_reuseport(addr, threads) {
        Ok(l) => l,
        Err(e) => {
            let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
                "; another process listens there: stop it, or pick another port with --port or --listen"
            } else {
                ""
            };
            eprintln!("mock-upstream: cannot listen on {addr}: {e}{hint}");
            std::process::exit(1);
        }
    };
    let bound = listeners[0].local_addr().map_or(addr, |a| a);
    println!("Mock server listening on {bound}");
    let handles: Vec<_> = listeners
        .into_iter()
        .map(|l| {
            let echo = args.echo;
            std::thread::spawn(move || serve_one(l, echo))
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}

/// One server thread: its own runtime and listener until Ctrl-C.
fn serve_one(listener: std::net::TcpListener, echo: loadgen::mock::Echo) {
    // I/O (and Ctrl-C) only: no timer driver to consult on every turn.
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mock-upstream: cannot start a server thread: {e}");
            std::process::exit(1);
        }
    };
    rt.block_on(async {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("mock-upstream: {e}");
                std::process::exit(1);
            }
        };
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
            // One thread seeing Ctrl-C ends the process.
            std::process::exit(0);
        };
        let _ = loadgen::mock::serve_with(listener, echo, shutdown).await;
    });
}
