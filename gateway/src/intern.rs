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
use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

use bytes::Bytes;
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

/// A parsed form whose cached copy can hold `'static` bytes ([`forever`]):
/// the clone a hit hands out, and its drop, then touch no reference count
/// (a shared `Bytes`' clone and drop are an atomic add each, ~40
/// instructions a header on a plugin's call).
pub trait Keep: Clone {
    /// This, its bytes made `'static`; `None` past the process's budget.
    fn kept(&self) -> Option<Self>;
}

impl Keep for HeaderName {
    fn kept(&self) -> Option<Self> {
        let text = std::str::from_utf8(forever(self.as_str().as_bytes())?).ok()?;
        // A parsed name's text is lowercase and valid: `from_static` takes
        // it as it is (a standard name comes back as its constant).
        Some(HeaderName::from_static(text))
    }
}

impl Keep for HeaderValue {
    fn kept(&self) -> Option<Self> {
        let mut v =
            HeaderValue::from_maybe_shared(Bytes::from_static(forever(self.as_bytes())?)).ok()?;
        v.set_sensitive(self.is_sensitive());
        Some(v)
    }
}

/// Bytes the caches keep for the life of the process, each distinct string
/// once, [`FOREVER_BUDGET`] bytes in all.
struct Forever {
    kept: HashSet<&'static [u8]>,
    bytes: usize,
}

/// What the process may keep forever: the constants of every plugin and
/// the header spellings of every side, many times over. Past it, a cache
/// holds shared copies as before. Caches are made again with their
/// instances (a wasm instance after a trap), so the budget, not the
/// caches' own bounds, is what bounds this.
const FOREVER_BUDGET: usize = 256 * 1024;

impl Forever {
    fn keep(&mut self, b: &[u8], budget: usize) -> Option<&'static [u8]> {
        if let Some(&s) = self.kept.get(b) {
            return Some(s);
        }
        if self.bytes + b.len() > budget {
            return None;
        }
        let s: &'static [u8] = Box::leak(b.into());
        self.kept.insert(s);
        self.bytes += b.len();
        Some(s)
    }
}

/// `b` as `'static` bytes, the same ones for the same content; `None`
/// once [`FOREVER_BUDGET`] is spent. Called on a cache's miss only.
fn forever(b: &[u8]) -> Option<&'static [u8]> {
    static FOREVER: LazyLock<Mutex<Forever>> = LazyLock::new(|| {
        Mutex::new(Forever {
            kept: HashSet::new(),
            bytes: 0,
        })
    });
    FOREVER
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .keep(b, FOREVER_BUDGET)
}

impl<T: Keep> Interned<T> {
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
            let parsed = parsed.kept().unwrap_or(parsed);
            self.entries.push((raw.into(), parsed.clone()));
            return Ok(parsed);
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

/// The caches an instance's request map uses.
#[derive(Debug, Default)]
pub struct HeaderCache {
    /// Names as the module spelled them (any case) to lowercase names.
    pub names: Interned<HeaderName>,
    /// Values byte for byte.
    pub values: Interned<HeaderValue>,
    /// Name and value together, as a native plugin sets them
    /// ([`HeaderCache::pair`]).
    pairs: Vec<Pair>,
}

/// A name and a value as a plugin sent them, and parsed.
type Pair = (Box<[u8]>, Box<[u8]>, HeaderName, HeaderValue);

/// Which half of a header [`HeaderCache::pair`] refused.
#[derive(Debug)]
pub enum BadPair {
    Name,
    /// The value, for this (valid) name.
    Value(HeaderName),
}

impl HeaderCache {
    /// `name` and `value` parsed: what a plugin sets on every call (the same
    /// header to the same value) found by one search of the pairs seen,
    /// instead of one for the name and one for the value (~20 instructions
    /// less a call on `/gopl/`). A miss goes through the two caches and
    /// keeps the pair while there is room ([`ENTRIES`] pairs, each half at
    /// most [`MAX_LEN`] bytes); an invalid half is never kept.
    #[inline(always)]
    pub fn pair(
        &mut self,
        name: &[u8],
        value: &[u8],
    ) -> Result<(HeaderName, HeaderValue), BadPair> {
        // A loop, not `Iter::find`: with two compares in its closure, `find`
        // was a call of its own (~90 instructions a hit, not ~40).
        for (n, v, parsed_n, parsed_v) in &self.pairs {
            if same(n, name) && same(v, value) {
                return Ok((parsed_n.clone(), parsed_v.clone()));
            }
        }
        self.pair_miss(name, value)
    }

