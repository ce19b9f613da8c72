//! Tyk's JS API beyond the middleware objects: the globals
//! `TykMakeHttpRequest`, `TykBatchRequest`, `TykGetKeyData`, `TykSetKeyData`
//! and underscore's `_`, with one engine-agnostic core and a thin
//! registration per engine (`boa.rs`, `qjs.rs`).
//!
//! # Facts carried over from Tyk (`gateway/jsvm_api.go`, `batch_requests.go`)
//!
//! - Every global takes and returns JSON *text*: the script calls
//!   `JSON.stringify` on the way in and `JSON.parse` on the way out. Any
//!   failure (bad JSON, a field of the wrong type, an unparseable URL, an
//!   unreachable host) is logged and answers `undefined`: the script goes on,
//!   and a script that then reads `JSON.parse(undefined)` fails its own
//!   request (a 500), as in Tyk.
//! - `TykGetKeyData(key, apiId)` answers the control API's "not found" JSON
//!   for every key, and `TykSetKeyData` only logs: this gateway has no
//!   sessions or key store (Tyk's answer for an unknown key).
//!
//! # A call that waits (the design decision)
//!
//! The HTTP globals are synchronous in the script, so they block the thread
//! the script runs on. On VM threads (`--jsvm-threads 1`, the default) that
//! thread is the API's own, and the I/O threads keep serving everything
//! else; each call is bounded by the middleware call's deadline
//! (`--jsvm-timeout`), so it ends before the VM thread would be abandoned.
//! Inline (`--jsvm-threads 0`, or an engine still running on the I/O
//! thread) a blocking call would stall every connection of the worker, so
//! the globals refuse: they log why and answer `undefined`. "Inline" is
//! detected as "this thread is inside a tokio runtime", which only the I/O
//! threads are.
//!
//! # Layout
//!
//! - `http`: the blocking HTTP/1.1 client (hyper on a per-thread runtime).
//! - `request`: `TykMakeHttpRequest` and `TykBatchRequest`: JSON in, JSON out.
//! - `boa`, `qjs`: the globals' registration on each engine.
//! - `underscore.js`: our implementation of the underscore functions Tyk
//!   scripts use, loaded on first use of `_`.

pub(crate) mod boa;
mod http;
pub(crate) mod qjs;
mod request;

use std::cell::Cell;
use std::time::{Duration, Instant};

pub(crate) use request::{batch_request, make_http_request};

/// Our underscore, evaluated to the `_` object on first use.
pub(crate) const UNDERSCORE: &str = include_str!("underscore.js");

/// Defines the global `_` as an accessor that evaluates [`UNDERSCORE`] (by
/// calling `load`) on first read and then becomes a plain data property; a
/// write replaces it. Scripts that never use `_` never pay its parse, which
/// keeps the `fresh` strategy's per-request context cheap.
pub(crate) const LAZY_UNDERSCORE: &str = r#"(function (load) {
  var g = globalThis;
  function settle(v) {
    Object.defineProperty(g, "_", { value: v, writable: true, enumerable: false, configurable: true });
  }
  Object.defineProperty(g, "_", {
    enumerable: false, configurable: true,
    get: function () { var u = load(); settle(u); return u; },
    set: function (v) { settle(v); }
  });
})"#;

/// True when a script may use `_` (`_.` or `_(` in its text). Such an
/// API's contexts evaluate underscore while they are built (`void _`):
/// on VM threads that is off the request's path (a persistent context is
/// built ahead of its first call, a fresh one right after the previous
/// answer), where a lazy load would land on the first request that reads
/// `_`. Evaluating it costs boa a parse of ~450 lines (tens of ms in a dev
/// build, see `boa.rs`'s test); APIs that never mention `_` never pay it.
pub(crate) fn uses_underscore(text: &str) -> bool {
    text.match_indices('_').any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + 1..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == '.')
            && matches!(after, Some('.') | Some('('))
    })
}

/// Evaluated in a context whose scripts use `_`, before they run.
pub(crate) const PRELOAD_UNDERSCORE: &str = "void _;";

/// When no call deadline is set (a script's top-level code calling out
/// while its context is built on a VM thread), calls are bounded by this.
const NO_DEADLINE_BOUND: Duration = Duration::from_secs(5);

thread_local! {
    /// The running middleware call's deadline on this thread.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Sets this thread's call deadline until the guard drops. The engines'
/// call paths hold one around each middleware call.
pub(crate) fn call_scope(deadline: Instant) -> DeadlineGuard {
    let previous = DEADLINE.with(|d| d.replace(Some(deadline)));
    DeadlineGuard(previous)
}

/// Restores the previous deadline (see [`call_scope`]).
pub(crate) struct DeadlineGuard(Option<Instant>);

impl Drop for DeadlineGuard {
    fn drop(&mut self) {
        DEADLINE.with(|d| d.set(self.0));
    }
}

/// The deadline an outgoing call must end by.
fn deadline() -> Instant {
    DEADLINE
        .with(Cell::get)
        .unwrap_or_else(|| Instant::now() + NO_DEADLINE_BOUND)
}

/// Why a blocking global may not run here, if it may not.
fn refusal(global: &str) -> Option<String> {
    tokio::runtime::Handle::try_current().ok().map(|_| {
        format!(
            "{global}: refused on an I/O thread (scripts run inline, --jsvm-threads 0): \
             a blocking call would stall every connection of the worker; \
             run scripts on VM threads (--jsvm-threads 1 or more)"
        )
    })
}

/// `TykGetKeyData(key, apiId)`: Tyk's answer for a key it does not know
/// (`handleGetDetail`'s `apiError("Key not found")`), which is every key
/// here.
pub(crate) fn get_key_data(key: &str, api_id: &str) -> String {
    crate::heap::uncounted(
        || tracing::debug!(target: "jsvm", key, api_id, "TykGetKeyData: no key store here; key not found"),
    );
    r#"{"status":"error","message":"Key not found"}"#.to_string()
}

/// `TykSetKeyData(key, sessionJson, suppressReset)`: Tyk decodes the
/// session (logging a bad one) and stores it; with no key store here it is
/// decoded and dropped, and the log says so.
pub(crate) fn set_key_data(key: &str, session: &str) {
    let decoded = serde_json::from_str::<serde_json::Value>(session);
    // Logged uncounted, as every log line a script can cause (`prelude.rs`),
    // and at most `--log-rate` lines a second: a script can call it in a
    // loop.
    static GATE: crate::lograte::LogGate = crate::lograte::LogGate::new();
    let Some(left_out) = GATE.admit() else {
        return;
    };
    let left_out = crate::lograte::LeftOut(left_out);
    crate::heap::uncounted(|| match decoded {
        Ok(v) if v.is_object() || v.is_null() => tracing::warn!(
            target: "jsvm",
            key,
            "TykSetKeyData: this gateway has no key store; the session was not saved{left_out}"
        ),
        Ok(_) | Err(_) => {
            tracing::error!(target: "jsvm", key, "TykSetKeyData: Failed to decode the session data{left_out}")
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn underscore_use_is_spotted() {
        assert!(super::uses_underscore("var k = _.keys(o);"));
        assert!(super::uses_underscore("_(list).each(f)"));
        assert!(!super::uses_underscore("var my_var = a.b_c; x.__proto__;"));
        assert!(!super::uses_underscore("obj._private.x"));
    }
}
