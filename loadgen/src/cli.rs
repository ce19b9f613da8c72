//! The ab-compatible command line, validated once into a [`RunConfig`].

use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;

use crate::config::{Expect, RequestSpec, RunConfig, Target, WorkMode};

/// ab's flags with ab's meanings, plus outputs, checks, CPU accounting and
/// constant-rate mode.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "loadgen",
    version,
    about = "An ab-compatible HTTP load generator with HDR-histogram percentiles (3 significant digits) and CPU accounting",
    after_help = "`loadgen bench --help` describes the gateway benchmark."
)]
pub struct Args {
    /// Number of requests to perform (default 1, as ab; unlimited with -t alone).
    #[arg(short = 'n', value_name = "requests")]
    pub requests: Option<u64>,
    /// Number of requests to make at a time.
    #[arg(short = 'c', value_name = "concurrency", default_value_t = 1)]
    pub concurrency: usize,
    /// How long to run: seconds (`30`) or a duration (`1s`, `90s`, `2m`); alone, the run lasts that long.
    #[arg(short = 't', value_name = "timelimit", value_parser = parse_duration)]
    pub timelimit: Option<Duration>,
    /// How long to wait for each response (connect, send and receive): seconds or a duration.
    #[arg(short = 's', value_name = "timeout", default_value = "30", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Use HTTP keep-alive: reuse connections.
    #[arg(short = 'k')]
    pub keepalive: bool,
    /// Add a header, e.g. 'Accept-Encoding: gzip' (repeatable).
    #[arg(short = 'H', value_name = "header")]
    pub headers: Vec<String>,
    /// Method (default GET, or POST with -p, PUT with -u, HEAD with -i).
    #[arg(short = 'm', value_name = "method")]
    pub method: Option<String>,
    /// Use HEAD instead of GET (ab -i).
    #[arg(short = 'i')]
    pub head: bool,
    /// File containing the body to PUT (ab -u).
    #[arg(short = 'u', value_name = "putfile", conflicts_with = "postfile")]
    pub putfile: Option<PathBuf>,
    /// Add a cookie, e.g. 'session=abc' (repeatable; ab -C).
    #[arg(short = 'C', value_name = "attribute")]
    pub cookies: Vec<String>,
    /// Basic authentication, 'user:password' (ab -A).
    #[arg(short = 'A', value_name = "auth")]
    pub basic_auth: Option<String>,
    /// Accept variable document length: a body whose length differs from
    /// the first is not a Length failure (ab -l).
    #[arg(short = 'l')]
    pub variable_length: bool,
    /// Don't exit on socket receive errors (ab -r). loadgen never exits on
    /// them, so this is accepted for ab's command lines and changes nothing.
    #[arg(short = 'r')]
    pub keep_going: bool,
    /// File containing the body to POST.
    #[arg(short = 'p', value_name = "postfile")]
    pub postfile: Option<PathBuf>,
    /// Content-type header for the body.
    #[arg(short = 'T', value_name = "content-type", default_value = "text/plain")]
    pub content_type: String,
    /// Write the report as JSON to FILE (`-` for stdout); see the `report::json` docs.
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Write a CSV of the time (ms) within which 0..100% of requests were served (ab -e).
    #[arg(long = "percentiles-csv", short = 'e', value_name = "FILE")]
    pub percentiles_csv: Option<PathBuf>,
    /// Write the HdrHistogram percentile distribution (.hgrm, milliseconds) to FILE.
    #[arg(long, value_name = "FILE")]
    pub hgrm: Option<PathBuf>,
    /// Measure the CPU time of this process over the run (repeatable).
    #[arg(long = "cpu-pid", value_name = "PID")]
    pub cpu_pids: Vec<u32>,
    /// Count responses with another status as failed.
    #[arg(long = "expect-status", value_name = "CODE")]
    pub expect_status: Option<u16>,
    /// Count responses whose body lacks TEXT as failed (repeatable).
    #[arg(long = "expect-body-contains", value_name = "TEXT")]
    pub expect_body_contains: Vec<String>,
    /// Constant throughput: R requests per second overall, latency measured
    /// from each request's intended send time.
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Load threads (default: half the cores, at least 1, at most -c: on
    /// loopback the server under test needs the other half).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// No progress bar.
    #[arg(short = 'q')]
    pub quiet: bool,
    /// Do not print the percentile table (ab -d).
    #[arg(short = 'd')]
    pub no_percentiles: bool,
    /// Print Connection Times as min, avg and max, without the median and
    /// standard deviation (ab -S).
    #[arg(short = 'S')]
    pub no_median_sd: bool,
    /// How much troubleshooting to print, as ab's levels: 2 and above the
    /// request sent, warnings (non-2xx answers, failed requests); 3 and
    /// above every response code; 4 and above every response head.
    #[arg(short = 'v', value_name = "verbosity", default_value_t = 0)]
    pub verbosity: u8,
    /// The URL to load: http://host[:port]/path.
    #[arg(value_name = "URL")]
    pub url: String,
}

/// What to say when `e` refused one of ab's options that loadgen does not
/// have: an ab command line then fails naming the option and what to use
/// instead, not with clap's "unexpected argument". `None` for any other
/// error.
pub fn ab_option_missing(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = arg
        .strip_prefix('-')
        .filter(|f| !f.starts_with('-'))?
        .chars()
        .next()?;
    let what = match flag {
        'b' => "sets the TCP buffer size",
        'B' => "binds to a local address",
        'E' | 'f' | 'Z' => "configures TLS, and loadgen speaks plain http://",
        'g' => "writes gnuplot data; use -e (percentile CSV), --hgrm or --json",
        'P' | 'X' => "goes through a proxy",
        'w' | 'x' | 'y' | 'z' => "formats the report as HTML; use --json",
        _ => return None,
    };
    Some(format!(
        "-{flag} is an ab option loadgen does not have: it {what}"
    ))
}

/// Why the command line cannot run: ab exits 2 on bad usage, 1 when the
/// target cannot be reached.
#[derive(Debug)]
pub enum CliError {
    /// Bad flags or input files (exit 2).
    Usage(String),
    /// The host does not resolve, or an output cannot be written (exit 1).
    Unreachable(String),
    /// stdout's reader went away (`loadgen ... | head`): exit quietly.
    BrokenPipe,
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Unreachable(m) => f.write_str(m),
            CliError::BrokenPipe => f.write_str("broken pipe"),
        }
    }
}

