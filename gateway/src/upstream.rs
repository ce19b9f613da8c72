//! The upstream side: a pooled keep-alive HTTP/1.1 client per worker thread,
//! and the header hygiene a proxy owes both directions.
//!
//! Each worker owns its client, so its pool is never shared across threads
//! (shared-nothing, as nginx workers). Upstream connections are reused even
//! when the client spoke HTTP/1.0 and closes after every request, which is
//! ab's default and the seed's workload: without the pool every proxied
//! request would pay a TCP handshake to the upstream as well.
//!
//! Target host names are resolved once at load ([`Resolver::prepare`]): a
//! resolver call per new connection would go through a blocking thread, and
//! `localhost` resolving to `::1` first would cost a refused connect each time
//! when the upstream listens on 127.0.0.1 only.

use std::collections::HashMap;
use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// A request body on its way upstream: the client's, streamed, or one a
/// middleware buffered or rewrote.
pub type UpstreamBody = Either<Incoming, Full<Bytes>>;

/// The per-worker pooled client.
pub type UpstreamClient = Client<HttpConnector<Resolver>, UpstreamBody>;

/// Builds a worker's upstream client.
pub fn client(resolver: Resolver) -> UpstreamClient {
    let mut connector = HttpConnector::new_with_resolver(resolver);
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(5)));
    // Target URLs are http://; the connector refuses anything else anyway.
    connector.enforce_http(true);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        // The client's Host header (or the target's) is set explicitly.
        .set_host(false)
        .build(connector)
}

/// Resolves target hosts from a table filled at load, falling back to the
/// system resolver for names it has not seen (and remembering the answer).
#[derive(Clone, Default)]
pub struct Resolver {
    table: Arc<RwLock<HashMap<String, Vec<SocketAddr>>>>,
}

impl Resolver {
    /// Resolves `host` now and remembers it, IPv4 first. Errors name the host.
    pub fn prepare(&self, host: &str) -> Result<(), String> {
        let addrs = resolve_blocking(host)?;
        self.table
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(host.to_string(), addrs);
        Ok(())
    }
}

fn resolve_blocking(host: &str) -> Result<Vec<SocketAddr>, String> {
    let mut addrs: Vec<SocketAddr> = (host, 0)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host:?}: {e}"))?
        .collect();
    // Prefer IPv4: local upstreams (the mock, most dev servers) bind 127.0.0.1.
    addrs.sort_by_key(|a| a.is_ipv6());
    addrs.dedup();
    if addrs.is_empty() {
        return Err(format!("{host:?} resolved to no address"));
    }
    Ok(addrs)
}

impl tower_service::Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let host = name.as_str().to_string();
        let cached = self
            .table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&host)
            .cloned();
        let table = self.table.clone();
        Box::pin(async move {
            if let Some(addrs) = cached {
                return Ok(addrs.into_iter());
            }
            let h = host.clone();
            let addrs = tokio::task::spawn_blocking(move || resolve_blocking(&h))
                .await
                .map_err(std::io::Error::other)?
                .map_err(std::io::Error::other)?;
            table
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(host, addrs.clone());
            Ok(addrs.into_iter())
        })
    }
}

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1),
/// and so never cross a proxy.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

/// Removes hop-by-hop headers, including any the `Connection` header names.
///
/// `Transfer-Encoding` is removed too: hyper frames each side's body itself.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP.iter() {
        headers.remove(name);
    }
    headers.remove(header::TRANSFER_ENCODING);
}

/// Appends the client's address to `X-Forwarded-For`.
pub fn append_forwarded_for(headers: &mut HeaderMap, client: SocketAddr) {
    const XFF: HeaderName = HeaderName::from_static("x-forwarded-for");
    let ip = client.ip().to_string();
    let joined = match headers.get(&XFF).and_then(|v| v.to_str().ok()) {
        Some(prev) if !prev.is_empty() => format!("{prev}, {ip}"),
        _ => ip,
    };
    if let Ok(v) = HeaderValue::from_str(&joined) {
        headers.insert(XFF, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_and_connection_tokens_are_removed() {
        let mut h = HeaderMap::new();
        h.insert("connection", "keep-alive, X-Secret".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert("x-secret", "1".parse().unwrap());
        h.insert("upgrade", "websocket".parse().unwrap());
        h.insert("transfer-encoding", "chunked".parse().unwrap());
        h.insert("x-kept", "yes".parse().unwrap());
        remove_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!(h["x-kept"], "yes");
    }

    #[test]
    fn forwarded_for_is_appended() {
        let mut h = HeaderMap::new();
        let addr: SocketAddr = "10.1.2.3:5555".parse().unwrap();
        append_forwarded_for(&mut h, addr);
        assert_eq!(h["x-forwarded-for"], "10.1.2.3");
        append_forwarded_for(&mut h, "127.0.0.1:1".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "10.1.2.3, 127.0.0.1");
    }

    #[test]
    fn localhost_prefers_ipv4() {
        let r = Resolver::default();
        r.prepare("localhost").unwrap();
        let t = r.table.read().unwrap();
        assert!(t["localhost"][0].is_ipv4());
    }
}
