//! The request as the proxy-wasm header map sees it: real headers plus the
//! pseudo-headers `:method`, `:path`, `:authority` and `:scheme` (HTTP/2
//! style, as Envoy presents every request), with edits applied straight to
//! the parts of the [`MwRequest`] they stand for.

use std::mem;

use bytes::Bytes;
use http::header::HOST;
use http::{HeaderMap, Method};

use super::abi;
use crate::intern::HeaderCache;
use crate::middleware::{HeadBudget, ReqMut, MAX_HEAD_TEXT};
use crate::proxy::MAX_BUFFERED_BODY;

/// The most header values a module may leave in a request or a local
/// response. Clients may send at most 100 (`wire/head.rs`); ten times that
/// leaves room for any plugin. Without a bound a module could reach
/// `http::HeaderMap`'s own maximum (32,768), where `append` panics and takes
/// the worker's task with it.
pub const MAX_HEADERS: usize = 1000;

/// A module passed a bound on the headers it sets: the call traps (the
/// request fails closed with 500, as a plugin fault), since a module that
/// ignored an error status would send a request missing the headers it
/// meant to add.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderLimit {
    /// More than [`MAX_HEADERS`] header values kept.
    Count,
    /// More than [`MAX_HEAD_TEXT`] bytes of names and values set in one
    /// call: each set copies the bytes out of the module's memory, so a
    /// module could hand the host one buffer as large as `--wasm-memory`
    /// under [`MAX_HEADERS`] names.
    Text,
}

impl std::fmt::Display for HeaderLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderLimit::Count => write!(
                f,
                "the module set more than {MAX_HEADERS} header values, the most this host keeps"
            ),
            HeaderLimit::Text => write!(
                f,
                "the module set more than {MAX_HEAD_TEXT} bytes (1 MiB) of header names and \
                 values in one call, the most one call may hand the host"
            ),
        }
    }
}

impl std::error::Error for HeaderLimit {}

/// A module handed the host a body past [`MAX_BUFFERED_BODY`], the bound
/// on every body the gateway holds whole (a client's is a 413 past it, a
/// native plugin's or a script's a 500): refused before it is copied, and
/// the call traps (the request fails closed with 500, as a plugin fault),
/// since a module that ignored an error status would send the body it had
/// before. [`body_within`] is the one check.
#[derive(Debug)]
pub struct BodyTooLarge {
    /// The host function the body was handed to.
    pub call: &'static str,
    /// The body's length in bytes.
    pub len: usize,
}

impl std::fmt::Display for BodyTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = "a body held for middleware";
        let why = crate::body::past_bound(self.call, &self.len, MAX_BUFFERED_BODY, what);
        f.write_str(&why)
    }
}

impl std::error::Error for BodyTooLarge {}

/// Refuses a body of `len` bytes, handed to host function `call`, past
/// [`MAX_BUFFERED_BODY`]: for every function that takes a body from a
/// module (`proxy_set_buffer_bytes`, `proxy_send_local_response`).
#[inline]
pub fn body_within(len: usize, call: &'static str) -> Result<(), BodyTooLarge> {
    if len > MAX_BUFFERED_BODY {
        return Err(BodyTooLarge { call, len });
    }
    Ok(())
}

/// The parts of a request a module can read and change. Moved into the
/// store for the length of one call (see [`ReqParts::take_from`]), so host
/// functions own what they edit: no pointer into the caller's stack.
#[derive(Debug, Default)]
pub struct ReqParts {
    pub method: Method,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The instance's parsed header names and values: stays in the store
    /// across requests (it is not part of the request, `take_from` leaves it).
    pub cache: HeaderCache,
    /// What is left of this call's header text (`take_from` starts it
    /// full): [`HeaderLimit::Text`] past [`MAX_HEAD_TEXT`].
    pub head: HeadBudget,
}

impl ReqParts {
    /// Moves `req`'s parts in, before a call. Field moves, but for the
    /// path and query: the module reads and writes them as strings here,
    /// so they are copied out of the request's target.
    pub fn take_from(&mut self, req: &mut ReqMut<'_, '_>) {
        self.swap_fields(req);
        self.head = HeadBudget::new();
        self.path.clear();
        self.path.push_str(req.path());
        self.query = req.query().map(str::to_string);
    }