impl CliError {
    /// The process exit code, as ab's.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Unreachable(_) => 1,
            CliError::BrokenPipe => 0,
        }
    }
}

/// The longest `-t` or `-s`: a year. Longer ones are typos (`-t 1e19`), and
/// past a few hundred years a deadline no longer fits a clock reading.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// `30`, `0.5` (seconds, as ab) or a humantime duration (`1s`, `90s`, `2m`),
/// more than zero and at most [`MAX_DURATION`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = match s.parse::<f64>() {
        Ok(secs) => Duration::try_from_secs_f64(secs)
            .map_err(|_| format!("{s:?} is not a positive number of seconds"))?,
        Err(_) => humantime::parse_duration(s)
            .map_err(|e| format!("{s:?} is neither seconds nor a duration like 90s: {e}"))?,
    };
    if d.is_zero() {
        return Err(format!("{s:?} must be more than zero"));
    }
    if d > MAX_DURATION {
        return Err(format!(
            "{s:?} is longer than a year ({} s), the most loadgen takes",
            MAX_DURATION.as_secs()
        ));
    }
    Ok(d)
}

/// Splits `http://host[:port]/path?query` into its parts.
pub fn parse_url(url: &str) -> Result<(String, u16, String), CliError> {
    let bad = |why: &str| CliError::Usage(format!("invalid URL {url:?}: {why}"));
    let uri: http::Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => {
            return Err(CliError::Usage(format!(
                "unsupported scheme {other:?} in URL {url:?}: only http:// is supported"
            )))
        }
        None => return Err(bad("expected http://host[:port]/path")),
    }
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| bad("no host"))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let path = if path.is_empty() { "/" } else { path };
    // `port_u16` is `None` for a port that does not fit (`:70000`) and for
    // an empty one (`h:/`) alike: read the authority's port text instead,
    // so that only a URL without one means 80.
    let authority = uri.authority().map_or("", |a| a.as_str());
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let port_text = match host_port.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map_or("", |(_, rest)| rest),
        None => host_port.find(':').map_or("", |i| &host_port[i..]),
    };
    let port = match port_text.strip_prefix(':') {
        None => 80,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| bad(&format!("port {p:?} is not a number from 1 to 65535")))?,
    };
    Ok((host, port, path.to_string()))
}

/// Checks a `-H 'Name: value'` argument.
pub fn parse_header(h: &str) -> Result<(String, String), CliError> {
    let bad = |why: &str| CliError::Usage(format!("malformed header -H {h:?}: {why}"));
    let (name, value) = h
        .split_once(':')
        .ok_or_else(|| bad("expected 'Name: value'"))?;
    let name = name.trim();
    http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("invalid header name"))?;
    let value = value.trim();
    http::HeaderValue::from_str(value).map_err(|_| bad("invalid header value"))?;
    Ok((name.to_string(), value.to_string()))
}

