//! Loop detection across gateways: each gateway names itself in the `Via`
//! header of every request it proxies (RFC 9110 §7.6.3), and a request that
//! arrives with its own name in `Via` has come back to it.

use http::header::{self, HeaderMap, HeaderValue};

/// This gateway's entry in `Via` (RFC 9110 §7.6.3), by which it knows a
/// request it has already proxied once: a target that leads back to it,
/// directly or through other gateways, is a loop (answered 508) instead of
/// a new connection per hop until file descriptors run out.
///
/// The name is random per gateway (`gw-` and 16 hex digits), so two
/// gateways on one host never take each other's requests for their own,
/// and it says nothing about the host. It has a fixed length: ab counts a
/// response whose length changes as failed, and the seed's upstream echoes
/// the request's headers.
#[derive(Clone)]
pub struct Hop {
    /// `gw-…`, looked for in a request's `Via`.
    name: String,
    /// `1.1 gw-…`, what a request without `Via` gets.
    pub(crate) value: HeaderValue,
}

impl Hop {
    /// A new random name.
    pub fn random() -> Hop {
        use std::hash::{BuildHasher, Hasher};
        // RandomState is seeded from the OS once per process and stepped
        // for every new one: distinct per gateway in one process too.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let name = format!("gw-{:016x}", h.finish());
        let value = HeaderValue::from_str(&format!("1.1 {name}")).expect("ASCII token");
        Hop { name, value }
    }

    /// True when `headers` show that the request has passed this gateway.
    pub fn seen_in(&self, headers: &HeaderMap) -> bool {
        let name = self.name.as_bytes();
        // A scan of the few headers a request has, not a hashed lookup:
        // most requests have no `Via` at all.
        headers.iter().any(|(n, v)| {
            *n == header::VIA
                && v.as_bytes()
                    .windows(name.len())
                    .any(|w| w.eq_ignore_ascii_case(name))
        })
    }

    /// Adds this gateway to `Via`, after any earlier proxies (one header).
    pub fn append(&self, headers: &mut HeaderMap) {
        let mut prior = headers.get_all(header::VIA).iter().peekable();
        if prior.peek().is_none() {
            headers.insert(header::VIA, self.value.clone());
            return;
        }
        let mut joined = Vec::with_capacity(64);
        for p in prior {
            joined.extend_from_slice(p.as_bytes());
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(self.value.as_bytes());
        if let Ok(v) = HeaderValue::from_bytes(&joined) {
            headers.insert(header::VIA, v);
        }
    }

    /// The name, for logs.
    pub fn name(&self) -> &str {
        &self.name
    }
}
