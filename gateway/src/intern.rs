//! Header names and values a plugin sends again and again, parsed once per
//! instance (a wasm module's instance, a native entry on one worker).
//!
//! A plugin hands the host raw bytes on every call: the proxy-wasm Rust SDK
//! passes `"X-Custom-Wasm"` as the plugin wrote it, a native plugin its C
//! string. Turning that into an
//! `http` [`HeaderName`] lowercases it and, for a name that is not one of
//! the standard ones, allocates; a [`HeaderValue`] is validated and copied
//! into a new allocation. Measured with callgrind on the AddHeader call,
//! that was about an eighth of the call's instructions (two `malloc`s, two
//! `free`s, the lowercasing), for the same two strings on every request.
//!
//! So each instance keeps what its module used: an exact byte comparison
//! against a handful of entries, then a clone (a reference-count increment,
//! no allocation). The cache is bounded in entries and in the size of each,
//! and never evicts: a module that sends a different value per request (an
//! id, a timestamp) fills it once and then simply parses as before, so it
//! can neither grow without bound nor thrash.

use std::cell::RefCell;

use http::{HeaderName, HeaderValue};

/// Entries per cache: plugins set a few headers, not dozens.
const ENTRIES: usize = 16;

/// Longest input kept: constants are short; long values are rarely repeated.
const MAX_LEN: usize = 128;

/// Raw bytes to their parsed form, for the first [`ENTRIES`] distinct inputs
/// of at most [`MAX_LEN`] bytes.
#[derive(Debug)]
pub struct Interned<T> {
    entries: Vec<(Box<[u8]>, T)>,
}

impl<T> Default for Interned<T> {
    fn default() -> Self {
        Interned::new()
    }
}

impl<T> Interned<T> {
    /// An empty cache (no allocation until the first entry).
    pub const fn new() -> Self {
        Interned {
            entries: Vec::new(),
        }
    }
}

impl<T: Clone> Interned<T> {
    /// The parsed form of `raw`: the cached one when `raw` was seen before,
    /// else `parse(raw)` (kept when there is room). A parse error is never
    /// cached: bad input costs what it always did.
    ///
    /// The hit is inlined into the caller (a call's prologue and epilogue
    /// were a third of a hit's cost); a miss is out of line.
    #[inline(always)]
    pub fn get<E>(
        &mut self,
        raw: &[u8],
        parse: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Result<T, E> {
        match self.entries.iter().find(|(k, _)| same(k, raw)) {
            Some((_, parsed)) => Ok(parsed.clone()),
            None => self.miss(raw, parse),
        }
    }

    #[cold]
    #[inline(never)]
    fn miss<E>(&mut self, raw: &[u8], parse: impl FnOnce(&[u8]) -> Result<T, E>) -> Result<T, E> {
        let parsed = parse(raw)?;
        if self.entries.len() < ENTRIES && raw.len() <= MAX_LEN {
            self.entries.push((raw.into(), parsed.clone()));
        }
        Ok(parsed)
    }
}

/// `a == b`, for the short strings a plugin sends, without a call into
/// libc's `memcmp`: for 4 to 32 bytes, two overlapping loads a side.
/// (The call was ~25 instructions for a 17-byte name; this is ~10.)
#[inline(always)]
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    fn at<const N: usize>(s: &[u8], i: usize) -> [u8; N] {
        s[i..i + N].try_into().expect("N bytes")
    }
    match n {
        // `Host`, `Date`, `Accept`, `Server`: four to seven bytes.
        4..=7 => at::<4>(a, 0) == at::<4>(b, 0) && at::<4>(a, n - 4) == at::<4>(b, n - 4),
        8..=16 => at::<8>(a, 0) == at::<8>(b, 0) && at::<8>(a, n - 8) == at::<8>(b, n - 8),
        17..=32 => at::<16>(a, 0) == at::<16>(b, 0) && at::<16>(a, n - 16) == at::<16>(b, n - 16),
        _ => a == b,
    }
}