    #[cold]
    #[inline(never)]
    fn pair_miss(
        &mut self,
        name: &[u8],
        value: &[u8],
    ) -> Result<(HeaderName, HeaderValue), BadPair> {
        let n = self
            .names
            .get(name, HeaderName::from_bytes)
            .map_err(|_| BadPair::Name)?;
        let v = self
            .values
            .get(value, HeaderValue::from_bytes)
            .map_err(|_| BadPair::Value(n.clone()))?;
        if self.pairs.len() < ENTRIES && name.len() <= MAX_LEN && value.len() <= MAX_LEN {
            self.pairs
                .push((name.into(), value.into(), n.clone(), v.clone()));
        }
        Ok((n, v))
    }
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
    fn cached_names_and_values_share_one_static_copy_per_process() {
        let (mut a, mut b) = (HeaderCache::default(), HeaderCache::default());
        let name = b"X-Kept-Forever-Test";
        let (na, nb) = (a.name(name).unwrap(), b.name(name).unwrap());
        assert_eq!(na.as_str(), "x-kept-forever-test");
        assert_eq!(
            na.as_str().as_ptr(),
            nb.as_str().as_ptr(),
            "one copy for both caches"
        );
        let (va, vb) = (
            a.value(b"kept \xff").unwrap(),
            b.value(b"kept \xff").unwrap(),
        );
        assert_eq!(va.as_bytes(), b"kept \xff");
        assert_eq!(va.as_bytes().as_ptr(), vb.as_bytes().as_ptr());
        // A hit hands out the same bytes again.
        assert_eq!(
            a.value(b"kept \xff").unwrap().as_bytes().as_ptr(),
            va.as_bytes().as_ptr()
        );
        // A standard name stays the standard one.
        assert_eq!(a.name(b"Content-Type").unwrap(), http::header::CONTENT_TYPE);
    }

    #[test]
    fn pairs_are_found_whole_and_checked_half_by_half() {
        let mut c = HeaderCache::default();
        let (n, v) = c.pair(b"X-Pair", b"one").unwrap();
        assert_eq!((n.as_str(), v.to_str().unwrap()), ("x-pair", "one"));
        assert_eq!(c.pair(b"X-Pair", b"one").unwrap(), (n.clone(), v));
        // Same name, another value; same value, another name: other pairs.
        assert_eq!(c.pair(b"X-Pair", b"two").unwrap().1, "two");
        assert_eq!(c.pair(b"X-Other", b"one").unwrap().0.as_str(), "x-other");
        assert_eq!(c.pairs.len(), 3);
        // The name cache served the second and third from the first.
        assert_eq!(c.names.entries.len(), 2);
        assert!(matches!(c.pair(b"bad name", b"one"), Err(BadPair::Name)));
        match c.pair(b"X-Pair", b"bad\nvalue") {
            Err(BadPair::Value(name)) => assert_eq!(name, n),
            other => panic!("{other:?}"),
        }
        assert_eq!(c.pairs.len(), 3, "errors are not kept");
        // Bounded: a value per call fills the pairs once, then parses.
        for i in 0..100 {
            let v = format!("id-{i}");
            assert_eq!(c.pair(b"X-Id", v.as_bytes()).unwrap().1, v.as_str());
        }
        assert_eq!(c.pairs.len(), ENTRIES);
        let long = "v".repeat(MAX_LEN + 1);
        let mut c = HeaderCache::default();
        assert_eq!(c.pair(b"X-Long", long.as_bytes()).unwrap().1, long.as_str());
        assert!(c.pairs.is_empty(), "a value over MAX_LEN is not kept");
    }

    #[test]
    fn every_byte_a_name_may_hold_survives_being_kept() {
        // `HeaderName::from_static` panics on what it does not accept: it
        // must accept every byte `from_bytes` lets through, in either case.
        let mut c = HeaderCache::default();
        let mut kept = 0;
        for b in 0..=255u8 {
            let raw = [b'x', b'-', b];
            if let Ok(parsed) = HeaderName::from_bytes(&raw) {
                assert_eq!(c.names.miss(&raw, HeaderName::from_bytes).unwrap(), parsed);
                c.names.entries.clear();
                kept += 1;
            }
        }
        assert!(kept > 70, "{kept} bytes");
    }

    #[test]
    fn what_is_kept_forever_is_bounded() {
        let mut f = Forever {
            kept: HashSet::new(),
            bytes: 0,
        };
        assert!(f.keep(b"0123456789", 16).is_some());
        // The same content again costs nothing and is the same copy.
        let again = f.keep(b"0123456789", 16).unwrap();
        assert_eq!(again.as_ptr(), f.keep(b"0123456789", 16).unwrap().as_ptr());
        assert!(f.keep(b"abcdefghij", 16).is_none(), "over budget");
        assert!(f.keep(b"abcdef", 16).is_some(), "fits exactly");
        assert_eq!(f.bytes, 16);
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