    /// Moves the edited parts back into `req`, after a call; the path and
    /// query are written only if the module changed them.
    pub fn give_back(&mut self, req: &mut ReqMut<'_, '_>) {
        self.swap_fields(req);
        if self.path != req.path() || self.query.as_deref() != req.query() {
            req.set_target(mem::take(&mut self.path), self.query.take());
        }
    }

    fn swap_fields(&mut self, req: &mut ReqMut<'_, '_>) {
        mem::swap(&mut self.method, req.method_mut());
        mem::swap(&mut self.headers, req.headers_mut());
        mem::swap(&mut self.body, req.body_mut());
    }

    fn path_and_query(&self) -> String {
        match &self.query {
            Some(q) => format!("{}?{q}", self.path),
            None => self.path.clone(),
        }
    }

    /// Number of entries in the map as modules see it (pseudo-headers too):
    /// the `num_headers` argument of `proxy_on_request_headers`.
    pub fn count(&self) -> usize {
        3 + usize::from(self.headers.contains_key(HOST)) + self.headers.len()
    }

    /// The whole map, pseudo-headers first, serialised for the module.
    pub fn serialize(&self) -> Vec<u8> {
        let path = self.path_and_query();
        let mut pairs: Vec<(&[u8], &[u8])> = vec![
            (b":method", self.method.as_str().as_bytes()),
            (b":path", path.as_bytes()),
            (b":scheme", b"http"),
        ];
        if let Some(host) = self.headers.get(HOST) {
            pairs.push((b":authority", host.as_bytes()));
        }
        pairs.extend(
            self.headers
                .iter()
                .map(|(k, v)| (k.as_str().as_bytes(), v.as_bytes())),
        );
        abi::serialize_map(pairs.into_iter())
    }

    /// The first value of `name` (values of a repeated header joined with
    /// `,`, as Envoy does), or `None`.
    pub fn get(&self, name: &[u8]) -> Option<Vec<u8>> {
        match name {
            b":method" => Some(self.method.as_str().as_bytes().to_vec()),
            b":path" => Some(self.path_and_query().into_bytes()),
            b":scheme" => Some(b"http".to_vec()),
            b":authority" => self.headers.get(HOST).map(|v| v.as_bytes().to_vec()),
            _ => {
                // A `&str` key is looked up without allocating (http
                // lowercases it on the stack); an invalid name finds nothing.
                let name = std::str::from_utf8(name).ok()?;
                let mut values = self.headers.get_all(name).iter();
                let first = values.next()?.as_bytes().to_vec();
                Some(values.fold(first, |mut acc, v| {
                    acc.push(b',');
                    acc.extend_from_slice(v.as_bytes());
                    acc
                }))
            }
        }
    }

    /// Sets `name` to `value`, replacing every previous value (`add` false)
    /// or appending one more (`add` true). Returns an ABI status, or
    /// [`HeaderLimit`] when the value would be one past [`MAX_HEADERS`] or
    /// the call's text past [`MAX_HEAD_TEXT`] (taken before it is copied).
    pub fn set(&mut self, name: &[u8], value: &[u8], add: bool) -> Result<u32, HeaderLimit> {
        match name {
            b":method" => match Method::from_bytes(value) {
                Ok(m) => self.method = m,
                Err(_) => return Ok(abi::BAD_ARGUMENT),
            },
            b":path" => return Ok(self.set_path(value)),
            b":authority" => return self.set(b"host", value, false),
            // Only plain http:// is proxied; a module cannot change that.
            b":scheme" => return Ok(abi::BAD_ARGUMENT),
            _ => {
                self.head
                    .take(name.len(), value.len())
                    .map_err(|_| HeaderLimit::Text)?;
                let (Ok(name), Ok(value)) = (self.cache.name(name), self.cache.value(value)) else {
                    return Ok(abi::BAD_ARGUMENT);
                };
                // Only a full map is looked up: a value that would grow it
                // is refused (a replacement does not grow it).
                if self.headers.len() >= MAX_HEADERS && (add || !self.headers.contains_key(&name)) {
                    return Err(HeaderLimit::Count);
                }
                // `try_`: never the panic, whatever the bound.
                let stored = if add {
                    self.headers.try_append(name, value).map(drop)
                } else {
                    self.headers.try_insert(name, value).map(drop)
                };
                stored.map_err(|_| HeaderLimit::Count)?;
            }
        }
        Ok(abi::OK)
    }

