//! Single blocking requests for the bench's checks and the gateway's
//! control API (`/tyk/stats`). Not on any measured path.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context};

const TIMEOUT: Duration = Duration::from_secs(5);

/// Sends one HTTP/1.0 request and reads the whole response: (status, body).
pub fn request(
    method: &str,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> anyhow::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    let mut req = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("response without a complete head")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("response without a status code")?;
    Ok((status, body.to_string()))
}

/// `GET path`.
pub fn get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> anyhow::Result<(u16, String)> {
    request("GET", addr, path, headers)
}

/// One middleware's call times, as `GET /tyk/stats` reports them: the
/// gateway's own type (`gateway-wire`), so the two cannot drift apart.
pub use gateway_wire::CallSummary as CallStats;
use gateway_wire::{StatsBody, AUTH_HEADER, STATS_PATH};

/// The gateway's control API.
pub struct Control {
    /// Gateway address.
    pub addr: SocketAddr,
    /// `X-Tyk-Authorization` value.
    pub secret: String,
}

impl Control {
    /// Clears the middleware histograms.
    pub fn reset(&self) -> anyhow::Result<()> {
        let (status, body) = request(
            "DELETE",
            self.addr,
            STATS_PATH,
            &[(AUTH_HEADER, &self.secret)],
        )?;
        if !(200..300).contains(&status) {
            bail!("DELETE {STATS_PATH} answered {status}: {body}");
        }
        Ok(())
    }

    /// Reads the middleware histograms.
    pub fn stats(&self) -> anyhow::Result<Vec<CallStats>> {
        Ok(self.stats_body()?.apis)
    }

    /// The whole `GET /tyk/stats` body: call times and failure counts (a
    /// gateway that predates failure counts reads as none).
    pub fn stats_body(&self) -> anyhow::Result<StatsBody> {
        let (status, body) = get(self.addr, STATS_PATH, &[(AUTH_HEADER, &self.secret)])?;
        if status != 200 {
            bail!("GET {STATS_PATH} answered {status}: {body}");
        }
        serde_json::from_str(&body)
            .with_context(|| format!("GET {STATS_PATH}: unexpected body {body}"))
    }
}