thread_local! {
    /// Header names as clients spelled them, per worker thread.
    static REQUEST_NAMES: RefCell<Interned<HeaderName>> = const { RefCell::new(Interned::new()) };
    /// Header names as upstreams spelled them, per worker thread.
    static RESPONSE_NAMES: RefCell<Interned<HeaderName>> = const { RefCell::new(Interned::new()) };
}

/// Which side of the proxy a head came from: clients and upstreams send
/// different names, and each side's few fill a cache of their own.
#[derive(Clone, Copy)]
pub enum Wire {
    /// A client's request head.
    Request,
    /// An upstream's response head.
    Response,
}

/// `f` with this worker's cache of the names heads on `side` carry.
///
/// The same dozen names arrive on every head (`Host`, `User-Agent`,
/// `Content-Type`, `Date`, ...), each parsed by [`HeaderName::from_bytes`]:
/// a match on its length and a byte-by-byte lowercasing compare, ~80-120
/// instructions for a standard name. A hit here is a length check and one
/// or two 8-byte compares. What the cache cannot hold (a 17th distinct
/// spelling, a name over 128 bytes) is parsed as before.
pub fn with_wire_names<R>(side: Wire, f: impl FnOnce(&mut Interned<HeaderName>) -> R) -> R {
    let cache = match side {
        Wire::Request => &REQUEST_NAMES,
        Wire::Response => &RESPONSE_NAMES,
    };
    cache.with_borrow_mut(f)
}

/// The two caches an instance's request map uses.
#[derive(Debug, Default)]
pub struct HeaderCache {
    /// Names as the module spelled them (any case) to lowercase names.
    pub names: Interned<HeaderName>,
    /// Values byte for byte.
    pub values: Interned<HeaderValue>,
}

// The wasm driver's calls; the native host borrows the two maps apart.
#[cfg_attr(not(feature = "wasm"), allow(dead_code))]
impl HeaderCache {
    /// `raw` as a header name.
    pub fn name(&mut self, raw: &[u8]) -> Result<HeaderName, http::header::InvalidHeaderName> {
        self.names.get(raw, HeaderName::from_bytes)
    }

    /// `raw` as a header value.
    pub fn value(&mut self, raw: &[u8]) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
        self.values.get(raw, HeaderValue::from_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_inputs_come_from_the_cache_and_stay_equal() {
        let mut c = HeaderCache::default();
        let a = c.name(b"X-Custom-Wasm").unwrap();
        let b = c.name(b"X-Custom-Wasm").unwrap();
        assert_eq!((a.as_str(), &a), ("x-custom-wasm", &b));
        // Another spelling is another entry, the same header.
        assert_eq!(c.name(b"x-custom-wasm").unwrap(), a);
        assert_eq!(c.names.entries.len(), 2);
        assert_eq!(c.value(b"v").unwrap(), "v");
        assert!(c.name(b"bad name").is_err());
        assert!(c.value(b"bad\nvalue").is_err());
        assert_eq!(c.names.entries.len(), 2, "errors are not cached");
    }

    #[test]
    fn same_compares_every_byte_at_every_length() {
        for n in 0..=40 {
            let a: Vec<u8> = (0..n as u8).map(|i| b'a' + i % 26).collect();
            assert!(same(&a, &a.clone()), "length {n}");
            for i in 0..n {
                let mut b = a.clone();
                b[i] ^= 0x20;
                assert!(!same(&a, &b), "length {n}, byte {i}");
            }
            assert!(!same(&a, &a[..n.saturating_sub(1)]) || n == 0);
        }
    }

    #[test]
    fn the_cache_is_bounded_and_still_parses_past_its_bound() {
        let mut c = HeaderCache::default();
        for i in 0..1000 {
            let v = format!("value-{i}");
            assert_eq!(c.value(v.as_bytes()).unwrap(), v.as_str());
        }
        let long = "x".repeat(MAX_LEN + 1);
        assert_eq!(c.name(long.as_bytes()).unwrap().as_str(), long);
        assert_eq!(c.values.entries.len(), ENTRIES);
        assert!(
            c.names.entries.is_empty(),
            "a name over MAX_LEN is not kept"
        );
    }
}