impl Args {
    /// `-H` headers, then ab's `-C` cookies and `-A` basic auth as headers.
    fn headers(&self) -> Result<Vec<(String, String)>, CliError> {
        let mut headers = self
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        if !self.cookies.is_empty() {
            headers.push(("Cookie".into(), self.cookies.join("; ")));
        }
        if let Some(auth) = &self.basic_auth {
            if !auth.contains(':') {
                return Err(CliError::Usage(format!(
                    "-A {auth:?}: expected 'user:password'"
                )));
            }
            use base64::Engine as _;
            let token = base64::engine::general_purpose::STANDARD.encode(auth);
            headers.push(("Authorization".into(), format!("Basic {token}")));
        }
        for (name, value) in &headers[headers.len().saturating_sub(2)..] {
            http::HeaderValue::from_str(value)
                .map_err(|_| CliError::Usage(format!("invalid {name} value {value:?}")))?;
        }
        Ok(headers)
    }

    /// Validates the flags and resolves the host.
    pub fn into_config(self) -> Result<RunConfig, CliError> {
        let usage = |m: String| CliError::Usage(m);
        let (host, port, path) = parse_url(&self.url)?;
        if self.concurrency == 0 {
            return Err(usage("-c must be at least 1".into()));
        }
        let mode = match (self.requests, self.timelimit) {
            (Some(0), _) => return Err(usage("-n must be at least 1".into())),
            (Some(n), None) => WorkMode::Count(n),
            (None, None) => WorkMode::Count(1),
            (None, Some(t)) => WorkMode::Duration(t),
            (Some(n), Some(t)) => WorkMode::CountOrDuration(n, t),
        };
        if let Some(n) = mode.max_requests() {
            if self.concurrency as u64 > n {
                return Err(usage(format!(
                    "cannot use concurrency level greater than total number of requests (-c {} > -n {n})",
                    self.concurrency
                )));
            }
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(usage(format!("--rate must be a positive number, got {r}")));
            }
        }
        let headers = self.headers()?;
        let (flag, file, default_method) = match (&self.postfile, &self.putfile) {
            (Some(p), _) => ("-p", Some(p), "POST"),
            (None, Some(u)) => ("-u", Some(u), "PUT"),
            (None, None) => ("", None, if self.head { "HEAD" } else { "GET" }),
        };
        let body = match file {
            Some(p) => {
                let data = std::fs::read(p)
                    .map_err(|e| usage(format!("cannot read {flag} file {}: {e}", p.display())))?;
                Some((Bytes::from(data), self.content_type.clone()))
            }
            None => None,
        };
        let method = self.method.clone().unwrap_or_else(|| default_method.into());
        http::Method::from_bytes(method.as_bytes())
            .map_err(|_| usage(format!("invalid method -m {method:?}")))?;
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| CliError::Unreachable(format!("cannot resolve host {host:?}: {e}")))?
            .next()
            .ok_or_else(|| CliError::Unreachable(format!("host {host:?} has no address")))?;
        let target = Target {
            host,
            port,
            path,
            addr,
        };
        let spec = RequestSpec {
            method: method.clone(),
            headers,
            body,
        };
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let default_threads = cores.div_ceil(2);
        Ok(RunConfig {
            request: spec.encode(&target, self.keepalive),
            target,
            head: method.eq_ignore_ascii_case("HEAD"),
            keepalive: self.keepalive,
            concurrency: self.concurrency,
            mode,
            rate: self.rate,
            timeout: self.timeout,
            threads: self.threads.unwrap_or(default_threads).max(1),
            expect: Expect {
                status: self.expect_status,
                body_contains: self.expect_body_contains.clone(),
                variable_length: self.variable_length,
            },
            cpu_pids: self.cpu_pids.clone(),
            verbosity: self.verbosity,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_port_is_taken_whole_or_refused() {
        let port = |url: &str| parse_url(url).map(|(_, p, _)| p).map_err(|e| e.to_string());
        assert_eq!(port("http://h/"), Ok(80));
        assert_eq!(port("http://h:8080/x"), Ok(8080));
        assert_eq!(port("http://[::1]/"), Ok(80));
        assert_eq!(port("http://[::1]:65535/"), Ok(65535));
        for bad in [
            "http://h:70000/",
            "http://h:/",
            "http://h:0/",
            "http://[::1]:/",
        ] {
            let err = port(bad).unwrap_err();
            assert!(err.starts_with(&format!("invalid URL {bad:?}")), "{err}");
        }
        let (host, _, _) = parse_url("http://[::1]:8080/").ok().unwrap();
        assert_eq!(host, "::1");
    }

    #[test]
    fn durations_longer_than_a_year_are_refused() {
        assert_eq!(parse_duration("31536000"), Ok(MAX_DURATION));
        for long in ["1e19", "31536001", "400years"] {
            let err = parse_duration(long).unwrap_err();
            assert!(err.contains("longer than a year"), "{long}: {err}");
        }
    }
}
