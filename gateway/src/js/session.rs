//! The parts of a script's answer that Tyk decodes besides `Request`:
//! `SessionMeta`, `Session` and `AuthValue` (Tyk's `VMReturnObject`).
//!
//! There are no sessions here, so nothing of them is applied, but Tyk
//! decodes the whole answer with `encoding/json` and a value of the wrong
//! type fails the request with a 500: a `Session` that is not an object, a
//! `SessionMeta` value that is not a string (it is a `map[string]string`),
//! `"rate": "fast"` in a session. This module applies the same type rules
//! to the JSON form of those values, so a script that fails in Tyk fails
//! here, engine-agnostic.

use serde_json::{Map, Value};

use crate::middleware::MwError;

/// What Go's decoder accepts for one field.
#[derive(Clone, Copy)]
enum Kind {
    /// `int`/`int64`: a number without fraction.
    Int,
    /// `float64`.
    Float,
    Str,
    Bool,
    /// `[]string`.
    StrList,
    /// `map[string]string`.
    StrMap,
    /// A struct or `map[string]interface{}`: any object.
    Object,
    /// `map[string]AccessDefinition`: an object of objects.
    ObjectMap,
    /// `time.Time`: an RFC 3339 string.
    Time,
}

/// Tyk's `user.SessionState` fields (their JSON names) and types.
const SESSION_FIELDS: &[(&str, Kind)] = &[
    ("last_check", Kind::Int),
    ("allowance", Kind::Float),
    ("rate", Kind::Float),
    ("per", Kind::Float),
    ("throttle_interval", Kind::Float),
    ("throttle_retry_limit", Kind::Int),
    ("max_query_depth", Kind::Int),
    ("date_created", Kind::Time),
    ("expires", Kind::Int),
    ("quota_max", Kind::Int),
    ("quota_renews", Kind::Int),
    ("quota_remaining", Kind::Int),
    ("quota_renewal_rate", Kind::Int),
    ("access_rights", Kind::ObjectMap),
    ("org_id", Kind::Str),
    ("oauth_client_id", Kind::Str),
    ("oauth_keys", Kind::StrMap),
    ("certificate", Kind::Str),
    ("mtls_static_certificate_bindings", Kind::StrList),
    ("basic_auth_data", Kind::Object),
    ("jwt_data", Kind::Object),
    ("hmac_enabled", Kind::Bool),
    ("enable_http_signature_validation", Kind::Bool),
    ("hmac_string", Kind::Str),
    ("rsa_certificate_id", Kind::Str),
    ("is_inactive", Kind::Bool),
    ("apply_policy_id", Kind::Str),
    ("apply_policies", Kind::StrList),
    ("data_expires", Kind::Int),
    ("monitor", Kind::Object),
    ("enable_detail_recording", Kind::Bool),
    ("enable_detailed_recording", Kind::Bool),
    ("meta_data", Kind::Object),
    ("tags", Kind::StrList),
    ("alias", Kind::Str),
    ("last_updated", Kind::Str),
    ("id_extractor_deadline", Kind::Int),
    ("session_lifetime", Kind::Int),
    ("post_expiry_grace_period", Kind::Int),
];

/// One field's check.
pub(crate) type Check = fn(&Value) -> Result<(), MwError>;

/// The session fields of a script's answer, in the order of [`CHECKS`].
pub(crate) const FIELDS: [&str; 3] = ["SessionMeta", "Session", "AuthValue"];

/// The checks of `[SessionMeta, Session, AuthValue]`, in that order.
pub(crate) const CHECKS: [Check; 3] = [check_session_meta, check_session, check_auth_value];

/// Checks `SessionMeta` (a `map[string]string`).
pub(crate) fn check_session_meta(v: &Value) -> Result<(), MwError> {
    check("SessionMeta", v, Kind::StrMap)
}

/// Checks `Session` against Tyk's `SessionState` field types. Go matches
/// field names case-insensitively and ignores unknown ones.
pub(crate) fn check_session(v: &Value) -> Result<(), MwError> {
    let obj = match v {
        Value::Null => return Ok(()),
        Value::Object(o) => o,
        other => return Err(wrong("Session", "an object", other)),
    };
    for (key, value) in obj {
        let known = SESSION_FIELDS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(key));
        if let Some((name, kind)) = known {
            check(&format!("Session.{name}"), value, *kind)?;
        }
    }
    Ok(())
}

/// Checks `AuthValue` (a string).
pub(crate) fn check_auth_value(v: &Value) -> Result<(), MwError> {
    check("AuthValue", v, Kind::Str)
}

fn check(field: &str, v: &Value, kind: Kind) -> Result<(), MwError> {
    let ok = match (kind, v) {
        (_, Value::Null) => true,
        (Kind::Int, Value::Number(n)) => n.is_i64() || n.is_u64(),
        (Kind::Float, Value::Number(_)) => true,
        (Kind::Str, Value::String(_)) => true,
        (Kind::Bool, Value::Bool(_)) => true,
        (Kind::StrList, Value::Array(a)) => a.iter().all(|x| x.is_string() || x.is_null()),
        (Kind::StrMap, Value::Object(m)) => return string_values(field, m),
        (Kind::Object, Value::Object(_)) => true,
        (Kind::ObjectMap, Value::Object(m)) => m.values().all(|x| x.is_object() || x.is_null()),
        (Kind::Time, Value::String(s)) => is_rfc3339(s),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(wrong(field, describe(kind), v))
    }
}

fn string_values(field: &str, m: &Map<String, Value>) -> Result<(), MwError> {
    match m.iter().find(|(_, x)| !(x.is_string() || x.is_null())) {
        None => Ok(()),
        Some((k, x)) => Err(wrong(&format!("{field}[{k:?}]"), "a string", x)),
    }
}

/// Go's `time.Time` decoder: `2006-01-02T15:04:05Z07:00`, optional fraction.
fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| r.clone().all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
    b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && (b[10] == b'T' || b[10] == b't')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
}

fn describe(kind: Kind) -> &'static str {
    match kind {
        Kind::Int => "an integer",
        Kind::Float => "a number",
        Kind::Str => "a string",
        Kind::Bool => "a boolean",
        Kind::StrList => "an array of strings",
        Kind::StrMap => "an object of strings",
        Kind::Object => "an object",
        Kind::ObjectMap => "an object of objects",
        Kind::Time => "an RFC 3339 time string",
    }
}

fn wrong(field: &str, want: &str, got: &Value) -> MwError {
    let got = match got {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    MwError::bad_answer(format!(
        "ProcessRequest result: {field} must be {want}, got {got} (Tyk cannot decode it either)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_type_rules() {
        assert!(check_session(&json!({"rate": 10, "Meta_Data": {"a": 1}})).is_ok());
        assert!(check_session(&json!("x")).is_err());
        assert!(check_session(&json!({"rate": "fast"})).is_err());
        assert!(check_session(&json!({"expires": 1.5})).is_err());
        assert!(check_session(&json!({"date_created": "2024-01-02T03:04:05Z"})).is_ok());
        assert!(check_session(&json!({"date_created": "yesterday"})).is_err());
        assert!(check_session(&json!({"unknown": [1]})).is_ok());
        assert!(check_session_meta(&json!({"a": "b"})).is_ok());
        assert!(check_session_meta(&json!({"a": 1})).is_err());
        assert!(check_session_meta(&json!([])).is_err());
    }
}