    fn set_path(&mut self, value: &[u8]) -> u32 {
        let Ok(text) = std::str::from_utf8(value) else {
            return abi::BAD_ARGUMENT;
        };
        // The same rule the request line follows: the target parses as a URI
        // path and query, and starts with '/'.
        if !text.starts_with('/') || text.parse::<http::uri::PathAndQuery>().is_err() {
            return abi::BAD_ARGUMENT;
        }
        match text.split_once('?') {
            Some((p, q)) => (self.path, self.query) = (p.to_string(), Some(q.to_string())),
            None => (self.path, self.query) = (text.to_string(), None),
        }
        abi::OK
    }

    /// Removes every value of `name`. Pseudo-headers cannot be removed.
    pub fn remove(&mut self, name: &[u8]) -> u32 {
        if name.starts_with(b":") {
            return abi::BAD_ARGUMENT;
        }
        // A name that cannot exist is not there: removing it is a no-op.
        if let Ok(name) = std::str::from_utf8(name) {
            self.headers.remove(name);
        }
        abi::OK
    }

    /// Replaces the whole map with `pairs` (pseudo-headers set their parts).
    /// Nothing changes unless every pair is accepted.
    pub fn replace_all(&mut self, pairs: &[(&[u8], &[u8])]) -> Result<u32, HeaderLimit> {
        let mut fresh = ReqParts {
            method: self.method.clone(),
            path: self.path.clone(),
            query: self.query.clone(),
            // Past the bound `set` refuses the pair: no larger map is needed.
            headers: HeaderMap::with_capacity(pairs.len().min(MAX_HEADERS)),
            body: Bytes::new(),
            cache: mem::take(&mut self.cache),
            head: self.head,
        };
        let status = pairs
            .iter()
            .map(|(k, v)| fresh.set(k, v, true))
            .find(|s| !matches!(s, Ok(abi::OK)));
        self.cache = mem::take(&mut fresh.cache);
        self.head = fresh.head;
        if let Some(status) = status {
            return status;
        }
        (self.method, self.path, self.query, self.headers) =
            (fresh.method, fresh.path, fresh.query, fresh.headers);
        Ok(abi::OK)
    }

