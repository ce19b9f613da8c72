//! What Tyk makes of a value where its decoder wants a Go `string`: a
//! `SetHeaders`, `AddParams` or `ResponseHeaders` value, a `DeleteHeaders`,
//! `DeleteParams` or `ExtendedParams` item.
//!
//! Tyk's transport is `JSON.stringify` in the VM, then Go's
//! `encoding/json` into `map[string]string` and `[]string`
//! (`mw_js_plugin.go`), so a value that is not a string is not always an
//! error there:
//!
//! - `undefined`, a function or a Symbol is left out of an object (the
//!   entry is not there: `SetHeaders["X-User"] = user.id` with no `id` sets
//!   nothing), and is `null` in an array;
//! - `null`, `NaN` and `±Infinity` are JSON `null`, which Go decodes into a
//!   string as no change: `""` (the header is set, empty);
//! - an object with a `toJSON` method (a `Date`) is what the method
//!   returns, by the same rules (a `Date` is its ISO text); a `String`
//!   object is its string;
//! - anything else (a number, a boolean, an array, any other object, a
//!   BigInt) is refused by Go's decoder, and the request fails (500,
//!   naming the field).
//!
//! Every engine and strategy reads values so (`tyk-json` gets the first
//! and third rules from `JSON.stringify` itself). The host looks past a
//! plain string only when the value is not one, so the common answer pays
//! nothing for it. A `toJSON` on a container (the answer, `Request`,
//! `SetHeaders` itself) is not called, where Tyk's `JSON.stringify` would
//! call it.

/// What Tyk's decoder gets for one value (each engine's `go_string`
/// answers `None` for a value it refuses).
pub(crate) enum GoString<S> {
    /// Left out of an object: no entry; `null` (so `""`) in an array.
    Left,
    /// JSON `null`: `""`.
    Empty,
    /// A string.
    Text(S),
}

/// A number JSON writes as `null`.
pub(crate) fn json_null_number(n: f64) -> bool {
    !n.is_finite()
}
