//! A validated run: what to send, where, how often and when to stop.
//!
//! The command line (see [`crate::cli`]) is checked once into a [`RunConfig`];
//! after that nothing in the driver can meet an invalid combination of flags.
//! The bench builds `RunConfig`s directly.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;

/// Where requests go: the resolved address and what goes on the request line.
#[derive(Debug, Clone)]
pub struct Target {
    /// Host as written in the URL (shown in the report as "Server Hostname").
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Path and query (the "Document Path").
    pub path: String,
    /// Address to connect to. Resolved once before the run, as ab does.
    pub addr: SocketAddr,
}

/// When the run stops. One driver loop serves every mode; this enum is the
/// only place where modes differ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WorkMode {
    /// Exactly `n` requests, as fast as `concurrency` connections allow.
    Count(u64),
    /// As many requests as fit in the duration (ab `-t` without `-n`).
    Duration(Duration),
    /// Stop at `n` requests or at the deadline, whichever comes first (ab `-t` with `-n`).
    CountOrDuration(u64, Duration),
}

impl WorkMode {
    /// The request budget, if any.
    pub fn max_requests(self) -> Option<u64> {
        match self {
            WorkMode::Count(n) | WorkMode::CountOrDuration(n, _) => Some(n),
            WorkMode::Duration(_) => None,
        }
    }

    /// The time budget, if any.
    pub fn time_limit(self) -> Option<Duration> {
        match self {
            WorkMode::Duration(d) | WorkMode::CountOrDuration(_, d) => Some(d),
            WorkMode::Count(_) => None,
        }
    }
}

/// Checks applied to every response; a response failing one counts as a
/// failed request, with the reason.
#[derive(Debug, Clone, Default)]
pub struct Expect {
    /// The status every response must have.
    pub status: Option<u16>,
    /// Substrings every body must contain.
    pub body_contains: Vec<String>,
    /// ab's `-l`: a body whose length differs from the first response's is
    /// not a failure.
    pub variable_length: bool,
}

impl Expect {
    /// Whether bodies must be kept in memory to check them.
    pub fn needs_body(&self) -> bool {
        !self.body_contains.is_empty()
    }

    /// The reasons a response fails the checks; empty when it passes.
    pub fn check(&self, status: u16, body: &[u8]) -> Vec<String> {
        let mut reasons = Vec::new();
        if let Some(want) = self.status {
            if status != want {
                reasons.push(format!("status {status}, expected {want}"));
            }
        }
        for text in &self.body_contains {
            let found = !text.is_empty() && body.windows(text.len()).any(|w| w == text.as_bytes());
            if !found && !text.is_empty() {
                reasons.push(format!("body does not contain {text:?}"));
            }
        }
        reasons
    }
}

/// Everything the driver needs for one run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Where requests go.
    pub target: Target,
    /// The complete request as sent on the wire, serialised once.
    pub request: Bytes,
    /// Whether the request is a HEAD (its responses carry no body).
    pub head: bool,
    /// Reuse connections (ab `-k`).
    pub keepalive: bool,
    /// Number of connections doing requests at the same time (ab `-c`).
    pub concurrency: usize,
    /// When to stop.
    pub mode: WorkMode,
    /// Constant-throughput schedule in requests per second overall (wrk2 `-R`).
    pub rate: Option<f64>,
    /// Per-request timeout (connect, write and read together), ab `-s`.
    pub timeout: Duration,
    /// OS threads running connections; each has its own event loop and histograms.
    pub threads: usize,
    /// Response checks.
    pub expect: Expect,
    /// Processes whose CPU time is measured over the run.
    pub cpu_pids: Vec<u32>,
    /// ab's `-v`: 0-1 quiet, 2 warnings and the request, 3 response codes,
    /// 4 response heads (see [`crate::verbose`]).
    pub verbosity: u8,
}

/// The HTTP request written on each connection. ab 2.3 always speaks
/// HTTP/1.0; with keep-alive it adds `Connection: Keep-Alive`.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    /// Method (`GET`, or `POST` with a body).
    pub method: String,
    /// Extra headers, in order; a name given here replaces the default header
    /// of that name (`Host`, `User-Agent`, `Accept`), as in ab.
    pub headers: Vec<(String, String)>,
    /// Body and its content type.
    pub body: Option<(Bytes, String)>,
}

impl RequestSpec {
    /// A plain GET.
    pub fn get() -> Self {
        RequestSpec {
            method: "GET".into(),
            headers: Vec::new(),
            body: None,
        }
    }