    /// Replaces `size` bytes of the body at `start` with `data` (Envoy's
    /// `set_buffer_bytes`; `start` past the end appends). A body that
    /// would pass [`MAX_BUFFERED_BODY`] is refused before it is made.
    pub fn splice_body(
        &mut self,
        start: usize,
        size: usize,
        data: &[u8],
    ) -> Result<u32, BodyTooLarge> {
        let len = self.body.len();
        let start = start.min(len);
        let end = start.saturating_add(size).min(len);
        let new_len = len - (end - start) + data.len();
        body_within(new_len, "proxy_set_buffer_bytes")?;
        let mut out = Vec::with_capacity(new_len);
        out.extend_from_slice(&self.body[..start]);
        out.extend_from_slice(data);
        out.extend_from_slice(&self.body[end..]);
        self.body = Bytes::from(out);
        Ok(abi::OK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HeaderValue;

    fn parts() -> ReqParts {
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_static("example.com"));
        headers.append("x-a", HeaderValue::from_static("1"));
        headers.append("x-a", HeaderValue::from_static("2"));
        ReqParts {
            method: Method::GET,
            path: "/p".into(),
            query: Some("q=1".into()),
            headers,
            body: Bytes::from_static(b"hello"),
            cache: HeaderCache::default(),
            head: HeadBudget::new(),
        }
    }

    #[test]
    fn pseudo_headers_read_and_write_the_request_line() {
        let mut p = parts();
        assert_eq!(p.get(b":path").unwrap(), b"/p?q=1");
        assert_eq!(p.get(b":authority").unwrap(), b"example.com");
        assert_eq!(p.get(b"x-a").unwrap(), b"1,2");
        assert_eq!(p.set(b":path", b"/new", false).unwrap(), abi::OK);
        assert_eq!((p.path.as_str(), p.query.as_deref()), ("/new", None));
        assert_eq!(
            p.set(b":path", b"no-slash", false).unwrap(),
            abi::BAD_ARGUMENT
        );
        assert_eq!(p.set(b":method", b"PUT", false).unwrap(), abi::OK);
        assert_eq!(p.method, Method::PUT);
        assert_eq!(p.set(b":authority", b"other", false).unwrap(), abi::OK);
        assert_eq!(p.headers[HOST], "other");
        assert_eq!(p.remove(b":path"), abi::BAD_ARGUMENT);
        assert_eq!(p.set(b"bad name", b"v", false).unwrap(), abi::BAD_ARGUMENT);
        assert_eq!(p.count(), 3 + 1 + 3);
    }

    #[test]
    fn body_splices_like_envoy_buffers() {
        let mut p = parts();
        assert_eq!(p.splice_body(0, 5, b"bye").unwrap(), abi::OK);
        assert_eq!(&p.body[..], b"bye");
        p.splice_body(99, 0, b"!").unwrap();
        assert_eq!(&p.body[..], b"bye!");
        p.splice_body(1, 1, b"").unwrap();
        assert_eq!(&p.body[..], b"be!");
    }

    /// What a splice would leave is bounded, not what one call hands over:
    /// a body of exactly the bound is kept, one byte more appended to it
    /// is refused and the body stays as it was.
    #[test]
    fn a_splice_past_the_body_bound_is_refused_before_it_is_made() {
        let mut p = parts();
        let whole = vec![b'w'; MAX_BUFFERED_BODY];
        p.splice_body(0, usize::MAX, &whole).unwrap();
        assert_eq!(p.body.len(), MAX_BUFFERED_BODY);
        let e = p.splice_body(usize::MAX, 0, b"!").unwrap_err();
        assert_eq!(e.len, MAX_BUFFERED_BODY + 1);
        assert!(
            e.to_string().starts_with(
                "proxy_set_buffer_bytes: a body of 33554433 bytes is past the 32 MiB bound"
            ),
            "{e}"
        );
        assert_eq!(p.body.len(), MAX_BUFFERED_BODY);
        // Replacing a byte keeps the length: within the bound.
        p.splice_body(0, 1, b"!").unwrap();
        assert_eq!(p.body.len(), MAX_BUFFERED_BODY);
    }

    #[test]
    fn replacing_the_map_keeps_pseudo_headers_as_request_parts() {
        let mut p = parts();
        let pairs: Vec<(&[u8], &[u8])> = vec![(b":path", b"/x"), (b"x-b", b"3")];
        assert_eq!(p.replace_all(&pairs).unwrap(), abi::OK);
        assert_eq!(p.path, "/x");
        assert!(p.headers.get(HOST).is_none());
        assert_eq!(p.headers["x-b"], "3");
    }

    /// One call's sets total at most `MAX_HEAD_TEXT` bytes, refused before
    /// the value is copied, replacements and whole-map sets included; the
    /// next call starts again.
    #[test]
    fn one_call_sets_at_most_a_mebibyte_of_header_text() {
        let mut p = parts();
        let value = vec![b'v'; 64 * 1024];
        let mut set = 0;
        let err = loop {
            match p.set(format!("x-{set}").as_bytes(), &value, true) {
                Ok(status) => assert_eq!(status, abi::OK),
                Err(e) => break e,
            }
            set += 1;
            assert!(set < 100, "never refused");
        };
        assert_eq!(err, HeaderLimit::Text);
        assert!(err.to_string().contains("1 MiB"), "{err}");
        // 15 values of 64 KiB and their names fit, the 16th does not.
        assert_eq!(set, 15);
        assert!(
            p.headers.get("x-15").is_none(),
            "the refused value was stored"
        );
        // A whole-map set counts as the sets it is made of.
        let pairs: Vec<(&[u8], &[u8])> = vec![(b"x-b", &value)];
        assert_eq!(p.replace_all(&pairs), Err(HeaderLimit::Text));
        // A new call (`take_from`) starts a new count.
        let mut req = crate::middleware::MwRequest::new(
            Method::GET,
            "/".parse().unwrap(),
            HeaderMap::new(),
            Bytes::new(),
            "127.0.0.1:1".parse().unwrap(),
        );
        p.take_from(&mut ReqMut::Owned(&mut req));
        assert_eq!(p.set(b"x-c", &value, false), Ok(abi::OK));
    }
}
