//! `gateway`: serves the Tyk API definitions in a directory.
//!
//! To try this: 1. `cargo build --release` 2. `target/release/mock-upstream &`
//! 3. `target/release/gateway` 4. `curl -s localhost:8091/plain/hello/`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use gateway::server::{Gateway, GatewayConfig};

#[derive(Parser)]
#[command(
    version,
    about = "A Tyk-compatible gateway running custom middleware natively or in a JS VM"
)]
struct Args {
    /// Directory of Tyk API definitions (*.json)
    #[arg(long, default_value = "apis")]
    apis: PathBuf,
    /// Address to listen on
    #[arg(long, default_value = "127.0.0.1:8091")]
    listen: SocketAddr,
    /// Worker threads, each with its own listener, upstream pool and JS contexts [default: one per core]
    #[arg(long)]
    threads: Option<usize>,
    /// Longest a JS middleware call may run before the request gets 500 (Tyk's jsvm_timeout)
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    jsvm_timeout: Duration,
    /// Longest a WebAssembly middleware call may run before the request gets 500
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    wasm_timeout: Duration,
    /// Most linear memory one WebAssembly instance may grow to (KiB, MiB, GiB)
    #[arg(long, default_value = "64MiB", value_parser = gateway::wasm::parse_memory_size)]
    wasm_memory: usize,
    /// Longest to wait for the upstream's response head before answering 504
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    upstream_timeout: Duration,
    /// Secret for the /tyk/ control API (X-Tyk-Authorization); the API is off without one
    #[arg(long, env = "GATEWAY_SECRET", hide_env_values = true)]
    secret: Option<String>,
}

/// Parses `5s`, `250ms`, `2m` or a bare number of seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or((s, "s"), |i| (&s[..i], &s[i..]));
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 5s or 250ms"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(format!("{s:?}: unit must be ms, s or m")),
    };
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("{s:?} must be a positive duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = Args::parse();
    let mut config = GatewayConfig {
        apis_dir: args.apis,
        jsvm_timeout: args.jsvm_timeout,
        wasm: gateway::wasm::WasmLimits {
            timeout: args.wasm_timeout,
            memory: args.wasm_memory,
        },
        upstream_timeout: args.upstream_timeout,
        secret: args.secret.filter(|s| !s.is_empty()),
        ..GatewayConfig::default()
    };
    if let Some(n) = args.threads {
        config.threads = n.max(1);
    }
    let gw = match Gateway::bind(args.listen, config) {
        Ok(gw) => gw,
        Err(e) => {
            eprintln!("gateway: {e:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // One plain line on stdout for scripts and the bench (logs go to stderr).
    println!("gateway listening on {}", gw.local_addr());
    let _ = std::io::Write::flush(&mut std::io::stdout());
    match gw.run(shutdown_signal()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gateway: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_parse_like_tyk_users_write_them() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("5h").is_err());
        assert!(parse_duration("0s").is_err());
    }
}
