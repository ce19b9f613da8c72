//! `mock-upstream`: the seed's mock server. Answers every request with a JSON
//! echo of its method, path and headers.
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
    /// Port to listen on [env: MOCK_PORT] [default: 8222]
    #[arg(long, env = "MOCK_PORT")]
    port: Option<u16>,
    /// Full address to listen on; overrides --port (default 127.0.0.1:PORT)
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Runtime worker threads (default: one per core)
    #[arg(long)]
    threads: Option<usize>,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let addr = args.listen.unwrap_or_else(|| {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), args.port.unwrap_or(8222))
    });
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.threads {
        rt.worker_threads(n.max(1));
    }
    let rt = rt.enable_all().build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
        println!("Mock server listening on {}", listener.local_addr()?);
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        loadgen::mock::serve(listener, shutdown).await?;
        Ok(())
    })
}