    /// Serialises the request for `target`.
    pub fn encode(&self, target: &Target, keepalive: bool) -> Bytes {
        let has = |name: &str| {
            self.headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        let mut out = format!("{} {} HTTP/1.0\r\n", self.method, target.path);
        if !has("host") {
            // An IPv6 literal goes in brackets, as in the URL (RFC 9110
            // 7.2, and what ab sends): in `::1:8080` no server can tell
            // where the address ends and the port begins.
            let host = if target.host.contains(':') {
                format!("[{}]", target.host)
            } else {
                target.host.clone()
            };
            if target.port == 80 {
                out.push_str(&format!("Host: {host}\r\n"));
            } else {
                out.push_str(&format!("Host: {host}:{}\r\n", target.port));
            }
        }
        if keepalive && !has("connection") {
            out.push_str("Connection: Keep-Alive\r\n");
        }
        if !has("user-agent") {
            out.push_str(concat!(
                "User-Agent: loadgen/",
                env!("CARGO_PKG_VERSION"),
                "\r\n"
            ));
        }
        if !has("accept") {
            out.push_str("Accept: */*\r\n");
        }
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        let mut bytes = out.into_bytes();
        if let Some((body, content_type)) = &self.body {
            if !has("content-type") {
                bytes.extend_from_slice(format!("Content-Type: {content_type}\r\n").as_bytes());
            }
            bytes.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            bytes.extend_from_slice(body);
        } else {
            bytes.extend_from_slice(b"\r\n");
        }
        Bytes::from(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(port: u16) -> Target {
        Target {
            host: "example".into(),
            port,
            path: "/a?b=1".into(),
            addr: ([127, 0, 0, 1], port).into(),
        }
    }

    #[test]
    fn encode_writes_abs_request_with_defaults() {
        let req = RequestSpec::get().encode(&target(8080), false);
        let text = String::from_utf8(req.to_vec()).unwrap();
        assert_eq!(
            text,
            concat!(
                "GET /a?b=1 HTTP/1.0\r\nHost: example:8080\r\nUser-Agent: loadgen/",
                env!("CARGO_PKG_VERSION"),
                "\r\nAccept: */*\r\n\r\n"
            )
        );
        // Port 80 is left out of Host; keep-alive adds ab's header.
        let text =
            String::from_utf8(RequestSpec::get().encode(&target(80), true).to_vec()).unwrap();
        assert!(
            text.contains("Host: example\r\nConnection: Keep-Alive\r\n"),
            "{text}"
        );
    }

    #[test]
    fn an_ipv6_host_is_bracketed_in_the_host_header() {
        let mut t = target(8080);
        t.host = "::1".into();
        let text = String::from_utf8(RequestSpec::get().encode(&t, false).to_vec()).unwrap();
        assert!(text.contains("\r\nHost: [::1]:8080\r\n"), "{text}");
        t.port = 80;
        let text = String::from_utf8(RequestSpec::get().encode(&t, false).to_vec()).unwrap();
        assert!(text.contains("\r\nHost: [::1]\r\n"), "{text}");
    }

    #[test]
    fn encode_lets_headers_replace_defaults_and_frames_the_body() {
        let spec = RequestSpec {
            method: "POST".into(),
            headers: vec![("host".into(), "h".into()), ("X-A".into(), "1".into())],
            body: Some((Bytes::from_static(b"{}"), "application/json".into())),
        };
        let text = String::from_utf8(spec.encode(&target(81), false).to_vec()).unwrap();
        assert!(!text.contains("Host: example"), "{text}");
        assert!(text.contains("host: h\r\nX-A: 1\r\n"), "{text}");
        assert!(
            text.ends_with("Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"),
            "{text}"
        );
    }

    #[test]
    fn expect_checks_status_and_every_substring() {
        let e = Expect {
            status: Some(200),
            body_contains: vec!["hello".into(), "\"X-A\":".into()],
            variable_length: false,
        };
        assert!(e.needs_body());
        assert!(e.check(200, br#"hello {"X-A":1}"#).is_empty());
        assert_eq!(
            e.check(500, b"hello"),
            vec![
                "status 500, expected 200".to_string(),
                "body does not contain \"\\\"X-A\\\":\"".to_string()
            ]
        );
        // No checks: everything passes, bodies need not be kept.
        let none = Expect::default();
        assert!(!none.needs_body() && none.check(404, b"").is_empty());
    }

    #[test]
    fn encode_keeps_a_users_connection_and_content_type_once() {
        let spec = RequestSpec {
            method: "PUT".into(),
            headers: vec![
                ("CONNECTION".into(), "close".into()),
                ("content-TYPE".into(), "text/plain".into()),
            ],
            body: Some((Bytes::from_static(b"abc"), "application/json".into())),
        };
        let text = String::from_utf8(spec.encode(&target(80), true).to_vec()).unwrap();
        assert!(text.starts_with("PUT /a?b=1 HTTP/1.0\r\n"), "{text}");
        // The user's headers replace ab's, whatever their case.
        assert!(!text.contains("Keep-Alive"), "{text}");
        assert!(!text.contains("application/json"), "{text}");
        assert_eq!(text.matches("CONNECTION: close\r\n").count(), 1, "{text}");
        assert!(
            text.ends_with("content-TYPE: text/plain\r\nContent-Length: 3\r\n\r\nabc"),
            "{text}"
        );
        // An empty body is still framed, so the server need not wait for one.
        let empty = RequestSpec {
            body: Some((Bytes::new(), "text/plain".into())),
            ..RequestSpec::get()
        };
        let text = String::from_utf8(empty.encode(&target(80), false).to_vec()).unwrap();
        assert!(text.ends_with("Content-Length: 0\r\n\r\n"), "{text}");
    }

    #[test]
    fn expect_ignores_an_empty_substring_and_finds_one_at_the_edges() {
        let e = Expect {
            status: None,
            body_contains: vec![String::new(), "ab".into(), "yz".into()],
            variable_length: true,
        };
        assert!(e.check(599, b"abcxyz").is_empty());
        assert_eq!(
            e.check(200, b"a"),
            vec![
                "body does not contain \"ab\"".to_string(),
                "body does not contain \"yz\"".to_string(),
            ]
        );
    }
}
